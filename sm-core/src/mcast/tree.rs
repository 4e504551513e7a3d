//! Which switches and ports carry each multicast group.
//!
//! A group's traffic must follow a tree: a cycle would duplicate packets
//! forever. When the engine offers a master spanning tree (torus-2QoS
//! builds one whose use it has proven deadlock free with its unicast
//! routing), each group uses the smallest subtree of it that joins the
//! group's switches. Otherwise the core builds a min-hop tree: the root is
//! the switch whose farthest member switch is nearest (ties: the smallest
//! sum of distances, then the lowest node index), and every member switch
//! joins it by a shortest path. Among equal parents the MLID picks one, so
//! groups spread over parallel links and equal-cost paths.
//!
//! A member is an end port (its switch's port towards it joins the mask)
//! or a switch's management port (port 0). Members the fabric no longer
//! has, or that no tree can reach, are reported, not routed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use sm_abi::{FabricSnapshot, NodeKind, SpanningTree, NONE};
use smcore_kit::graph::{Graph, Sw};
use smcore_kit::McastRoute;

use super::groups::McGroups;

/// One group's forwarding: per switch node, the ports of its MFT entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTree {
    /// The group's MLID.
    pub mlid: u16,
    /// The group's SL.
    pub sl: u8,
    /// Switch node index → ports (sorted).
    pub switches: BTreeMap<u32, Vec<u8>>,
    /// How the tree was chosen.
    pub source: TreeSource,
}

/// Where a group's tree came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeSource {
    /// A subtree of the engine's master spanning tree.
    Engine,
    /// The core's min-hop tree (no master tree, or it misses a member).
    MinHop,
    /// A single switch (all members on it): no links used.
    Local,
}

/// Every group's tree, and what could not be placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McastPlan {
    /// Trees, by MLID order.
    pub trees: Vec<GroupTree>,
    /// Human-readable problems (absent members, unreachable switches).
    pub problems: Vec<String>,
}

impl McastPlan {
    /// The trees in the verifier's terms.
    pub fn routes(&self) -> Vec<McastRoute> {
        self.trees
            .iter()
            .map(|t| McastRoute {
                mlid: t.mlid,
                sl: t.sl,
                switches: t.switches.iter().map(|(n, p)| (*n, p.clone())).collect(),
            })
            .collect()
    }
}

/// Computes every group's tree on `fabric`; `master` is the engine's
/// spanning tree if it built one.
pub fn plan(
    fabric: &FabricSnapshot,
    master: Option<&SpanningTree>,
    groups: &McGroups,
) -> McastPlan {
    plan_on(fabric, &Graph::new(fabric), master, groups)
}

/// [`plan`] with the switch graph of `fabric` already built (the SM loop
/// builds it once for the plan and the credit-loop check).
pub fn plan_on(
    fabric: &FabricSnapshot,
    graph: &Graph,
    master: Option<&SpanningTree>,
    groups: &McGroups,
) -> McastPlan {
    let master_adj = master.map(|m| master_adjacency(fabric, graph, m));
    let mut out = McastPlan::default();
    let by_guid: BTreeMap<u64, u32> = fabric
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.guid != 0 && (p.num != 0 || fabric.nodes[p.node as usize].kind == NodeKind::Switch)
        })
        .map(|(i, p)| (p.guid, i as u32))
        .collect();
    for group in groups.iter() {
        // Member switch → ports of its own that lead to members.
        let mut local: BTreeMap<Sw, BTreeSet<u8>> = BTreeMap::new();
        for m in group.members.values() {
            let Some(&pi) = by_guid.get(&m.port_guid) else {
                out.problems.push(format!(
                    "MLID {:#06x}: member port {:#018x} is not in the fabric",
                    group.mlid, m.port_guid
                ));
                continue;
            };
            let p = &fabric.ports[pi as usize];
            let sw = graph.sw_of_node[p.node as usize];
            if sw != NONE {
                local.entry(sw).or_default().insert(0);
                continue;
            }
            let attach = (p.peer != NONE).then(|| &fabric.ports[p.peer as usize]);
            match attach.map(|a| (graph.sw_of_node[a.node as usize], a.num)) {
                Some((s, num)) if s != NONE && smcore_kit::graph::usable(fabric, pi) => {
                    local.entry(s).or_default().insert(num);
                }
                _ => out.problems.push(format!(
                    "MLID {:#06x}: member port {:#018x} has no active link to a switch",
                    group.mlid, m.port_guid
                )),
            }
        }
        if local.is_empty() {
            continue;
        }
        let members: Vec<Sw> = local.keys().copied().collect();
        let (edges, source) = if members.len() == 1 {
            (Vec::new(), TreeSource::Local)
        } else if let Some(edges) = master_adj.as_ref().and_then(|adj| subtree(adj, &members)) {
            (edges, TreeSource::Engine)
        } else {
            match min_hop_tree(graph, &members, group.mlid) {
                Ok(edges) => (edges, TreeSource::MinHop),
                Err(lost) => {
                    out.problems.push(format!(
                        "MLID {:#06x}: {lost} member switch(es) share no connected part of the fabric with the others; \
                         the group is routed without them",
                        group.mlid
                    ));
                    let kept = reachable_members(graph, &members);
                    local.retain(|s, _| kept.contains(s));
                    match min_hop_tree(graph, &kept, group.mlid) {
                        Ok(edges) => (edges, TreeSource::MinHop),
                        Err(_) => continue,
                    }
                }
            }
        };
        let mut switches: BTreeMap<u32, BTreeSet<u8>> = BTreeMap::new();
        for (s, ports) in &local {
            switches
                .entry(graph.switch_nodes[*s as usize])
                .or_default()
                .extend(ports.iter().copied());
        }
        for (s, port) in edges {
            switches
                .entry(graph.switch_nodes[s as usize])
                .or_default()
                .insert(port);
        }
        out.trees.push(GroupTree {
            mlid: group.mlid,
            sl: group.params.sl,
            switches: switches
                .into_iter()
                .map(|(n, p)| (n, p.into_iter().collect()))
                .collect(),
            source,
        });
    }
    out.trees.sort_by_key(|t| t.mlid);
    out
}

