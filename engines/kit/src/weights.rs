//! OpenSM's hop weights (`hop_weights_file`): every switch port counts as
//! its weight factor (1 unless the file says otherwise) in the hop counts
//! the LFT builder compares, so a port given a heavy weight is only on a
//! "least-hop" path where no lighter way exists.
//!
//! OpenSM adds the weight of the port a switch leaves through to its
//! neighbour's count (`ucast_mgr_process_neighbor`); [`WeightedHops`] is
//! that relaxation done with Dijkstra towards every switch, as a
//! [`HopTable`] for [`crate::balance::assign_lfts`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use sm_abi::{FabricSnapshot, NONE};

use crate::balance::HopTable;
use crate::graph::{Graph, Sw, SwPort};

/// The largest weighted count: OpenSM keeps hop counts in a byte and
/// 0xFF means "no path".
const MAX_HOPS: u16 = 0xFE;

/// Weighted least hop counts between switches.
#[derive(Debug, Clone)]
pub struct WeightedHops {
    n: usize,
    /// `[t * n + s]`: weighted hops from `s` to `t`, `u8::MAX` when none.
    d: Vec<u8>,
    /// Per switch, the weight of each port (by port number).
    weight: Vec<Vec<u8>>,
}

impl WeightedHops {
    /// Counts over `graph` with `weights` (node index, port, factor 1..255)
    /// on switch ports; every other port weighs 1.
    pub fn new(fabric: &FabricSnapshot, graph: &Graph, weights: &[(u32, u8, u8)]) -> WeightedHops {
        let n = graph.switch_count();
        let mut weight: Vec<Vec<u8>> = (0..n)
            .map(|s| vec![1; fabric.nodes[graph.switch_nodes[s] as usize].num_ports as usize + 1])
            .collect();
        for &(node, port, wf) in weights {
            let s = graph.sw_of_node.get(node as usize).copied().unwrap_or(NONE);
            if s != NONE {
                if let Some(w) = weight[s as usize].get_mut(port as usize) {
                    *w = wf.max(1);
                }
            }
        }
        let mut d = vec![u8::MAX; n * n];
        d.par_chunks_mut(n.max(1)).enumerate().for_each(|(t, row)| {
            // Dijkstra from `t` over links walked backwards: a switch `s`
            // cabled to `u` reaches `t` in d(u) + the weight of its port.
            let mut best = vec![u16::MAX; n];
            let mut heap = BinaryHeap::new();
            best[t] = 0;
            heap.push(Reverse((0u16, t as Sw)));
            while let Some(Reverse((du, u))) = heap.pop() {
                if du > best[u as usize] {
                    continue;
                }
                for l in &graph.sw_ports[u as usize] {
                    if l.peer_sw == NONE {
                        continue;
                    }
                    let s = l.peer_sw as usize;
                    let back = fabric.ports[l.peer_port as usize].num as usize;
                    let ds = du + u16::from(weight[s].get(back).copied().unwrap_or(1));
                    if ds <= MAX_HOPS && ds < best[s] {
                        best[s] = ds;
                        heap.push(Reverse((ds, s as Sw)));
                    }
                }
            }
            for (r, b) in row.iter_mut().zip(&best) {
                if *b != u16::MAX {
                    *r = *b as u8;
                }
            }
        });
        WeightedHops { n, d, weight }
    }

    /// The weight of `port` of switch `s`.
    pub fn weight(&self, s: Sw, port: u8) -> u8 {
        self.weight[s as usize].get(port as usize).copied().unwrap_or(1)
    }
}

impl HopTable for WeightedHops {
    fn least(&self, s: Sw, t: Sw) -> u8 {
        self.d[t as usize * self.n + s as usize]
    }

    fn via(&self, s: Sw, link: &SwPort, t: Sw) -> u8 {
        let rest = self.d[t as usize * self.n + link.peer_sw as usize];
        if rest == u8::MAX {
            return u8::MAX;
        }
        let hops = u16::from(rest) + u16::from(self.weight(s, link.port));
        if hops > MAX_HOPS {
            u8::MAX
        } else {
            hops as u8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A triangle: a-b direct on a's port 1, a-c on a's port 2, c-b.
    fn triangle() -> FabricSnapshot {
        let text = "Switch 3 \"a\"\n[1] \"b\"[1]\n[2] \"c\"[1]\n\nSwitch 3 \"b\"\n[2] \"c\"[2]\n[3] \"h\"[1]\n\n\
                    Switch 3 \"c\"\n\nHca 1 \"h\"\n";
        let topo = sm_topology::parse_str(text, "triangle").unwrap();
        sm_topology::lids::snapshot(&topo, 0).unwrap()
    }

    #[test]
    fn a_heavy_port_lengthens_the_paths_through_it() {
        let f = triangle();
        let g = Graph::new(&f);
        let sw = |name: &str| {
            let node = f.nodes.iter().position(|n| n.description.as_str() == name).unwrap();
            g.sw_of_node[node]
        };
        let a_node = f.nodes.iter().position(|n| n.description.as_str() == "a").unwrap() as u32;
        let plain = WeightedHops::new(&f, &g, &[]);
        assert_eq!(plain.least(sw("a"), sw("b")), 1);
        // a's port 1 weighs 3: going round through c (1 + 1) is lighter.
        let heavy = WeightedHops::new(&f, &g, &[(a_node, 1, 3)]);
        assert_eq!(heavy.least(sw("a"), sw("b")), 2);
        assert_eq!(heavy.least(sw("b"), sw("a")), 1, "the weight counts only leaving through the port");
        let links = &g.sw_ports[sw("a") as usize];
        let p1 = links.iter().find(|l| l.port == 1).unwrap();
        let p2 = links.iter().find(|l| l.port == 2).unwrap();
        assert_eq!((heavy.via(sw("a"), p1, sw("b")), heavy.via(sw("a"), p2, sw("b"))), (3, 2));
    }
}
