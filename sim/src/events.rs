//! Link and node events: the port state machine's link-driven half, the
//! fault hooks tests use, and the trap 128 a switch sends when one of its
//! ports changes state.
//!
//! IBA 14.2.5.4 sets SwitchInfo.PortStateChange when a port changes state
//! through the link state machine (link up: Down to Init; link lost: any
//! state to Down), and not for changes the SM itself makes with a SubnSet.
//! So the port a Set acts on stays quiet, while the far end of the same
//! link, which only sees its link drop, reports.

use sm_mad::mad::{attr, method};
use sm_mad::notice::{notice_type, producer, trap, Details, Source, DETAILS_LEN};
use sm_mad::{smp, Mad, NoticePacket, NoticeRepr, PortState};

use super::{SimError, SimFabric, SimTrap, TrapDelivery};

impl SimFabric {
    /// Brings both ends of `link` in line with whether it is up; returns
    /// the switches with a changed port other than `quiet`, which are to
    /// report it.
    pub(super) fn settle_link(&mut self, link: usize, quiet: Option<(usize, u8)>) -> Vec<usize> {
        let up = self.link_is_up(link);
        let ends = [self.links[link].a, self.links[link].b];
        let mut changed = Vec::new();
        for end @ (node, port) in ends {
            let n = &mut self.nodes[node];
            if !n.present {
                continue;
            }
            let is_switch = n.is_switch();
            let Some(p) = n.port_mut(port) else { continue };
            let next = match (up, p.state) {
                (false, _) => PortState::Down,
                (true, PortState::Down) => PortState::Init,
                (true, state) => state,
            };
            if next != p.state {
                p.state = next;
                if is_switch && Some(end) != quiet {
                    changed.push(node);
                }
            }
        }
        changed
    }

    /// A SubnSet of PortState Down: the link goes down and, the cable being
    /// there, trains again at once, leaving both ends in Init.
    pub(super) fn bounce_port(&mut self, node: usize, port: u8) {
        let Some(link) = self.link_at(node, port) else {
            return;
        };
        if !self.link_is_up(link) {
            return;
        }
        let mut changed = Vec::new();
        for end @ (n, p) in [self.links[link].a, self.links[link].b] {
            let is_switch = self.nodes[n].is_switch();
            if let Some(state) = self.nodes[n].port_mut(p).map(|p| &mut p.state) {
                *state = PortState::Init;
                if is_switch && end != (node, port) {
                    changed.push(n);
                }
            }
        }
        self.report_port_changes(changed);
    }

    /// A SubnSet of PortPhysicalState: Disabled takes the link down until
    /// Polling enables it again.
    pub(super) fn set_port_enabled(&mut self, node: usize, port: u8, enabled: bool) {
        if let Some(p) = self.nodes[node].port_mut(port) {
            p.disabled = !enabled;
        }
        match self.link_at(node, port) {
            Some(link) => {
                let changed = self.settle_link(link, Some((node, port)));
                self.report_port_changes(changed);
            }
            None => {
                if let Some(p) = self.nodes[node].port_mut(port) {
                    p.state = PortState::Down;
                }
            }
        }
    }

    /// Sets PortStateChange on each switch in `switches` and sends its
    /// trap 128.
    pub(super) fn report_port_changes(&mut self, mut switches: Vec<usize>) {
        switches.sort_unstable();
        switches.dedup();
        for node in switches {
            if let Some(sw) = self.nodes[node].switch.as_mut() {
                sw.info.port_state_change = true;
            }
            self.send_trap_128(node);
        }
    }

    fn send_trap_128(&mut self, node: usize) {
        let lid = self.nodes[node].ports[0].info.lid;
        self.send_trap(node, 0, NoticeRepr::link_state_change(lid));
    }

