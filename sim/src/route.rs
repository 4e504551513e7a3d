//! How packets cross the simulated fabric: directed routes per IBA 14.2.2
//! and LID routing through the switches' LFTs.
//!
//! Directed routes follow the rules the IBA states for the SMI of every
//! node (C14-9 on the way out, C14-13 on the way back), each applied where
//! the packet is:
//!
//! | way | hop pointer at a node | what the node does |
//! | --- | --- | --- |
//! | out | 0, hop count > 0 | start: pointer to 1, send by InitialPath\[1\] |
//! | out | 1 ..< hop count | switch only: ReturnPath\[hp\] = entry port, pointer + 1, send by InitialPath\[hp+1\] |
//! | out | = hop count | ReturnPath\[hp\] = entry port, pointer + 1; the target, or (switch, real DrDLID) LID-route on |
//! | out | = hop count + 1 | the target (arrived by the LID-routed tail) |
//! | back | = hop count + 1 > 1 | pointer − 1, send by ReturnPath\[hop count\] |
//! | back | 2 ..= hop count | switch only: pointer − 1, send by ReturnPath\[hp−1\] |
//! | back | 1 | pointer to 0; the SM, or (switch, real DrSLID) LID-route to it |
//! | back | 0 | the SM (arrived by the LID-routed head) |
//!
//! Anything else is discarded, as C14-9:5 and C14-13:5 require.

use sm_mad::forwarding::{MULTICAST_LID_BASE, NO_ROUTE};
use sm_mad::smp::{PATH_LEN, PERMISSIVE_LID};
use sm_mad::{Mad, PortState};

use super::{DropReason, SimFabric, Target};

/// LID-routed hops before a packet is taken for lost in a loop: more than
/// any loop-free route in a fabric of 255-port switches can take.
const MAX_LID_HOPS: usize = 1024;

/// One hop of a LID-routed packet: the (node, port) it left by and the
/// (node, port) it entered by.
pub(super) type Hop = ((usize, u8), (usize, u8));

impl SimFabric {
    /// Whether the cable at `link` carries packets: plugged in, both nodes
    /// present, neither port disabled.
    pub(super) fn link_is_up(&self, link: usize) -> bool {
        let Some(l) = self.links.get(link) else {
            return false;
        };
        let end_ok = |(node, port): (usize, u8)| {
            self.nodes
                .get(node)
                .is_some_and(|n| n.present && n.port(port).is_some_and(|p| !p.disabled))
        };
        l.connected && end_ok(l.a) && end_ok(l.b)
    }

    /// The link on a port, if it has a cable.
    pub(super) fn link_at(&self, node: usize, port: u8) -> Option<usize> {
        *self.port_links.get(node)?.get(usize::from(port))?
    }

    /// Sends a packet out of `port` of `node`; returns the node and port
    /// it enters by at the far end.
    fn transmit(&self, node: usize, port: u8, lid_routed: bool) -> Result<(usize, u8), DropReason> {
        let n = &self.nodes[node];
        if port == 0 || port > n.num_ports {
            return Err(DropReason::BadPort);
        }
        let link = self.link_at(node, port).ok_or(DropReason::NoLink)?;
        if !self.link_is_up(link) {
            return Err(DropReason::NoLink);
        }
        let peer = self.links[link].other_end((node, port));
        if lid_routed && self.options.lid_routing_needs_active {
            let active = |(node, port): (usize, u8)| {
                self.nodes[node]
                    .port(port)
                    .is_some_and(|p| p.state == PortState::Active)
            };
            if !active((node, port)) || !active(peer) {
                return Err(DropReason::PortNotActive);
            }
        }
        Ok(peer)
    }

    /// LID-routes a packet that is at (`node`, `port`) — sent from there,
    /// or just arrived there — to `dlid`; returns where it is accepted and
    /// the port it came in by.
    pub(super) fn route_lid(
        &self,
        from: (usize, u8),
        dlid: u16,
    ) -> Result<(usize, u8), DropReason> {
        self.route_lid_via(from, dlid, None)
    }

