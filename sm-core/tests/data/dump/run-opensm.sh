#!/bin/bash
# Run OpenSM once on an ibsim fabric and keep everything it writes, plus
# `ibroute` printouts of every switch, then run ibdmchk on the dumps.
#
#   run-opensm.sh <net file> <output dir> [opensm options...]
#   e.g. run-opensm.sh ref-fabric.net /tmp/out -R minhop
#        run-opensm.sh ref-fabric.net /tmp/out -R lash -Q
#        GUID2LID=ours/guid2lid run-opensm.sh ring4.net /tmp/out -R file -U ours/opensm-lfts.dump
#
# GUID2LID seeds OpenSM's LID cache, so that it keeps the LIDs of another
# run (ours) and an LFT file written for those LIDs applies unchanged.
#
# `-D 0x43` (ERROR + INFO + ROUTING) is what makes OpenSM write the dumps.
set -u
net=$1; out=$2; shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*
[ -n "${GUID2LID:-}" ] && cp "$GUID2LID" "$out/guid2lid"
sock=smcore-dump-$$            # private simulator, so runs can overlap
umad2sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so

# ibsim's console is its stdin; hold it open through a fifo for as long as
# the fabric is needed, then type `quit`.
fifo=$out/.ibsim-console
mkfifo "$fifo"
IBSIM_SOCKNAME=$sock ibsim -s "$net" < "$fifo" > "$out/ibsim.out" 2>&1 &
simpid=$!
exec 7> "$fifo"
sleep 0.5                      # let ibsim create its socket

# Dumps go to OSM_TMP_DIR, the guid2lid/guid2mkey/neighbors cache to
# OSM_CACHE_DIR; -f keeps the log out of /var/log. The SM attaches to the
# first node of the net file (or SIM_HOST).
LD_PRELOAD=$umad2sim IBSIM_SOCKNAME=$sock OSM_TMP_DIR=$out OSM_CACHE_DIR=$out \
    timeout 60 opensm -o -D 0x43 -f "$out/osm.log" "$@" > "$out/opensm.out" 2>&1
echo "opensm exit status $?" >> "$out/opensm.out"

# The LFTs stay in the simulated switches after OpenSM exits; read them back.
# (ibroute by GUID, -G, needs the SA and so fails once OpenSM has exited.)
for lid in $(awk '/^Unicast lids/ {print $7}' "$out/opensm-lfts.dump"); do
    LD_PRELOAD=$umad2sim IBSIM_SOCKNAME=$sock timeout 20 ibroute "$lid" > "$out/ibroute.$lid" 2>&1
done
echo quit >&7
exec 7>&-
wait $simpid
rm -f "$fifo"

# ibdmchk exits with SIGSEGV (139) after printing its verdict; read the text.
(cd "$out" && ibdmchk -s opensm-subnet.lst -f opensm.fdbs -m opensm.mcfdbs \
    $( [ -f opensm-sl2vl.dump ] && echo -d opensm-sl2vl.dump ) > ibdmchk.out 2>&1)
echo "ibdmchk exit status $?" >> "$out/ibdmchk.out"
