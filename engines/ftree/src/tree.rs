//! The fat-tree model: which switches form the tree, their ranks, the port
//! groups between them, the compute nodes, and the checks that the fabric
//! is a fat tree at all.
//!
//! Everything is indexed densely: switches by the kit's switch number,
//! port groups and their ports in flat arrays. Ranks follow OpenSM: 0 for
//! the roots, growing towards the leaves.

use std::collections::HashSet;

use sm_abi::{EngineError, FabricSnapshot, NodeKind, NONE};
use smcore_kit::graph::{Graph, Sw};

/// Rank of a switch the ranking did not reach (it is left out of the tree).
pub const UNRANKED: u32 = u32::MAX;

/// Length of an index tuple (OpenSM's `FTREE_TUPLE_LEN`); also bounds the
/// tree rank.
pub const TUPLE_LEN: usize = 8;

/// Lowest and highest tree rank (levels of switches) OpenSM accepts.
pub const MIN_TREE_RANK: u32 = 2;
/// See [`MIN_TREE_RANK`].
pub const MAX_TREE_RANK: u32 = 8;

/// An index tuple: `[rank, digits...]`, `0xFF` where unassigned.
pub type Tuple = [u8; TUPLE_LEN];

const UNASSIGNED: Tuple = [0xFF; TUPLE_LEN];

/// The links from one switch to one neighbouring switch.
#[derive(Debug, Clone)]
pub struct Group {
    /// Switch at the other end.
    pub remote: Sw,
    /// This group's ports in [`Tree::ports`].
    pub first: u32,
    /// Number of ports.
    pub len: u32,
}

/// One port of a group.
#[derive(Debug, Clone, Copy)]
pub struct GroupPort {
    /// Port number on the owning switch.
    pub num: u8,
    /// Port number on the remote switch.
    pub remote_num: u8,
}

/// One CA port cabled to a switch of the tree.
#[derive(Debug, Clone)]
pub struct CaPort {
    /// Index of the CA port in the snapshot.
    pub port: u32,
    /// Its LID.
    pub lid: u16,
    /// CA node index.
    pub node: u32,
    /// Switch it is cabled to.
    pub sw: Sw,
    /// Port number on that switch.
    pub sw_port: u8,
    /// A compute node (all CA ports are, unless a `cn_guid_file` says otherwise).
    pub is_cn: bool,
    /// Listed in the `io_guid_file` (and not a compute node).
    pub is_io: bool,
}

/// One switch of the tree.
#[derive(Debug, Clone)]
pub struct TreeSwitch {
    /// Node index.
    pub node: u32,
    /// Node GUID.
    pub guid: u64,
    /// LID of port 0.
    pub lid: u16,
    /// Rank (0 = root), or [`UNRANKED`].
    pub rank: u32,
    /// Has compute nodes cabled to it.
    pub is_leaf: bool,
    /// Index tuple.
    pub tuple: Tuple,
    /// Groups towards lower ranks (closer to the roots), as indices in [`Tree::groups`].
    pub up: Vec<u32>,
    /// Groups towards higher ranks (switches only).
    pub down: Vec<u32>,
    /// CA ports cabled to it, in port order, as indices in [`Tree::cas`].
    pub cas: Vec<u32>,
}

/// What the GUID files say.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    /// Root switch node GUIDs (empty: detect from the leaves).
    pub roots: Option<Vec<u64>>,
    /// Compute node port GUIDs (None: every CA port is one).
    pub cns: Option<HashSet<u64>>,
    /// I/O node port GUIDs.
    pub ios: Option<HashSet<u64>>,
    /// Without roots, rank from the switches with compute nodes rather
    /// than from all switches with CAs.
    pub leaves_from_cns: bool,
    /// OpenSM's `quasi_ftree_indexing`: index from every root switch in
    /// turn (each starting its own subtree number) instead of from the
    /// first leaf only, for quasi fat trees whose switches one leaf's
    /// breadth-first walk does not index in their tree order.
    pub quasi_indexing: bool,
}

