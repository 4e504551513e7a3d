#!/bin/bash
# Fault recovery measured from outside, smcore against OpenSM under ibsim
# (issue 31): each SM runs as a daemon (sweep interval 30 s, so ibsim's
# trap 128 is what starts the re-route), one SM per fresh ibsim, on the
# same fabric, through the same events, in the same run:
#
#   OpenSM: opensm -R ENGINE -s 30 -d2 -f LOG   (OSM_TMP_DIR, OSM_CACHE_DIR in the
#           run dir; -d2 flushes its log after each line, which is how this
#           script sees "SUBNET UP")
#   smcore: smcore --engines ENGINE --sweep-interval 30
#
# Fabrics: a K-ary 3-tree with ftree, a 3D torus (2 CAs per switch) with
# torus-2QoS and its torus-2QoS.conf, a random fabric (2 CAs per switch)
# with updn. Events, each after the SM has gone quiet, through ibsim's
# console, each undone by the next: a link down (on the tree a leaf
# uplink) and back, a switch down (on the tree a spine, all its links) and
# back, a host cable down and back. `bench_recovery pick` chooses them
# (tests/src/bin/bench_recovery.rs).
#
# Per event, from a host that is neither the SM's nor the one cabled off:
#   * every switch's LFT read back with dump_fts (the ibroute format, what
#     `dump_lfts` runs) before and after; `bench_recovery analyse` gives LFT
#     entries changed (switch, LID entries that differ, over the switches
#     read both times), the busiest directed inter-switch link (CA-to-CA
#     routes through it) and the CA pairs that reach each other on the
#     fabric as it is after the event, over the CAs the read-back names
#     (a cabled CA port no entry names is reported as unseen);
#   * the SM's port's PortXmitPkts, polled every POLL_MS by
#     `bench_recovery poll` (a PMA PortCounters Get, as perfquery sends,
#     through one umad agent kept open on the diags' host). Each poll's own
#     answer adds to the counter; that floor is the smallest step seen over
#     the polls of the idle SM before the first event. Recovery is the time
#     from the console command to the answer of the last poll whose step
#     exceeded the floor (the SM's packets ended between that poll and the
#     one before, so this overstates by at most one poll period plus its
#     round trip); the SM is quiet once its counter stayed at the floor for
#     QUIET_MS (a poll that gets no answer, say while routes are being
#     rewritten, counts as neither).
#
# Prints one row per (fabric, event, SM) and smcore/OpenSM per row, as a
# markdown table; the raw data (read-backs, polls, logs, rows) stays in
# the results dir.
#
# usage: bench/recovery.sh [K] [TORUS_DIMS] [RANDOM_SWITCHES]
#   defaults 12 6x6x4 60 (the issue's fabrics); quick: bench/recovery.sh 4 3x3x3 12
#   FABRICS=tree,torus,random picks fabrics; SMS=opensm,smcore picks SMs;
#   RESULTS=dir (default target/recovery/<UTC time>); POLL_MS (10),
#   RANDOM_SEED (1: the random fabric's seed); QUIET_MS (5000: the SM is
#   quiet once its counter stayed at the floor that long).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k=${1:-12}
torus=${2:-6x6x4}
random_switches=${3:-60}
random_seed=${RANDOM_SEED:-1}
fabric_list=${FABRICS:-tree,torus,random}
sm_list=${SMS:-opensm,smcore}
poll_ms=${POLL_MS:-10}
quiet_ms=${QUIET_MS:-5000}
umad2sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim opensm dump_fts ibaddr; do
    command -v "$tool" >/dev/null || { echo "recovery: $tool missing: install ibsim-utils, infiniband-diags and opensm" >&2; exit 2; }
done
[ -f "$umad2sim" ] || { echo "recovery: $umad2sim missing: install ibsim-utils" >&2; exit 2; }