    /// [`Self::route_lid`], recording each hop (the port sent from, the
    /// port entered by) in `hops` when given.
    pub(super) fn route_lid_via(
        &self,
        from: (usize, u8),
        dlid: u16,
        mut hops: Option<&mut Vec<Hop>>,
    ) -> Result<(usize, u8), DropReason> {
        let (mut node, mut port) = from;
        let mut origin = true;
        for _ in 0..MAX_LID_HOPS {
            let n = &self.nodes[node];
            if !n.present {
                return Err(DropReason::NoLink);
            }
            // The permissive DLID is taken by the first node that receives
            // it, never by its sender.
            if (dlid == PERMISSIVE_LID && !origin) || n.owns_lid(port, dlid) {
                return Ok((node, port));
            }
            let exit = match &n.switch {
                Some(sw) => {
                    if dlid == 0 || dlid >= MULTICAST_LID_BASE || dlid > sw.info.linear_fdb_top {
                        return Err(DropReason::NoRoute);
                    }
                    match sw.lft_entry(dlid) {
                        // Port 0 would hand it to this switch's SMA, which
                        // does not own the LID.
                        NO_ROUTE | 0 => return Err(DropReason::NoRoute),
                        exit => exit,
                    }
                }
                // A CA sends by the port it is at and forwards nothing.
                None if origin => port,
                None => return Err(DropReason::LidNotHere),
            };
            let entered = self.transmit(node, exit, true)?;
            if let Some(hops) = hops.as_deref_mut() {
                hops.push(((node, exit), entered));
            }
            (node, port) = entered;
            origin = false;
        }
        Err(DropReason::HopLimit)
    }

    /// Carries a directed-route request from the SM to its target,
    /// updating the hop pointer and ReturnPath in `mad` as the nodes on the
    /// way do. `dlid` is the LRH DLID, used when DrSLID is not permissive.
    pub(super) fn dr_outbound(&self, mad: &mut Mad, dlid: u16, origin: (usize, u8)) -> Result<Target, DropReason> {
        let mut smp = mad.smp_mut();
        let hop_count = smp.hop_count();
        let (mut node, mut port) = origin;
        if smp.dr_slid() != PERMISSIVE_LID {
            (node, port) = self.route_lid((node, port), dlid)?;
        }
        for _ in 0..=PATH_LEN + 1 {
            let hp = smp.hop_pointer();
            let is_switch = self.nodes[node].is_switch();
            if hop_count > 0 && hp == 0 {
                let exit = path_entry(smp.initial_path(), 1)?;
                if !is_switch && exit != port {
                    return Err(DropReason::BadPort);
                }
                smp.set_hop_pointer(1);
                (node, port) = self.transmit(node, exit, false)?;
            } else if hp > 0 && hp < hop_count {
                if !is_switch {
                    return Err(DropReason::NotASwitch);
                }
                record(smp.return_path_mut(), hp, port)?;
                let exit = path_entry(smp.initial_path(), hp + 1)?;
                smp.set_hop_pointer(hp + 1);
                (node, port) = self.transmit(node, exit, false)?;
            } else if hp == hop_count {
                if hop_count > 0 {
                    record(smp.return_path_mut(), hp, port)?;
                }
                smp.set_hop_pointer(hp + 1);
                let dr_dlid = smp.dr_dlid();
                if dr_dlid == PERMISSIVE_LID {
                    return Ok(Target {
                        node,
                        port,
                        dr_end: None,
                    });
                }
                if !is_switch {
                    return Err(DropReason::NotASwitch);
                }
                let (to, by) = self.route_lid((node, port), dr_dlid)?;
                return Ok(Target {
                    node: to,
                    port: by,
                    dr_end: Some(node),
                });
            } else if u16::from(hp) == u16::from(hop_count) + 1 {
                return Ok(Target {
                    node,
                    port,
                    dr_end: None,
                });
            } else {
                return Err(DropReason::BadHopPointer);
            }
        }
        Err(DropReason::BadHopPointer)
    }

