#!/usr/bin/env bash
# Regenerates the *.hex fixtures in this directory from a live ibsim.
#
# Needs ibsim-utils, infiniband-diags and opensm. Usage: tests/data/capture.sh
#
# Every fixture holds the bytes of one real MAD as libibmad (or ibsim) dumped
# them, preceded by '#' lines: what it is, the exact command, and what the
# same invocation printed, so the tests can assert the values a tool decoded
# from the very bytes they parse.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
preload=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
export IBSIM_SOCKNAME=madcap$$
ibsim_pid=
osm_pid=

cleanup() {
	exec 3>&- 2>/dev/null || true
	[ -n "$osm_pid" ] && kill "$osm_pid" 2>/dev/null || true
	[ -n "$ibsim_pid" ] && kill "$ibsim_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# umad2sim builds its fake sysfs (sys-PID/) in the current directory.
cd "$work"

sim() { LD_PRELOAD=$preload "$@"; }

# The hex lines of the N-th (1-based) dump block that follows a line equal
# to $header and whose second line starts with $line2 (attribute ID and
# modifier: that is how one MAD of several a tool sent is picked).
extract() {
	local file=$1 header=$2 line2=$3 nth=${4:-1}
	awk -v header="$header" -v line2="$line2" -v nth="$nth" '
		function flush() {
			if (n > 0 && index(blk[2], line2) == 1 && ++seen == nth) {
				for (i = 1; i <= n; i++) print blk[i]
				found = 1
				exit
			}
			n = 0
		}
		$0 == header { flush(); inblk = 1; next }
		inblk && /^[0-9a-f][0-9a-f][0-9a-f][0-9a-f]( [0-9a-f][0-9a-f][0-9a-f][0-9a-f])*$/ {
			blk[++n] = $0; next
		}
		{ if (inblk) flush(); inblk = 0 }
		END { if (!found) { flush() } if (!found) exit 1 }
	' "$file"
}

# capture NAME LINE2 NTH DESCRIPTION -- COMMAND...
capture() {
	local name=$1 line2=$2 nth=$3 desc=$4
	shift 5
	local bytes= try
	# A whole MAD is 16 dump lines; anything else is a garbled dump, retried.
	for try in 1 2 3; do
		sim "$@" >"$work/out" 2>"$work/err"
		bytes=$(extract "$work/err" "rcv buf" "$line2" "$nth") || bytes=
		[ "$(printf '%s\n' "$bytes" | grep -c .)" = 16 ] && break
		bytes=
	done
	[ -n "$bytes" ] || {
		echo "no whole response with '$line2' from: $*" >&2
		exit 1
	}
	{
		echo "# $desc"
		echo "# command: $*"
		echo "# bytes: the \"rcv buf\" dump that the command's -d -d -d printed"
		echo "# tool output:"
		sed 's/^/#   /' "$work/out"
		echo "$bytes"
	} >"$here/$name.hex"
}

mkfifo "$work/console"
# Verbosity 3 makes ibsim dump the traps it sends (see trap128 below).
ibsim -s -v -v -v "$here/capture.net" <"$work/console" >"$work/ibsim.log" 2>&1 &
ibsim_pid=$!
# Holding the console open keeps ibsim reading it rather than seeing EOF.
exec 3>"$work/console"
for _ in $(seq 50); do
	grep -q "Network simulator ready" "$work/ibsim.log" && break
	sleep 0.1
done

export OSM_TMP_DIR=$work OSM_CACHE_DIR=$work
# Raw fabric first: ports are Active but no LIDs are assigned yet.
capture nodeinfo_sw1_dr "0011 0000 0000 0000" 1 \
	"NodeInfo GetResp, directed route with no hops (the local switch sw1)" \
	-- smpquery -d -d -d -D nodeinfo 0
capture nodeinfo_sw2_dr "0011 0000 0000 0000" 1 \
	"NodeInfo GetResp, directed route 0,3 (sw1 port 3 -> sw2)" \
	-- smpquery -d -d -d -D nodeinfo 0,3
capture nodeinfo_h3_dr "0011 0000 0000 0000" 1 \
	"NodeInfo GetResp, directed route 0,3,1 (sw1 -> sw2 -> h3, a CA)" \
	-- smpquery -d -d -d -D nodeinfo 0,3,1
capture portinfo_sw2_p1_dr "0015 0000 0000 0001" 1 \
	"PortInfo GetResp for port 1 of sw2, directed route 0,3, before any SM ran" \
	-- smpquery -d -d -d -D portinfo 0,3 1

# One OpenSM sweep assigns LIDs (sw1=1 sw2=2 h1=3 h2=4 h3=5), SM LID, LFTs.
sim timeout 60 opensm -o -f "$work/osm-once.log" >/dev/null 2>&1

capture nodedesc_h1 "0010 0000 0000 0000" 1 \
	"NodeDescription GetResp from h1 (LID 3), LID routed" \
	-- smpquery -d -d -d nodedesc 3
capture portinfo_sw1_p0 "0015 0000 0000 0000" 1 \
	"PortInfo GetResp for switch port 0 of sw1 (LID 1), after OpenSM" \
	-- smpquery -d -d -d portinfo 1 0
capture portinfo_sw1_p3 "0015 0000 0000 0003" 1 \
	"PortInfo GetResp for port 3 of sw1 (the link to sw2), after OpenSM" \
	-- smpquery -d -d -d portinfo 1 3
capture portinfo_h1 "0015 0000 0000 0001" 1 \
	"PortInfo GetResp for port 1 of h1 (LID 3), after OpenSM" \
	-- smpquery -d -d -d portinfo 3 1
capture switchinfo_sw2 "0012 0000 0000 0000" 1 \
	"SwitchInfo GetResp from sw2 (LID 2), after OpenSM" \
	-- smpquery -d -d -d switchinfo 2
capture lft_sw2_block0 "0019 0000 0000 0000" 1 \
	"LinearForwardingTable GetResp, block 0 of sw2 (LID 2), after OpenSM" \
	-- ibroute -d -d -d 2
capture mft_sw1_block0 "001b 0000 0000 0000" 1 \
	"MulticastForwardingTable GetResp, block 0 position 0 of sw1 (LID 1)" \
	-- ibroute -d -d -d -M 1
capture sl2vl_sw1_in1_out3 "0017 0000 0000 0103" 1 \
	"SLtoVLMappingTable GetResp of sw1, input port 1, output port 3" \
	-- smpquery -d -d -d sl2vl 1 3
capture vlarb_h1_low "0018 0000 0001 0001" 1 \
	"VLArbitrationTable GetResp of h1 port 1, block 1 (low priority 0-31)" \
	-- smpquery -d -d -d vlarb 3 1
capture vlarb_h1_high "0018 0000 0003 0001" 1 \
	"VLArbitrationTable GetResp of h1 port 1, block 3 (high priority 0-31)" \
	-- smpquery -d -d -d vlarb 3 1

# A resident OpenSM answers SMInfo and SA queries and receives traps.
# Not through sim(): $! must be OpenSM itself for the cleanup to stop it.
LD_PRELOAD=$preload opensm -f "$work/osm.log" >/dev/null 2>&1 &
osm_pid=$!
for _ in $(seq 100); do
	grep -q "Entering MASTER state" "$work/osm.log" 2>/dev/null && break
	sleep 0.1
done
sleep 2

capture sminfo_sw1 "0020 0000 0000 0000" 1 \
	"SMInfo GetResp from the master OpenSM on sw1 port 0 (LID 1)" \
	-- sminfo -d -d -d

# saquery prints its dumps on stdout, between its decoded records.
sim saquery -d -d -d NR >"$work/out" 2>"$work/err"
{
	echo "# SubnAdmGetTableResp (NodeRecord table, first 256 bytes as libibmad received them)"
	echo "# command: saquery -d -d -d NR"
	echo "# bytes: the \"SA Response:\" dump on its stdout"
	echo "# tool output (records; the table goes on past these bytes):"
	grep -v -E '^([0-9a-f]{4} ?)+$|^SA (Request|Response):$' "$work/out" | sed 's/^/#   /'
	extract "$work/out" "SA Response:" "0011 0000 0000 0000" 1
} >"$here/sa_noderecord_resp.hex"

# Unlinking h3 makes sw2 (LID 2) send trap 128 to the SM LID. ibsim dumps
# its struct sim_request: 32 bytes of ibsim's own header, then the first
# 224 bytes of the MAD.
lines_before=$(wc -l <"$work/ibsim.log")
echo 'Unlink "h3"[1]' >&3
for _ in $(seq 50); do
	tail -n +"$lines_before" "$work/ibsim.log" | grep -q -- "--- packet ---" && break
	sleep 0.1
done
sleep 1
tail -n +"$lines_before" "$work/ibsim.log" >"$work/trap.log"
{
	echo "# SubnTrap(Notice) 128 sent by sw2 (LID 2) to the SM (LID 1) after the"
	echo "# ibsim console command: Unlink \"h3\"[1]"
	echo "# bytes: ibsim -v -v -v's '--- packet ---' dump of the trap with its"
	echo "# 32-byte sim_request header removed: MAD bytes 0..224 (ibsim zeroes"
	echo "# the whole request before encoding, so bytes 224..256 are zero)"
	awk '
		$0 == "--- packet ---" { n = 0; inblk = 1; next }
		inblk && /^[0-9a-f][0-9a-f][0-9a-f][0-9a-f]( [0-9a-f][0-9a-f][0-9a-f][0-9a-f])*$/ { blk[++n] = $0; next }
		inblk { inblk = 0; if (n >= 3 && index(blk[3], "0101 0105") == 1) { for (i = 3; i <= n; i++) print blk[i]; exit } }
	' "$work/trap.log"
} >"$here/trap128_sw2.hex"
grep -q '^0101 0105' "$here/trap128_sw2.hex" || {
	echo "no trap 128 in ibsim's log" >&2
	exit 1
}

echo "fixtures written to $here"
