//! The state every simulated SMA answers from, and the state a node powers
//! up with.

use sm_abi::NodeKind;
use sm_mad::forwarding::{LFT_BLOCK_LEN, MFT_BLOCK_LEN, NO_ROUTE};
use sm_mad::port_info::{capability, capability2, link_width};
use sm_mad::speed::{width_bit, LaneSpeed, SpeedBits};
use sm_mad::sl2vl::SLS;
use sm_mad::{PhysState, PortInfoRepr, PortState, SmInfoRepr, SwitchInfoRepr, VlArbEntry};
use sm_topology::model::{DEFAULT_SPEED, DEFAULT_WIDTH};
use sm_topology::TopoNode;

use super::SimOptions;

/// Entries of each VL arbitration table a port stores: the most IBA
/// allows, whatever the advertised caps, so that a cap change needs no
/// reallocation.
pub(super) const VLARB_ENTRIES: usize = 64;

/// HOQLife a port resets to: infinite, head-of-queue discard off.
pub(super) const RESET_HOQ_LIFE: u8 = 0x1f;

/// The default GID prefix (IBA 4.1.1: link-local).
const DEFAULT_GID_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// RespTimeValue: 4.096 µs × 2^8 ≈ 1 ms, ample for an in-process SMA.
const RESP_TIME_VALUE: u8 = 8;

/// NodeInfo.PartitionCap of CAs and of switches (their port 0).
pub(super) const CA_PARTITION_CAP: u16 = 128;
pub(super) const SWITCH_PARTITION_CAP: u16 = 8;

/// A P_Key table as adapters power up: the default partition, full
/// membership, in entry 0.
fn default_pkeys(cap: u16) -> Vec<u16> {
    let mut table = vec![0; usize::from(cap)];
    table[0] = 0xFFFF;
    table
}

/// The generation a node supports when it is given none: NDR, or XDR
/// when the topology says one of its cables runs at XDR (every port of
/// the node alike: a switch says its capabilities on port 0).
fn default_top_speed(rates: &[(u8, u8)]) -> LaneSpeed {
    rates.iter().filter_map(|&(_, s)| LaneSpeed::from_units(s)).fold(LaneSpeed::Ndr, LaneSpeed::max)
}

/// One node as its SMA sees it.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub kind: NodeKind,
    /// False after [`super::SimFabric::remove_node`]: the node neither
    /// answers nor forwards, and its links are dark.
    pub present: bool,
    pub num_ports: u8,
    pub node_guid: u64,
    pub sys_guid: u64,
    pub description: [u8; 64],
    /// Indexed by port number; a CA's entry 0 is a placeholder so that
    /// port numbers index directly.
    pub ports: Vec<Port>,
    pub switch: Option<Switch>,
}

impl Node {
    /// The node as it powers up: no LIDs, empty tables, every port Down
    /// until the fabric trains its links.
    pub fn power_up(
        topo: &TopoNode,
        rates: &[(u8, u8)],
        options: &SimOptions,
        sm_port: Option<u8>,
    ) -> Self {
        let is_switch = topo.kind == NodeKind::Switch;
        let ports = (0..=topo.num_ports)
            .map(|p| {
                let (width, speed) = rates
                    .get(usize::from(p))
                    .copied()
                    .unwrap_or((DEFAULT_WIDTH, DEFAULT_SPEED));
                let role = match (is_switch, p) {
                    (true, 0) => PortRole::SwitchPort0,
                    (true, _) => PortRole::SwitchExternal,
                    (false, _) => PortRole::Ca,
                };
                let mut caps = options.caps_of(topo.node_guid);
                let trains_speed = caps.speed.is_some();
                caps.speed = Some(caps.speed.unwrap_or_else(|| default_top_speed(rates)));
                let mut port = Port::power_up(topo.port_guid(p), role, width, speed, options, caps);
                port.trains_speed = trains_speed;
                if sm_port == Some(p) {
                    port.info.capability_mask |= capability::IS_SM;
                    port.sm_info = Some(SmInfoRepr {
                        guid: port.guid,
                        ..SmInfoRepr::default()
                    });
                }
                port
            })
            .collect();
        let mut description = [0u8; 64];
        let text = truncate_utf8(&topo.desc, description.len());
        description[..text.len()].copy_from_slice(text.as_bytes());
        Self {
            kind: topo.kind,
            present: true,
            num_ports: topo.num_ports,
            node_guid: topo.node_guid,
            sys_guid: topo.sys_guid,
            description,
            ports,
            switch: is_switch.then(|| Switch::power_up(topo.num_ports, options)),
        }
    }