    /// Carries a directed-route response from the target back to the SM
    /// along ReturnPath.
    pub(super) fn dr_inbound(&self, mad: &mut Mad, target: Target, origin: (usize, u8)) -> Result<(), DropReason> {
        let mut smp = mad.smp_mut();
        let hop_count = smp.hop_count();
        let (mut node, mut port) = (target.node, target.port);
        if let Some(end) = target.dr_end {
            // Back over the LID-routed tail to the switch that began it.
            let lid = self.nodes[end].ports[0].info.lid;
            if lid == 0 {
                return Err(DropReason::NoLid);
            }
            (node, port) = self.route_lid((node, port), lid)?;
            if node != end {
                return Err(DropReason::NoRoute);
            }
        }
        for _ in 0..=PATH_LEN + 1 {
            let hp = smp.hop_pointer();
            let is_switch = self.nodes[node].is_switch();
            if hop_count > 0 && u16::from(hp) == u16::from(hop_count) + 1 {
                let exit = path_entry(smp.return_path(), hop_count)?;
                if !is_switch && exit != port {
                    return Err(DropReason::BadPort);
                }
                smp.set_hop_pointer(hop_count);
                (node, port) = self.transmit(node, exit, false)?;
            } else if hp >= 2 && hp <= hop_count {
                if !is_switch {
                    return Err(DropReason::NotASwitch);
                }
                let exit = path_entry(smp.return_path(), hp - 1)?;
                smp.set_hop_pointer(hp - 1);
                (node, port) = self.transmit(node, exit, false)?;
            } else if hp == 1 {
                smp.set_hop_pointer(0);
                let dr_slid = smp.dr_slid();
                if dr_slid == PERMISSIVE_LID {
                    return Self::arrived_at(origin, node, port, is_switch);
                }
                if !is_switch {
                    return Err(DropReason::NotASwitch);
                }
                let (to, by) = self.route_lid((node, port), dr_slid)?;
                let switch = self.nodes[to].is_switch();
                return Self::arrived_at(origin, to, by, switch);
            } else if hp == 0 {
                return Self::arrived_at(origin, node, port, is_switch);
            } else {
                return Err(DropReason::BadHopPointer);
            }
        }
        Err(DropReason::BadHopPointer)
    }
}


impl SimFabric {
    /// Data packets the fabric would drop for want of a virtual lane:
    /// for every ordered pair of end ports holding LIDs (base LIDs), the
    /// packet on SL `path_sl(slid, dlid)` is walked through the LFTs, and
    /// at every hop the VL the sender's SL2VL table gives it must be one
    /// that both ends of the link operate (below their OperationalVLs,
    /// never VL 15). One line per failing pair; empty when all get
    /// through. Packets the LFTs do not deliver are reported too.
    pub fn vl_faults(&self, path_sl: &dyn Fn(u16, u16) -> u8) -> Vec<String> {
        let mut ends = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.is_switch() || !n.present {
                continue;
            }
            for p in 1..=n.num_ports {
                if let Some(port) = n.port(p).filter(|p| p.info.lid != 0 && p.state == PortState::Active) {
                    ends.push((i, p, port.info.lid));
                }
            }
        }
        let mut faults = Vec::new();
        for &(node, port, slid) in &ends {
            for &(_, _, dlid) in &ends {
                if dlid == slid {
                    continue;
                }
                let sl = path_sl(slid, dlid);
                if let Err(why) = self.trace_vl(node, port, dlid, sl) {
                    faults.push(format!("LID {slid} -> LID {dlid} on SL {sl}: {why}"));
                }
            }
        }
        faults
    }

    /// Walks one data packet on `sl` from (`node`, `port`) to `dlid`,
    /// checking the VL of every hop.
    fn trace_vl(&self, mut node: usize, mut port: u8, dlid: u16, sl: u8) -> Result<(), String> {
        if sl > 15 {
            return Err("no such SL".into());
        }
        let mut origin = true;
        for _ in 0..MAX_LID_HOPS {
            let n = &self.nodes[node];
            if !origin && n.owns_lid(port, dlid) {
                return Ok(());
            }
            let (exit, vl) = match &n.switch {
                Some(sw) => {
                    let exit = match sw.lft_entry(dlid) {
                        NO_ROUTE | 0 => return Err(format!("no route at node {node}")),
                        exit => exit,
                    };
                    (exit, sw.sl2vl(port, exit)[usize::from(sl)])
                }
                None if origin => (port, n.port(port).map_or(0, |p| p.sl2vl[usize::from(sl)])),
                None => return Err(format!("delivered to node {node}, which does not own it")),
            };
            let (peer_node, peer_port) = self.transmit(node, exit, true).map_err(|e| format!("dropped at node {node} port {exit}: {e:?}"))?;
            let ops = |(nd, pt): (usize, u8)| self.nodes[nd].port(pt).map_or(0, |p| sm_mad::port_info::vls::count(p.info.operational_vls));
            let operated = ops((node, exit)).min(ops((peer_node, peer_port)));
            if vl >= operated {
                return Err(format!(
                    "node {node} port {exit} sends on VL {vl}, but the link operates {operated} VL(s)"
                ));
            }
            (node, port) = (peer_node, peer_port);
            origin = false;
        }
        Err("hop limit".into())
    }
}

