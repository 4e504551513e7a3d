#!/bin/sh
# Route time, VLs, balance and extra hops of smcore's topology-agnostic
# deadlock-free engines (lash, dfsssp, sssp, nue) against OpenSM 3.3.23's on
# a 6x6x6 3D torus, a 500-switch random irregular fabric and a 16-ary
# 3-tree, in one run; see tests/src/bin/bench_layers.rs. Run from anywhere;
# results go to bench/results-layers.md. Arguments are passed on
# (--fabrics LIST, --engines LIST, --runs N, --nue-vls N, --opensm-timeout
# SECS, --budget-min M, ...).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The benchmark judges the release build; the engine .so files must sit
# beside the binary (minhop: Smcore::locate checks for it). Only the
# packages it needs, so that another engine crate being edited cannot stop it.
cargo build --release --quiet -p sm-core -p smcore-tests -p smcore-engine-lash \
    -p smcore-engine-dfsssp -p smcore-engine-nue -p smcore-engine-minhop
exec target/release/bench_layers "$@"
