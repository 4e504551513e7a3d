//! An index-based view of a [`FabricSnapshot`] tuned for routing: switches
//! numbered densely, their links as flat port lists, and a LID → port table.

use sm_abi::{FabricSnapshot, NodeKind, PortState, NONE};

/// Dense switch number (0..switch_count), distinct from the node index.
pub type Sw = u32;

/// One usable link leaving a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwPort {
    /// Port number on this switch.
    pub port: u8,
    /// Global index of this port in the snapshot.
    pub port_index: u32,
    /// Global index of the peer port.
    pub peer_port: u32,
    /// Peer node index.
    pub peer_node: u32,
    /// Peer switch number, or [`NONE`] when the peer is an end node.
    pub peer_sw: Sw,
}

/// Routing view of a fabric.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Node index of each switch.
    pub switch_nodes: Vec<u32>,
    /// Switch number of each node ([`NONE`] for end nodes).
    pub sw_of_node: Vec<Sw>,
    /// Active linked ports of each switch (ports ≥ 1), in port order.
    pub sw_ports: Vec<Vec<SwPort>>,
    /// Port index answering to each LID ([`NONE`] where unused).
    pub lid_port: Vec<u32>,
    /// Distinct neighbouring switches of each switch (for BFS).
    pub sw_adj: Vec<Vec<Sw>>,
    /// End ports (CA and router ports with a LID and a link), in port order.
    pub end_ports: Vec<u32>,
}

/// The switches of a distance row (hops from each switch to one switch,
/// `u8::MAX` where it cannot be reached) ordered by distance, nearest or
/// farthest first, in switch order within a distance; the row's own switch
/// (distance 0) left out when `skip_own`. A counting sort: the order in
/// which the verifier and the balancing walk minimal paths towards a
/// switch, each switch before the next one on its way.
pub fn by_distance(row: &[u8], farthest_first: bool, skip_own: bool, out: &mut Vec<Sw>) {
    let lowest = usize::from(skip_own);
    let mut count = [0u32; 256];
    for &d in row {
        if d != u8::MAX {
            count[d as usize] += 1;
        }
    }
    // Where each distance starts in `out`.
    let mut start = [0u32; 256];
    let mut at = 0u32;
    for k in 0..255 - lowest {
        let d = if farthest_first { 254 - k } else { lowest + k };
        start[d] = at;
        at += count[d];
    }
    out.clear();
    out.resize(at as usize, 0);
    for (s, &d) in row.iter().enumerate() {
        if d != u8::MAX && usize::from(d) >= lowest {
            out[start[d as usize] as usize] = s as Sw;
            start[d as usize] += 1;
        }
    }
}

/// A port that can carry traffic: linked and not down.
pub fn usable(fabric: &FabricSnapshot, port_index: u32) -> bool {
    let p = &fabric.ports[port_index as usize];
    p.peer != NONE && p.state != PortState::Down && fabric.ports[p.peer as usize].state != PortState::Down
}

impl Graph {
    /// Build the view.
    pub fn new(fabric: &FabricSnapshot) -> Graph {
        let mut sw_of_node = vec![NONE; fabric.nodes.len()];
        let mut switch_nodes = Vec::new();
        for (i, n) in fabric.nodes.iter().enumerate() {
            if n.kind == NodeKind::Switch {
                sw_of_node[i] = switch_nodes.len() as Sw;
                switch_nodes.push(i as u32);
            }
        }
        let mut sw_ports = Vec::with_capacity(switch_nodes.len());
        let mut sw_adj = Vec::with_capacity(switch_nodes.len());
        for &node in &switch_nodes {
            let n = &fabric.nodes[node as usize];
            let mut ports = Vec::new();
            let mut adj: Vec<Sw> = Vec::new();
            for num in 1..=n.num_ports {
                let pi = n.first_port + num as u32;
                if !usable(fabric, pi) {
                    continue;
                }
                let peer = fabric.ports[pi as usize].peer;
                let peer_node = fabric.ports[peer as usize].node;
                let peer_sw = sw_of_node[peer_node as usize];
                ports.push(SwPort { port: num, port_index: pi, peer_port: peer, peer_node, peer_sw });
                if peer_sw != NONE && !adj.contains(&peer_sw) {
                    adj.push(peer_sw);
                }
            }
            sw_ports.push(ports);
            sw_adj.push(adj);
        }
        let mut lid_port = vec![NONE; fabric.max_lid as usize + 1];
        let mut end_ports = Vec::new();
        for (i, p) in fabric.ports.iter().enumerate() {
            if p.lid == 0 {
                continue;
            }
            let node = &fabric.nodes[p.node as usize];
            // A switch answers on port 0 only; an end port only when linked.
            let live = if node.kind == NodeKind::Switch { p.num == 0 } else { p.num != 0 && usable(fabric, i as u32) };
            if !live {
                continue;
            }
            if node.kind.is_end_node() {
                end_ports.push(i as u32);
            }
            for l in p.lid as u32..p.lid as u32 + p.lid_count() {
                if let Some(slot) = lid_port.get_mut(l as usize) {
                    *slot = i as u32;
                }
            }
        }
        Graph { switch_nodes, sw_of_node, sw_ports, lid_port, sw_adj, end_ports }
    }

