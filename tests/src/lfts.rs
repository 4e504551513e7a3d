//! LFT dumps and route quality computed from them alone.
//!
//! The input is what any SM leaves behind: `opensm-lfts.dump` plus a LID
//! file of the same run (`guid2lid`, or `opensm-subnet.lst`), and the
//! topology file the fabric was built from. Nothing of smcore's own
//! verifier is used, so the figures can judge smcore and OpenSM alike.
//!
//! Two SMs may hand out different LIDs on the same fabric, so everything is
//! keyed by GUID: switches by node GUID, destinations by port GUID.
//!
//! `opensm-lfts.dump` (OpenSM's `dump_ucast_lfts`) is, per switch,
//!
//! ```text
//! Unicast lids [0-22] of switch Lid 17 guid 0x0002c90000000000 ('leaf-0'):
//! 0x0001 001 # Channel Adapter portguid 0x0002c90100000001: 'host-0'
//! ...
//! 22 lids dumped
//! ```
//!
//! with no line for a LID the switch has no route to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use sm_topology::Topology;

use crate::{Error, Result};

/// LFT entry for "no route", as in the SM ABI.
pub const NO_ROUTE: u8 = sm_abi::NO_ROUTE;

/// The LFT of one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchLft {
    /// Node GUID.
    pub guid: u64,
    /// The switch's own LID in that run.
    pub lid: u16,
    /// Description as dumped.
    pub desc: String,
    /// Output port indexed by LID; [`NO_ROUTE`] where the dump has no line.
    pub ports: Vec<u8>,
}

impl SwitchLft {
    /// Output port for `lid`, if the switch has a route.
    pub fn port(&self, lid: u16) -> Option<u8> {
        self.ports.get(lid as usize).copied().filter(|&p| p != NO_ROUTE)
    }
}

/// All switches' LFTs of one dump, by node GUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lfts {
    /// LFT per switch node GUID.
    pub switches: BTreeMap<u64, SwitchLft>,
}

impl Lfts {
    /// The LFT of the switch with this node GUID.
    pub fn get(&self, guid: u64) -> Option<&SwitchLft> {
        self.switches.get(&guid)
    }

    /// Number of switches dumped.
    pub fn len(&self) -> usize {
        self.switches.len()
    }

    /// No switch dumped.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty()
    }
}

/// Read an `opensm-lfts.dump`.
pub fn parse_lfts_file(path: impl AsRef<Path>) -> Result<Lfts> {
    let path = path.as_ref();
    let text = read(path)?;
    parse_lfts_str(&text, &path.display().to_string())
}

/// Parse the text of an `opensm-lfts.dump` with the SM's own parser
/// (`sm_core::dump::lfts_parse`, shared with the `file` engine); `origin`
/// names it in errors.
pub fn parse_lfts_str(text: &str, origin: &str) -> Result<Lfts> {
    let parsed = sm_core::dump::lfts_parse::parse_lfts_detailed(text, origin)
        .map_err(|e| Error::parse(origin, 0, e.to_string()))?;
    let mut lfts = Lfts::default();
    for sw in parsed {
        let top = sw.entries.iter().map(|e| e.lid as usize).max().unwrap_or(0);
        let mut ports = vec![NO_ROUTE; top + 1];
        for e in &sw.entries {
            ports[e.lid as usize] = e.port;
        }
        let lft = SwitchLft { guid: sw.guid, lid: sw.lid.unwrap_or(0), desc: sw.description, ports };
        if lfts.switches.insert(sw.guid, lft).is_some() {
            return Err(Error::parse(origin, sw.line, format!("switch 0x{:016x} dumped twice", sw.guid)));
        }
    }
    Ok(lfts)
}

/// LIDs of one run: which port GUID answers to each LID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LidMap {
    /// Port GUID per LID.
    pub by_lid: BTreeMap<u16, u64>,
}

