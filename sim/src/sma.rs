//! The subnet management agent of every simulated node: what it answers
//! for each attribute, what a Set may change, and which status a request
//! it cannot honour gets (IBA 13.4.7, 14.2.5).
//!
//! A Set is validated whole before anything changes, so a refused Set
//! leaves the node as it was; its response then carries the attribute as
//! the node still holds it.

use sm_abi::NodeKind;
use sm_mad::forwarding::{LftRepr, MftModifier, LFT_BLOCK_LEN, MFT_BLOCK_LEN};
use sm_mad::guid_info;
use sm_mad::mad::{attr, method, status};
use sm_mad::node_info::{self, NodeType};
use sm_mad::port_info::{link_speed, link_width};
use sm_mad::sl2vl::{self, Sl2VlModifier, SLS};
use sm_mad::sm_info::control;
use sm_mad::smp::{self, DATA_LEN};
use sm_mad::vlarb::{self, VlArbBlock, VlArbModifier, ENTRIES};
use sm_mad::{
    switch_info, NodeInfoRepr, PhysState, PortInfoPacket, PortState, SmState, SwitchInfoPacket,
};

use super::state::{
    PortRole, CA_PARTITION_CAP, SWITCH_PARTITION_CAP, VLARB_ENTRIES,
};
use super::{DropReason, SimFabric};

/// What the SMA sends back.
pub(super) struct Answer {
    pub status: u16,
    pub data: [u8; DATA_LEN],
}

/// Why the SMA refuses a request; each maps to one IBA status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Method,
    MethodAttribute,
    Value,
}

impl Refusal {
    fn status(self) -> u16 {
        match self {
            Self::Method => status::UNSUPPORTED_METHOD,
            Self::MethodAttribute => status::UNSUPPORTED_METHOD_ATTR,
            Self::Value => status::INVALID_ATTR_VALUE,
        }
    }
}

type Data = [u8; DATA_LEN];

/// P_Keys in one P_KeyTable block.
const PKEYS_PER_BLOCK: usize = 32;

/// LIDs at and above this are multicast or permissive, never a port's.
const FIRST_MULTICAST_LID: u16 = 0xC000;

impl SimFabric {
    /// Processes `request` at the SMA of `node`, which it entered by
    /// `port`.
    pub(super) fn sma(
        &mut self,
        node: usize,
        port: u8,
        request: &smp::Repr,
    ) -> Result<Answer, DropReason> {
        if let Some(heard) = self.heard_keys.get_mut(&node) {
            heard.push(request.m_key);
        }
        let hide_m_key = self.check_m_key(node, port, request)?;
        self.counters.handled += 1;
        if request.attribute_id == attr::SM_INFO {
            // An SM added beside the first answers its SMInfo itself.
            let at = (node, if self.nodes[node].is_switch() { 0 } else { port });
            if let Some(agent) = self.sm_agent(at).cloned() {
                self.counters.attribute(attr::SM_INFO).get += u64::from(request.method == method::GET);
                let (status, data) = agent(request).ok_or(DropReason::NotARequest)?;
                return Ok(Answer { status, data });
            }
        }
        let outcome = match request.method {
            method::GET => self.get(node, port, request.attribute_id, request.attribute_modifier),
            method::SET => self.set(node, port, request),
            _ => Err(Refusal::Method),
        };
        let counters = self.counters.attribute(request.attribute_id);
        match request.method {
            method::GET => counters.get += 1,
            method::SET => counters.set += 1,
            _ => counters.other += 1,
        }
        let (status, mut data) = match outcome {
            Ok(data) => (0, data),
            Err(refusal) => {
                counters.errors += 1;
                // A valid attribute and modifier with a bad value: show what
                // the node holds; otherwise echo the request.
                let current = (refusal == Refusal::Value && request.method == method::SET)
                    .then(|| {
                        self.get(node, port, request.attribute_id, request.attribute_modifier)
                            .ok()
                    })
                    .flatten();
                (refusal.status(), current.unwrap_or(request.data))
            }
        };
        if hide_m_key && request.attribute_id == attr::PORT_INFO {
            PortInfoPacket::new_unchecked(&mut data[..]).set_m_key(0);
        }
        Ok(Answer { status, data })
    }

