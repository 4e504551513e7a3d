#!/usr/bin/env bash
# What running engines in a process of their own costs: `smcore route` of
# the same fabric with engine_isolation = "inline" and "process", in the
# same run, release build.
#
#   bench/isolation.sh [RUNS]        (default 3 runs of each)
#
# Fabrics: the 16-ary 3-tree and the 34-ary 3-tree (42,772 LIDs, 148 M
# LFT entries) with ftree, the 10x10x10 torus with torus-2QoS. Per fabric
# and mode: the route time of the engine
# that routed (`attempts[].route_ms` of the report: for "process", from
# the request written to the answer read, host start included), the
# SM's peak RSS and the engine host's. RESULTS=DIR keeps the files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
(cd "$root" && cargo build --release --quiet --workspace) || exit 2
smcore=$root/target/release/smcore
results=${RESULTS:-$root/target/isolation/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"
cd "$results"
printf 'engine_isolation = "inline"\n' > inline.toml
printf 'engine_isolation = "process"\n' > process.toml
fabrics=("tree16:kary-ntree --k 16 --n 3:ftree" "torus10:torus --dims 10x10x10 --hosts 1 --torus-conf torus10.conf:torus-2QoS" "tree34:kary-ntree --k 34 --n 3:ftree")
echo "# $(date -u +%FT%TZ), commit $(cd "$root" && git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| fabric | engine | mode | route ms (median of $runs) | runs | SM peak MiB | engine host peak MiB |"
echo "|---|---|---|---:|---|---:|---:|"
for f in "${fabrics[@]}"; do
    IFS=: read -r name gen engine <<< "$f"
    # shellcheck disable=SC2086
    "$smcore" gen $gen -o "$name.net"
    extra=()
    [ -f torus10.conf ] && [ "$engine" = torus-2QoS ] && extra=(--torus-config torus10.conf)
    for mode in inline process; do
        times=()
        for i in $(seq "$runs"); do
            "$smcore" route "$name.net" --config "$mode.toml" --engines "$engine,no_fallback" "${extra[@]}" \
                --report "$name-$mode-$i.json" > "$name-$mode-$i.txt"
            times+=("$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(next(a['route_ms'] for a in r['attempts'] if a['outcome']=='routed'))" "$name-$mode-$i.json")")
        done
        median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        mem=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('%.0f %s' % (r['peak_rss_mib'], '-' if r.get('engine_host_peak_rss_mib') is None else '%.0f' % r['engine_host_peak_rss_mib']))" "$name-$mode-$runs.json")
        echo "| $name | $engine | $mode | $median | ${times[*]} | ${mem% *} | ${mem#* } |"
    done
done