impl LidMap {
    /// The port GUID behind `lid`.
    pub fn guid(&self, lid: u16) -> Option<u64> {
        self.by_lid.get(&lid).copied()
    }

    /// Highest LID in use.
    pub fn max_lid(&self) -> u16 {
        self.by_lid.keys().next_back().copied().unwrap_or(0)
    }
}

/// Read a `guid2lid` file: `0x<port guid> 0x<min lid> 0x<max lid>` lines.
pub fn parse_guid2lid_file(path: impl AsRef<Path>) -> Result<LidMap> {
    let path = path.as_ref();
    let text = read(path)?;
    parse_guid2lid_str(&text, &path.display().to_string())
}

/// Parse `guid2lid` text.
pub fn parse_guid2lid_str(text: &str, origin: &str) -> Result<LidMap> {
    let mut map = LidMap::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let nums: Vec<Option<u64>> =
            line.split_whitespace().map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()).collect();
        let [Some(guid), Some(lo), Some(hi)] = nums[..] else {
            return Err(Error::parse(origin, i + 1, format!("expected `guid min_lid max_lid`: {line}")));
        };
        if lo == 0 || lo > hi || hi > u16::MAX as u64 {
            return Err(Error::parse(origin, i + 1, format!("bad LID range: {line}")));
        }
        for lid in lo..=hi {
            map.by_lid.insert(lid as u16, guid);
        }
    }
    Ok(map)
}

/// Read the port GUID and LID of both ends of every link in an
/// `opensm-subnet.lst`. It gives base LIDs only, so with LMC > 0 prefer
/// `guid2lid`.
pub fn parse_subnet_lst_file(path: impl AsRef<Path>) -> Result<LidMap> {
    let path = path.as_ref();
    let text = read(path)?;
    parse_subnet_lst_str(&text, &path.display().to_string())
}

/// Parse `opensm-subnet.lst` text.
pub fn parse_subnet_lst_str(text: &str, origin: &str) -> Result<LidMap> {
    let mut map = LidMap::default();
    for (i, line) in text.lines().enumerate() {
        // Each end of a link is `{ ... PortGUID:<hex> ... {desc} LID:<hex> PN:<hex> }`;
        // the first `LID:` after a PortGUID belongs to that end.
        for end in line.split("PortGUID:").skip(1) {
            let guid = end.split_whitespace().next().and_then(|g| u64::from_str_radix(g, 16).ok());
            let lid = end
                .split_once(" LID:")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|l| u16::from_str_radix(l, 16).ok());
            match (guid, lid) {
                (Some(g), Some(l)) => {
                    if l != 0 {
                        map.by_lid.insert(l, g);
                    }
                }
                _ => return Err(Error::parse(origin, i + 1, "port record without a readable GUID and LID")),
            }
        }
    }
    Ok(map)
}

/// The LIDs of the run that wrote `dir`: `guid2lid` when present (it has
/// LMC ranges), else `opensm-subnet.lst`.
pub fn lid_map_for_dump_dir(dir: impl AsRef<Path>) -> Result<LidMap> {
    let dir = dir.as_ref();
    let g2l = dir.join("guid2lid");
    if g2l.is_file() {
        let map = parse_guid2lid_file(&g2l)?;
        if !map.by_lid.is_empty() {
            return Ok(map);
        }
    }
    parse_subnet_lst_file(dir.join("opensm-subnet.lst"))
}

