#!/bin/bash
# SA PathRecord queries answered per second, smcore's SA against OpenSM's,
# under ibsim on loopback. Each run starts a fresh ibsim, an SM (smcore as a
# daemon, or opensm) on the first CA, waits until its SA answers, then runs
# `sa_client path-load` on the last CA: PathRecord Gets (SLID = that CA,
# DLID cycling over every LID of the fabric) with W requests in flight for
# S seconds. The two SMs alternate (A B A B ...); medians and the ratio are
# printed.
#
# usage: bench/sa-load.sh [runs] [seconds] [window] [gen args...]
#   defaults: 3 runs, 5 s, window 16, `kary-ntree --k 4 --n 3`
# Needs `cargo build -p sm-core -p smcore-tests -p smcore-engine-minhop`
# (debug; SMCORE=/path/to/smcore and SA_CLIENT=... for others), ibsim-utils,
# opensm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
smcore=${SMCORE:-$root/target/debug/smcore}
client=${SA_CLIENT:-$root/target/debug/sa_client}
runs=${1:-3}
seconds=${2:-5}
window=${3:-16}
shift $(( $# < 3 ? $# : 3 ))
gen=("$@")
[ ${#gen[@]} -eq 0 ] && gen=(kary-ntree --k 4 --n 3)
umad=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
work=$(mktemp -d /tmp/sa-load-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
"$smcore" gen "${gen[@]}" -o fabric.net
nodes=$(grep -cE '^(Switch|Ca|Hca)' fabric.net)
sm_host=$(grep -m1 '^Ca' fabric.net | sed 's/.*"\(H-[^"]*\)".*/\1/')
load_host=$(grep '^Ca' fabric.net | tail -1 | sed 's/.*"\(H-[^"]*\)".*/\1/')
dlids=$(seq -s, 1 "$nodes")
echo "fabric: ${gen[*]} ($(grep -c '^Switch' fabric.net) switches, $(grep -c '^Ca' fabric.net) CAs);" \
  "SM on $sm_host, load from $load_host; ${seconds} s, window ${window}, DLIDs 1..${nodes}"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

one() { # sm-name -> prints queries/s
  local sm=$1 d=$work/$2
  mkdir -p "$d"; cd "$d"
  export IBSIM_SOCKNAME=saload$$-$2
  mkfifo console; exec {console}<>console
  ibsim -s ../fabric.net < console > ibsim.log 2>&1 &
  local sim=$!; pids+=("$sim"); disown "$sim"
  sleep 1
  if [ "$sm" = smcore ]; then
    SIM_HOST=$sm_host LD_PRELOAD=$umad SMCORE_ENGINE_PATH=$(dirname "$smcore") \
      "$smcore" --dump-dir "$d/dumps" --sweep-interval 10 > sm.log 2>&1 &
  else
    SIM_HOST=$sm_host LD_PRELOAD=$umad opensm -f "$d/opensm.log" -s 10 > sm.log 2>&1 &
  fi
  local smpid=$!; pids+=("$smpid"); disown "$smpid"
  local ok=""
  for _ in $(seq 150); do
    if SIM_HOST=$load_host LD_PRELOAD=$umad timeout 5 "$client" path --dlid 1 2>/dev/null | grep -q 'status=0x0000'; then
      ok=1; break
    fi
    sleep 0.2
  done
  [ -n "$ok" ] || { echo "$sm: SA never answered" >&2; tail -5 sm.log >&2; return 1; }
  SIM_HOST=$load_host LD_PRELOAD=$umad "$client" path-load --seconds "$seconds" --window "$window" --dlids "$dlids" > load.txt
  kill "$smpid" "$sim" 2>/dev/null || true
  sleep 0.5
  exec {console}>&-
  cd "$work"
  echo "$sm run $2: $(cat "$d/load.txt")" >&2
  sed 's/.*per_second=\([0-9.]*\).*/\1/' "$d/load.txt"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
s=(); o=()
for run in $(seq "$runs"); do
  s+=("$(one smcore s$run)")
  o+=("$(one opensm o$run)")
done
ms=$(printf '%s\n' "${s[@]}" | median)
mo=$(printf '%s\n' "${o[@]}" | median)
echo "smcore SA:  ${s[*]} PathRecords/s, median $ms"
echo "OpenSM SA:  ${o[*]} PathRecords/s, median $mo"
echo "ratio smcore/OpenSM: $(awk -v a="$ms" -v b="$mo" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')"
