#!/usr/bin/env bash
# The project's test command (README): installs the Debian packages the
# tests drive (ibsim, infiniband-diags, ibutils' ibdmchk, OpenSM as the
# reference), builds every engine library, then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

need=(ibsim-utils infiniband-diags ibutils opensm systemd logrotate prometheus man-db groff-base)
missing=()
for p in "${need[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# Engine cdylibs land beside target/debug/smcore, where the SM finds them.
cargo build --workspace
# The manual pages: `man ./target/man/smcore.8`.
target/debug/smcore manpages target/man >/dev/null
# Deliberately broken engines for the loader tests live in their own
# workspace so they never sit beside the real binary.
cargo build --manifest-path tests/fixtures/Cargo.toml --target-dir target/fixtures
cargo test --workspace --no-fail-fast
