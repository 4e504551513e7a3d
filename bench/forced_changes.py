#!/usr/bin/env python3
"""How many LFT entries an event forces an SM to change, on its own tables.

An entry (switch, LID) is forced when, after the event, its out port no
longer leads one hop closer to the LID's switch: the port's cable or peer
is gone, or the peer's distance grew. Under a min-hop rule (minhop, and
updn where it falls back to minhop) an SM that keeps every valid entry
changes exactly the forced ones, plus whatever it moves to rebalance.
Run on the `ibroute` read-backs `bench/recovery.sh` keeps for each SM:

    bench/forced_changes.py RESULTS/random/fabric.net \
        RESULTS/random/smcore/2.lfts RESULTS/random/smcore/3.lfts --switch S-0002c9000000001c
    bench/forced_changes.py ... --link S-0002c9000000001e 1

prints the entries changed between the two read-backs (port changed, entry
gone, entry new) and the entries the event forced on the first one. With
`--every`, the two read-backs are two SMs' tables of the healthy fabric
(each SM's `0.lfts`), compared on every single link and switch fault:

    bench/forced_changes.py RESULTS/random/fabric.net \
        RESULTS/random/opensm/0.lfts RESULTS/random/smcore/0.lfts --every
"""

import argparse
import collections
import re


def load_lfts(path):
    """switch GUID -> {LID: (port, destination port GUID)} from dump_fts output."""
    tables, switch = {}, None
    for line in open(path):
        if line.startswith("Unicast"):
            switch = int(re.search(r"guid (0x[0-9a-f]+)", line).group(1), 16)
            tables[switch] = {}
            continue
        m = re.match(r"(0x[0-9a-f]{4}) (\d{3}) : \(.*? portguid (0x[0-9a-f]+)", line)
        if m and switch is not None:
            tables[switch][int(m.group(1), 16)] = (int(m.group(2)), int(m.group(3), 16))
    return tables


def load_net(path):
    """(node, port) -> (node, port) for every cable of an ibnetdiscover file."""
    links, node = {}, None
    for line in open(path):
        m = re.match(r'(Switch|Ca)\s+\d+\s+"([SH]-[0-9a-f]+)"', line)
        if m:
            node = m.group(2)
            continue
        m = re.match(r'\[(\d+)\].*?"([SH]-[0-9a-f]+)"\[(\d+)\]', line)
        if m and node:
            links[(node, int(m.group(1)))] = (m.group(2), int(m.group(3)))
    return links


def name(guid, prefix):
    return f"{prefix}-{guid:016x}"


def forced_entries(tables, links, dead_switch=None, dead=frozenset()):
    """Entries of `tables` the event forces: their port's cable or peer is
    gone, or the peer is no longer one hop closer to the LID's switch."""
    adjacency = collections.defaultdict(set)
    for (a, pa), (b, pb) in links.items():
        if not (a.startswith("S") and b.startswith("S")) or dead_switch in (a, b) or (a, pa) in dead:
            continue
        adjacency[a].add(b)
    all_switches = {n for (n, _) in links if n.startswith("S")}
    switches = all_switches - {dead_switch}

    def distances(target):
        d, queue = {target: 0}, [target]
        for x in queue:
            for y in adjacency[x]:
                if y not in d:
                    d[y] = d[x] + 1
                    queue.append(y)
        return d

    dist = {t: distances(t) for t in switches}
    host_switch = {a: b for (a, _), (b, _) in links.items() if a.startswith("H")}

    def switch_of(port_guid):
        s = name(port_guid, "S")
        if s in all_switches:
            return s
        return host_switch.get(name(port_guid & ~0xFF, "H"))

    forced = 0
    for sw, table in tables.items():
        s = name(sw, "S")
        if s == dead_switch:
            continue
        for lid, (port, dest) in table.items():
            t = switch_of(dest)
            if t is None or t == dead_switch or t == s:
                continue
            peer = links.get((s, port))
            if peer is None or (s, port) in dead or peer[0] not in adjacency[s]:
                forced += 1
            elif dist[t].get(peer[0], 1 << 20) + 1 != dist[t].get(s, 1 << 20):
                forced += 1
    return forced


def every_element(links, first, second):
    """Forced entries on two SMs' tables of the same fabric for every
    switch-to-switch link and every switch taken down alone."""
    isl = sorted({tuple(sorted([a, b])) for a, b in links.items() if a[0].startswith("S") and b[0].startswith("S")})
    switches = sorted({n for (n, _) in links if n.startswith("S")})
    for kind, events in (("link", [dict(dead=frozenset(l)) for l in isl]), ("switch", [dict(dead_switch=s) for s in switches])):
        a = [forced_entries(first, links, **e) for e in events]
        b = [forced_entries(second, links, **e) for e in events]
        print(
            f"every {kind} down alone ({len(events)}): forced entries summed {sum(a)} (first) {sum(b)} (second), "
            f"most {max(a)} {max(b)}; second <= first on {sum(y <= x for x, y in zip(a, b))}, "
            f"second > first on {sum(y > x for x, y in zip(a, b))}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("net")
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--switch", help="the switch taken down (S-<guid>)")
    ap.add_argument("--link", nargs=2, metavar=("NODE", "PORT"), help="one end of the cable taken down")
    ap.add_argument(
        "--every",
        action="store_true",
        help="BEFORE and AFTER are two SMs' read-backs of the healthy fabric: "
        "compare the entries every single link or switch fault would force on each",
    )
    args = ap.parse_args()

    links = load_net(args.net)
    before, after = load_lfts(args.before), load_lfts(args.after)
    if args.every:
        every_element(links, before, after)
        return
    dead = frozenset()
    if args.link:
        end = (args.link[0], int(args.link[1]))
        dead = frozenset({end, links.get(end)})

    changed = collections.Counter()
    for sw, table in before.items():
        if sw not in after:
            continue
        for lid in set(table) | set(after[sw]):
            x, y = table.get(lid), after[sw].get(lid)
            if x == y:
                continue
            changed["port changed" if x and y else ("entry gone" if x else "entry new")] += 1

    forced = forced_entries(before, links, args.switch, dead)
    print(", ".join(f"{k} {v}" for k, v in sorted(changed.items())) or "nothing changed")
    print(f"forced by the event on the first tables: {forced}")


if __name__ == "__main__":
    main()
