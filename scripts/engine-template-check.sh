#!/usr/bin/env bash
# Build engine-template/ out of tree, as a vendor would, and load it into
# smcore.
#
#   scripts/engine-template-check.sh [SMCORE]
#
# SMCORE is the smcore binary built by the workspace (default: $SMCORE, else
# target/debug/smcore); build it first with `cargo build --workspace`.
#
# The template depends on sm-abi and smcore-kit by version. They are not on
# crates.io, so the copy gets a .cargo/config.toml whose [patch.crates-io]
# points at this checkout's crates, the same thing a vendor does with a
# checkout of a released smcore. The repository's Cargo.lock seeds the
# copy's, so the build uses the crate versions the workspace was tested
# with and needs no network (CARGO_NET_OFFLINE). The build goes to
# $ENGINE_TEMPLATE_TARGET_DIR (default target/engine-template), kept
# between runs.
#
# Checks: the template's own tests (its conformance test) pass; the library
# builds; `smcore engines` lists its engine from that build; `smcore route`
# routes a topology with it alone and verifies the result. Exits non-zero,
# saying which step failed, otherwise.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
smcore=${1:-${SMCORE:-$repo/target/debug/smcore}}
target=${ENGINE_TEMPLATE_TARGET_DIR:-$repo/target/engine-template}
topology=$repo/config/topologies/4-ary-3-tree.net
engine=template-minhop

fail() {
    echo "engine-template-check: $*" >&2
    exit 1
}

[ -x "$smcore" ] || fail "no smcore binary at $smcore (run cargo build --workspace, or pass its path)"
cargo=${CARGO:-cargo}
command -v "$cargo" >/dev/null || fail "cargo not found ($cargo)"

work=$(mktemp -d "${TMPDIR:-/tmp}/smcore-engine-template.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The copy a vendor would make, without anything built in the checkout.
mkdir "$work/engine"
(cd "$repo/engine-template" && tar --exclude=./target --exclude=./Cargo.lock -cf - .) | tar -xf - -C "$work/engine"
cp "$repo/Cargo.lock" "$work/engine/Cargo.lock"
mkdir -p "$work/engine/.cargo"
cat >"$work/engine/.cargo/config.toml" <<TOML
[patch.crates-io]
sm-abi = { path = "$repo/sm-abi" }
smcore-kit = { path = "$repo/engines/kit" }
TOML

export CARGO_NET_OFFLINE=true
cd "$work/engine"
"$cargo" test --offline --target-dir "$target" || fail "the template's tests failed (in $work/engine)"
"$cargo" build --offline --target-dir "$target" || fail "the template did not build"

library=$target/debug/libsmcore_template.so
[ -f "$library" ] || fail "the build made no $library"
# A directory holding only this build: smcore loads every library in an
# engine directory, and refuses one others could write to.
mkdir -m 0755 "$work/engines"
cp "$library" "$work/engines/"

listing=$("$smcore" engines --engine-dir "$work/engines") || fail "smcore engines failed"
echo "$listing"
grep -E "^$engine +[^ ]+ +$work/engines/libsmcore_template.so\$" <<<"$listing" >/dev/null \
    || fail "smcore engines does not list $engine from $work/engines"
if grep "libsmcore_template.so" <<<"$listing" | grep -q "^skipped"; then
    fail "smcore skipped the template library"
fi

# In an engine host process, as a site runs third-party engines (the
# default, stated here so that the check keeps meaning it).
printf 'engine_isolation = "process"\n' > "$work/isolated.toml"
report=$("$smcore" route "$topology" --config "$work/isolated.toml" --engine-dir "$work/engines" --engines "$engine,no_fallback") \
    || fail "smcore route --engines $engine failed on $topology"
echo "$report"
grep -q "^result *routed by $engine\$" <<<"$report" || fail "$topology was not routed by $engine"
echo "engine-template-check: $engine built out of tree, listed and routing"
