#!/bin/sh
# torus-2QoS: smcore against OpenSM 3.3.23 on a 10x10x10 torus with 2 CAs
# per switch, in one run on one machine.
#
# 1. Route time (tests/tests/torus2qos_bench.rs, ignored test): A B A B,
#    A = `smcore route` (the engine's own route_ms from the report),
#    B = `opensm -o -R torus-2QoS -Q` under ibsim (its log window from
#    "building routing" to "tables configured on all switches").
# 2. Balance (tests/tests/torus2qos_ibsim.rs, ignored test
#    balance_10x10x10_against_opensm): both SMs' LFT dumps judged by the
#    same code, CA-to-CA routes per directed inter-switch link.
#
# Run from anywhere. The raw log goes to $LOG (default
# /dev/shm/torus-bench.log) and stdout; bench/results-torus.md is written
# by hand from it. TORUS2QOS_BENCH_RUNS (default 5) sets the timed runs.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log=${LOG:-/dev/shm/torus-bench.log}
# The smcore binary and the engine .so files the benchmarks load are the
# release ones; only the packages needed, so that another crate being
# edited cannot stop the run.
cargo build --release --quiet -p sm-core -p smcore-tests -p smcore-engine-torus2qos -p smcore-engine-minhop
{
    echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD)"
    echo "# nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
    echo "# load before: $(cat /proc/loadavg)"
    echo "# $(opensm --version 2>&1 | grep -m1 -i opensm || true)"
    cargo test --quiet -p smcore-tests --test torus2qos_bench -- --ignored --nocapture
    echo "# load between: $(cat /proc/loadavg)"
    cargo test --quiet -p smcore-tests --test torus2qos_ibsim -- --ignored --nocapture balance_10x10x10_against_opensm
    echo "# load after: $(cat /proc/loadavg)"
} 2>&1 | grep -v ibwarn | tee "$log"