/// Route quality of a set of LFTs on a fabric, end port to end port.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quality {
    /// End ports (CA and router ports linked to a switch) with a LID.
    pub end_ports: usize,
    /// (source end port, destination end-port LID) pairs, source ≠ destination port.
    pub pairs: usize,
    /// Pairs whose LFT walk ends at the destination port.
    pub reachable_pairs: usize,
    /// A few unreachable pairs, described.
    pub unreachable_examples: Vec<String>,
    /// Mean links traversed per reachable pair, end links included.
    pub avg_hops: f64,
    /// Mean of (links traversed − shortest possible) per reachable pair.
    pub avg_extra_hops: f64,
    /// Largest extra hop count of any reachable pair.
    pub max_extra_hops: u32,
    /// Reachable pairs routed over a longer than shortest path.
    pub non_minimal_pairs: usize,
    /// Directed inter-switch links (two per cable).
    pub inter_switch_links: usize,
    /// Most end-to-end routes crossing one directed inter-switch link.
    pub max_routes_per_link: u64,
    /// Mean routes per directed inter-switch link (unused links included).
    pub mean_routes_per_link: f64,
    /// The most loaded link: (switch node GUID, output port).
    pub busiest_link: Option<(u64, u8)>,
}

impl Quality {
    /// Every pair reachable.
    pub fn all_reachable(&self) -> bool {
        self.pairs > 0 && self.reachable_pairs == self.pairs
    }
}

/// How a switch's LFT walk towards one destination ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    Unknown,
    OnStack,
    /// Links from here to the destination port.
    Reaches(u32),
    /// No route, wrong port, loop or too long.
    Dead,
}