    /// IBA 14.2.4: a port with a non-zero M_Key takes a Set only with that
    /// key. A Get with a wrong key is answered at protection level 0,
    /// answered with PortInfo.M_Key zeroed at level 1, dropped at levels 2
    /// and 3. Each refused SMP counts in M_KeyViolations and sends trap 256.
    /// Returns whether the M_Key must be hidden in the answer. The lease
    /// period is kept but never runs out: the fabric has no clock.
    fn check_m_key(
        &mut self,
        node: usize,
        port: u8,
        request: &smp::Repr,
    ) -> Result<bool, DropReason> {
        let n = &mut self.nodes[node];
        let key_port = if n.is_switch() { 0 } else { port };
        let Some(p) = n.port_mut(key_port) else {
            return Err(DropReason::BadPort);
        };
        let key = p.info.m_key;
        if key == 0 || request.m_key == key {
            return Ok(false);
        }
        match (request.method, p.info.m_key_protect_bits) {
            (method::GET, 0) => Ok(false),
            (method::GET, 1) => Ok(true),
            _ => {
                p.info.m_key_violations = p.info.m_key_violations.saturating_add(1);
                self.send_trap_256(node, key_port, request);
                Err(DropReason::MKey)
            }
        }
    }

    fn get(&self, node: usize, port: u8, attribute: u16, modifier: u32) -> Result<Data, Refusal> {
        match attribute {
            attr::NODE_INFO => {
                zero_modifier(modifier)?;
                Ok(self.node_info(node, port))
            }
            attr::NODE_DESCRIPTION => {
                zero_modifier(modifier)?;
                Ok(self.nodes[node].description)
            }
            attr::PORT_INFO => {
                let target = self.port_info_target(node, port, modifier)?;
                let mut data = self.port_info(node, target, port);
                let asked_extended = modifier & (1 << 31) != 0;
                if !asked_extended && self.options.ext_speeds_on_request.contains(&self.nodes[node].node_guid) {
                    let mut p = PortInfoPacket::new_unchecked(&mut data[..]);
                    p.set_link_speed_ext_active(0);
                    p.set_link_speed_ext_supported(0);
                    p.set_link_speed_ext_enabled(0);
                    p.set_link_speed_ext2_active(0);
                    p.set_link_speed_ext2_supported(0);
                    p.set_link_speed_ext2_enabled(0);
                }
                Ok(data)
            }
            attr::SWITCH_INFO => {
                zero_modifier(modifier)?;
                let sw = self.nodes[node]
                    .switch
                    .as_ref()
                    .ok_or(Refusal::MethodAttribute)?;
                let mut data = [0; DATA_LEN];
                sw.info
                    .emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
                Ok(data)
            }
            attr::LINEAR_FORWARDING_TABLE => {
                let block = self.lft_block_number(node, modifier)?;
                let sw = self.nodes[node]
                    .switch
                    .as_ref()
                    .ok_or(Refusal::MethodAttribute)?;
                let mut data = [0; DATA_LEN];
                data[..LFT_BLOCK_LEN].copy_from_slice(&sw.lft_block(block));
                Ok(data)
            }
            attr::MULTICAST_FORWARDING_TABLE => {
                let m = self.mft_modifier(node, modifier)?;
                let sw = self.nodes[node]
                    .switch
                    .as_ref()
                    .ok_or(Refusal::MethodAttribute)?;
                let mut data = [0; DATA_LEN];
                for (i, mask) in sw.mft_block(m.block, m.position).iter().enumerate() {
                    data[2 * i..2 * i + 2].copy_from_slice(&mask.to_be_bytes());
                }
                Ok(data)
            }
            attr::SL_TO_VL_MAPPING_TABLE => {
                let table = match &self.nodes[node].switch {
                    Some(sw) => {
                        let m = Sl2VlModifier::from_u32(modifier).map_err(|_| Refusal::Value)?;
                        if m.all_input_ports || m.all_output_ports {
                            return Err(Refusal::Value);
                        }
                        self.switch_port(node, m.input_port)?;
                        self.switch_port(node, m.output_port)?;
                        sw.sl2vl(m.input_port, m.output_port)
                    }
                    // CAs keep one table per port, the one asked through.
                    None => self.ca_port(node, port)?.sl2vl,
                };
                let mut data = [0; DATA_LEN];
                sl2vl::Repr { vl_by_sl: table }
                    .emit(&mut sl2vl::Packet::new_unchecked(&mut data[..]));
                Ok(data)
            }
            attr::VL_ARBITRATION_TABLE => {
                let (target, high, offset) = self.vlarb_target(node, port, modifier)?;
                let p = &self.nodes[node].ports[usize::from(target)];
                let table = if high { &p.vlarb_high } else { &p.vlarb_low };
                let mut entries = [Default::default(); ENTRIES];
                entries.copy_from_slice(&table[offset..offset + ENTRIES]);
                let mut data = [0; DATA_LEN];
                vlarb::Repr { entries }.emit(&mut vlarb::Packet::new_unchecked(&mut data[..]));
                Ok(data)
            }
            attr::P_KEY_TABLE => {
                let (target, first) = self.pkey_block(node, port, modifier)?;
                let table = &self.nodes[node].ports[usize::from(target)].pkeys;
                let mut data = [0; DATA_LEN];
                for (i, pkey) in table.iter().skip(first).take(PKEYS_PER_BLOCK).enumerate() {
                    data[2 * i..2 * i + 2].copy_from_slice(&pkey.to_be_bytes());
                }
                Ok(data)
            }
            attr::GUID_INFO => {
                let (target, first) = self.guid_block(node, port, modifier)?;
                let table = &self.nodes[node].ports[usize::from(target)].guids;
                let mut block = guid_info::Repr::default();
                for (slot, &g) in block.guids.iter_mut().zip(table.iter().skip(first)) {
                    *slot = g;
                }
                let mut data = [0; DATA_LEN];
                block.emit(&mut guid_info::Packet::new_unchecked(&mut data[..]));
                Ok(data)
            }
            attr::SM_INFO => {
                let target = self.sm_info_port(node, port)?;
                let info = self.nodes[node].ports[usize::from(target)]
                    .sm_info
                    .ok_or(Refusal::MethodAttribute)?;
                let mut data = [0; DATA_LEN];
                info.emit(&mut sm_mad::SmInfoPacket::new_unchecked(&mut data[..]));
                Ok(data)
            }
            _ => Err(Refusal::MethodAttribute),
        }
    }

