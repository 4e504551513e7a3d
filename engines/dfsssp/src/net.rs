//! The switch graph both engines route on: switches numbered densely and
//! every usable switch-to-switch cable direction as a *channel* with its
//! own id. Channels are what Dijkstra weighs and what the channel
//! dependency graph of DFSSSP is built over.

use sm_abi::{FabricSnapshot, NONE};
use smcore_kit::graph::{Graph, Sw};

/// Channel id: one direction of one switch-to-switch link.
pub type Ch = u32;

/// The routing view.
#[derive(Debug, Clone)]
pub struct Net {
    /// Number of switches.
    pub nsw: usize,
    /// Switch a channel leaves.
    pub from: Vec<Sw>,
    /// Switch a channel enters.
    pub to: Vec<Sw>,
    /// Port number the channel leaves `from` by.
    pub out_port: Vec<u8>,
    /// Port number the channel enters `to` by.
    pub in_port: Vec<u8>,
    /// Per switch: offset into [`Net::port_out`] / [`Net::port_in`]; a
    /// switch has `num_ports + 1` slots there.
    pub port_base: Vec<u32>,
    /// Channel leaving the switch by a port, [`NONE`] when the port is not
    /// a usable switch-to-switch link.
    pub port_out: Vec<Ch>,
    /// Channel entering the switch by a port, or [`NONE`].
    pub port_in: Vec<Ch>,
    /// Highest port number per switch.
    pub num_ports: Vec<u8>,
    /// Reverse adjacency for Dijkstra from a destination: per switch `v`,
    /// `rin_start[v]..rin_start[v + 1]` indexes groups of parallel channels
    /// `u → v` (one group per neighbour `u`).
    pub rin_start: Vec<u32>,
    /// Group: (neighbour `u`, range in [`Net::group_ch`]).
    pub groups: Vec<(Sw, u32, u32)>,
    /// Channels of the groups, contiguous per group.
    pub group_ch: Vec<Ch>,
    /// Forward adjacency: per switch `u`, `out_start[u]..out_start[u + 1]`
    /// indexes groups of parallel channels `u → v` in [`Net::out_groups`].
    pub out_start: Vec<u32>,
    /// Group: (neighbour `v`, range in [`Net::out_ch`]).
    pub out_groups: Vec<(Sw, u32, u32)>,
    /// Channels of the forward groups.
    pub out_ch: Vec<Ch>,
    /// Distinct neighbouring switches of each switch, as in the kit's graph.
    pub adj: Vec<Vec<Sw>>,
    /// End ports (CAs, routers) attached to each switch.
    pub num_hca: Vec<u32>,
}

impl Net {
    /// Build the view from the kit's graph.
    pub fn new(fabric: &FabricSnapshot, graph: &Graph) -> Net {
        let nsw = graph.switch_count();
        let mut from = Vec::new();
        let mut to = Vec::new();
        let mut out_port = Vec::new();
        let mut in_port = Vec::new();
        let mut port_base = Vec::with_capacity(nsw);
        let mut num_ports = Vec::with_capacity(nsw);
        let mut total = 0u32;
        for &node in &graph.switch_nodes {
            port_base.push(total);
            let np = fabric.nodes[node as usize].num_ports;
            num_ports.push(np);
            total += np as u32 + 1;
        }
        let mut port_out = vec![NONE; total as usize];
        let mut port_in = vec![NONE; total as usize];
        let mut num_hca = vec![0u32; nsw];
        for s in 0..nsw {
            for sp in &graph.sw_ports[s] {
                if sp.peer_sw == NONE {
                    continue;
                }
                let c = from.len() as Ch;
                let peer_num = fabric.ports[sp.peer_port as usize].num;
                from.push(s as Sw);
                to.push(sp.peer_sw);
                out_port.push(sp.port);
                in_port.push(peer_num);
                port_out[(port_base[s] + sp.port as u32) as usize] = c;
                port_in[(port_base[sp.peer_sw as usize] + peer_num as u32) as usize] = c;
            }
        }
        for &p in &graph.end_ports {
            let s = graph.entry_switch(fabric, p);
            if s != NONE {
                num_hca[s as usize] += 1;
            }
        }
        // Incoming channels per switch, grouped by the neighbour they come from.
        let mut incoming: Vec<Vec<Ch>> = vec![Vec::new(); nsw];
        for (c, &t) in to.iter().enumerate() {
            incoming[t as usize].push(c as Ch);
        }
        let mut rin_start = Vec::with_capacity(nsw + 1);
        let mut groups = Vec::new();
        let mut group_ch = Vec::with_capacity(from.len());
        for inc in incoming.iter_mut() {
            rin_start.push(groups.len() as u32);
            inc.sort_by_key(|&c| (from[c as usize], out_port[c as usize]));
            let mut i = 0;
            while i < inc.len() {
                let u = from[inc[i] as usize];
                let start = group_ch.len() as u32;
                while i < inc.len() && from[inc[i] as usize] == u {
                    group_ch.push(inc[i]);
                    i += 1;
                }
                groups.push((u, start, group_ch.len() as u32));
            }
        }
        rin_start.push(groups.len() as u32);
        let mut out_start = Vec::with_capacity(nsw + 1);
        let mut out_groups = Vec::new();
        let mut out_ch = Vec::with_capacity(from.len());
        let mut outgoing: Vec<Vec<Ch>> = vec![Vec::new(); nsw];
        for (c, &f) in from.iter().enumerate() {
            outgoing[f as usize].push(c as Ch);
        }
        for out in outgoing.iter_mut() {
            out_start.push(out_groups.len() as u32);
            out.sort_by_key(|&c| (to[c as usize], out_port[c as usize]));
            let mut i = 0;
            while i < out.len() {
                let v = to[out[i] as usize];
                let start = out_ch.len() as u32;
                while i < out.len() && to[out[i] as usize] == v {
                    out_ch.push(out[i]);
                    i += 1;
                }
                out_groups.push((v, start, out_ch.len() as u32));
            }
        }
        out_start.push(out_groups.len() as u32);
        Net {
            nsw,
            from,
            to,
            out_port,
            in_port,
            port_base,
            port_out,
            port_in,
            num_ports,
            rin_start,
            groups,
            group_ch,
            out_start,
            out_groups,
            out_ch,
            adj: graph.sw_adj.clone(),
            num_hca,
        }
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.from.len()
    }

    /// Channel leaving switch `s` by port `port`, or [`NONE`].
    #[inline]
    pub fn out_channel(&self, s: Sw, port: u8) -> Ch {
        if port > self.num_ports[s as usize] {
            return NONE;
        }
        self.port_out[(self.port_base[s as usize] + port as u32) as usize]
    }
}