/// Compute [`Quality`] of `lfts` (with LIDs from `lids`) on `topo`.
///
/// Paths are walked per destination LID over all switches at once (each
/// switch's walk is memoised), and the load of a link is the number of
/// source end ports whose walk crosses it, so the cost is about
/// destinations × switches rather than pairs × path length.
pub fn quality(topo: &Topology, lfts: &Lfts, lids: &LidMap) -> Result<Quality> {
    let n = topo.nodes.len();
    let port_links = topo.port_links();
    let peer = |node: usize, port: u8| -> Option<(usize, u8)> {
        let link = (*port_links.get(node)?.get(port as usize)?)?;
        topo.links.get(link)?.other_end((node, port))
    };

    // Dense switch numbering and a flat index for each (switch, port).
    let mut sw_of_node = vec![usize::MAX; n];
    let mut sw_nodes = Vec::new();
    let mut port_base = Vec::new();
    let mut total_ports = 0usize;
    for (i, node) in topo.nodes.iter().enumerate() {
        if node.is_switch() {
            sw_of_node[i] = sw_nodes.len();
            sw_nodes.push(i);
            port_base.push(total_ports);
            total_ports += node.num_ports as usize + 1;
        }
    }
    let sw_lft: Vec<Option<&SwitchLft>> = sw_nodes.iter().map(|&i| lfts.get(topo.nodes[i].node_guid)).collect();

    // Switch adjacency for shortest paths.
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); sw_nodes.len()];
    let mut inter_switch_links = 0usize;
    for l in &topo.links {
        let (a, b) = (sw_of_node.get(l.a.0).copied(), sw_of_node.get(l.b.0).copied());
        if let (Some(a), Some(b)) = (a, b) {
            if a != usize::MAX && b != usize::MAX {
                adj[a].push(b);
                adj[b].push(a);
                inter_switch_links += 2;
            }
        }
    }

    // End ports attached to a switch, by port GUID.
    let mut end_port_by_guid: HashMap<u64, (usize, u8)> = HashMap::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        if node.is_switch() {
            continue;
        }
        for p in 1..=node.num_ports {
            if let Some((pn, _)) = peer(i, p) {
                if sw_of_node[pn] != usize::MAX {
                    end_port_by_guid.insert(node.port_guid(p), (i, p));
                }
            }
        }
    }

    // Sources: end ports with a LID; destinations: every LID of them.
    let mut source_ports: Vec<(usize, u8)> = Vec::new();
    let mut dests: Vec<(u16, (usize, u8))> = Vec::new();
    for (&lid, guid) in &lids.by_lid {
        if let Some(&port) = end_port_by_guid.get(guid) {
            dests.push((lid, port));
            source_ports.push(port);
        }
    }
    source_ports.sort_unstable();
    source_ports.dedup();
    // The switch (and port) each source hangs off.
    let src_attach: Vec<(usize, (usize, u8))> = source_ports
        .iter()
        .filter_map(|&(node, port)| {
            let (pn, pp) = peer(node, port)?;
            Some((sw_of_node[pn], (pn, pp)))
        })
        .collect();

    // Group destinations by their switch so each BFS runs once per switch.
    dests.sort_by_key(|&(lid, (node, port))| (peer(node, port).map(|(sn, _)| sw_of_node[sn]), lid));

    let mut q = Quality { end_ports: source_ports.len(), inter_switch_links, ..Default::default() };
    let mut link_load = vec![0u64; total_ports];
    let mut walk = vec![Walk::Unknown; sw_nodes.len()];
    let mut next_sw = vec![usize::MAX; sw_nodes.len()];
    let mut out_port = vec![0u8; sw_nodes.len()];
    let mut dist: Vec<u32> = Vec::new();
    let mut dist_for = usize::MAX;
    let mut load = vec![0u64; sw_nodes.len()];
    let mut order: Vec<usize> = Vec::with_capacity(sw_nodes.len());
    let mut stack: Vec<usize> = Vec::new();
    let (mut hop_sum, mut extra_sum) = (0u64, 0u64);
    let max_walk = sw_nodes.len() as u32 + 1;

    for &(dlid, (dnode, dport)) in &dests {
        let Some((dsw_node, _)) = peer(dnode, dport) else { continue };
        let dsw = sw_of_node[dsw_node];
        if dist_for != dsw {
            dist = bfs(&adj, dsw);
            dist_for = dsw;
        }

        // Next hop of every switch towards dlid.
        for s in 0..sw_nodes.len() {
            walk[s] = Walk::Unknown;
            next_sw[s] = usize::MAX;
            let Some(port) = sw_lft[s].and_then(|l| l.port(dlid)) else {
                walk[s] = Walk::Dead;
                continue;
            };
            out_port[s] = port;
            if port == 0 {
                walk[s] = Walk::Dead;
                continue;
            }
            match peer(sw_nodes[s], port) {
                Some(end) if end == (dnode, dport) => walk[s] = Walk::Reaches(1),
                Some((pn, _)) if sw_of_node[pn] != usize::MAX => next_sw[s] = sw_of_node[pn],
                _ => walk[s] = Walk::Dead,
            }
        }
        // Resolve walks; a switch met again while on the stack is a loop.
        order.clear();
        for s0 in 0..sw_nodes.len() {
            if walk[s0] != Walk::Unknown {
                continue;
            }
            stack.clear();
            let mut s = s0;
            let end = loop {
                match walk[s] {
                    Walk::Unknown => {
                        walk[s] = Walk::OnStack;
                        stack.push(s);
                        s = next_sw[s];
                    }
                    Walk::OnStack | Walk::Dead => break None,
                    Walk::Reaches(h) => break Some(h),
                }
            };
            let mut h = end;
            while let Some(t) = stack.pop() {
                h = h.map(|h| h + 1).filter(|&h| h <= max_walk);
                walk[t] = h.map_or(Walk::Dead, Walk::Reaches);
            }
        }

        // Pairs from every source port.
        for (&(snode, sport), &(ssw, _)) in source_ports.iter().zip(&src_attach) {
            if (snode, sport) == (dnode, dport) {
                continue;
            }
            q.pairs += 1;
            match walk[ssw] {
                Walk::Reaches(h) => {
                    let hops = h + 1;
                    let shortest = dist[ssw].saturating_add(2);
                    let extra = hops.saturating_sub(shortest);
                    q.reachable_pairs += 1;
                    hop_sum += hops as u64;
                    extra_sum += extra as u64;
                    q.max_extra_hops = q.max_extra_hops.max(extra);
                    if extra > 0 {
                        q.non_minimal_pairs += 1;
                    }
                }
                _ => {
                    if q.unreachable_examples.len() < 5 {
                        q.unreachable_examples.push(format!(
                            "{}[{}] -> LID {} ({}[{}])",
                            topo.nodes[snode].name, sport, dlid, topo.nodes[dnode].name, dport
                        ));
                    }
                }
            }
        }

        // Link loads: push each switch's source count down its walk, from
        // the farthest switches in.
        for s in 0..sw_nodes.len() {
            load[s] = 0;
            if let Walk::Reaches(_) = walk[s] {
                order.push(s);
            }
        }
        for &(ssw, _) in &src_attach {
            load[ssw] += 1;
        }
        // The destination port itself is no source for its own LID.
        if source_ports.binary_search(&(dnode, dport)).is_ok() {
            load[dsw] = load[dsw].saturating_sub(1);
        }
        order.sort_unstable_by_key(|&s| {
            std::cmp::Reverse(match walk[s] {
                Walk::Reaches(h) => h,
                _ => 0,
            })
        });
        for &s in &order {
            let nx = next_sw[s];
            if nx == usize::MAX {
                continue;
            }
            link_load[port_base[s] + out_port[s] as usize] += load[s];
            load[nx] += load[s];
        }
    }

    if q.reachable_pairs > 0 {
        q.avg_hops = hop_sum as f64 / q.reachable_pairs as f64;
        q.avg_extra_hops = extra_sum as f64 / q.reachable_pairs as f64;
    }
    let total: u64 = link_load.iter().sum();
    if inter_switch_links > 0 {
        q.mean_routes_per_link = total as f64 / inter_switch_links as f64;
    }
    if let Some((idx, &max)) = link_load.iter().enumerate().max_by_key(|&(i, &v)| (v, std::cmp::Reverse(i))) {
        q.max_routes_per_link = max;
        if max > 0 {
            let s = port_base.partition_point(|&b| b <= idx) - 1;
            q.busiest_link = Some((topo.nodes[sw_nodes[s]].node_guid, (idx - port_base[s]) as u8));
        }
    }
    Ok(q)
}

