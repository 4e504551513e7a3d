#!/bin/bash
# Failover time of a standby smcore under ibsim: from SIGKILL of the master
# to the standby's first completed heavy sweep as master (its --report
# file's heavy_sweep turning 1), split into detection (kill -> the
# standby's "taking over as master" log line) and the first sweep (the
# rest). Each run uses a fresh ibsim: SM A (priority 10) on the first CA
# becomes master and sweeps; SM B (priority 5) on the last CA stands by;
# A is killed once B has polled it for a while. Prints one line per run
# and the medians.
#
# usage: bench/failover.sh [runs] [poll-interval-s] [poll-retries] [gen args...]
#   defaults: 5 runs, smcore's defaults (2 s, 4), `kary-ntree --k 4 --n 3`
# Needs `cargo build -p sm-core -p smcore-engine-minhop` (debug build;
# set SMCORE=path/to/smcore for another one), ibsim-utils, jq.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
smcore=${SMCORE:-$root/target/debug/smcore}
runs=${1:-5}
interval=${2:-2}
retries=${3:-4}
shift $(( $# < 3 ? $# : 3 ))
gen=("$@")
[ ${#gen[@]} -eq 0 ] && gen=(kary-ntree --k 4 --n 3)
umad=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
work=$(mktemp -d /tmp/failover-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
"$smcore" gen "${gen[@]}" -o fabric.net
a_host=$(grep -m1 '^Ca' fabric.net | sed 's/.*"\(H-[^"]*\)".*/\1/')
b_host=$(grep '^Ca' fabric.net | tail -1 | sed 's/.*"\(H-[^"]*\)".*/\1/')
echo "fabric: ${gen[*]} ($(grep -c '^Switch' fabric.net) switches, $(grep -c '^Ca' fabric.net) CAs);" \
  "A on $a_host, B on $b_host; poll ${interval} s x ${retries}; smcore $smcore"

ms() { echo $(( $(date +%s%N) / 1000000 )); }
# Milliseconds since the epoch of a tracing timestamp (2026-11-22T08:09:47.603750Z).
log_ms() { echo $(( $(date -d "$1" +%s%N) / 1000000 )); }
sweeps() { jq -r '.heavy_sweep // 0' "$1" 2>/dev/null || echo 0; }
swept() { [ "$(sweeps "$1")" -ge 1 ]; }
wait_until() { # timeout-s command...
  local end=$(( $(ms) + $1 * 1000 )); shift
  until "$@"; do
    [ "$(ms)" -lt "$end" ] || return 1
    sleep 0.02
  done
}

totals=(); detects=(); firsts=()
for run in $(seq "$runs"); do
  d=$work/run$run; mkdir -p "$d"; cd "$d"
  export IBSIM_SOCKNAME=failover$$-$run
  # ibsim reads its console on stdin and spins once it closes: hold a fifo.
  mkfifo console; exec {console}<>console
  ibsim -s ../fabric.net < console > ibsim.log 2>&1 &
  sim=$!; pids+=("$sim"); disown "$sim"
  sleep 1
  common=(--log info --sweep-interval 5 --engines minhop --sm-poll-interval "$interval" --sm-poll-retries "$retries")
  SIM_HOST=$a_host LD_PRELOAD=$umad "$smcore" "${common[@]}" --priority 10 \
    --dump-dir a --report a.json > a.log 2>&1 &
  a=$!; pids+=("$a"); disown "$a"
  wait_until 60 swept a.json || { echo "run $run: A never swept"; tail a.log; exit 1; }
  SIM_HOST=$b_host LD_PRELOAD=$umad "$smcore" "${common[@]}" --priority 5 \
    --dump-dir b --report b.json > b.log 2>&1 &
  b=$!; pids+=("$b"); disown "$b"
  wait_until 60 grep -q 'standing by' b.log || { echo "run $run: B never stood by"; tail b.log; exit 1; }
  # Let B poll a while, and kill A at a random point of B's poll cycle.
  sleep "$(awk -v i="$interval" -v r="$RANDOM" 'BEGIN { printf "%.3f", 2 * i + i * r / 32768 }')"
  kill -9 "$a"; killed=$(ms)
  wait_until 120 swept b.json || { echo "run $run: B never swept"; tail b.log; exit 1; }
  swept=$(ms)
  took=$(grep -m1 'taking over as master' b.log | sed 's/\x1b\[[0-9;]*m//g' | awk '{print $1}')
  took_ms=$(log_ms "$took")
  total=$(( swept - killed )); detect=$(( took_ms - killed )); first=$(( swept - took_ms ))
  # What the takeover sweep wrote: LIDs (must be 0 set) and LFT blocks.
  sweep=$(awk '/^SMPs per phase/ { on = 1; next } on && /^  (lids|lft|total) / { gsub(/ +/, " "); sub(/^ /, ""); printf "%s%s", sep, $0; sep = "; " } on && /^  total/ { exit }' b.log)
  echo "run $run: failover ${total} ms = detection ${detect} ms + first heavy sweep ${first} ms [${sweep}]"
  totals+=("$total"); detects+=("$detect"); firsts+=("$first")
  kill "$b" "$sim" 2>/dev/null || true
  exec {console}>&-
  cd "$work"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo "median of $runs: failover $(median "${totals[@]}") ms, detection $(median "${detects[@]}") ms," \
  "first heavy sweep $(median "${firsts[@]}") ms"