/// The fat tree found in a fabric.
#[derive(Debug, Clone)]
pub struct Tree {
    /// All switches by kit switch number (unranked ones included).
    pub switches: Vec<TreeSwitch>,
    /// Port groups.
    pub groups: Vec<Group>,
    /// Ports of the groups.
    pub ports: Vec<GroupPort>,
    /// CA ports attached to ranked switches.
    pub cas: Vec<CaPort>,
    /// Rank of the leaf switches.
    pub leaf_rank: u32,
    /// Highest switch rank.
    pub max_rank: u32,
    /// Leaf-rank switches in index order, from the first to the last switch
    /// with compute nodes.
    pub leaves: Vec<Sw>,
    /// Most compute nodes on one leaf.
    pub max_cn_per_leaf: u32,
    /// Per switch: its position when all switches are sorted by tuple (the
    /// tie-break between equally loaded groups).
    pub order: Vec<u32>,
    /// Links between switches of equal rank, which the routing leaves unused.
    pub sibling_links: usize,
    /// The first such link, as its two switches.
    pub sibling_example: Option<(Sw, Sw)>,
    /// Why the tree is not pure, when it is routed as a degraded fat tree
    /// (see [`Tree::check_degraded`]); `None` for a pure tree or one with
    /// a root file.
    pub degraded: Option<String>,
    /// Switches the ranking did not reach.
    pub unranked: usize,
    /// Things the admin should know (GUIDs of the files not found, ...).
    pub notes: Vec<String>,
    /// Index from the roots ([`Roles::quasi_indexing`]).
    pub quasi_indexing: bool,
}

fn err(msg: impl Into<String>) -> EngineError {
    EngineError::new(format!("ftree: {}", msg.into()))
}