    fn set(&mut self, node: usize, port: u8, request: &smp::Repr) -> Result<Data, Refusal> {
        let modifier = request.attribute_modifier;
        let data = &request.data;
        match request.attribute_id {
            attr::PORT_INFO => self.set_port_info(node, port, modifier, data)?,
            attr::SWITCH_INFO => self.set_switch_info(node, modifier, data)?,
            attr::LINEAR_FORWARDING_TABLE => {
                let block = self.lft_block_number(node, modifier)?;
                let sw = self.nodes[node]
                    .switch
                    .as_mut()
                    .ok_or(Refusal::MethodAttribute)?;
                let mut ports = [0; LFT_BLOCK_LEN];
                ports.copy_from_slice(&data[..LFT_BLOCK_LEN]);
                sw.set_lft_block(block, &ports);
            }
            attr::MULTICAST_FORWARDING_TABLE => {
                let m = self.mft_modifier(node, modifier)?;
                let sw = self.nodes[node]
                    .switch
                    .as_mut()
                    .ok_or(Refusal::MethodAttribute)?;
                let mut masks = [0u16; MFT_BLOCK_LEN];
                for (i, mask) in masks.iter_mut().enumerate() {
                    *mask = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
                }
                sw.set_mft_block(m.block, m.position, &masks);
            }
            attr::SL_TO_VL_MAPPING_TABLE => {
                let table = sl2vl::Repr::parse(&sl2vl::Packet::new_unchecked(&data[..]))
                    .map_err(|_| Refusal::Value)?
                    .vl_by_sl;
                self.set_sl2vl(node, port, modifier, table)?;
                // The all-ports bits name no single table to read back.
                let mut data = [0; DATA_LEN];
                sl2vl::Repr { vl_by_sl: table }
                    .emit(&mut sl2vl::Packet::new_unchecked(&mut data[..]));
                return Ok(data);
            }
            attr::VL_ARBITRATION_TABLE => {
                let (target, high, offset) = self.vlarb_target(node, port, modifier)?;
                let entries = vlarb::Repr::parse(&vlarb::Packet::new_unchecked(&data[..]))
                    .map_err(|_| Refusal::Value)?
                    .entries;
                let p = &mut self.nodes[node].ports[usize::from(target)];
                let table = if high {
                    &mut p.vlarb_high
                } else {
                    &mut p.vlarb_low
                };
                table[offset..offset + ENTRIES].copy_from_slice(&entries);
            }
            attr::P_KEY_TABLE => {
                let (target, first) = self.pkey_block(node, port, modifier)?;
                let table = &mut self.nodes[node].ports[usize::from(target)].pkeys;
                for (i, pkey) in table
                    .iter_mut()
                    .skip(first)
                    .take(PKEYS_PER_BLOCK)
                    .enumerate()
                {
                    *pkey = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
                }
            }
            attr::GUID_INFO => {
                let (target, first) = self.guid_block(node, port, modifier)?;
                let block = guid_info::Repr::parse(&guid_info::Packet::new_unchecked(&data[..]))
                    .map_err(|_| Refusal::Value)?;
                let table = &mut self.nodes[node].ports[usize::from(target)].guids;
                for (i, (slot, &g)) in table.iter_mut().skip(first).zip(block.guids.iter()).enumerate() {
                    // Index 0 is the port GUID: read-only (IBA 14.2.5.5).
                    if first + i != 0 {
                        *slot = g;
                    }
                }
            }
            attr::SM_INFO => {
                let state = match modifier {
                    control::HANDOVER => Some(SmState::Master),
                    control::ACKNOWLEDGE => None,
                    control::DISABLE => Some(SmState::NotActive),
                    control::STANDBY => Some(SmState::Standby),
                    control::DISCOVER => Some(SmState::Discovering),
                    _ => return Err(Refusal::Value),
                };
                let target = self.sm_info_port(node, port)?;
                let p = self.nodes[node].port_mut(target).ok_or(Refusal::Value)?;
                let info = p.sm_info.as_mut().ok_or(Refusal::MethodAttribute)?;
                if let Some(state) = state {
                    info.state = state;
                }
            }
            // NodeInfo and NodeDescription are read-only; the rest unknown.
            _ => return Err(Refusal::MethodAttribute),
        }
        self.get(node, port, request.attribute_id, modifier)
    }

