#!/bin/sh
# minhop benchmarks against OpenSM, results in bench/results-minhop.md:
#  1. route time (tests/src/bin/bench_minhop.rs; arguments are passed on:
#     --runs N, --only NAME, ...);
#  2. busiest link of OpenSM's minhop, smcore's minhop and smcore's default
#     minhop-balanced on several families, as generated and numbered
#     differently (tests/src/bin/bench_minhop_balance.rs), with the ratios.
# MINHOP_BENCH=time or MINHOP_BENCH=balance runs one of them only.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The benchmarks judge the release build; the engine .so must sit beside it.
cargo build --workspace --release --quiet
which=${MINHOP_BENCH:-all}
if [ "$which" = all ] || [ "$which" = time ]; then
    target/release/bench_minhop "$@"
fi
if [ "$which" = all ] || [ "$which" = balance ]; then
    target/release/bench_minhop_balance
fi