/// The master tree as switch adjacency: per switch, (neighbour, own port).
/// Edges whose link is down or whose far end is not a switch are left out,
/// so a stale tree shows as a disconnected one.
fn master_adjacency(
    fabric: &FabricSnapshot,
    graph: &Graph,
    tree: &SpanningTree,
) -> Vec<Vec<(Sw, u8)>> {
    let mut adj = vec![Vec::new(); graph.switch_count()];
    for e in tree.edges.iter() {
        let Some(&s) = graph.sw_of_node.get(e.node as usize) else {
            continue;
        };
        if s == NONE {
            continue;
        }
        let Some(sp) = graph.sw_ports[s as usize].iter().find(|p| p.port == e.port) else {
            continue;
        };
        if sp.peer_sw == NONE || !smcore_kit::graph::usable(fabric, sp.port_index) {
            continue;
        }
        if !adj[s as usize].contains(&(sp.peer_sw, e.port)) {
            adj[s as usize].push((sp.peer_sw, e.port));
        }
    }
    // An edge given in one direction only is used both ways.
    for s in 0..adj.len() {
        for k in 0..adj[s].len() {
            let (t, port) = adj[s][k];
            let back = graph.sw_ports[s]
                .iter()
                .find(|p| p.port == port)
                .map(|p| fabric.ports[p.peer_port as usize].num);
            if let Some(bp) = back {
                if !adj[t as usize].iter().any(|&(u, _)| u as usize == s) {
                    adj[t as usize].push((s as Sw, bp));
                }
            }
        }
    }
    adj
}

/// The smallest subtree of the master tree that joins `members`: the
/// master tree's component holding them, with non-member leaves pruned
/// until none is left. `None` when the members are not all in one
/// component (or the master tree has a cycle there).
fn subtree(adj: &[Vec<(Sw, u8)>], members: &[Sw]) -> Option<Vec<(Sw, u8)>> {
    let n = adj.len();
    let mut seen = vec![false; n];
    let mut queue = VecDeque::from([members[0]]);
    seen[members[0] as usize] = true;
    let mut nodes = vec![members[0]];
    let mut edge_count = 0usize;
    while let Some(s) = queue.pop_front() {
        for &(t, _) in &adj[s as usize] {
            edge_count += 1;
            if !seen[t as usize] {
                seen[t as usize] = true;
                nodes.push(t);
                queue.push_back(t);
            }
        }
    }
    if members.iter().any(|&m| !seen[m as usize]) || edge_count / 2 + 1 != nodes.len() {
        return None;
    }
    let is_member: BTreeSet<Sw> = members.iter().copied().collect();
    let mut degree: Vec<usize> = (0..n)
        .map(|s| if seen[s] { adj[s].len() } else { 0 })
        .collect();
    let mut alive = seen.clone();
    let mut leaves: Vec<Sw> = nodes
        .iter()
        .copied()
        .filter(|&s| degree[s as usize] <= 1 && !is_member.contains(&s))
        .collect();
    while let Some(s) = leaves.pop() {
        if !alive[s as usize] {
            continue;
        }
        alive[s as usize] = false;
        for &(t, _) in &adj[s as usize] {
            if alive[t as usize] {
                degree[t as usize] -= 1;
                if degree[t as usize] <= 1 && !is_member.contains(&t) {
                    leaves.push(t);
                }
            }
        }
    }
    let mut edges = Vec::new();
    for &s in &nodes {
        if alive[s as usize] {
            edges.extend(
                adj[s as usize]
                    .iter()
                    .filter(|(t, _)| alive[*t as usize])
                    .map(|&(_, p)| (s, p)),
            );
        }
    }
    Some(edges)
}