# Release build: the SM, the engines beside it, the analysis.
# Two builds: `--bin` would also keep the SM's binary and the engines'
# libraries from being built.
(cd "$root" && cargo build --release --quiet -p sm-core -p smcore-engine-ftree -p smcore-engine-torus2qos \
    -p smcore-engine-updn -p smcore-engine-minhop \
    && cargo build --release --quiet -p smcore-tests --bin bench_recovery) || exit 2
smcore=$root/target/release/smcore
analysis=$root/target/release/bench_recovery
results=${RESULTS:-$root/target/recovery/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"
results=$(cd "$results" && pwd)

pids=()
# The SMs run under `timeout`: their children go first, or an interrupted
# run leaves an SM behind.
cleanup() {
    for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ibsim's -N/-S/-P/-L sized from the net file (as bench/first-sweep.sh).
limits() {
    awk '/^Switch/ {s++; p += $2 + 1} /^Ca/ {c++; p += $2 + 1}
         END {n = s + c; printf "-N %d -S %d -P %d -L %d", n + 16, s + 16, p + 64, int((n + 64) / 64 + 1) * 64}' "$1"
}

# A diag on the simulated fabric from host $1.
diag() {
    local host=$1; shift
    SIM_HOST=$host LD_PRELOAD=$umad2sim "$@" 2>> diags.err
}

# Every switch's LFT, read from the diags' host, into $1.
read_back() {
    diag "$diag_host" timeout 600 dump_fts > "$1" || true
    grep -q '^Unicast lids' "$1" || { echo "recovery: dump_fts read no LFT (see $1)" >&2; exit 1; }
}

# Polls the SM port's PortXmitPkts into $1 ("ms value" lines, ms when
# the answer arrived) until killed: `bench_recovery poll`, one PMA
# PortCounters Get every $poll_ms ms through one umad agent on the diags'
# host (what perfquery sends, without a process start per poll).
poll() {
    SIM_HOST=$diag_host LD_PRELOAD=$umad2sim exec "$analysis" poll "$sm_lid" 1 "$1" "$poll_ms" 2>> diags.err
}

# Reads a poll file: "quiet LAST_MS" once the polls after the last step
# above the floor $2 span $quiet_ms (LAST_MS: answer of the last poll above
# it, 0 when none), else "busy".
judge() {
    awk -v floor="$2" -v need="$quiet_ms" '
        NR == 1 { first = $1 }
        NR > 1 { step = $2 - v; if (step > floor) last = $1 }
        { v = $2; t = $1 }
        END { from = (last > 0 ? last : first); if (NR > 1 && t - from >= need) printf "quiet %.0f\n", last; else print "busy" }' "$1"
}

# Waits until the poll file $1 is quiet (floor $2), at most $3 s; prints
# the time of the last step above the floor.
wait_quiet() {
    local end=$(( $(now_ms) + $3 * 1000 )) verdict
    while :; do
        verdict=$(judge "$1" "$2")
        case $verdict in quiet*) echo "${verdict#quiet }"; return 0 ;; esac
        [ "$(now_ms)" -lt "$end" ] || { echo "recovery: the SM never went quiet (polls in $1)" >&2; return 1; }
        sleep 0.2
    done
}

# One SM ($1) on a fresh ibsim on the fabric of $run_dir, through all events.
session() {
    local sm=$1 dir=$run_dir/$1 sim sm_pid poller
    mkdir -p "$dir"; cd "$dir"
    export IBSIM_SOCKNAME=recovery$$-$RANDOM
    mkfifo console; exec {console}<>console
    # shellcheck disable=SC2046
    stdbuf -oL -eL ibsim -s $(limits "$net") "$net" < console > ibsim.log 2>&1 &
    sim=$!; pids+=("$sim")
    for _ in $(seq 1200); do grep -q "simulator ready" ibsim.log 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    if [ "$sm" = opensm ]; then
        mkdir -p osm
        OSM_TMP_DIR=$dir/osm OSM_CACHE_DIR=$dir/osm SIM_HOST=$sm_host LD_PRELOAD=$umad2sim \
            timeout 7200 opensm -R "$engine" -s 30 -d2 -f "$dir/osm/opensm.log" "${osm_extra[@]}" > opensm.out 2>&1 &
        sm_pid=$!
        up() { grep -q "SUBNET UP" osm/opensm.log 2>/dev/null; }
    else
        SIM_HOST=$sm_host LD_PRELOAD=$umad2sim timeout 7200 "$smcore" --engines "$engine" --sweep-interval 30 \
            --log info --report "$dir/report.json" --dump-dir "$dir/dumps" "${sm_extra[@]}" > smcore.log 2>&1 &
        sm_pid=$!
        up() { grep -q '"heavy_sweep": *[1-9]' report.json 2>/dev/null; }
    fi
    pids+=("$sm_pid")
    local t0; t0=$(now_ms)
    until up; do
        kill -0 "$sm_pid" 2>/dev/null || { echo "recovery: $sm exited on $fabric" >&2; tail -20 ./*.out ./*.log osm/opensm.log 2>/dev/null >&2; exit 1; }
        [ $(( $(now_ms) - t0 )) -lt 1800000 ] || { echo "recovery: $sm never came up on $fabric" >&2; exit 1; }
        sleep 0.2
    done
    sm_lid=$(diag "$sm_host" ibaddr | sed -n 's/.*LID start \(0x[0-9a-f]*\).*/\1/p')
    [ -n "$sm_lid" ] || { echo "recovery: no LID on the SM's port" >&2; exit 1; }
    # The floor: the smallest step over the idle SM's polls; then quiet.
    poll idle.polls & poller=$!; pids+=("$poller")
    sleep 3
    local floor
    floor=$(awk 'NR > 1 { s = $2 - v; if (m == "" || s < m) m = s } { v = $2 } END { print m + 0 }' idle.polls)
    wait_quiet idle.polls "$floor" 900 > /dev/null
    kill "$poller"; wait "$poller" 2>/dev/null || true
    echo "# $fabric $sm: up, SM LID $sm_lid, poll floor $floor packets per poll, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results/log"
    read_back 0.lfts
    local i=0 prev=0.lfts down=() what cmd last at
    for ev in "${events[@]}"; do
        i=$((i + 1))
        IFS='|' read -r what cmd target <<< "$ev"
        case $cmd in
            Unlink) down+=("$target") ;;
            ReLink) local kept=(); for d in "${down[@]}"; do [ "$d" = "$target" ] || kept+=("$d"); done; down=("${kept[@]}") ;;
        esac
        : > "$i.polls"
        poll "$i.polls" & poller=$!; pids+=("$poller")
        sleep 0.5
        at=$(now_ms)
        echo "$cmd $target" >&"$console"
        last=$(wait_quiet "$i.polls" "$floor" 900)
        kill "$poller"; wait "$poller" 2>/dev/null || true
        local took=0
        [ "$last" -gt "$at" ] && took=$(( last - at ))
        read_back "$i.lfts"
        local a
        a=$("$analysis" analyse "$net" "$prev" "$i.lfts" "${down[@]}")
        prev=$i.lfts
        echo "$fabric|$what|$sm|$a|recovery_ms $took" | tee -a "$results/rows"
    done
    kill "$sm_pid" 2>/dev/null || true; wait "$sm_pid" 2>/dev/null || true
    kill "$sim" 2>/dev/null || true; wait "$sim" 2>/dev/null || true
    exec {console}>&-
    cd "$run_dir"
}