    /// Trap 256 (Bad M_Key, IBA 14.2.4.3) from the port `key_port` of
    /// `node` whose key `request` did not carry. DataDetails as IBA lays
    /// them out: LIDADDR (the requester's: the SM's port, the only sender
    /// here), DRSLID, Method, AttributeID, AttributeModifier, the M_Key
    /// that was offered, and the hop count of a directed route.
    pub(super) fn send_trap_256(&mut self, node: usize, key_port: u8, request: &smp::Repr) {
        let mut raw = [0u8; DETAILS_LEN];
        let requester = self.responder_lid(self.sm_node, self.sm_port);
        raw[2..4].copy_from_slice(&requester.to_be_bytes());
        if let Some(dr) = request.directed() {
            raw[4..6].copy_from_slice(&dr.dr_slid.to_be_bytes());
            raw[22] = dr.hop_count & 0x3F;
        }
        raw[6] = request.method;
        raw[8..10].copy_from_slice(&request.attribute_id.to_be_bytes());
        raw[10..14].copy_from_slice(&request.attribute_modifier.to_be_bytes());
        raw[14..22].copy_from_slice(&request.m_key.to_be_bytes());
        let n = &self.nodes[node];
        let lid = n.address_port(key_port).map_or(0, |p| p.info.lid);
        let notice = NoticeRepr {
            notice_type: notice_type::SECURITY,
            source: Source::Generic {
                producer_type: if n.is_switch() { producer::SWITCH } else { producer::CA },
                trap_number: trap::BAD_M_KEY,
            },
            issuer_lid: lid,
            toggle: false,
            count: 0,
            details: Details::Raw(raw),
            issuer_gid: None,
        };
        self.send_trap(node, key_port, notice);
    }

    /// Sends `notice` from `port` of `node` to the MasterSMLID that port
    /// was given, LID-routed as a real SMA would (see [`TrapDelivery`]).
    fn send_trap(&mut self, node: usize, port: u8, notice: NoticeRepr) {
        self.counters.traps_generated += 1;
        let Some(from) = self.nodes[node].address_port(port) else {
            self.counters.traps_lost += 1;
            return;
        };
        let (lid, sm_lid) = (from.info.lid, from.info.master_sm_lid);
        let delivered = match self.options.trap_delivery {
            TrapDelivery::Always => Some((self.sm_node, self.sm_port)),
            TrapDelivery::Routed if lid == 0 || sm_lid == 0 => None,
            TrapDelivery::Routed => self
                .route_lid((node, port), sm_lid)
                .and_then(|(to, by)| self.deliver_to_sm(to, by))
                .ok(),
        };
        let Some(to) = delivered else {
            self.counters.traps_lost += 1;
            return;
        };
        self.counters.traps_delivered += 1;
        let mut data = [0; smp::DATA_LEN];
        notice.emit(&mut NoticePacket::new_unchecked(&mut data[..]));
        let trap = smp::Repr {
            method: method::TRAP,
            status: 0,
            transaction_id: self.next_trap_tid,
            attribute_id: attr::NOTICE,
            attribute_modifier: 0,
            m_key: 0,
            routing: smp::Routing::Lid,
            data,
        };
        self.next_trap_tid += 1;
        let mut mad = Mad::zeroed();
        trap.emit(&mut mad.smp_mut());
        self.traps.push(SimTrap {
            node,
            slid: lid,
            mad: mad.0.to_vec(),
            to,
        });
    }

    /// The cable at `port` of `node`, for the fault hooks.
    fn cable(&self, node: usize, port: u8) -> Result<usize, SimError> {
        let n = self.nodes.get(node).ok_or(SimError::NoSuchNode(node))?;
        if port == 0 || port > n.num_ports {
            return Err(SimError::NoSuchPort { node, port });
        }
        self.link_at(node, port)
            .ok_or(SimError::NoCable { node, port })
    }

    /// Pulls the cable at `port` of `node`: both ends go Down, switches
    /// among them set PortStateChange and send trap 128.
    pub fn link_down(&mut self, node: usize, port: u8) -> Result<(), SimError> {
        let link = self.cable(node, port)?;
        self.links[link].connected = false;
        let changed = self.settle_link(link, None);
        self.report_port_changes(changed);
        Ok(())
    }