    fn node_info(&self, node: usize, port: u8) -> Data {
        let (node, port) = self.impostors.get(&node).copied().unwrap_or((node, port));
        let n = &self.nodes[node];
        let (node_type, device_id) = match n.kind {
            NodeKind::Switch => (NodeType::Switch, self.options.switch_device_id),
            NodeKind::Ca => (NodeType::Ca, self.options.ca_device_id),
            NodeKind::Router => (NodeType::Router, self.options.ca_device_id),
            // The simulator only builds nodes from topology files, which name
            // the three kinds; anything else answers as a CA would.
            _ => (NodeType::Ca, self.options.ca_device_id),
        };
        // A switch's ports all answer with port 0's GUID.
        let port_guid = n.address_port(port).map_or(0, |p| p.guid);
        let repr = NodeInfoRepr {
            base_version: 1,
            class_version: 1,
            node_type,
            num_ports: n.num_ports,
            system_image_guid: n.sys_guid,
            node_guid: n.node_guid,
            port_guid,
            partition_cap: if n.is_switch() {
                SWITCH_PARTITION_CAP
            } else {
                CA_PARTITION_CAP
            },
            device_id,
            revision: 0,
            local_port_num: port,
            vendor_id: self.options.vendor_id,
        };
        let mut data = [0; DATA_LEN];
        repr.emit(&mut node_info::Packet::new_unchecked(&mut data[..]));
        data
    }

    /// The port a PortInfo modifier names. On a CA, 0 means the port the
    /// SMP came in by (IBA 14.2.5.6). Bit 31 is ignored: some SMs set it
    /// to ask for extended fields this SMA does not have.
    fn port_info_target(&self, node: usize, port: u8, modifier: u32) -> Result<u8, Refusal> {
        let n = &self.nodes[node];
        let wanted = modifier & 0x7FFF_FFFF;
        if wanted > u32::from(n.num_ports) {
            return Err(Refusal::Value);
        }
        let wanted = wanted as u8;
        Ok(if wanted == 0 && !n.is_switch() {
            port
        } else {
            wanted
        })
    }