    /// Number of switches.
    pub fn switch_count(&self) -> usize {
        self.switch_nodes.len()
    }

    /// The switch a port's traffic enters the switched fabric at: the
    /// switch itself for a switch port, the attached switch for an end port,
    /// [`NONE`] for an end port not attached to a switch.
    pub fn entry_switch(&self, fabric: &FabricSnapshot, port_index: u32) -> Sw {
        let p = &fabric.ports[port_index as usize];
        let own = self.sw_of_node[p.node as usize];
        if own != NONE {
            return own;
        }
        if p.peer == NONE {
            return NONE;
        }
        self.sw_of_node[fabric.ports[p.peer as usize].node as usize]
    }

    /// Breadth-first hop distances from switch `from` to every switch
    /// (`u8::MAX` = unreachable), written into `dist`.
    pub fn bfs(&self, from: Sw, dist: &mut [u8], queue: &mut Vec<Sw>) {
        dist.fill(u8::MAX);
        queue.clear();
        dist[from as usize] = 0;
        queue.push(from);
        let mut head = 0;
        while head < queue.len() {
            let s = queue[head];
            head += 1;
            let d = dist[s as usize];
            for &t in &self.sw_adj[s as usize] {
                if dist[t as usize] == u8::MAX {
                    dist[t as usize] = d.saturating_add(1);
                    queue.push(t);
                }
            }
        }
    }

    /// All-pairs switch distances, row-major (`[from * n + to]`). Links
    /// are bidirectional so the matrix is symmetric.
    ///
    /// Bit-parallel BFS: 64 sources advance together, one bit each in a
    /// word per switch, so a level costs one OR per link end for all 64;
    /// batches run in parallel.
    pub fn distance_matrix(&self) -> DistanceMatrix {
        use rayon::prelude::*;
        let n = self.switch_count();
        // Zeroed pages are mapped as the batches fill them, by every thread.
        let mut d = vec![0u8; n * n];
        if n > 0 {
            d.par_chunks_mut(64 * n).enumerate().for_each(|(batch, rows)| {
                rows.fill(u8::MAX);
                let first = batch * 64;
                let count = rows.len() / n;
                let mut visited = vec![0u64; n];
                let mut frontier = vec![0u64; n];
                let mut next = vec![0u64; n];
                for i in 0..count {
                    visited[first + i] |= 1 << i;
                    frontier[first + i] |= 1 << i;
                    rows[i * n + first + i] = 0;
                }
                let mut level = 0u8;
                loop {
                    level = level.saturating_add(1);
                    let mut grew = false;
                    for v in 0..n {
                        let mut reach = 0u64;
                        for &u in &self.sw_adj[v] {
                            reach |= frontier[u as usize];
                        }
                        let fresh = reach & !visited[v];
                        next[v] = fresh;
                        if fresh != 0 {
                            grew = true;
                            visited[v] |= fresh;
                            let mut bits = fresh;
                            while bits != 0 {
                                let i = bits.trailing_zeros() as usize;
                                bits &= bits - 1;
                                rows[i * n + v] = level;
                            }
                        }
                    }
                    if !grew || level == u8::MAX - 1 {
                        break;
                    }
                    std::mem::swap(&mut frontier, &mut next);
                }
            });
        }
        DistanceMatrix { n, d }
    }
}

/// Switch-to-switch hop counts.
#[derive(Debug, Clone)]
pub struct DistanceMatrix {
    n: usize,
    d: Vec<u8>,
}

impl DistanceMatrix {
    /// Hops from `a` to `b` (`u8::MAX` when unreachable).
    #[inline]
    pub fn get(&self, a: Sw, b: Sw) -> u8 {
        self.d[a as usize * self.n + b as usize]
    }

    /// Number of switches.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a fabric without switches.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Distances from every switch to `b` (the matrix is symmetric).
    #[inline]
    pub fn to(&self, b: Sw) -> &[u8] {
        &self.d[b as usize * self.n..(b as usize + 1) * self.n]
    }
}

#[cfg(test)]
mod tests {
    use super::by_distance;

    #[test]
    fn by_distance_orders_by_hops_then_switch_and_leaves_out_the_unreachable() {
        let row = [2, 0, 1, u8::MAX, 1, 2];
        let mut out = Vec::new();
        by_distance(&row, false, false, &mut out);
        assert_eq!(out, [1, 2, 4, 0, 5]);
        by_distance(&row, true, true, &mut out);
        assert_eq!(out, [0, 5, 2, 4]);
        by_distance(&[u8::MAX, 0], true, true, &mut out);
        assert!(out.is_empty());
    }
}
