#!/bin/sh
# Route-time benchmark of smcore's minhop against OpenSM's, see
# tests/src/bin/bench_minhop.rs. Run from anywhere; results go to
# bench/results-minhop.md. Arguments are passed on (--runs N, --only NAME,...).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The benchmark judges the release build; the engine .so must sit beside it.
cargo build --workspace --release --quiet
exec target/release/bench_minhop "$@"