/// BFS over switch adjacency from `sources` (distance 0), giving distances
/// (or [`UNRANKED`]).
fn bfs(graph: &Graph, sources: &[Sw]) -> Vec<u32> {
    let mut dist = vec![UNRANKED; graph.switch_count()];
    let mut queue = Vec::with_capacity(graph.switch_count());
    for &s in sources {
        if dist[s as usize] == UNRANKED {
            dist[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let s = queue[head];
        head += 1;
        for &t in &graph.sw_adj[s as usize] {
            if dist[t as usize] == UNRANKED {
                dist[t as usize] = dist[s as usize] + 1;
                queue.push(t);
            }
        }
    }
    dist
}

impl Tree {
    /// Build and check the tree. Fails with the rule the fabric breaks.
    pub fn build(
        fabric: &FabricSnapshot,
        graph: &Graph,
        roles: &Roles,
    ) -> Result<Tree, EngineError> {
        let nsw = graph.switch_count();
        if nsw < 2 {
            return Err(err(format!(
                "the fabric has {nsw} switch(es); a fat tree needs at least two"
            )));
        }
        let ca_nodes = fabric
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Ca)
            .count();
        if ca_nodes < 2 {
            return Err(err(format!(
                "the fabric has {ca_nodes} CA(s); a fat tree needs at least two"
            )));
        }

        let mut switches: Vec<TreeSwitch> = graph
            .switch_nodes
            .iter()
            .map(|&node| {
                let n = &fabric.nodes[node as usize];
                TreeSwitch {
                    node,
                    guid: n.guid,
                    lid: fabric.ports[n.first_port as usize].lid,
                    rank: UNRANKED,
                    is_leaf: false,
                    tuple: UNASSIGNED,
                    up: Vec::new(),
                    down: Vec::new(),
                    cas: Vec::new(),
                }
            })
            .collect();

        // CA ports, in CA GUID order then port order (OpenSM walks its CA
        // table, keyed by GUID).
        let mut ca_order: Vec<u32> = (0..fabric.nodes.len() as u32)
            .filter(|&i| fabric.nodes[i as usize].kind == NodeKind::Ca)
            .collect();
        ca_order.sort_by_key(|&i| fabric.nodes[i as usize].guid);
        let mut cas: Vec<CaPort> = Vec::new();
        for &node in &ca_order {
            let n = &fabric.nodes[node as usize];
            for num in 1..=n.num_ports {
                let pi = n.first_port + num as u32;
                if !smcore_kit::graph::usable(fabric, pi) {
                    continue;
                }
                let p = &fabric.ports[pi as usize];
                let peer = &fabric.ports[p.peer as usize];
                let peer_kind = fabric.nodes[peer.node as usize].kind;
                match peer_kind {
                    NodeKind::Ca => {
                        return Err(err(format!(
                            "CA 0x{:016x} is cabled directly to CA 0x{:016x}; not a fat tree",
                            n.guid, fabric.nodes[peer.node as usize].guid
                        )))
                    }
                    NodeKind::Router => continue,
                    NodeKind::Switch => {}
                    _ => continue,
                }
                if p.lid == 0 {
                    continue;
                }
                // A GUID file may name the port or, for convenience, its node.
                let listed = |set: &Option<HashSet<u64>>| {
                    set.as_ref()
                        .map(|s| s.contains(&p.guid) || s.contains(&n.guid))
                };
                let in_cn = listed(&roles.cns);
                let in_io = listed(&roles.ios).unwrap_or(false);
                let (is_cn, is_io) = match in_cn {
                    None => (!in_io, in_io),
                    Some(true) => (true, false),
                    Some(false) => (false, in_io),
                };
                cas.push(CaPort {
                    port: pi,
                    lid: p.lid,
                    node,
                    sw: graph.sw_of_node[peer.node as usize],
                    sw_port: peer.num,
                    is_cn,
                    is_io,
                });
            }
        }

        let mut notes = Vec::new();
        for (what, set) in [("cn_guid_file", &roles.cns), ("io_guid_file", &roles.ios)] {
            let Some(set) = set else { continue };
            let known: HashSet<u64> = ca_order
                .iter()
                .flat_map(|&node| {
                    let n = &fabric.nodes[node as usize];
                    let ports = (1..=n.num_ports as u32)
                        .map(move |p| fabric.ports[(n.first_port + p) as usize].guid);
                    std::iter::once(n.guid).chain(ports)
                })
                .collect();
            let unknown = set.iter().filter(|g| !known.contains(g)).count();
            if unknown > 0 {
                notes.push(format!(
                    "ftree: {what}: {unknown} GUID(s) name no CA port of the fabric"
                ));
            }
        }

        // Ranking.
        let explicit_roots = roles.roots.is_some();
        // Distance from the nearest switch with CAs (or compute nodes),
        // when the ranking starts from the leaves.
        let mut leaf_dist: Vec<u32> = Vec::new();
        let rank: Vec<u32> = match &roles.roots {
            Some(guids) => {
                let mut roots: Vec<Sw> = Vec::new();
                for g in guids {
                    match switches.iter().position(|s| s.guid == *g) {
                        Some(s) => roots.push(s as Sw),
                        None => notes.push(format!(
                            "ftree: root_guid_file: 0x{g:016x} is not a switch of the fabric"
                        )),
                    }
                }
                if roots.is_empty() {
                    return Err(err(
                        "none of the switches in root_guid_file is in the fabric",
                    ));
                }
                bfs(graph, &roots)
            }
            None => {
                // Leaves are the switches with CAs (or, when asked, with
                // compute nodes only); rank by the distance from them,
                // reversed, then again from the switches that came out as
                // roots so every switch's rank is its distance from the
                // nearest root.
                let mut leaves: Vec<Sw> = if roles.leaves_from_cns {
                    cas.iter().filter(|c| c.is_cn).map(|c| c.sw).collect()
                } else {
                    Vec::new()
                };
                if leaves.is_empty() {
                    leaves = cas.iter().map(|c| c.sw).collect();
                }
                let dist = bfs(graph, &leaves);
                let max = dist
                    .iter()
                    .copied()
                    .filter(|&d| d != UNRANKED)
                    .max()
                    .unwrap_or(0);
                let roots: Vec<Sw> = (0..nsw as Sw)
                    .filter(|&s| dist[s as usize] == max)
                    .collect();
                leaf_dist = dist;
                bfs(graph, &roots)
            }
        };
        let mut unranked = 0;
        for (s, r) in rank.iter().enumerate() {
            switches[s].rank = *r;
            if *r == UNRANKED {
                unranked += 1;
            }
        }
        let max_rank = rank
            .iter()
            .copied()
            .filter(|&r| r != UNRANKED)
            .max()
            .unwrap_or(0);
        if max_rank == 0 && nsw - unranked > 1 {
            return Err(err(format!(
                "all {} switches rank as roots (every switch carries CAs); not a fat tree",
                nsw - unranked
            )));
        }
        // CAs cabled only to switches out of the tree are out of it too.
        let cas_before = cas.len();
        cas.retain(|c| rank[c.sw as usize] != UNRANKED);
        let cas_outside = cas_before - cas.len();

        // Port groups.
        let mut groups: Vec<Group> = Vec::new();
        let mut ports: Vec<GroupPort> = Vec::new();
        let mut sibling_links = 0;
        let mut sibling_example = None;
        let mut ca_of_port = vec![NONE; fabric.ports.len()];
        for (i, c) in cas.iter().enumerate() {
            ca_of_port[c.port as usize] = i as u32;
        }
        for s in 0..nsw {
            if rank[s] == UNRANKED {
                continue;
            }
            // (remote, is_up, ports) in first-port order.
            let mut local: Vec<(Sw, bool, Vec<GroupPort>)> = Vec::new();
            for sp in &graph.sw_ports[s] {
                if sp.peer_sw == NONE {
                    let ci = ca_of_port[sp.peer_port as usize];
                    if ci != NONE {
                        switches[s].cas.push(ci);
                    }
                    continue;
                }
                let r = sp.peer_sw;
                if r as usize == s || rank[r as usize] == UNRANKED {
                    continue;
                }
                if rank[r as usize] == rank[s] {
                    sibling_links += 1;
                    sibling_example = sibling_example.or(Some((s as Sw, r)));
                    continue;
                }
                let gp = GroupPort {
                    num: sp.port,
                    remote_num: fabric.ports[sp.peer_port as usize].num,
                };
                match local.iter_mut().find(|(rr, _, _)| *rr == r) {
                    Some(entry) => entry.2.push(gp),
                    None => local.push((r, rank[r as usize] < rank[s], vec![gp])),
                }
            }
            for (r, is_up, gps) in local {
                let gi = groups.len() as u32;
                groups.push(Group {
                    remote: r,
                    first: ports.len() as u32,
                    len: gps.len() as u32,
                });
                ports.extend(gps);
                if is_up {
                    switches[s].up.push(gi);
                } else {
                    switches[s].down.push(gi);
                }
            }
        }
        let sibling_links = sibling_links / 2;

        let first_cn = cas.iter().find(|c| c.is_cn);
        let Some(first_cn) = first_cn else {
            return Err(err("the fabric has no compute nodes cabled to the tree"));
        };
        let leaf_rank = if explicit_roots {
            rank[first_cn.sw as usize]
        } else {
            max_rank
        };
        let tree_rank = leaf_rank + 1;
        if !(MIN_TREE_RANK..=MAX_TREE_RANK).contains(&tree_rank) {
            return Err(err(format!(
                "the tree has {tree_rank} level(s) of switches; fat-tree routing handles {MIN_TREE_RANK} to {MAX_TREE_RANK}"
            )));
        }
        for c in &cas {
            if !c.is_cn {
                continue;
            }
            if switches[c.sw as usize].rank != leaf_rank && !explicit_roots {
                // Said more precisely when some switch's level is in doubt.
                if let Some(conflict) = rank_conflict(&switches, &leaf_dist, leaf_rank) {
                    return Err(err(conflict));
                }
            }
            let sw = &mut switches[c.sw as usize];
            if sw.rank != leaf_rank {
                return Err(err(format!(
                    "compute node port 0x{:016x} is cabled to switch 0x{:016x} of rank {}, but the leaf rank is \
                     {leaf_rank}: all compute nodes must hang at the same tree level",
                    fabric.ports[c.port as usize].guid, sw.guid, sw.rank
                )));
            }
            sw.is_leaf = true;
        }

        let mut tree = Tree {
            switches,
            groups,
            ports,
            cas,
            leaf_rank,
            max_rank,
            leaves: Vec::new(),
            max_cn_per_leaf: 0,
            order: Vec::new(),
            sibling_links,
            sibling_example,
            degraded: None,
            unranked,
            notes,
            quasi_indexing: roles.quasi_indexing,
        };
        tree.index(false);
        tree.make_leaf_array()?;
        if !explicit_roots {
            if let Err(impure) = tree.validate() {
                if cas_outside > 0 {
                    return Err(err(format!(
                        "{cas_outside} CA port(s) hang on switches cut off from the tree: the fabric is split and no \
                         longer a fat tree ({})",
                        impure.reason.strip_prefix("ftree: ").unwrap_or(&impure.reason)
                    )));
                }
                tree.check_degraded(&leaf_dist, &impure.reason)?;
                // Routed: the hint of the pure-tree rule no longer applies.
                let hint = " (give root_guid_file to route it anyway)";
                tree.degraded = Some(impure.reason.replace(hint, ""));
                // Indexed again by port position, so a missing cable or
                // switch does not shift the index of everything after it.
                for sw in &mut tree.switches {
                    sw.tuple = UNASSIGNED;
                }
                tree.index(true);
                tree.make_leaf_array()?;
            }
        }
        Ok(tree)
    }

    /// Number of compute nodes.
    pub fn cn_count(&self) -> usize {
        self.cas.iter().filter(|c| c.is_cn).count()
    }

    /// Assign index tuples by BFS from the first leaf (in GUID order), as
    /// OpenSM does: a switch reached going down from `t` gets `t` with the
    /// rank raised and the next free digit at position `rank`; going up,
    /// the rank lowered and the next free digit at the old rank's position.
    /// Switches under one parent thus get neighbouring tuples, so sorting by
    /// tuple keeps subtrees together.
    ///
    /// With `by_port` (degraded trees) the digit tried first is the
    /// group's first port number less the lowest port number any switch of
    /// the rank uses in that direction, rather than the lowest free one:
    /// on a complete tree both give the same order, but a cable or switch
    /// missing then leaves its slot free instead of moving every later
    /// neighbour (and all below it) one place down.
    fn index(&mut self, by_port: bool) {
        // Lowest first port of a group, per rank and direction.
        let mut lowest = vec![[u8::MAX; 2]; self.max_rank as usize + 1];
        if by_port {
            for sw in &self.switches {
                if sw.rank == UNRANKED {
                    continue;
                }
                for (up, list) in [(0, &sw.down), (1, &sw.up)] {
                    for &g in list {
                        let num = self.ports[self.groups[g as usize].first as usize].num;
                        let l = &mut lowest[sw.rank as usize][up];
                        *l = (*l).min(num);
                    }
                }
            }
        }
        let nsw = self.switches.len();
        let mut by_guid: Vec<Sw> = (0..nsw as Sw).collect();
        by_guid.sort_by_key(|&s| self.switches[s as usize].guid);
        let mut taken: HashSet<Tuple> = HashSet::new();
        if self.quasi_indexing {
            // OpenSM's quasi_ftree_indexing: every root in turn, one not
            // indexed yet starting subtree `n` at `[0, i, 0.., n]` (the
            // first free `i`), each walk going on from what the earlier
            // ones indexed.
            let roots: Vec<Sw> = by_guid.iter().copied().filter(|&s| self.switches[s as usize].rank == 0).collect();
            let mut subtree = 0u8;
            for r in roots {
                if self.switches[r as usize].tuple == UNASSIGNED {
                    let mut t = UNASSIGNED;
                    t[0] = 0;
                    for d in t.iter_mut().take(self.leaf_rank as usize + 1).skip(1) {
                        *d = 0;
                    }
                    if self.leaf_rank > 1 {
                        t[self.leaf_rank as usize] = subtree;
                    }
                    subtree = subtree.wrapping_add(1);
                    let Some(i) = (0..u8::MAX).find(|&i| {
                        t[1] = i;
                        !taken.contains(&t)
                    }) else {
                        continue;
                    };
                    t[1] = i;
                    self.switches[r as usize].tuple = t;
                    taken.insert(t);
                }
                self.index_from(r, by_port, &lowest, &mut taken);
            }
        } else if let Some(first) = by_guid.iter().copied().find(|&s| self.switches[s as usize].is_leaf) {
            let mut t = UNASSIGNED;
            t[0] = self.switches[first as usize].rank as u8;
            for d in t.iter_mut().take(self.leaf_rank as usize + 1).skip(1) {
                *d = 0;
            }
            self.switches[first as usize].tuple = t;
            taken.insert(t);
            self.index_from(first, by_port, &lowest, &mut taken);
        }
        self.sort_by_index();
    }

    /// The breadth-first walk of [`Self::index`] from `first` (indexed).
    fn index_from(&mut self, first: Sw, by_port: bool, lowest: &[[u8; 2]], taken: &mut HashSet<Tuple>) {
        {
            let mut queue = vec![first];
            let mut head = 0;
            while head < queue.len() {
                let s = queue[head] as usize;
                head += 1;
                let rank = self.switches[s].rank;
                let mut dirs: Vec<bool> = Vec::with_capacity(2);
                if rank < self.leaf_rank {
                    dirs.push(false);
                }
                if rank != 0 {
                    dirs.push(true);
                }
                for up in dirs {
                    let list = if up {
                        self.switches[s].up.clone()
                    } else {
                        self.switches[s].down.clone()
                    };
                    for g in list {
                        let r = self.groups[g as usize].remote as usize;
                        if self.switches[r].tuple != UNASSIGNED {
                            continue;
                        }
                        let from = self.switches[s].tuple;
                        let start = if by_port {
                            let num = self.ports[self.groups[g as usize].first as usize].num;
                            num.saturating_sub(lowest[rank as usize][up as usize])
                        } else {
                            0
                        };
                        if let Some(t) = new_tuple(taken, from, up, start) {
                            self.switches[r].tuple = t;
                            taken.insert(t);
                            queue.push(r as Sw);
                        }
                    }
                }
            }
        }
    }

    /// Switch order and group lists by index tuple.
    fn sort_by_index(&mut self) {
        let nsw = self.switches.len();
        let mut sorted: Vec<Sw> = (0..nsw as Sw).collect();
        sorted.sort_by_key(|&s| {
            (
                self.switches[s as usize].tuple,
                self.switches[s as usize].guid,
            )
        });
        self.order = vec![0; nsw];
        for (i, &s) in sorted.iter().enumerate() {
            self.order[s as usize] = i as u32;
        }
        // Group lists in index order: the starting order of every balancing
        // decision.
        for s in 0..nsw {
            let mut up = std::mem::take(&mut self.switches[s].up);
            let mut down = std::mem::take(&mut self.switches[s].down);
            up.sort_by_key(|&g| self.order[self.groups[g as usize].remote as usize]);
            down.sort_by_key(|&g| self.order[self.groups[g as usize].remote as usize]);
            self.switches[s].up = up;
            self.switches[s].down = down;
        }
    }

    fn make_leaf_array(&mut self) -> Result<(), EngineError> {
        let mut level: Vec<Sw> = (0..self.switches.len() as Sw)
            .filter(|&s| self.switches[s as usize].rank == self.leaf_rank)
            .collect();
        level.sort_by_key(|&s| self.order[s as usize]);
        let first = level
            .iter()
            .position(|&s| self.switches[s as usize].is_leaf);
        let last = level
            .iter()
            .rposition(|&s| self.switches[s as usize].is_leaf);
        match (first, last) {
            (Some(f), Some(l)) if f < l => self.leaves = level[f..=l].to_vec(),
            _ => {
                return Err(err(
                    "fewer than two leaf switches carry compute nodes; not a fat tree",
                ))
            }
        }
        self.max_cn_per_leaf = self
            .leaves
            .iter()
            .map(|&s| {
                self.switches[s as usize]
                    .cas
                    .iter()
                    .filter(|&&c| self.cas[c as usize].is_cn)
                    .count() as u32
            })
            .max()
            .unwrap_or(0);
        Ok(())
    }

    fn group_sizes<'a>(&'a self, list: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
        list.iter().map(|&g| self.groups[g as usize].len)
    }

    /// A tree that breaks the pure-tree rules (a cable or a switch missing,
    /// uneven groups, leaves with fewer hosts) is still a fat tree, routed
    /// up/down without credit loops, as long as its levels are clear:
    /// every switch's rank from the roots and its distance from the
    /// nearest leaf add up to the leaf rank (so every link joins adjacent
    /// levels, going up towards the roots from any leaf), and no link joins
    /// two switches of one rank. Fails naming the switch that breaks this;
    /// `impure` is the pure-tree rule the fabric broke first.
    /// Destinations no up/down path reaches are found after routing.
    pub fn check_degraded(&self, leaf_dist: &[u32], impure: &str) -> Result<(), EngineError> {
        let impure = impure.strip_prefix("ftree: ").unwrap_or(impure);
        let name = |s: Sw| {
            let sw = &self.switches[s as usize];
            format!("switch 0x{:016x} (rank {})", sw.guid, sw.rank)
        };
        if let Some((a, b)) = self.sibling_example {
            return Err(err(format!(
                "{} and {} are linked but rank alike ({} such link(s)): the levels of the tree cannot be told apart, \
                 so it is no longer a fat tree ({impure})",
                name(a),
                name(b),
                self.sibling_links
            )));
        }
        if let Some(conflict) = rank_conflict(&self.switches, leaf_dist, self.leaf_rank) {
            return Err(err(format!("{conflict} ({impure})")));
        }
        Ok(())
    }

    /// OpenSM's rules for a pure fat tree (used when no roots are given):
    /// per rank, equal numbers of up groups, equal numbers of down groups
    /// (leaves excepted: CAs may be missing), and equal port counts in all
    /// up groups and in all down groups (leaves excepted).
    fn validate(&self) -> Result<(), EngineError> {
        let mut by_guid: Vec<Sw> = (0..self.switches.len() as Sw).collect();
        by_guid.sort_by_key(|&s| self.switches[s as usize].guid);
        let mut reference: Vec<Option<Sw>> = vec![None; self.max_rank as usize + 1];
        let name = |s: &TreeSwitch| format!("switch 0x{:016x} (rank {})", s.guid, s.rank);
        for &s in &by_guid {
            let sw = &self.switches[s as usize];
            if sw.rank == UNRANKED {
                continue;
            }
            let leaf_level = sw.rank == self.leaf_rank;
            let Some(r) = reference[sw.rank as usize] else {
                reference[sw.rank as usize] = Some(s);
                // The reference's own groups must agree with each other.
                if let Some(first) = self.group_sizes(&sw.up).next() {
                    if let Some(bad) = self.group_sizes(&sw.up).find(|&n| n != first) {
                        return Err(err(format!(
                            "{} has up-going port groups of {first} and {bad} ports; not a pure fat tree \
                             (give root_guid_file to route it anyway)",
                            name(sw)
                        )));
                    }
                }
                if !leaf_level {
                    if let Some(first) = self.group_sizes(&sw.down).next() {
                        if let Some(bad) = self.group_sizes(&sw.down).find(|&n| n != first) {
                            return Err(err(format!(
                                "{} has down-going port groups of {first} and {bad} ports; not a pure fat tree \
                                 (give root_guid_file to route it anyway)",
                                name(sw)
                            )));
                        }
                    }
                }
                continue;
            };
            let rs = &self.switches[r as usize];
            if rs.up.len() != sw.up.len() {
                return Err(err(format!(
                    "{} has {} up-going port groups but {} has {}; not a pure fat tree \
                     (give root_guid_file to route it anyway)",
                    name(rs),
                    rs.up.len(),
                    name(sw),
                    sw.up.len()
                )));
            }
            if !leaf_level && rs.down.len() != sw.down.len() {
                return Err(err(format!(
                    "{} has {} down-going port groups but {} has {}; not a pure fat tree \
                     (give root_guid_file to route it anyway)",
                    name(rs),
                    rs.down.len(),
                    name(sw),
                    sw.down.len()
                )));
            }
            if let Some(want) = self.group_sizes(&rs.up).next() {
                if let Some(bad) = self.group_sizes(&sw.up).find(|&n| n != want) {
                    return Err(err(format!(
                        "{} has up-going port groups of {want} ports but {} one of {bad}; not a pure fat tree \
                         (give root_guid_file to route it anyway)",
                        name(rs),
                        name(sw)
                    )));
                }
            }
            if !leaf_level {
                if let Some(want) = self.group_sizes(&rs.down).next() {
                    if let Some(bad) = self.group_sizes(&sw.down).find(|&n| n != want) {
                        return Err(err(format!(
                            "{} has down-going port groups of {want} ports but {} one of {bad}; not a pure fat \
                             tree (give root_guid_file to route it anyway)",
                            name(rs),
                            name(sw)
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The first switch (in GUID order) whose rank from the roots and
/// distance from the nearest leaf do not add up to the leaf rank, told as
/// the reason the fabric is no longer a fat tree.
fn rank_conflict(switches: &[TreeSwitch], leaf_dist: &[u32], leaf_rank: u32) -> Option<String> {
    let mut by_guid: Vec<usize> = (0..switches.len()).collect();
    by_guid.sort_by_key(|&s| switches[s].guid);
    by_guid.into_iter().find_map(|s| {
        let sw = &switches[s];
        if sw.rank == UNRANKED {
            return None;
        }
        let d = leaf_dist.get(s).copied().unwrap_or(UNRANKED);
        if d != UNRANKED && sw.rank + d == leaf_rank {
            return None;
        }
        let (hops, from_leaves) = if d == UNRANKED {
            ("no path".to_string(), "undefined".to_string())
        } else {
            (format!("{d} hop(s)"), leaf_rank.saturating_sub(d).to_string())
        };
        Some(format!(
            "switch 0x{:016x} is {hops} from the nearest leaf, so its rank is {from_leaves} counted from the \
             leaves but {} from the roots: its level cannot be determined consistently and the fabric is no longer \
             a fat tree",
            sw.guid, sw.rank
        ))
    })
}

/// The first free tuple one step up or down from `from`, trying digits
/// from `start` on (then from 0).
fn new_tuple(taken: &HashSet<Tuple>, from: Tuple, up: bool, start: u8) -> Option<Tuple> {
    let mut t = from;
    let var = if up {
        t[0] = t[0].checked_sub(1)?;
        from[0] as usize
    } else {
        t[0] = t[0].checked_add(1)?;
        from[0] as usize + 1
    };
    if var >= TUPLE_LEN {
        return None;
    }
    for i in (start..0xFF).chain(0..start) {
        t[var] = i;
        if !taken.contains(&t) {
            return Some(t);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_topology::{gen, lids};

    /// On complete trees, indexing by port position gives the order (on
    /// k-ary n-trees the very tuples) the first-free indexing gives: a degraded tree's index then differs
    /// from its pristine tree's only where something is missing.
    /// OpenSM's quasi_ftree_indexing indexes from the roots, the first
    /// root (by GUID) at `[0, 0]`; without it the walk starts at the first
    /// leaf. On this quasi fat tree (the first leaf hangs off the second
    /// root only) the two walks number the roots the other way round.
    #[test]
    fn quasi_indexing_starts_from_the_roots() {
        let text = "Switch 3 \"s1\"\n[1] \"l2\"[1]\n[2] \"l3\"[1]\n\nSwitch 3 \"s2\"\n[1] \"l1\"[1]\n[2] \"l2\"[2]\n\n\
                    Switch 3 \"l1\"\n[3] \"h1\"[1]\n\nSwitch 3 \"l2\"\n[3] \"h2\"[1]\n\nSwitch 3 \"l3\"\n[3] \"h3\"[1]\n\n\
                    Hca 1 \"h1\"\n\nHca 1 \"h2\"\n\nHca 1 \"h3\"\n";
        let f = lids::snapshot(&sm_topology::parse_str(text, "quasi").unwrap(), 0).unwrap();
        let graph = Graph::new(&f);
        let guid = |name: &str| f.nodes.iter().find(|n| n.description.as_str() == name).unwrap().guid;
        let sw = |t: &Tree, name: &str| t.switches.iter().find(|s| s.guid == guid(name)).unwrap().tuple;
        assert!(guid("s1") < guid("s2") && guid("l1") < guid("l2"), "GUIDs in the order written");
        let roots = Some(vec![guid("s1"), guid("s2")]);
        let plain = Tree::build(&f, &graph, &Roles { roots: roots.clone(), ..Roles::default() }).unwrap();
        let quasi = Tree::build(&f, &graph, &Roles { roots, quasi_indexing: true, ..Roles::default() }).unwrap();
        let t = |rank: u8, d: u8| {
            let mut t = UNASSIGNED;
            t[0] = rank;
            t[1] = d;
            t
        };
        // Plain: l1 [1,0], up to s2 [0,0], down to l2 [1,1], up to s1 [0,1].
        assert_eq!((sw(&plain, "l1"), sw(&plain, "s2"), sw(&plain, "s1")), (t(1, 0), t(0, 0), t(0, 1)));
        // Quasi: s1 [0,0], down to l2 [1,0] and l3 [1,1], up to s2 [0,1], down to l1 [1,2].
        assert_eq!((sw(&quasi, "s1"), sw(&quasi, "s2"), sw(&quasi, "l1")), (t(0, 0), t(0, 1), t(1, 2)));
    }

    #[test]
    fn port_position_index_matches_on_complete_trees() {
        let trees = [
            gen::kary_ntree(2, 3, 2).unwrap(),
            gen::kary_ntree(3, 3, 3).unwrap(),
            gen::kary_ntree(4, 3, 4).unwrap(),
            gen::kary_ntree(3, 4, 2).unwrap(),
            gen::kary_ntree(6, 2, 6).unwrap(),
            gen::fat_tree_2level(8, 4, 8, 8).unwrap(),
        ];
        for (i, t) in trees.iter().enumerate() {
            let f = lids::snapshot(t, 0).unwrap();
            let graph = Graph::new(&f);
            let tree = Tree::build(&f, &graph, &Roles::default()).unwrap();
            assert!(tree.degraded.is_none());
            let mut again = tree.clone();
            for sw in &mut again.switches {
                sw.tuple = UNASSIGNED;
            }
            again.index(true);
            let tuples = |t: &Tree| t.switches.iter().map(|s| s.tuple).collect::<Vec<_>>();
            // Groups of several ports space the digits out; the order
            // (all the routing reads) is the same.
            if i < 5 {
                assert_eq!(tuples(&tree), tuples(&again), "tree {i}");
            }
            assert_eq!(tree.order, again.order, "tree {i}");
        }
    }
}