fn path_entry(path: &[u8], index: u8) -> Result<u8, DropReason> {
    path.get(usize::from(index))
        .copied()
        .ok_or(DropReason::BadHopPointer)
}

fn record(path: &mut [u8], index: u8, port: u8) -> Result<(), DropReason> {
    let slot = path
        .get_mut(usize::from(index))
        .ok_or(DropReason::BadHopPointer)?;
    *slot = port;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_mad::mad::attr;
    use sm_mad::smp;
    use sm_topology::{gen, Topology};

    use super::*;

    /// Two hosts, two leaves, two spines; every port Active, switch `s`
    /// at LID 10 + s, host `h` at LID 1 + h.
    fn active_tree() -> (Topology, SimFabric) {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        for (i, node) in f.nodes.iter_mut().enumerate() {
            let lid_port = if node.is_switch() { 0 } else { 1 };
            node.ports[lid_port].info.lid = if node.is_switch() {
                10 + i as u16
            } else {
                1 + i as u16
            };
            for port in node.ports.iter_mut() {
                if port.state != PortState::Down {
                    port.state = PortState::Active;
                }
            }
            if let Some(sw) = node.switch.as_mut() {
                sw.info.linear_fdb_top = 63;
            }
        }
        (topo, f)
    }

    fn set_entry(f: &mut SimFabric, node: usize, lid: u16, port: u8) {
        let sw = f.nodes[node].switch.as_mut().unwrap();
        let mut block = sw.lft_block(0);
        block[usize::from(lid)] = port;
        sw.set_lft_block(0, &block);
    }

    #[test]
    fn data_packets_need_an_operational_vl_at_every_hop() {
        let (topo, mut f) = active_tree();
        let leaf0 = topo.find_node_by_desc("leaf-0").unwrap();
        let leaf1 = topo.find_node_by_desc("leaf-1").unwrap();
        let (spine, _) = topo.peer(leaf0, 3).unwrap();
        let spine_out = (1..=4)
            .find(|&p| topo.peer(spine, p).map(|e| e.0) == Some(leaf1))
            .unwrap();
        let host1_leaf_port = topo.peer(1, 1).unwrap().1;
        set_entry(&mut f, leaf0, 2, 3);
        set_entry(&mut f, spine, 2, spine_out);
        set_entry(&mut f, leaf1, 2, host1_leaf_port);
        assert_eq!(f.trace_vl(0, 1, 2, 3), Ok(()), "SL 3 on VL 0 everywhere");
        // The host sends SL 3 on VL 1, which its link does not operate
        // yet (ports reset to VL0 only).
        f.nodes[0].ports[1].sl2vl[3] = 1;
        let why = f.trace_vl(0, 1, 2, 3).unwrap_err();
        assert!(why.contains("VL 1") && why.contains("operates 1"), "{why}");
        // Operating two VLs on that link (both ends) lets it through.
        let host0_leaf_port = topo.peer(0, 1).unwrap().1;
        f.nodes[0].ports[1].info.operational_vls = 2;
        f.nodes[leaf0].ports[usize::from(host0_leaf_port)].info.operational_vls = 2;
        assert_eq!(f.trace_vl(0, 1, 2, 3), Ok(()));
        // VL 15 carries no data.
        f.nodes[leaf0].switch.as_mut().unwrap().set_sl2vl(host0_leaf_port, 3, [15; 16]);
        assert!(f.trace_vl(0, 1, 2, 3).is_err());
    }

    #[test]
    fn a_forwarding_loop_hits_the_hop_limit() {
        let (topo, mut f) = active_tree();
        let leaf = topo.find_node_by_desc("leaf-0").unwrap();
        let (spine, spine_port) = topo.peer(leaf, 3).unwrap();
        set_entry(&mut f, leaf, 2, 3);
        set_entry(&mut f, spine, 2, spine_port);
        assert_eq!(f.route_lid((0, 1), 2), Err(DropReason::HopLimit));
    }

    #[test]
    fn lid_routing_reaches_the_owner_by_the_lft() {
        let (topo, mut f) = active_tree();
        let leaf0 = topo.find_node_by_desc("leaf-0").unwrap();
        let leaf1 = topo.find_node_by_desc("leaf-1").unwrap();
        let (spine, spine_in) = topo.peer(leaf0, 3).unwrap();
        let spine_out = (1..=4)
            .find(|&p| topo.peer(spine, p).map(|e| e.0) == Some(leaf1))
            .unwrap();
        let (host1, host1_leaf_port) = (1, topo.peer(1, 1).unwrap().1);
        set_entry(&mut f, leaf0, 2, 3);
        set_entry(&mut f, spine, 2, spine_out);
        set_entry(&mut f, leaf1, 2, host1_leaf_port);
        assert_eq!(f.route_lid((0, 1), 2), Ok((host1, 1)));
        // A switch's LID is taken at whatever port the packet came in by.
        let spine_lid = 10 + spine as u16;
        set_entry(&mut f, leaf0, spine_lid, 3);
        assert_eq!(f.route_lid((0, 1), spine_lid), Ok((spine, spine_in)));
        // The sender's own LID never leaves it.
        assert_eq!(f.route_lid((0, 1), 1), Ok((0, 1)));
        // LFT port 0 and multicast LIDs go nowhere.
        set_entry(&mut f, leaf0, 5, 0);
        assert_eq!(f.route_lid((0, 1), 5), Err(DropReason::NoRoute));
        assert_eq!(f.route_lid((0, 1), 0xC001), Err(DropReason::NoRoute));
    }

    #[test]
    fn the_permissive_lid_is_taken_by_the_first_receiver() {
        let (topo, f) = active_tree();
        let (leaf, leaf_port) = topo.peer(0, 1).unwrap();
        assert_eq!(f.route_lid((0, 1), PERMISSIVE_LID), Ok((leaf, leaf_port)));
        assert_eq!(
            f.route_lid((leaf, 0), PERMISSIVE_LID),
            Err(DropReason::NoRoute)
        );
    }

    #[test]
    fn the_outbound_walk_moves_the_pointer_and_records_entry_ports() {
        let (topo, f) = active_tree();
        let request = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1, 3]).unwrap();
        let mut mad = Mad::zeroed();
        request.emit(&mut mad.smp_mut());
        let target = f.dr_outbound(&mut mad, PERMISSIVE_LID, f.sm_location()).unwrap();
        let leaf = topo.find_node_by_desc("leaf-0").unwrap();
        let (spine, spine_port) = topo.peer(leaf, 3).unwrap();
        assert_eq!(
            (target.node, target.port, target.dr_end),
            (spine, spine_port, None)
        );
        let smp = mad.smp();
        assert_eq!(smp.hop_pointer(), 3);
        assert_eq!(
            &smp.return_path()[1..3],
            &[topo.peer(0, 1).unwrap().1, spine_port]
        );
        let mut back = mad.clone();
        back.smp_mut().set_direction_bit(true);
        f.dr_inbound(&mut back, target, f.sm_location()).unwrap();
        assert_eq!(back.smp().hop_pointer(), 0);
    }

    #[test]
    fn pointers_that_fit_no_rule_are_discarded() {
        let (_, f) = active_tree();
        let request = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1, 3]).unwrap();
        let mut mad = Mad::zeroed();
        request.emit(&mut mad.smp_mut());
        mad.smp_mut().set_hop_pointer(9);
        assert_eq!(
            f.dr_outbound(&mut mad, PERMISSIVE_LID, f.sm_location()).err(),
            Some(DropReason::BadHopPointer)
        );
        let target = Target {
            node: 0,
            port: 1,
            dr_end: None,
        };
        assert_eq!(
            f.dr_inbound(&mut mad, target, f.sm_location()),
            Err(DropReason::BadHopPointer)
        );
        // A response that ends at hop 0 somewhere other than the SM.
        mad.smp_mut().set_hop_pointer(0);
        let elsewhere = Target {
            node: 1,
            port: 1,
            dr_end: None,
        };
        assert_eq!(f.dr_inbound(&mut mad, elsewhere, f.sm_location()), Err(DropReason::NotForSm));
    }
}
