#!/bin/bash
# Verification against routing time (issue 14, items 3 and 5): `smcore
# route` on generated fabrics, reading the engine's `route` time, the
# verifier's `verify` time and the peak memory from the report.
#
# Fabrics: a 10x10x10 torus (1 CA per switch) with torus-2QoS; a 12x12x12
# torus (1 CA per switch) with torus-2QoS and dor; a 12x12x12 torus with
# 12 CAs per switch (20,736 end ports, the ~20k-port torus) with
# torus-2QoS, dor and minhop; the 34-ary 3-tree (3,468 switches, 39,304
# CAs, 42,772 LIDs, the largest k-ary 3-tree in IB's unicast LID space)
# with ftree and minhop.
#
# Prints one line per run, then per (fabric, engine) the medians:
#   fabric | engine | route ms | verify ms | verify/route | peak MiB
# Issue 14 asks verify <= route on the torus benchmarks.
#
# usage: bench/verify.sh [RUNS]        (default 3)
#   FABRICS=small   a quick check on small fabrics instead
#   BASE=DIR        also run DIR/smcore (a build of another commit, engine
#                   libraries beside it), interleaved run by run, each
#                   going first in turn (A B B A ...), and print its
#                   medians too, for before/after figures
#   SKIP_BUILD=1    use target/release as it is
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}

if [ -z "${SKIP_BUILD:-}" ]; then
    # The SM and every engine library beside it.
    (cd "$root" && cargo build --release --quiet --workspace)
fi
smcore=$root/target/release/smcore
[ -x "$smcore" ] || { echo "verify.sh: $smcore missing (build it or unset SKIP_BUILD)" >&2; exit 2; }
base=${BASE:+$BASE/smcore}
if [ -n "$base" ] && [ ! -x "$base" ]; then
    echo "verify.sh: $base missing" >&2; exit 2
fi
work=$(mktemp -d /tmp/verify-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT

# name | generator arguments | engines
if [ "${FABRICS:-}" = small ]; then
    fabrics=("4x4x4 torus|torus --dims 4x4x4|torus-2QoS dor"
             "8-ary 3-tree|kary-ntree --k 8 --n 3|ftree minhop")
else
    fabrics=("10x10x10 torus|torus --dims 10x10x10|torus-2QoS"
             "12x12x12 torus|torus --dims 12x12x12|torus-2QoS dor"
             "12x12x12 torus, 12 CAs/switch|torus --dims 12x12x12 --hosts 12|torus-2QoS dor minhop"
             "34-ary 3-tree|kary-ntree --k 34 --n 3|ftree minhop")
fi

# The number after "key": in a report.
field() { grep -o "\"$1\": *[0-9.eE+-]*" "$2" | head -1 | sed 's/.*: *//'; }

# One run: prints "route_ms verify_ms peak_mib".
run() {
    local bin=$1 net=$2 engine=$3 extra=("${@:4}")
    local report=$work/report.json
    rm -f "$report"
    if ! "$bin" route "$net" --engines "$engine,no_fallback" "${extra[@]}" --report "$report" >/dev/null 2>"$work/err"; then
        echo "verify.sh: $bin route $net --engines $engine failed:" >&2
        cat "$work/err" >&2
        exit 1
    fi
    echo "$(field route_ms "$report") $(field verify_ms "$report") $(field peak_rss_mib "$report")"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

summary=$work/summary
: > "$summary"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for f in "${fabrics[@]}"; do
    IFS='|' read -r name gen engines <<<"$f"
    net=$work/fabric.net
    conf=$work/torus-2QoS.conf
    # shellcheck disable=SC2086
    if [[ $gen == torus* ]]; then
        "$smcore" gen $gen -o "$net" --torus-conf "$conf"
    else
        "$smcore" gen $gen -o "$net"
    fi
    for engine in $engines; do
        extra=()
        [ "$engine" = torus-2QoS ] && extra=(--torus-config "$conf")
        : > "$work/new"; : > "$work/base"
        one() {
            local r
            if [ "$1" = new ]; then
                r=$(run "$smcore" "$net" "$engine" "${extra[@]}")
                echo "$name | $engine | run $i | route verify peak: $r"
            else
                r=$(run "$base" "$net" "$engine" "${extra[@]}")
                echo "$name | $engine | run $i | BASE route verify peak: $r"
            fi
            echo "$r" >> "$work/$1"
        }
        for i in $(seq "$runs"); do
            # With BASE, the two take turns going first (A B B A ...): the
            # first of a pair verified the 12³ torus 8-15% slower than
            # the second on this machine, through the same code.
            if [ -z "$base" ]; then
                one new
            elif [ $((i % 2)) = 1 ]; then
                one new; one base
            else
                one base; one new
            fi
        done
        for which in new base; do
            [ -s "$work/$which" ] || continue
            rm_=$(cut -d' ' -f1 "$work/$which" | median)
            vm=$(cut -d' ' -f2 "$work/$which" | median)
            pm=$(cut -d' ' -f3 "$work/$which" | median)
            label=$engine
            [ "$which" = base ] && label="$engine (BASE)"
            printf '| %s | %s | %.1f | %.1f | %.2f | %.0f |\n' "$name" "$label" "$rm_" "$vm" \
                "$(awk -v a="$vm" -v b="$rm_" 'BEGIN {print (b > 0 ? a / b : 0)}')" "$pm" >> "$summary"
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Medians of $runs runs:"
echo
echo "| fabric | engine | route ms | verify ms | verify/route | peak MiB |"
echo "|---|---|---:|---:|---:|---:|"
cat "$summary"