    /// PortInfo of `target` on `node`, asked through `via`.
    fn port_info(&self, node: usize, target: u8, via: u8) -> Data {
        let n = &self.nodes[node];
        let p = &n.ports[usize::from(target)];
        let mut info = p.info;
        if p.role == PortRole::SwitchExternal {
            // A switch has one set of addresses, on port 0.
            let port0 = &n.ports[0].info;
            info.m_key = port0.m_key;
            info.m_key_protect_bits = port0.m_key_protect_bits;
            info.m_key_lease_period = port0.m_key_lease_period;
            info.lid = port0.lid;
            info.lmc = port0.lmc;
            info.master_sm_lid = port0.master_sm_lid;
            info.master_sm_sl = port0.master_sm_sl;
        }
        info.local_port_num = via;
        info.port_state = p.state;
        info.port_physical_state = self.phys_state(node, target);
        let (width, speed) = self.trained(node, target);
        info.link_width_active = sm_mad::speed::width_bit(width);
        let bits = sm_mad::speed::active_bits(speed);
        (info.link_speed_active, info.link_speed_ext_active, info.link_speed_ext2_active) = (bits.base, bits.ext, bits.ext2);
        let mut data = [0; DATA_LEN];
        info.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
        data
    }

    /// The width (lanes) and lane speed (2.5 Gb/s units) `port` of `node`
    /// runs at: its cable's, or, where an end was given a generation or a
    /// width, the best both ends support and enable (as links train).
    fn trained(&self, node: usize, port: u8) -> (u8, u8) {
        let p = &self.nodes[node].ports[usize::from(port)];
        let peer = self
            .link_at(node, port)
            .and_then(|l| self.links.get(l))
            .map(|l| l.other_end((node, port)))
            .and_then(|(n, q)| self.nodes.get(n)?.port(q));
        let Some(q) = peer else { return (p.width, p.speed) };
        let speed = if p.trains_speed || q.trains_speed {
            let all = sm_mad::speed::SpeedCaps::ALL;
            let common = sm_mad::speed::usable(&p.info, all).common(sm_mad::speed::usable(&q.info, all));
            common.fastest().map_or(p.speed, sm_mad::speed::LaneSpeed::units)
        } else {
            p.speed
        };
        let width = if p.trains_width || q.trains_width {
            let both = p.info.link_width_enabled & p.info.link_width_supported & q.info.link_width_enabled & q.info.link_width_supported;
            match sm_mad::speed::widest(both) {
                0 => p.width,
                w => w,
            }
        } else {
            p.width
        };
        (width, speed)
    }

    fn phys_state(&self, node: usize, port: u8) -> PhysState {
        let n = &self.nodes[node];
        match n.port(port) {
            Some(p) if p.role == PortRole::SwitchPort0 => PhysState::LinkUp,
            Some(p) if p.disabled => PhysState::Disabled,
            Some(_) if self.link_at(node, port).is_some_and(|l| self.link_is_up(l)) => {
                PhysState::LinkUp
            }
            _ => PhysState::Polling,
        }
    }