/// Switch hops from `from` to every switch; `u32::MAX` where unreachable.
fn bfs(adj: &[Vec<usize>], from: usize) -> Vec<u32> {
    let mut dist = vec![u32::MAX; adj.len()];
    let mut queue = VecDeque::new();
    dist[from] = 0;
    queue.push_back(from);
    while let Some(s) = queue.pop_front() {
        for &t in &adj[s] {
            if dist[t] == u32::MAX {
                dist[t] = dist[s] + 1;
                queue.push_back(t);
            }
        }
    }
    dist
}

/// [`quality`] of the dumps in `dir` (`opensm-lfts.dump` and its LID file).
pub fn quality_of_dump_dir(topo: &Topology, dir: impl AsRef<Path>) -> Result<Quality> {
    let dir = dir.as_ref();
    let lfts = parse_lfts_file(dir.join("opensm-lfts.dump"))?;
    let lids = lid_map_for_dump_dir(dir)?;
    quality(topo, &lfts, &lids)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two switches joined by two parallel cables, two hosts on each.
    const NET: &str = r#"
Switch 4 "sw1"
[1] "h1"[1]
[2] "h2"[1]
[3] "sw2"[3]
[4] "sw2"[4]

Switch 4 "sw2"
[1] "h3"[1]
[2] "h4"[1]

Hca 1 "h1"
Hca 1 "h2"
Hca 1 "h3"
Hca 1 "h4"
"#;

    fn topo() -> Topology {
        sm_topology::parse_str(NET, "two-switch.net").expect("test net parses")
    }

    fn guid(t: &Topology, name: &str, port: u8) -> u64 {
        let i = t.find_node(name).expect("node in test net");
        t.nodes[i].port_guid(port)
    }

    /// LIDs 1..=4 for h1..h4, 5 and 6 for the switches; LFTs in dump form.
    fn dump(t: &Topology, sw1_to_h3: u8, sw1_to_h4: u8) -> (String, String) {
        let g = |n: &str, p: u8| guid(t, n, p);
        let g2l: String = [("h1", 1), ("h2", 1), ("h3", 1), ("h4", 1), ("sw1", 0), ("sw2", 0)]
            .iter()
            .enumerate()
            .map(|(i, &(n, p))| format!("0x{:016x} 0x{:04x} 0x{:04x}\n\n", g(n, p), i + 1, i + 1))
            .collect();
        let lft = format!(
            "Unicast lids [0-6] of switch Lid 5 guid 0x{:016x} ('sw1'):\n\
             0x0001 001 # Channel Adapter portguid 0x1: 'h1'\n\
             0x0002 002 # x\n0x0003 {sw1_to_h3:03} # x\n0x0004 {sw1_to_h4:03} # x\n0x0005 000 # x\n0x0006 003 # x\n\
             6 lids dumped\n\
             Unicast lids [0-6] of switch Lid 6 guid 0x{:016x} ('sw2'):\n\
             0x0001 003 # x\n0x0002 003 # x\n0x0003 001 # x\n0x0004 002 # x\n0x0005 003 # x\n0x0006 000 # x\n\
             6 lids dumped\n",
            g("sw1", 0),
            g("sw2", 0)
        );
        (lft, g2l)
    }

    #[test]
    fn balanced_two_switch_fabric() {
        let t = topo();
        let (lft, g2l) = dump(&t, 3, 4);
        let lfts = parse_lfts_str(&lft, "lfts").expect("parses");
        let lids = parse_guid2lid_str(&g2l, "g2l").expect("parses");
        assert_eq!(lfts.len(), 2);
        let q = quality(&t, &lfts, &lids).expect("quality");
        assert_eq!(q.end_ports, 4);
        assert_eq!(q.pairs, 12);
        assert!(q.all_reachable(), "{q:?}");
        // 4 same-switch pairs of 2 links, 8 cross pairs of 3.
        assert!((q.avg_hops - (4.0 * 2.0 + 8.0 * 3.0) / 12.0).abs() < 1e-9);
        assert_eq!(q.avg_extra_hops, 0.0);
        assert_eq!(q.inter_switch_links, 4);
        // sw1 -> sw2: h1,h2 to h3 over port 3, to h4 over port 4: 2 each.
        // sw2 -> sw1: h3,h4 to h1 and h2 all over port 3: 4.
        assert_eq!(q.max_routes_per_link, 4, "{q:?} {lft}");
        assert_eq!(q.busiest_link, Some((guid(&t, "sw2", 0), 3)));
        assert!((q.mean_routes_per_link - 8.0 / 4.0).abs() < 1e-9);
    }

    #[test]
    fn missing_and_wrong_routes_are_unreachable() {
        let t = topo();
        // sw1 sends h3's LID back to h2 and has no entry for h4.
        let (lft, g2l) = dump(&t, 2, 255);
        let lft = lft.replace("0x0004 255 # x\n", "");
        let q =
            quality(&t, &parse_lfts_str(&lft, "l").expect("parses"), &parse_guid2lid_str(&g2l, "g").expect("parses"))
                .expect("quality");
        // h1 and h2 reach neither h3 nor h4.
        assert_eq!(q.pairs - q.reachable_pairs, 4);
        assert!(!q.all_reachable());
        assert_eq!(q.unreachable_examples.len(), 4);
    }

    #[test]
    fn forwarding_loop_is_unreachable() {
        let t = topo();
        let (lft, g2l) = dump(&t, 3, 4);
        // sw2 sends h3's LID back to sw1, which sends it to sw2.
        let lft = lft.replace("0x0003 001 # x", "0x0003 004 # x");
        let q =
            quality(&t, &parse_lfts_str(&lft, "l").expect("parses"), &parse_guid2lid_str(&g2l, "g").expect("parses"))
                .expect("quality");
        assert_eq!(q.pairs - q.reachable_pairs, 3);
    }

    #[test]
    fn subnet_lst_lids() {
        let text = "{ SW Ports:08 SystemGUID:0002c90000000000 NodeGUID:0002c90000000000 PortGUID:0002c90000000000 VenID:000000 DevID:0000 Rev:00000000 {leaf-0} LID:0011 PN:01 } { CA Ports:01 SystemGUID:0002c90100000000 NodeGUID:0002c90100000000 PortGUID:0002c90100000001 VenID:00000000 DevID:0000 Rev:00000000 {host-0} LID:0001 PN:01 } PHY=4x LOG=ACT SPD=10\n";
        let m = parse_subnet_lst_str(text, "s").expect("parses");
        assert_eq!(m.guid(0x11), Some(0x0002c90000000000));
        assert_eq!(m.guid(1), Some(0x0002c90100000001));
        assert_eq!(m.max_lid(), 0x11);
    }

    #[test]
    fn header_with_spaces_in_description() {
        let l = parse_lfts_str(
            "Unicast lids [0-3] of switch Lid 3 guid 0x0000000000000abc ('my switch (a)'):\n0x0001 001 # x\n3 lids dumped\n",
            "x",
        )
        .expect("parses");
        let sw = l.get(0xabc).expect("switch");
        assert_eq!((sw.lid, sw.desc.as_str(), sw.port(1), sw.port(2)), (3, "my switch (a)", Some(1), None));
    }
}

