#!/usr/bin/env bash
# smcore shadow beside OpenSM under ibsim: what the shadow reports, and
# whether that is what the fabric holds.
#
#   bench/shadow.sh [K] [ENGINE...]     (default: 6 ftree minhop)
#
# Per OpenSM engine: a fresh ibsim of a K-ary 3-tree (`smcore gen
# kary-ntree --k K --n 3`), OpenSM 3.3.23 as master (`opensm -R ENGINE -s 0
# -d2`, on the first host), then `smcore shadow --once --engines ftree`
# (release build) from the last host. Every switch's LFT is read back with
# `dump_fts` from a middle host before and after the shadow; the script
# prints the shadow's report, whether the read-backs are identical, and the
# entries where smcore's dumped routing differs from the read-back (the
# count the report must give). RESULTS=DIR keeps the files (default
# target/shadow/<time>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k=${1:-6}
shift || true
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(ftree minhop)
umad2sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim opensm dump_fts; do
    command -v "$tool" >/dev/null || { echo "shadow: $tool missing: install ibsim-utils, infiniband-diags and opensm" >&2; exit 2; }
done
(cd "$root" && cargo build --release --quiet -p sm-core -p smcore-engine-ftree -p smcore-engine-minhop) || exit 2
smcore=$root/target/release/smcore
results=${RESULTS:-$root/target/shadow/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"
results=$(cd "$results" && pwd)
pids=()
cleanup() { for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

net=$results/tree$k.net
"$smcore" gen kary-ntree --k "$k" --n 3 -o "$net"
hosts=($(awk '/^Ca/ {gsub(/"/, "", $3); print $3}' "$net"))
master=${hosts[0]} shadow_host=${hosts[${#hosts[@]}-1]} diag=${hosts[${#hosts[@]}/2]}
limits() {
    awk '/^Switch/ {s++; p += $2 + 1} /^Ca/ {c++; p += $2 + 1}
         END {n = s + c; printf "-N %d -S %d -P %d -L %d", n + 16, s + 16, p + 64, int((n + 64) / 64 + 1) * 64}' "$1"
}
echo "# $(date -u +%FT%TZ), commit $(cd "$root" && git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $k-ary 3-tree: $(grep -c '^Switch' "$net") switches, ${#hosts[@]} hosts"
for engine in "${engines[@]}"; do
    dir=$results/$engine
    mkdir -p "$dir/osm"
    cd "$dir"
    export IBSIM_SOCKNAME=shadow$$-$RANDOM
    mkfifo console; exec {console}<>console
    # shellcheck disable=SC2046
    stdbuf -oL -eL ibsim -s $(limits "$net") "$net" < console > ibsim.log 2>&1 &
    sim=$!; pids+=("$sim")
    for _ in $(seq 1200); do grep -q "simulator ready" ibsim.log 2>/dev/null && break; sleep 0.1; done
    OSM_TMP_DIR=$dir/osm OSM_CACHE_DIR=$dir/osm SIM_HOST=$master LD_PRELOAD=$umad2sim \
        timeout 3600 opensm -R "$engine" -s 0 -d2 -f "$dir/osm/opensm.log" > opensm.out 2>&1 &
    osm=$!; pids+=("$osm")
    for _ in $(seq 3000); do grep -q "SUBNET UP" osm/opensm.log 2>/dev/null && break; sleep 0.1; done
    grep -q "SUBNET UP" osm/opensm.log || { echo "shadow: OpenSM never reported SUBNET UP" >&2; exit 1; }
    SIM_HOST=$diag LD_PRELOAD=$umad2sim timeout 600 dump_fts > before.lfts 2>> diags.err
    start=$(date +%s%N)
    set +e
    SIM_HOST=$shadow_host LD_PRELOAD=$umad2sim timeout 3600 "$smcore" shadow --once --engines ftree \
        --report shadow.json --dump-dir dumps > shadow.txt 2> shadow.err
    status=$?
    set -e
    wall=$(( ($(date +%s%N) - start) / 1000000 ))
    SIM_HOST=$diag LD_PRELOAD=$umad2sim timeout 600 dump_fts > after.lfts 2>> diags.err
    echo
    echo "## OpenSM -R $engine master; smcore shadow --once --engines ftree (exit $status, $wall ms wall)"
    cat shadow.txt
    if cmp -s before.lfts after.lfts; then echo "read-back before/after the shadow: identical"; else echo "read-back before/after the shadow: DIFFERENT"; fi
    python3 - "$dir/before.lfts" "$dir/dumps/smcore/opensm-lfts.dump" "$dir/dumps/live/opensm-lfts.dump" <<'EOF'
import re, sys
def read(path):
    tables, guid = {}, None
    for line in open(path, errors="replace"):
        m = re.search(r"Unicast lids .*guid (0x[0-9a-f]+)", line)
        if m:
            guid = int(m.group(1), 16); tables[guid] = {}; continue
        m = re.match(r"\s*(0x[0-9a-f]+)\s+(\d+)\s", line)
        if m and guid is not None:
            tables[guid][int(m.group(1), 16)] = int(m.group(2))
    return tables
held, ours, live = (read(p) for p in sys.argv[1:4])
def differ(a, b):
    return sum(1 for g in b for l in set(a.get(g, {})) | set(b[g]) if a.get(g, {}).get(l) != b[g].get(l))
print(f"read-back vs the shadow's smcore dump: {differ(held, ours)} entries differ; vs its live dump: {differ(held, live)}")
EOF
    # OpenSM looks at SIGTERM only every few seconds: it is killed.
    pkill -KILL -P "$osm" 2>/dev/null || true
    kill "$sim" 2>/dev/null || true
    wait "$osm" "$sim" 2>/dev/null || true
    exec {console}>&-
done
