#!/bin/bash
# SMP window (max_wire_smps) against sweep time under ibsim: one `smcore
# --once` per window size on a fresh ibsim each time, repeated. Prints the
# wall time and smcore's own phase times (sweep = discovery + LIDs,
# program = SwitchInfo, LFTs, SL2VL, port states).
#
# usage: bench/smp-window.sh [reps]   (after `cargo build --workspace`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
smcore=$root/target/debug/smcore
reps=${1:-3}
work=$(mktemp -d /tmp/smp-window-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$smcore" gen kary-ntree --k 8 --n 3 -o k83.net
for rep in $(seq "$reps"); do
  for w in 1 4 8 16 32; do
    export IBSIM_SOCKNAME=smpwin$$-$rep-$w
    sleep 120 | ibsim -s -N 2000 -S 500 -P 10000 k83.net > ibsim.log 2>&1 &
    sleep 2
    s=$(date +%s%N)
    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so \
      timeout 100 "$smcore" --once --max-wire-smps "$w" --dump-dir d > out.txt 2>&1 || true
    e=$(date +%s%N)
    echo "window $w wall_ms $(( (e - s) / 1000000 )) $(grep '^time' out.txt | sed 's/time *//')"
    pkill -f "ibsim -s -N 2000 -S 500 -P 10000 k83.net" || true
    rm -rf d
    sleep 0.5
  done
done
