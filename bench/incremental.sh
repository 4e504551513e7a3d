#!/bin/bash
# Incremental heavy sweeps against full ones (issue 14, item 2), on the
# embedded simulated fabric of a k-ary 3-tree (default the 16-ary one: 768
# switches, 4,096 hosts): a host going off, coming back and rebooting
# between two sweeps, then a spine going off and coming back, each swept
# once in full and once incrementally (changes named by the traps that
# reach the SM, by a light sweep when none does).
#
# Prints a table: SMPs of discovery, SMPs of the whole heavy sweep but the
# LFT blocks written (what really changes in the switches), those blocks,
# and the SM's time from the first SMP to the last, plus the SA database
# rebuilt from the sweep (the in-process fabric answers at no cost, so this
# is the SM's own work), with its phases.
#
# With REBOOTS, that many more host reboots follow, each swept
# incrementally, and the line after the table gives the least, median and
# most SM ms of one.
#
# usage: bench/incremental.sh [K] [ENGINES] [REBOOTS]   (defaults: 16,
#        ftree,minhop, 0; ftree refuses the tree with a spine missing,
#        minhop routes it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
# Release build: the example and the engine libraries it loads from the
# directory above its own.
(cd "$root" && cargo build --release --quiet -p sm-core --example incremental \
    && cargo build --release --quiet -p smcore-engine-ftree -p smcore-engine-minhop)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
"$target/release/examples/incremental" "${1:-16}" "${2:-ftree,minhop}" "${3:-0}"