    pub fn is_switch(&self) -> bool {
        self.switch.is_some()
    }

    pub fn port(&self, port: u8) -> Option<&Port> {
        self.ports.get(usize::from(port))
    }

    pub fn port_mut(&mut self, port: u8) -> Option<&mut Port> {
        self.ports.get_mut(usize::from(port))
    }

    /// The port whose LID, LMC and M_Key speak for `port`: on a switch
    /// only port 0 has addresses (IBA 14.2.5.6), on a CA every port has
    /// its own.
    pub fn address_port(&self, port: u8) -> Option<&Port> {
        if self.is_switch() {
            self.ports.first()
        } else {
            self.port(port)
        }
    }

    /// Whether `lid` is one of the 2^LMC LIDs of the port a packet
    /// arriving by `port` is addressed to.
    pub fn owns_lid(&self, port: u8, lid: u16) -> bool {
        let Some(p) = self.address_port(port) else {
            return false;
        };
        let base = p.info.lid;
        if base == 0 || lid < base {
            return false;
        }
        u32::from(lid - base) < 1u32 << p.info.lmc.min(7)
    }
}

/// Cuts `text` to at most `max` bytes without splitting a character.
pub(super) fn truncate_utf8(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PortRole {
    Ca,
    SwitchPort0,
    SwitchExternal,
}

/// One port. `info` holds what the SM may set plus the fixed capability
/// fields; the link-derived fields (state, widths, speeds, LocalPortNum)
/// are filled in when a Get is answered, so they cannot go stale.
#[derive(Debug, Clone)]
pub(super) struct Port {
    pub guid: u64,
    pub role: PortRole,
    /// Logical state; [`PortState::Down`] exactly when the link is not up.
    pub state: PortState,
    /// PortPhysicalState set to Disabled by the SM.
    pub disabled: bool,
    /// Lanes and lane speed (2.5 Gb/s units) of the port's cable, or the
    /// fabric default when it has none.
    pub width: u8,
    pub speed: u8,
    /// The node was given a generation or a width (`--sim-caps`): its
    /// links train to the best both ends support and enable, not to the
    /// cable's rate.
    pub trains_speed: bool,
    pub trains_width: bool,
    pub info: PortInfoRepr,
    /// SL to VL on a CA port (switches keep theirs per port pair).
    pub sl2vl: [u8; SLS],
    pub vlarb_high: [VlArbEntry; VLARB_ENTRIES],
    pub vlarb_low: [VlArbEntry; VLARB_ENTRIES],
    /// P_Key table, NodeInfo.PartitionCap entries long (on switch
    /// external ports SwitchInfo.PartitionEnforcementCap, by default 0).
    pub pkeys: Vec<u16>,
    /// GUIDInfo, PortInfo.GUIDCap entries: the port GUID (read-only),
    /// then alias GUIDs (0: unused). None on switch external ports.
    pub guids: Vec<u64>,
    /// SMInfo of an SM behind this port; `None` where no SM runs, and the
    /// SMA then refuses the attribute as real CAs without an SM do.
    pub sm_info: Option<SmInfoRepr>,
    /// What the port's PMA counts (see `gsi`).
    pub pma: super::gsi::PmaCounters,
}

impl Port {
    fn power_up(guid: u64, role: PortRole, width: u8, speed: u8, options: &SimOptions, caps: super::PortCaps) -> Self {
        let widths = match caps.width {
            Some(w) if w >= 4 => link_width::W1X | link_width::W4X | width_bit(w),
            Some(w) => link_width::W1X | width_bit(w),
            None => link_width::W1X | link_width::W4X | width_bit(width),
        };
        let speeds = SpeedBits::up_to(caps.speed.unwrap_or(LaneSpeed::Ndr));
        let mut capability_mask = 0;
        let mut capability_mask2 = 0;
        if speeds.ext != 0 {
            capability_mask |= capability::IS_EXTENDED_SPEEDS_SUPPORTED;
        }
        if speeds.ext2 != 0 {
            capability_mask |= capability::IS_CAPABILITY_MASK2_SUPPORTED;
            capability_mask2 |= capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED | capability2::IS_LINK_SPEED_XDR_SUPPORTED;
        }
        match role {
            PortRole::Ca => {
                capability_mask |= capability::IS_TRAP_SUPPORTED
                    | capability::IS_SL_MAPPING_SUPPORTED
                    | capability::IS_CLIENT_REREGISTRATION_SUPPORTED;
            }
            PortRole::SwitchPort0 => {
                // IsSLMappingSupported as real switches (and ibsim) report it.
                capability_mask |= capability::IS_TRAP_SUPPORTED
                    | capability::IS_MULTICAST_FDB_TOP_SUPPORTED
                    | capability::IS_SL_MAPPING_SUPPORTED;
            }
            PortRole::SwitchExternal => {}
        }
        let info = PortInfoRepr {
            gid_prefix: DEFAULT_GID_PREFIX,
            capability_mask,
            capability_mask2,
            link_width_enabled: widths,
            link_width_supported: widths,
            link_speed_supported: speeds.base,
            link_speed_enabled: speeds.base,
            port_physical_state: PhysState::Polling,
            // Polling: a port whose link drops looks for its peer again.
            link_down_default_state: 2,
            // IBA reset values: one data VL, the smallest MTU, no
            // head-of-queue discard (HOQLife above 19 is infinite); the SM
            // sets them while the port is Init.
            neighbor_mtu: 1,
            mtu_cap: caps.mtu_cap,
            vl_cap: caps.vl_cap,
            operational_vls: 1,
            vl_arbitration_high_cap: options.vl_arb_high_cap,
            vl_arbitration_low_cap: options.vl_arb_low_cap,
            hoq_life: RESET_HOQ_LIFE,
            vl_stall_count: 7,
            guid_cap: guid_table(guid, role, options).len() as u8,
            resp_time_value: RESP_TIME_VALUE,
            link_speed_ext_supported: speeds.ext,
            link_speed_ext_enabled: speeds.ext,
            link_speed_ext2_supported: speeds.ext2,
            link_speed_ext2_enabled: speeds.ext2,
            ..PortInfoRepr::default()
        };
        Self {
            guid,
            role,
            // Switch port 0 is the switch's own management port: there is
            // no link to train, so it is Active from power-up (as ibsim
            // and switches report it).
            state: if role == PortRole::SwitchPort0 {
                PortState::Active
            } else {
                PortState::Down
            },
            disabled: false,
            width,
            speed,
            trains_speed: caps.speed.is_some(),
            trains_width: caps.width.is_some(),
            info,
            sl2vl: [0; SLS],
            vlarb_high: [VlArbEntry::default(); VLARB_ENTRIES],
            vlarb_low: [VlArbEntry::default(); VLARB_ENTRIES],
            pkeys: match role {
                PortRole::Ca => default_pkeys(CA_PARTITION_CAP),
                PortRole::SwitchPort0 => default_pkeys(SWITCH_PARTITION_CAP),
                PortRole::SwitchExternal if options.partition_enforcement_cap == 0 => Vec::new(),
                PortRole::SwitchExternal => default_pkeys(options.partition_enforcement_cap),
            },
            guids: guid_table(guid, role, options),
            sm_info: None,
            pma: super::gsi::PmaCounters::default(),
        }
    }
}

/// A port's GUIDInfo at power-up: its GUID, then unused alias entries up
/// to GUIDCap ([`SimOptions::ca_guid_cap`] on a CA, 1 on switch port 0,
/// none on a switch external port).
fn guid_table(guid: u64, role: PortRole, options: &SimOptions) -> Vec<u64> {
    let cap = match role {
        PortRole::Ca => usize::from(options.ca_guid_cap.max(1)),
        PortRole::SwitchPort0 => 1,
        PortRole::SwitchExternal => 0,
    };
    let mut table = vec![0; cap];
    if let Some(first) = table.first_mut() {
        *first = guid;
    }
    table
}

/// Switch-wide state: SwitchInfo and the forwarding and SL-to-VL tables.
#[derive(Debug, Clone)]
pub(super) struct Switch {
    pub info: SwitchInfoRepr,
    /// LFT entries programmed so far; LIDs past the end read as
    /// [`NO_ROUTE`]. Grown on demand: most fabrics use a few blocks of
    /// the 49,152-entry capacity.
    pub lft: Vec<u8>,
    /// MFT port masks, `mft_positions` per multicast LID, grown on demand.
    pub mft: Vec<u16>,
    pub mft_positions: usize,
    /// SL-to-VL tables per (input, output) port pair, row-major; empty
    /// until the first Set, all pairs at the reset value until then.
    pub sl2vl: Vec<[u8; SLS]>,
    num_ports: u8,
}

impl Switch {
    fn power_up(num_ports: u8, options: &SimOptions) -> Self {
        let info = SwitchInfoRepr {
            linear_fdb_cap: options.linear_fdb_cap,
            multicast_fdb_cap: options.multicast_fdb_cap,
            // 4.096 µs × 2^18 ≈ 1 s, OpenSM's default packet lifetime.
            life_time_value: 18,
            // Bits 16 and 17 of the SL2VL modifier are honoured.
            optimized_sl2vl_programming: 1,
            multicast_fdb_top: 0xBFFF,
            partition_enforcement_cap: options.partition_enforcement_cap,
            inbound_enforcement_cap: options.partition_enforcement_cap != 0,
            outbound_enforcement_cap: options.partition_enforcement_cap != 0,
            ..SwitchInfoRepr::default()
        };
        Self {
            info,
            lft: Vec::new(),
            mft: Vec::new(),
            mft_positions: usize::from(num_ports) / 16 + 1,
            sl2vl: Vec::new(),
            num_ports,
        }
    }

    /// The egress port for `lid` as programmed, [`NO_ROUTE`] if none.
    pub fn lft_entry(&self, lid: u16) -> u8 {
        self.lft.get(usize::from(lid)).copied().unwrap_or(NO_ROUTE)
    }

    pub fn lft_block(&self, block: u16) -> [u8; LFT_BLOCK_LEN] {
        let mut out = [NO_ROUTE; LFT_BLOCK_LEN];
        let start = usize::from(block) * LFT_BLOCK_LEN;
        if let Some(have) = self.lft.get(start..) {
            let n = have.len().min(LFT_BLOCK_LEN);
            out[..n].copy_from_slice(&have[..n]);
        }
        out
    }

    pub fn set_lft_block(&mut self, block: u16, ports: &[u8; LFT_BLOCK_LEN]) {
        let start = usize::from(block) * LFT_BLOCK_LEN;
        if self.lft.len() < start + LFT_BLOCK_LEN {
            self.lft.resize(start + LFT_BLOCK_LEN, NO_ROUTE);
        }
        self.lft[start..start + LFT_BLOCK_LEN].copy_from_slice(ports);
    }

    fn mft_index(&self, block: u16, position: u8, entry: usize) -> usize {
        (usize::from(block) * MFT_BLOCK_LEN + entry) * self.mft_positions + usize::from(position)
    }

    pub fn mft_block(&self, block: u16, position: u8) -> [u16; MFT_BLOCK_LEN] {
        let mut out = [0; MFT_BLOCK_LEN];
        for (entry, mask) in out.iter_mut().enumerate() {
            *mask = self
                .mft
                .get(self.mft_index(block, position, entry))
                .copied()
                .unwrap_or(0);
        }
        out
    }

    pub fn set_mft_block(&mut self, block: u16, position: u8, masks: &[u16; MFT_BLOCK_LEN]) {
        let last = self.mft_index(block, position, MFT_BLOCK_LEN - 1);
        if self.mft.len() <= last {
            self.mft.resize(last + 1, 0);
        }
        for (entry, &mask) in masks.iter().enumerate() {
            let index = self.mft_index(block, position, entry);
            self.mft[index] = mask;
        }
    }

    fn sl2vl_index(&self, input: u8, output: u8) -> usize {
        usize::from(input) * (usize::from(self.num_ports) + 1) + usize::from(output)
    }

    pub fn sl2vl(&self, input: u8, output: u8) -> [u8; SLS] {
        self.sl2vl
            .get(self.sl2vl_index(input, output))
            .copied()
            .unwrap_or([0; SLS])
    }

    pub fn set_sl2vl(&mut self, input: u8, output: u8, table: [u8; SLS]) {
        if self.sl2vl.is_empty() {
            let pairs = (usize::from(self.num_ports) + 1).pow(2);
            self.sl2vl = vec![[0; SLS]; pairs];
        }
        let index = self.sl2vl_index(input, output);
        if let Some(slot) = self.sl2vl.get_mut(index) {
            *slot = table;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lft_grows_on_demand_and_reads_no_route_beyond() {
        let mut sw = Switch::power_up(8, &SimOptions::default());
        assert_eq!(sw.lft_entry(5), NO_ROUTE);
        let mut block = [NO_ROUTE; LFT_BLOCK_LEN];
        block[3] = 7;
        sw.set_lft_block(2, &block);
        assert_eq!(sw.lft.len(), 3 * LFT_BLOCK_LEN);
        assert_eq!(sw.lft_entry(2 * 64 + 3), 7);
        assert_eq!(sw.lft_block(2), block);
        assert_eq!(sw.lft_block(700), [NO_ROUTE; LFT_BLOCK_LEN]);
    }

    #[test]
    fn mft_positions_are_independent() {
        let mut sw = Switch::power_up(20, &SimOptions::default());
        assert_eq!(sw.mft_positions, 2);
        let mut masks = [0u16; MFT_BLOCK_LEN];
        masks[0] = 0x8001;
        sw.set_mft_block(1, 1, &masks);
        assert_eq!(sw.mft_block(1, 1), masks);
        assert_eq!(sw.mft_block(1, 0), [0; MFT_BLOCK_LEN]);
        assert_eq!(sw.mft_block(0, 1), [0; MFT_BLOCK_LEN]);
    }

    #[test]
    fn sl2vl_pairs() {
        let mut sw = Switch::power_up(3, &SimOptions::default());
        let mut t = [0; SLS];
        t[1] = 5;
        sw.set_sl2vl(3, 2, t);
        assert_eq!(sw.sl2vl(3, 2), t);
        assert_eq!(sw.sl2vl(2, 3), [0; SLS]);
        assert_eq!(sw.sl2vl.len(), 16);
    }

    #[test]
    fn description_is_cut_on_a_character_boundary() {
        let text = format!("{}é", "x".repeat(63));
        assert_eq!(truncate_utf8(&text, 64), "x".repeat(63));
        assert_eq!(truncate_utf8("abc", 64), "abc");
    }

    #[test]
    fn lmc_covers_a_range() {
        let topo = TopoNode {
            kind: NodeKind::Ca,
            name: "h".into(),
            desc: "h".into(),
            num_ports: 1,
            node_guid: 0x10,
            sys_guid: 0x10,
            port_guids: vec![0, 0x11],
        };
        let mut node = Node::power_up(&topo, &[], &SimOptions::default(), None);
        assert!(!node.owns_lid(1, 0));
        node.ports[1].info.lid = 8;
        node.ports[1].info.lmc = 2;
        assert!(node.owns_lid(1, 8) && node.owns_lid(1, 11));
        assert!(!node.owns_lid(1, 12) && !node.owns_lid(1, 7));
    }
}