/// Hop distances from `from` over switch links.
fn distances(graph: &Graph, from: Sw) -> Vec<u32> {
    let mut dist = vec![u32::MAX; graph.switch_count()];
    let mut queue = VecDeque::from([from]);
    dist[from as usize] = 0;
    while let Some(s) = queue.pop_front() {
        for &t in &graph.sw_adj[s as usize] {
            if dist[t as usize] == u32::MAX {
                dist[t as usize] = dist[s as usize] + 1;
                queue.push_back(t);
            }
        }
    }
    dist
}

/// The members in the connected part that holds most of them.
fn reachable_members(graph: &Graph, members: &[Sw]) -> Vec<Sw> {
    let mut best: Vec<Sw> = Vec::new();
    for &m in members {
        let d = distances(graph, m);
        let part: Vec<Sw> = members
            .iter()
            .copied()
            .filter(|&x| d[x as usize] != u32::MAX)
            .collect();
        if part.len() > best.len() {
            best = part;
        }
    }
    best
}

/// The min-hop tree joining `members` (see the module documentation), as
/// (switch, port) pairs, both directions of every tree link. `Err(n)`
/// when `n` members cannot be reached from the others.
fn min_hop_tree(graph: &Graph, members: &[Sw], mlid: u16) -> Result<Vec<(Sw, u8)>, usize> {
    let from_members: Vec<Vec<u32>> = members.iter().map(|&m| distances(graph, m)).collect();
    let root = (0..graph.switch_count() as Sw)
        .filter(|&s| from_members.iter().all(|d| d[s as usize] != u32::MAX))
        .min_by_key(|&s| {
            let worst = from_members
                .iter()
                .map(|d| d[s as usize])
                .max()
                .unwrap_or(0);
            let sum: u64 = from_members.iter().map(|d| u64::from(d[s as usize])).sum();
            (worst, sum, s)
        });
    let Some(root) = root else {
        let d = &from_members[0];
        return Err(members
            .iter()
            .filter(|&&m| d[m as usize] == u32::MAX)
            .count()
            .max(1));
    };
    let dist = distances(graph, root);
    let mut edges = BTreeSet::new();
    let mut in_tree = vec![false; graph.switch_count()];
    in_tree[root as usize] = true;
    for &m in members {
        let mut s = m;
        while !in_tree[s as usize] {
            in_tree[s as usize] = true;
            // Parents: neighbours one hop nearer the root, by any link.
            let ups: Vec<&smcore_kit::graph::SwPort> = graph.sw_ports[s as usize]
                .iter()
                .filter(|p| p.peer_sw != NONE && dist[p.peer_sw as usize] + 1 == dist[s as usize])
                .collect();
            // A switch already in the tree is preferred: fewer links used.
            let pick = ups
                .iter()
                .copied()
                .filter(|p| in_tree[p.peer_sw as usize])
                .nth(
                    usize::from(mlid)
                        % ups
                            .iter()
                            .filter(|p| in_tree[p.peer_sw as usize])
                            .count()
                            .max(1),
                )
                .or_else(|| ups.get(usize::from(mlid) % ups.len().max(1)).copied());
            let Some(up) = pick else { break };
            edges.insert((s, up.port));
            let back = graph.sw_ports[up.peer_sw as usize]
                .iter()
                .find(|p| p.port_index == up.peer_port);
            if let Some(b) = back {
                edges.insert((up.peer_sw, b.port));
            }
            s = up.peer_sw;
        }
    }
    Ok(edges.into_iter().collect())
}
