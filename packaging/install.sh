#!/usr/bin/env bash
# Installs a built smcore: the binary, the engines, the service units, the
# defaults, the logrotate file, the manual pages and the README.
#
#   cargo build --release --workspace
#   sudo packaging/install.sh                     # into /
#   DESTDIR=/tmp/stage packaging/install.sh       # into a staging tree
#
# BUILD (default target/release) is where the binary and the engine
# libraries are; PREFIX (default /usr), UNITDIR (default /lib/systemd/system)
# and SYSCONFDIR (default /etc) where they go, under DESTDIR. Files an admin
# edits (/etc/default/smcore, /etc/smcore/smcore.toml) are never overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-target/release}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr}
UNITDIR=${UNITDIR:-/lib/systemd/system}
SYSCONFDIR=${SYSCONFDIR:-/etc}
root="$DESTDIR"

[ -x "$BUILD/smcore" ] || { echo "install.sh: no $BUILD/smcore; run cargo build --release --workspace first" >&2; exit 2; }
engines=("$BUILD"/libsmcore_*.so)
[ -e "${engines[0]}" ] || { echo "install.sh: no engine libraries in $BUILD" >&2; exit 2; }

install -D -m 0755 "$BUILD/smcore" "$root$PREFIX/sbin/smcore"
install -d -m 0755 "$root$PREFIX/lib/smcore/engines"
install -m 0644 "${engines[@]}" "$root$PREFIX/lib/smcore/engines/"

install -D -m 0644 packaging/smcore.service "$root$UNITDIR/smcore.service"
install -D -m 0644 packaging/smcore@.service "$root$UNITDIR/smcore@.service"
install -D -m 0644 packaging/smcore.logrotate "$root$SYSCONFDIR/logrotate.d/smcore"
keep() { # install $1 as $2 unless $2 exists (the admin's copy)
    if [ -e "$2" ]; then
        echo "install.sh: kept $2 (new version: $1)"
    else
        install -D -m 0644 "$1" "$2"
    fi
}
keep packaging/smcore.default "$root$SYSCONFDIR/default/smcore"
keep config/smcore.toml "$root$SYSCONFDIR/smcore/smcore.toml"

# Manual pages, generated from the command line and the defaults file.
pages=$(mktemp -d)
trap 'rm -rf "$pages"' EXIT
"$BUILD/smcore" manpages "$pages" >/dev/null
for page in "$pages"/*; do
    section=${page##*.}
    install -D -m 0644 "$page" "$root$PREFIX/share/man/man$section/$(basename "$page")"
    gzip -9nf "$root$PREFIX/share/man/man$section/$(basename "$page")"
done

install -D -m 0644 README.md "$root$PREFIX/share/doc/smcore/README.md"
install -d -m 0755 "$root$PREFIX/share/doc/smcore/docs"
install -m 0644 docs/*.md "$root$PREFIX/share/doc/smcore/docs/"
echo "install.sh: installed into ${DESTDIR:-/}"