    fn set_port_info(
        &mut self,
        node: usize,
        port: u8,
        modifier: u32,
        data: &Data,
    ) -> Result<(), Refusal> {
        let target = self.port_info_target(node, port, modifier)?;
        let n = &self.nodes[node];
        if !n.is_switch() && target != port {
            // Each CA port is managed through itself.
            return Err(Refusal::Value);
        }
        let current = &n.ports[usize::from(target)];
        let role = current.role;
        let req = PortInfoPacket::new_unchecked(&data[..]);

        let state = match req.port_state() {
            0 => None,
            1 if role != PortRole::SwitchPort0 => Some(PortState::Down),
            3 if matches!(current.state, PortState::Init | PortState::Armed) => {
                Some(PortState::Armed)
            }
            4 if matches!(current.state, PortState::Armed | PortState::Active) => {
                Some(PortState::Active)
            }
            // Init is the link's doing, never the SM's; the rest are
            // transitions IBA does not allow from the current state.
            _ => return Err(Refusal::Value),
        };
        let enable = match (req.port_physical_state(), role) {
            (0, _) => None,
            (2, PortRole::Ca | PortRole::SwitchExternal) => Some(true),
            (3, PortRole::Ca | PortRole::SwitchExternal) => Some(false),
            _ => return Err(Refusal::Value),
        };
        let addressed = role != PortRole::SwitchExternal;
        if addressed
            && (req.lid() >= FIRST_MULTICAST_LID || req.master_sm_lid() >= FIRST_MULTICAST_LID)
        {
            return Err(Refusal::Value);
        }
        let info = &current.info;
        // IBA: OperationalVLs and NeighborMTU are taken only while the
        // port is Init; in any other state a Set leaves them.
        let in_init = current.state == PortState::Init;
        let operational_vls = match req.operational_vls() {
            _ if !in_init => info.operational_vls,
            0 => info.operational_vls,
            v if v <= info.vl_cap => v,
            _ => return Err(Refusal::Value),
        };
        let neighbor_mtu = match req.neighbor_mtu() {
            _ if !in_init => info.neighbor_mtu,
            0 => info.neighbor_mtu,
            v if v <= info.mtu_cap => v,
            _ => return Err(Refusal::Value),
        };
        let width_enabled = enabled_subset(
            req.link_width_enabled(),
            info.link_width_supported,
            link_width::SET_TO_SUPPORTED,
        )
        .ok_or(Refusal::Value)?
        .unwrap_or(info.link_width_enabled);
        let speed_enabled = enabled_subset(
            req.link_speed_enabled(),
            info.link_speed_supported,
            link_speed::SET_TO_SUPPORTED,
        )
        .ok_or(Refusal::Value)?
        .unwrap_or(info.link_speed_enabled);
        // 30 turns extended speeds off (IBA 1.3); 31 enables all supported.
        let ext_enabled = match req.link_speed_ext_enabled() {
            0 => info.link_speed_ext_enabled,
            30 => 0,
            31 => info.link_speed_ext_supported,
            v if v & !info.link_speed_ext_supported == 0 => v,
            _ => return Err(Refusal::Value),
        };
        // LinkSpeedExtEnabled2 (XDR): 0 leaves it; otherwise a subset of
        // what the port supports.
        let ext2_enabled = match req.link_speed_ext2_enabled() {
            0 => info.link_speed_ext2_enabled,
            v if v & !info.link_speed_ext2_supported == 0 => v,
            _ => return Err(Refusal::Value),
        };

        if req.client_reregister()
            && role == PortRole::Ca
            && current.info.capability_mask & sm_mad::port_info::capability::IS_CLIENT_REREGISTRATION_SUPPORTED != 0
        {
            // An event for the port's clients; the bit itself is not kept.
            self.counters.client_reregistrations += 1;
        }
        let p = &mut self.nodes[node].ports[usize::from(target)];
        let info = &mut p.info;
        if addressed {
            info.m_key = req.m_key();
            info.m_key_protect_bits = req.m_key_protect_bits();
            info.m_key_lease_period = req.m_key_lease_period();
            info.gid_prefix = req.gid_prefix();
            info.lid = req.lid();
            info.master_sm_lid = req.master_sm_lid();
            info.master_sm_sl = req.master_sm_sl();
            // Base switch port 0 has exactly one LID.
            info.lmc = if role == PortRole::Ca { req.lmc() } else { 0 };
            info.subnet_timeout = req.subnet_timeout();
        }
        info.operational_vls = operational_vls;
        info.neighbor_mtu = neighbor_mtu;
        info.link_width_enabled = width_enabled;
        info.link_speed_enabled = speed_enabled;
        info.link_speed_ext_enabled = ext_enabled;
        info.link_speed_ext2_enabled = ext2_enabled;
        info.link_down_default_state = match req.link_down_default_state() {
            0 => info.link_down_default_state,
            v => v,
        };
        info.vl_high_limit = req.vl_high_limit();
        info.hoq_life = req.hoq_life();
        info.vl_stall_count = req.vl_stall_count();
        info.init_type_reply = req.init_type_reply();
        info.partition_enforcement_inbound = req.partition_enforcement_inbound();
        info.partition_enforcement_outbound = req.partition_enforcement_outbound();
        info.filter_raw_inbound = req.filter_raw_inbound();
        info.filter_raw_outbound = req.filter_raw_outbound();
        info.local_phy_errors = req.local_phy_errors();
        info.overrun_errors = req.overrun_errors();
        // Writing the violation counters is how an SM resets them.
        info.m_key_violations = req.m_key_violations();
        info.p_key_violations = req.p_key_violations();
        info.q_key_violations = req.q_key_violations();

        if let Some(enable) = enable {
            self.set_port_enabled(node, target, enable);
        }
        match state {
            Some(PortState::Down) => self.bounce_port(node, target),
            Some(state) => {
                if let Some(p) = self.nodes[node].port_mut(target) {
                    // A Disabled in the same Set may have taken the link.
                    if p.state != PortState::Down {
                        p.state = state;
                    }
                }
            }
            None => {}
        }
        Ok(())
    }