    /// Plugs the cable at `port` of `node` back in: both ends train to Init
    /// (if their nodes are present and the ports enabled) and report.
    pub fn link_up(&mut self, node: usize, port: u8) -> Result<(), SimError> {
        let link = self.cable(node, port)?;
        self.links[link].connected = true;
        let changed = self.settle_link(link, None);
        self.report_port_changes(changed);
        Ok(())
    }

    /// Powers `node` off: it answers and forwards nothing, and its
    /// neighbours see their links go down.
    pub fn remove_node(&mut self, node: usize) -> Result<(), SimError> {
        let n = self.nodes.get_mut(node).ok_or(SimError::NoSuchNode(node))?;
        n.present = false;
        for link in self.links_of(node) {
            let changed = self.settle_link(link, None);
            self.report_port_changes(changed);
        }
        Ok(())
    }

    /// Powers `node` back on as it first came up: no LIDs, empty tables,
    /// its links training to Init. Cables pulled with
    /// [`Self::link_down`] stay pulled.
    pub fn restore_node(&mut self, node: usize) -> Result<(), SimError> {
        if node >= self.nodes.len() {
            return Err(SimError::NoSuchNode(node));
        }
        self.nodes[node] = self.power_up(node);
        // Congestion control settings do not survive a power cycle.
        self.forget_cc(node);
        for link in self.links_of(node) {
            let changed = self.settle_link(link, None);
            self.report_port_changes(changed);
        }
        Ok(())
    }

    fn links_of(&self, node: usize) -> Vec<usize> {
        let mut links: Vec<usize> = self
            .port_links
            .get(node)
            .into_iter()
            .flatten()
            .flatten()
            .copied()
            .collect();
        // A cable between two ports of one node appears twice.
        links.sort_unstable();
        links.dedup();
        links
    }
}

#[cfg(test)]
mod tests {
    use sm_topology::gen;

    use super::*;

    #[test]
    fn a_new_fabric_has_trained_links_and_nothing_to_report() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        assert_eq!(f.counters().traps_generated, 0);
        for (i, node) in f.nodes.iter().enumerate() {
            if let Some(sw) = &node.switch {
                assert!(!sw.info.port_state_change);
            }
            for port in 1..=node.num_ports {
                let cabled = topo.peer(i, port).is_some();
                let expected = if cabled {
                    PortState::Init
                } else {
                    PortState::Down
                };
                assert_eq!(node.ports[usize::from(port)].state, expected);
            }
        }
    }

    #[test]
    fn a_bounce_reports_only_the_far_end() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let leaf = topo.find_node_by_desc("leaf-0").unwrap();
        let (spine, spine_port) = topo.peer(leaf, 3).unwrap();
        f.nodes[leaf].ports[3].state = PortState::Active;
        f.nodes[spine].ports[usize::from(spine_port)].state = PortState::Active;
        f.bounce_port(leaf, 3);
        assert_eq!(f.nodes[leaf].ports[3].state, PortState::Init);
        assert_eq!(
            f.nodes[spine].ports[usize::from(spine_port)].state,
            PortState::Init
        );
        assert_eq!(f.port_state_change(leaf), Some(false));
        assert_eq!(f.port_state_change(spine), Some(true));
        assert_eq!(f.counters().traps_generated, 1);
        // Bouncing a port without a cable does nothing.
        f.bounce_port(leaf, 2);
        assert_eq!(f.counters().traps_generated, 1);
    }

    #[test]
    fn a_restored_switch_reports_its_own_links_coming_up() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let leaf = topo.find_node_by_desc("leaf-0").unwrap();
        f.remove_node(leaf).unwrap();
        assert_eq!(f.nodes[0].ports[1].state, PortState::Down);
        f.restore_node(leaf).unwrap();
        assert_eq!(f.nodes[0].ports[1].state, PortState::Init);
        assert_eq!(f.port_state_change(leaf), Some(true));
        // A pulled cable stays pulled through a power cycle.
        f.link_down(leaf, 3).unwrap();
        f.remove_node(leaf).unwrap();
        f.restore_node(leaf).unwrap();
        assert_eq!(f.port_state(leaf, 3), Some(PortState::Down));
        assert_eq!(f.port_state(leaf, 4), Some(PortState::Init));
    }
}