{
    echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git -C "$root" rev-parse --short HEAD); nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    echo "# $( { opensm --version 2>&1 || true; } | grep -m1 -i opensm); load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# poll every $poll_ms ms, quiet after $quiet_ms ms at the floor; results in $results"
} | tee "$results/log"
: > "$results/rows"
IFS=',' read -r -a fabrics <<< "$fabric_list"
IFS=',' read -r -a sms <<< "$sm_list"
for f in "${fabrics[@]}"; do
    osm_extra=(); sm_extra=()
    run_dir=$results/$f; mkdir -p "$run_dir"; cd "$run_dir"
    net=$run_dir/fabric.net
    case $f in
        tree) fabric="$k-ary 3-tree"; engine=ftree; "$smcore" gen kary-ntree --k "$k" --n 3 -o "$net" ;;
        torus) fabric="$torus torus, 2 CAs/switch"; engine=torus-2QoS
            "$smcore" gen torus --dims "$torus" --hosts 2 -o "$net" --torus-conf "$run_dir/torus-2QoS.conf"
            # OpenSM's torus-2QoS runs only with QoS on (-Q), as its sites run it.
            osm_extra=(-Q --torus_config "$run_dir/torus-2QoS.conf"); sm_extra=(--torus-config "$run_dir/torus-2QoS.conf") ;;
        random) fabric="random, $random_switches switches, $((2 * random_switches)) CAs"; engine=updn
            "$smcore" gen random --switches "$random_switches" --ports 8 --hosts 2 \
                --extra-links $((random_switches / 2)) --seed "$random_seed" -o "$net" ;;
        *) echo "recovery: unknown fabric $f (tree, torus, random)" >&2; exit 2 ;;
    esac
    "$analysis" pick "$net" > picks
    sm_host=$(sed -n 's/^sm_host //p' picks); diag_host=$(sed -n 's/^diag_host //p' picks)
    link=$(sed -n 's/^link //p' picks); switch=$(sed -n 's/^switch //p' picks); host=$(sed -n 's/^host //p' picks)
    if [ "$f" = tree ]; then lname="leaf uplink"; sname="spine switch"; else lname="link"; sname="switch"; fi
    events=("$lname down|Unlink|$link" "$lname back|ReLink|$link"
            "$sname down|Unlink|$switch" "$sname back|ReLink|$switch"
            "host cable down|Unlink|$host" "host cable back|ReLink|$host")
    echo "# $fabric ($(grep -c '^Switch' "$net") switches, $(grep -c '^Ca' "$net") CAs), $engine; SM on $sm_host, diags on $diag_host; link $link, switch $switch, host $host" | tee -a "$results/log"
    for sm in "${sms[@]}"; do session "$sm"; done