    fn set_switch_info(&mut self, node: usize, modifier: u32, data: &Data) -> Result<(), Refusal> {
        zero_modifier(modifier)?;
        let n = &mut self.nodes[node];
        let num_ports = n.num_ports;
        let sw = n.switch.as_mut().ok_or(Refusal::MethodAttribute)?;
        let req = switch_info::Packet::new_unchecked(&data[..]);
        let top = req.linear_fdb_top();
        if u32::from(top) >= u32::from(sw.info.linear_fdb_cap) || top >= FIRST_MULTICAST_LID {
            return Err(Refusal::Value);
        }
        let ports = [
            req.default_port(),
            req.default_multicast_primary_port(),
            req.default_multicast_not_primary_port(),
        ];
        if ports.iter().any(|&p| p > num_ports) {
            return Err(Refusal::Value);
        }
        let mcast_top = req.multicast_fdb_top();
        if u32::from(mcast_top)
            >= u32::from(FIRST_MULTICAST_LID) + u32::from(sw.info.multicast_fdb_cap)
        {
            return Err(Refusal::Value);
        }
        sw.info.linear_fdb_top = top;
        sw.info.default_port = ports[0];
        sw.info.default_multicast_primary_port = ports[1];
        sw.info.default_multicast_not_primary_port = ports[2];
        sw.info.life_time_value = req.life_time_value();
        sw.info.multicast_fdb_top = mcast_top;
        // Write one to clear: a Set that carries 0 leaves it alone.
        if req.port_state_change() {
            sw.info.port_state_change = false;
        }
        Ok(())
    }

    fn lft_block_number(&self, node: usize, modifier: u32) -> Result<u16, Refusal> {
        let sw = self.nodes[node]
            .switch
            .as_ref()
            .ok_or(Refusal::MethodAttribute)?;
        let block = LftRepr::parse_modifier(modifier).map_err(|_| Refusal::Value)?;
        if usize::from(block) * LFT_BLOCK_LEN >= usize::from(sw.info.linear_fdb_cap) {
            return Err(Refusal::Value);
        }
        Ok(block)
    }

    fn mft_modifier(&self, node: usize, modifier: u32) -> Result<MftModifier, Refusal> {
        let n = &self.nodes[node];
        let sw = n.switch.as_ref().ok_or(Refusal::MethodAttribute)?;
        let m = MftModifier::from_u32(modifier).map_err(|_| Refusal::Value)?;
        if usize::from(m.block) * MFT_BLOCK_LEN >= usize::from(sw.info.multicast_fdb_cap)
            || u16::from(m.position) * 16 > u16::from(n.num_ports)
        {
            return Err(Refusal::Value);
        }
        Ok(m)
    }

    fn switch_port(&self, node: usize, port: u8) -> Result<(), Refusal> {
        if port > self.nodes[node].num_ports {
            Err(Refusal::Value)
        } else {
            Ok(())
        }
    }

    fn ca_port(&self, node: usize, port: u8) -> Result<&super::state::Port, Refusal> {
        match self.nodes[node].port(port) {
            Some(p) if port != 0 => Ok(p),
            _ => Err(Refusal::Value),
        }
    }

    fn set_sl2vl(
        &mut self,
        node: usize,
        port: u8,
        modifier: u32,
        table: [u8; SLS],
    ) -> Result<(), Refusal> {
        let num_ports = self.nodes[node].num_ports;
        let Some(sw) = self.nodes[node].switch.as_mut() else {
            if port == 0 {
                return Err(Refusal::Value);
            }
            let p = self.nodes[node].port_mut(port).ok_or(Refusal::Value)?;
            p.sl2vl = table;
            return Ok(());
        };
        let m = Sl2VlModifier::from_u32(modifier).map_err(|_| Refusal::Value)?;
        let range = |all: bool, one: u8| {
            if all {
                Ok(0..=num_ports)
            } else if one <= num_ports {
                Ok(one..=one)
            } else {
                Err(Refusal::Value)
            }
        };
        let inputs = range(m.all_input_ports, m.input_port)?;
        let outputs = range(m.all_output_ports, m.output_port)?;
        for input in inputs {
            for output in outputs.clone() {
                sw.set_sl2vl(input, output, table);
            }
        }
        Ok(())
    }

