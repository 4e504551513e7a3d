#!/bin/sh
# Scale (issue 14 item 5): route and verify offline, per engine, on
#  - the largest k-ary 3-tree in IB's unicast LID space, the 34-ary 3-tree
#    (3,468 switches, 39,304 CAs, 42,772 LIDs), with ftree, minhop,
#    minhop-balanced (the default), updn;
#  - a ~20k-port torus: 16x16x16 with 4 CAs per switch (4,096 switches,
#    16,384 CAs, 20,480 LIDs), with torus-2QoS.
# Prints fabric | engine | route ms | verify ms | total ms | peak MiB, from
# `smcore route --report` (route and verify are the engine's and the
# verifier's phase times, total is their sum, peak is the process's peak
# RSS). Goal: total < 2000 ms and peak < 1024 MiB per engine.
#
# Run from anywhere, with only a Rust toolchain (no python, no OpenSM).
# Environment: SCALE_WORK (default /dev/shm/smcore-scale, else /tmp) for
# the fabrics and reports; SCALE_RUNS (default 1) runs per engine, the
# table shows each; SCALE_K / SCALE_TORUS / SCALE_HOSTS change the fabrics.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release --quiet -p sm-core -p smcore-engine-ftree -p smcore-engine-minhop \
    -p smcore-engine-updn -p smcore-engine-torus2qos
smcore=$root/target/release/smcore

work=${SCALE_WORK:-}
if [ -z "$work" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then work=/dev/shm/smcore-scale; else work=/tmp/smcore-scale; fi
fi
mkdir -p "$work"
k=${SCALE_K:-34}
dims=${SCALE_TORUS:-16x16x16}
hosts=${SCALE_HOSTS:-4}
runs=${SCALE_RUNS:-1}
tree=$work/k$k.net
torus=$work/torus-$dims-h$hosts.net
conf=$work/torus-$dims-h$hosts.conf
[ -s "$tree" ] || "$smcore" gen kary-ntree --k "$k" --n 3 -o "$tree"
[ -s "$torus" ] || "$smcore" gen torus --dims "$dims" --hosts "$hosts" -o "$torus" --torus-conf "$conf"

# A number field of the report (the first occurrence: the report is
# pretty-printed JSON, one key a line).
field() {
    sed -n "s/^ *\"$1\": *\([0-9.]*\).*/\1/p" "$2" | head -n 1
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "# load before: $(cat /proc/loadavg)"
echo "| fabric | engine | route ms | verify ms | total ms | peak MiB |"
echo "|---|---|---:|---:|---:|---:|"
run() {
    fabric=$1 file=$2 engine=$3
    shift 3
    i=0
    while [ "$i" -lt "$runs" ]; do
        i=$((i + 1))
        report=$work/report-$engine-$(basename "$file" .net).json
        rm -f "$report"
        if ! "$smcore" route "$file" --engines "$engine,no_fallback" --report "$report" "$@" >/dev/null 2>"$work/stderr.txt"; then
            echo "| $fabric | $engine | failed: $(tail -n 1 "$work/stderr.txt") | | | |"
            continue
        fi
        r=$(field route_ms "$report")
        v=$(field verify_ms "$report")
        m=$(field peak_rss_mib "$report")
        awk -v f="$fabric" -v e="$engine" -v r="$r" -v v="$v" -v m="$m" \
            'BEGIN { printf "| %s | %s | %.0f | %.0f | %.0f | %.0f |\n", f, e, r, v, r + v, m }'
    done
}
run "$k-ary 3-tree" "$tree" ftree
run "$k-ary 3-tree" "$tree" minhop
run "$k-ary 3-tree" "$tree" minhop-balanced
run "$k-ary 3-tree" "$tree" updn
run "torus $dims h$hosts" "$torus" torus-2QoS --torus-config "$conf"
echo "# load after: $(cat /proc/loadavg)"
