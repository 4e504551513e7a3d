#!/bin/sh
# Route time and balance of smcore's tree engines (minhop, updn, dnup,
# ftree) against OpenSM's on one large k-ary n-tree (default 22-ary 3-tree,
# 10,648 CAs), see tests/src/bin/bench_trees.rs. Run from anywhere; results
# go to bench/results-trees.md. Arguments are passed on (--k K --n N,
# --engines LIST, --runs N, --no-quality, --work DIR, ...).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The benchmark judges the release build; the engine .so files must sit
# beside the binary. Only the packages it needs, so that another engine
# crate being edited cannot stop it.
cargo build --release --quiet -p sm-core -p smcore-engine-minhop -p smcore-engine-updn \
    -p smcore-engine-ftree -p smcore-tests
exec target/release/bench_trees "$@"