    /// The port, table (high or not) and first entry a VLArbitrationTable
    /// modifier names. Switches name the output port; a CA's table is the
    /// one of the port asked through.
    fn vlarb_target(
        &self,
        node: usize,
        port: u8,
        modifier: u32,
    ) -> Result<(u8, bool, usize), Refusal> {
        let m = VlArbModifier::from_u32(modifier).map_err(|_| Refusal::Value)?;
        let n = &self.nodes[node];
        let target = if n.is_switch() {
            // Base switch port 0 arbitrates nothing.
            match u8::try_from(m.port) {
                Ok(p) if p >= 1 && p <= n.num_ports => p,
                _ => return Err(Refusal::Value),
            }
        } else {
            self.ca_port(node, port)?;
            port
        };
        let (high, offset) = match m.block {
            VlArbBlock::Low0 => (false, 0),
            VlArbBlock::Low32 => (false, 32),
            VlArbBlock::High0 => (true, 0),
            VlArbBlock::High32 => (true, 32),
        };
        let info = &n.ports[usize::from(target)].info;
        let cap = if high {
            info.vl_arbitration_high_cap
        } else {
            info.vl_arbitration_low_cap
        };
        if offset >= usize::from(cap) || offset + ENTRIES > VLARB_ENTRIES {
            return Err(Refusal::Value);
        }
        Ok((target, high, offset))
    }

    /// The port and first entry a P_KeyTable modifier names: bits 15..0
    /// the block, bits 31..16 the port on a switch (ignored on a CA, whose
    /// table is the one of the port asked through).
    fn pkey_block(&self, node: usize, port: u8, modifier: u32) -> Result<(u8, usize), Refusal> {
        let n = &self.nodes[node];
        let target = if n.is_switch() {
            u8::try_from(modifier >> 16)
                .ok()
                .filter(|&p| p <= n.num_ports)
                .ok_or(Refusal::Value)?
        } else {
            self.ca_port(node, port)?;
            port
        };
        let first = usize::from(modifier as u16) * PKEYS_PER_BLOCK;
        if first >= n.ports[usize::from(target)].pkeys.len() {
            return Err(Refusal::Value);
        }
        Ok((target, first))
    }

    /// The port and first entry a GUIDInfo modifier names: the block, of
    /// port 0 on a switch, of the port asked through on a CA; a block
    /// beyond the port's GUIDCap is refused.
    fn guid_block(&self, node: usize, port: u8, modifier: u32) -> Result<(u8, usize), Refusal> {
        let target = if self.nodes[node].is_switch() {
            0
        } else {
            self.ca_port(node, port)?;
            port
        };
        let block = guid_info::from_modifier(modifier).map_err(|_| Refusal::Value)?;
        let first = usize::from(block) * guid_info::GUIDS;
        if first >= self.nodes[node].ports[usize::from(target)].guids.len() {
            return Err(Refusal::Value);
        }
        Ok((target, first))
    }

    /// The port whose SM answers SMInfo: port 0 on a switch, the port asked
    /// through on a CA.
    fn sm_info_port(&self, node: usize, port: u8) -> Result<u8, Refusal> {
        let n = &self.nodes[node];
        let target = if n.is_switch() { 0 } else { port };
        match n.port(target) {
            Some(p) if p.sm_info.is_some() => Ok(target),
            // No SM behind this port: the attribute does not exist here.
            _ => Err(Refusal::MethodAttribute),
        }
    }
}

/// NodeInfo, NodeDescription and SwitchInfo have no modifier; anything
/// else in it is a malformed request.
fn zero_modifier(modifier: u32) -> Result<(), Refusal> {
    if modifier == 0 {
        Ok(())
    } else {
        Err(Refusal::Value)
    }
}

/// A LinkWidthEnabled/LinkSpeedEnabled value: `Some(None)` leaves it,
/// `Some(Some(v))` sets it, `None` is invalid (not a subset of what the
/// port supports).
fn enabled_subset(value: u8, supported: u8, all: u8) -> Option<Option<u8>> {
    match value {
        0 => Some(None),
        v if v == all => Some(Some(supported)),
        v if v & !supported == 0 => Some(Some(v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enabled_subsets() {
        assert_eq!(enabled_subset(0, 3, 0xFF), Some(None));
        assert_eq!(enabled_subset(0xFF, 3, 0xFF), Some(Some(3)));
        assert_eq!(enabled_subset(2, 3, 0xFF), Some(Some(2)));
        assert_eq!(enabled_subset(4, 3, 0xFF), None);
    }

    #[test]
    fn refusal_statuses() {
        assert_eq!(Refusal::Method.status(), 0x0008);
        assert_eq!(Refusal::MethodAttribute.status(), 0x000C);
        assert_eq!(Refusal::Value.status(), 0x001C);
        assert!(zero_modifier(1).is_err());
    }
}