done

# The table: one row per (fabric, event, SM); smcore's rows give
# smcore / OpenSM for entries changed, busiest link and recovery.
echo
echo "| fabric | event | SM | LFT entries changed | busiest link (CA→CA routes) | mean | CA pairs reachable | recovery ms | smcore/OpenSM changed, busiest, recovery |"
echo "|---|---|---|---:|---:|---:|---:|---:|---|"
awk -F'|' '
    function field(s, name,   n, a, i) { n = split(s, a, " "); for (i = 1; i < n; i++) if (a[i] == name) return a[i + 1]; return "" }
    function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : (a > 0 ? "inf" : "-") }
    {
        key = $1 "|" $2; s = $4 " " $5
        c = field(s, "changed"); b = field(s, "busiest"); m = field(s, "mean")
        r = field(s, "reachable"); p = field(s, "pairs"); t = field(s, "recovery_ms")
        u = field(s, "unseen"); seen = (u > 0) ? sprintf(" (%d CA ports unseen)", u) : ""
        if ($3 == "opensm") { oc[key] = c; ob[key] = b; ot[key] = t }
        x = ($3 == "smcore" && (key in oc)) ? ratio(c, oc[key]) ", " ratio(b, ob[key]) ", " ratio(t, ot[key]) : ""
        printf "| %s | %s | %s | %d | %d | %s | %d/%d%s | %d | %s |\n", $1, $2, ($3 == "opensm" ? "OpenSM" : "smcore"), c, b, m, r, p, seen, t, x
    }' "$results/rows" | tee "$results/table.md"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results/log"