/// The (source port GUID, destination port GUID) pairs of end ports whose
/// LFT walk arrives, every LID of a destination counted as its port.
///
/// [`Quality`] gives counts only; comparing two SMs pair by pair ("every
/// pair OpenSM reaches, smcore reaches too") needs the pairs themselves.
/// Each pair is walked on its own, so this is for small fabrics (pairs ×
/// path length).
pub fn reachable_pairs(
    topo: &Topology,
    lfts: &Lfts,
    lids: &LidMap,
) -> Result<std::collections::BTreeSet<(u64, u64)>> {
    let port_links = topo.port_links();
    let peer = |node: usize, port: u8| -> Option<(usize, u8)> {
        let link = (*port_links.get(node)?.get(port as usize)?)?;
        topo.links.get(link)?.other_end((node, port))
    };
    // End ports cabled to a switch: GUID -> (node, port, switch node).
    let mut ends: HashMap<u64, (usize, u8, usize)> = HashMap::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        if node.is_switch() {
            continue;
        }
        for p in 1..=node.num_ports {
            if let Some((sw, _)) = peer(i, p).filter(|&(pn, _)| topo.nodes[pn].is_switch()) {
                ends.insert(node.port_guid(p), (i, p, sw));
            }
        }
    }
    let sources: Vec<(u64, usize)> = {
        let mut v: Vec<(u64, usize)> = lids
            .by_lid
            .values()
            .filter_map(|g| ends.get(g).map(|&(_, _, sw)| (*g, sw)))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let max_walk = topo.num_switches() + 1;
    let mut out = std::collections::BTreeSet::new();
    for (&dlid, &dguid) in &lids.by_lid {
        let Some(&(dnode, dport, _)) = ends.get(&dguid) else { continue };
        for &(sguid, ssw) in &sources {
            if sguid == dguid {
                continue;
            }
            let mut sw = ssw;
            for _ in 0..max_walk {
                let Some(port) = lfts.get(topo.nodes[sw].node_guid).and_then(|l| l.port(dlid)) else {
                    break;
                };
                match peer(sw, port) {
                    _ if port == 0 => break,
                    Some(end) if end == (dnode, dport) => {
                        out.insert((sguid, dguid));
                        break;
                    }
                    Some((next, _)) if topo.nodes[next].is_switch() => sw = next,
                    _ => break,
                }
            }
        }
    }
    Ok(out)
}
