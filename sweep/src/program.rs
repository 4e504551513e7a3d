//! Programming a routing into the fabric, and bringing ports up.
//!
//! The programming stages of design.md's "Data flow of one sweep" (run in
//! order by [`super::stages`]): SwitchInfo's
//! LinearFDBTop, the LFT blocks that differ from what each switch holds,
//! then every linked port Init → Armed → Active. Everything goes by
//! directed route, because until the LFTs are in and the ports Active no
//! LID-routed SMP gets through.
//!
//! SMPs are the cost that matters (design.md, "Performance principles"), so
//! each phase is counted on its own and nothing is sent that the fabric
//! already holds:
//!
//! * LinearFDBTop is Set only where discovery read another value.
//! * LFT blocks are compared with what the switch holds. An earlier sweep's
//!   writes ([`HeldTables`]) are trusted while the switch still reports the
//!   top that sweep left; otherwise blocks the switch forwards with (those
//!   at or below its current top) are read first, and blocks above it are
//!   written without reading, since a switch drops those LIDs anyway and
//!   reading would cost as much as writing. A switch that comes up with top
//!   0 is therefore programmed with one Set per block and no Get.
//! * Port states are Set only on ports not there yet. All ports are Armed
//!   before any is made Active, because a port may go Active only once its
//!   neighbour has left Init.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sm_abi::{Routing, NO_ROUTE};
use sm_mad::forwarding::{LftPacket, LftRepr, LFT_BLOCK_LEN};
use sm_mad::mad::attr;
use sm_mad::smp::DATA_LEN;
use sm_abi::NodeKind;
use sm_mad::port_info::{link_speed, link_width};
use sm_mad::{PortInfoRepr, PortState, SwitchInfoPacket, SwitchInfoRepr};
use tracing::{debug, warn};

use super::discovery::{parse_port_info, Fabric, FabricMemory};
use super::lids::{LidSet, LidSets, ProgramReport};
use super::pkey::Partitions;
use super::transport::{SmpClient, SmpError, SmpOp, SmpStats};

/// The tables earlier sweeps wrote: LFTs by switch node GUID, SL2VL and
/// VLArb by (node GUID, ports).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldTables {
    switches: HashMap<u64, HeldSwitch>,
    /// SL2VL per (node GUID, input port, output port).
    pub(super) sl2vl: HashMap<(u64, u8, u8), [u8; 16]>,
    /// VLArb blocks per (node GUID, port, block number 1..=4).
    pub(super) vlarb: HashMap<(u64, u8, u16), [(u8, u8); 32]>,
    /// Link parameters last written per (node GUID, port) that the port
    /// answered otherwise (a device that does not keep a field): what was
    /// written and what came back. Not written again while both hold.
    links: HashMap<(u64, u8), ([u8; 10], [u8; 10])>,
    /// The fabric as the last sweep knew it: a node or link whose SMPs are
    /// lost in a sweep is kept from here until proven gone.
    pub memory: FabricMemory,
    /// Partitions in force and the P_Key tables written.
    pub pkeys: super::pkey::HeldPkeys,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct HeldSwitch {
    /// LinearFDBTop left on the switch.
    top: u16,
    /// Blocks `0..=top/64`; `None` where a write failed and the content is
    /// unknown.
    blocks: Vec<Option<[u8; LFT_BLOCK_LEN]>>,
}

impl HeldTables {
    /// Switches known.
    pub fn len(&self) -> usize {
        self.switches.len()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty()
    }

    /// Forgets what node `guid`'s SL2VL and VLArb tables hold.
    pub(super) fn forget_vl_tables(&mut self, guid: u64) {
        self.sl2vl.retain(|k, _| k.0 != guid);
        self.vlarb.retain(|k, _| k.0 != guid);
    }
}

/// Sets of one phase: how many took effect, were not needed, failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseReport {
    /// Sets that took effect.
    pub set: usize,
    /// Items that already held what was wanted (no Set).
    pub unchanged: usize,
    /// Items read to learn what they hold.
    pub read: usize,
    /// Sets or reads that failed or did not take effect (logged).
    pub failed: usize,
    /// SMPs of the phase.
    pub smps: SmpStats,
}

/// What [`program_routing`] and [`activate_ports`] did, per phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingProgramReport {
    /// Link parameters (OperationalVLs, NeighborMTU, HOQLife, ...), per
    /// port; written before routing.
    pub link: PhaseReport,
    /// SwitchInfo (LinearFDBTop), per switch.
    pub switch_info: PhaseReport,
    /// LFT blocks.
    pub lft: PhaseReport,
    /// SL2VL tables (per node and port pair).
    pub sl2vl: PhaseReport,
    /// VL arbitration blocks.
    pub vlarb: PhaseReport,
    /// Ports Init → Armed.
    pub arm: PhaseReport,
    /// Ports Armed → Active.
    pub activate: PhaseReport,
    /// P_Key blocks and partition enforcement (per block or port).
    pub pkey: PhaseReport,
}

impl RoutingProgramReport {
    /// SMPs of all phases.
    pub fn total_smps(&self) -> u64 {
        self.link.smps.sent
            + self.switch_info.smps.sent
            + self.lft.smps.sent
            + self.sl2vl.smps.sent
            + self.vlarb.smps.sent
            + self.arm.smps.sent
            + self.activate.smps.sent
            + self.pkey.smps.sent
    }
}

/// The 64 entries of block `block` as `routing` wants them, with every LID
/// above `top` dropped (the switch would drop them anyway; writing them as
/// such keeps the comparison with what it holds exact).
fn wanted_block(ports: &[u8], block: u16, top: u16) -> [u8; LFT_BLOCK_LEN] {
    let mut out = [NO_ROUTE; LFT_BLOCK_LEN];
    let first = usize::from(block) * LFT_BLOCK_LEN;
    for (i, slot) in out.iter_mut().enumerate() {
        let lid = first + i;
        if lid <= usize::from(top) {
            if let Some(&p) = ports.get(lid) {
                *slot = p;
            }
        }
    }
    out
}

fn parse_lft(data: &[u8; DATA_LEN]) -> Result<[u8; LFT_BLOCK_LEN], SmpError> {
    LftPacket::new_checked(&data[..])
        .and_then(|p| LftRepr::parse(&p))
        .map(|r| r.ports)
        .map_err(|e| SmpError::Malformed(format!("LFT block: {e}")))
}

fn parse_switch_info(data: &[u8; DATA_LEN]) -> Result<SwitchInfoRepr, SmpError> {
    SwitchInfoPacket::new_checked(&data[..])
        .and_then(|p| SwitchInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("SwitchInfo: {e}")))
}

/// Writes `routing`'s LFTs into the switches of `fabric` (node `i` of the
/// snapshot the routing was computed on is node `i` of `fabric`), with
/// LinearFDBTop `max_lid`. Fills the SwitchInfo and LFT phases of the
/// report; `held` is read and updated.
pub fn program_routing(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    routing: &Routing,
    max_lid: u16,
    held: &mut HeldTables,
    report: &mut RoutingProgramReport,
) {
    let before = client.stats().clone();
    // Per routed switch: (node, top it held before this sweep, top it
    // holds now as far as we know).
    let mut targets: Vec<(usize, u16, Option<u16>)> = Vec::new();
    // SwitchInfo Sets, all in flight together: (node, old top).
    let mut top_sets: Vec<(usize, u16)> = Vec::new();
    let mut ops = Vec::new();
    for lft in routing.lfts.iter() {
        let node = lft.node as usize;
        let Some(n) = fabric.nodes.get(node).filter(|n| n.is_switch()) else {
            warn!(node, "routing has an LFT for a node that is not a discovered switch; ignored");
            continue;
        };
        let Some(info) = n.switch_info else {
            warn!(guid = format_args!("{:#018x}", n.guid), "SwitchInfo unknown; LFT not programmed");
            report.switch_info.failed += 1;
            continue;
        };
        let old_top = info.linear_fdb_top;
        if old_top == max_lid {
            report.switch_info.unchanged += 1;
            targets.push((node, old_top, Some(max_lid)));
            continue;
        }
        let mut want = info;
        want.linear_fdb_top = max_lid;
        // PortStateChange is write-one-to-clear: writing back a set bit
        // would hide a change the next light sweep must see.
        want.port_state_change = false;
        let mut data = [0u8; DATA_LEN];
        want.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
        ops.push(SmpOp::set(attr::SWITCH_INFO, 0, &n.path, data));
        top_sets.push((node, old_top));
    }
    let answers = client.run_many(&ops);
    for ((node, old_top), answer) in top_sets.into_iter().zip(answers) {
        let guid = fabric.nodes[node].guid;
        let now = match answer.and_then(|d| parse_switch_info(&d)) {
            Ok(now) if now.linear_fdb_top == max_lid => {
                report.switch_info.set += 1;
                Some(now)
            }
            Ok(now) => {
                warn!(guid = format_args!("{guid:#018x}"), top = now.linear_fdb_top, wanted = max_lid,
                    "LinearFDBTop Set did not take effect");
                report.switch_info.failed += 1;
                None
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), error = %e, "SwitchInfo Set failed");
                report.switch_info.failed += 1;
                None
            }
        };
        if let Some(now) = now {
            fabric.node_mut(node).switch_info = Some(now);
        }
        targets.push((node, old_top, now.map(|i| i.linear_fdb_top)));
    }
    let after_switch_info = client.stats().clone();
    report.switch_info.smps = after_switch_info.since(&before);

    let lft_of: HashMap<usize, &[u8]> = routing.lfts.iter().map(|l| (l.node as usize, &l.ports[..])).collect();
    let last_block = max_lid / LFT_BLOCK_LEN as u16;
    // What each switch to program holds, as far as known: (node, blocks).
    let mut switches: Vec<(usize, Vec<Option<[u8; LFT_BLOCK_LEN]>>)> = Vec::new();
    // Blocks to read first: (index into `switches`, block, old top).
    let mut reads: Vec<(usize, u16, u16)> = Vec::new();
    let mut ops = Vec::new();
    for (node, old_top, top_now) in targets {
        if !lft_of.contains_key(&node) {
            continue;
        }
        let n = &fabric.nodes[node];
        let guid = n.guid;
        if top_now != Some(max_lid) {
            // With the top wrong, the blocks would forward the wrong LIDs
            // or none; the next sweep retries the switch whole.
            held.switches.remove(&guid);
            continue;
        }
        let trusted_cache = held.switches.get(&guid).is_some_and(|h| h.top == old_top);
        let mut known: Vec<Option<[u8; LFT_BLOCK_LEN]>> = match held.switches.get(&guid) {
            // The switch still shows the top we left: nothing but us
            // rewrote it (a reset switch comes back with top 0).
            Some(h) if trusted_cache => h.blocks.clone(),
            _ => Vec::new(),
        };
        if !trusted_cache {
            // A switch we cannot vouch for may have been reset: its SL2VL
            // and VLArb tables are unknown too.
            held.forget_vl_tables(guid);
        }
        known.resize(usize::from(last_block) + 1, None);
        if !trusted_cache && old_top != 0 {
            let readable = old_top.min(max_lid) / LFT_BLOCK_LEN as u16;
            for block in 0..=readable {
                match LftRepr::modifier(block) {
                    Ok(m) => {
                        ops.push(SmpOp::get(attr::LINEAR_FORWARDING_TABLE, m, &n.path));
                        reads.push((switches.len(), block, old_top));
                    }
                    Err(_) => report.lft.failed += 1,
                }
            }
        }
        switches.push((node, known));
    }
    let answers = client.run_many(&ops);
    for ((k, block, old_top), answer) in reads.into_iter().zip(answers) {
        let (node, known) = &mut switches[k];
        match answer.and_then(|d| parse_lft(&d)) {
            Ok(mut held_block) => {
                report.lft.read += 1;
                // Entries above the old top were not forwarding; compare
                // them as what they meant.
                let first = usize::from(block) * LFT_BLOCK_LEN;
                for (i, e) in held_block.iter_mut().enumerate() {
                    if first + i > usize::from(old_top) {
                        *e = NO_ROUTE;
                    }
                }
                known[usize::from(block)] = Some(held_block);
            }
            Err(e) => {
                debug!(guid = format_args!("{:#018x}", fabric.nodes[*node].guid), block, error = %e,
                    "LFT block unreadable; written blind");
                report.lft.failed += 1;
            }
        }
    }

    // Every block that differs, across all switches, in flight together.
    let mut writes: Vec<(usize, u16, [u8; LFT_BLOCK_LEN])> = Vec::new();
    let mut ops = Vec::new();
    for (k, (node, known)) in switches.iter().enumerate() {
        let ports = lft_of[node];
        for block in 0..=last_block {
            let want = wanted_block(ports, block, max_lid);
            if known[usize::from(block)] == Some(want) {
                report.lft.unchanged += 1;
                continue;
            }
            let Ok(modifier) = LftRepr::modifier(block) else {
                report.lft.failed += 1;
                continue;
            };
            let mut data = [0u8; DATA_LEN];
            data[..LFT_BLOCK_LEN].copy_from_slice(&want);
            ops.push(SmpOp::set(attr::LINEAR_FORWARDING_TABLE, modifier, &fabric.nodes[*node].path, data));
            writes.push((k, block, want));
        }
    }
    let answers = client.run_many(&ops);
    for ((k, block, want), answer) in writes.into_iter().zip(answers) {
        let (node, known) = &mut switches[k];
        let guid = fabric.nodes[*node].guid;
        match answer.and_then(|d| parse_lft(&d)) {
            Ok(now) if now == want => {
                report.lft.set += 1;
                known[usize::from(block)] = Some(want);
            }
            Ok(now) => {
                warn!(guid = format_args!("{guid:#018x}"), block, "LFT block Set did not take effect");
                report.lft.failed += 1;
                known[usize::from(block)] = Some(now);
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), block, error = %e, "LFT block Set failed");
                report.lft.failed += 1;
                known[usize::from(block)] = None;
            }
        }
    }
    for (node, known) in switches {
        held.switches.insert(fabric.nodes[node].guid, HeldSwitch { top: max_lid, blocks: known });
    }
    report.lft.smps = client.stats().since(&after_switch_info);
}

/// Moves every linked port of `fabric` to `to` (Armed or Active) if it is
/// in `from`, by read-modify-write PortInfo Sets that carry the attribute
/// as last read with NoChange in PortPhysicalState.
fn move_ports(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    from: PortState,
    to: PortState,
    phase: &mut PhaseReport,
) {
    let before = client.stats().clone();
    let mut targets = Vec::new();
    let mut ops = Vec::new();
    for node in 0..fabric.nodes.len() {
        for port in 1..fabric.nodes[node].ports.len() {
            let slot = &fabric.nodes[node].ports[port];
            let (Some(current), Some(path), Some(_)) = (slot.info, slot.path.as_ref(), slot.peer) else {
                continue;
            };
            if current.port_state == PortState::Active {
                phase.unchanged += 1;
                continue;
            }
            if current.port_state == to {
                // Armed already, by the link parameters' Set of this sweep
                // (counted there) or by an earlier sweep.
                continue;
            }
            if current.port_state != from {
                // Down: the link is not up, nothing to bring up.
                continue;
            }
            ops.push(crate::port_info::port_state(current, to, port as u8, path));
            targets.push((node, port));
        }
    }
    let answers = client.run_many(&ops);
    for ((node, port), answer) in targets.into_iter().zip(answers) {
        let guid = fabric.nodes[node].guid;
        match answer.and_then(|d| parse_port_info(&d)) {
            Ok(now) if now.port_state == to => {
                phase.set += 1;
                fabric.node_mut(node).ports[port].info = Some(now);
            }
            Ok(now) => {
                warn!(guid = format_args!("{guid:#018x}"), port, state = ?now.port_state, wanted = ?to,
                    "PortState Set did not take effect");
                phase.failed += 1;
                fabric.node_mut(node).ports[port].info = Some(now);
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "PortState Set failed");
                phase.failed += 1;
            }
        }
    }
    phase.smps = client.stats().since(&before);
}

/// Every linked port Init → Armed, then Armed → Active. Fills the arm and
/// activate phases of the report.
pub fn activate_ports(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    report: &mut RoutingProgramReport,
) {
    move_ports(
        client,
        fabric,
        PortState::Init,
        PortState::Armed,
        &mut report.arm,
    );
    move_ports(
        client,
        fabric,
        PortState::Armed,
        PortState::Active,
        &mut report.activate,
    );
}

/// Link parameters as OpenSM's link manager writes them (see
/// [`program_links`]). The defaults are OpenSM's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Cap on OperationalVLs, as PortInfo encodes it (1 = VL0 … 5 = VL0-14).
    pub max_op_vls: u8,
    /// HOQLife of switch-to-switch ports.
    pub hoq_life: u8,
    /// HOQLife of switch ports facing an end node, and of router ports.
    pub leaf_hoq_life: u8,
    /// VLStallCount of switch-to-switch ports.
    pub vl_stall_count: u8,
    /// VLStallCount of switch ports facing an end node.
    pub leaf_vl_stall_count: u8,
    /// SubnetTimeOut of CA ports and switch port 0.
    pub subnet_timeout: u8,
    /// LinkSpeedEnabled to write; 0 leaves it, 15 = all supported.
    pub force_link_speed: u8,
    /// LinkWidthEnabled to write; 0 leaves it, 255 = all supported.
    pub force_link_width: u8,
    /// LinkSpeedExtEnabled to write where both ends support extended
    /// speeds; 0 leaves it, 30 disables, 31 = all supported.
    pub force_link_speed_ext: u8,
    /// LocalPhyErrors threshold written to every port (4 bits).
    pub local_phy_errors: u8,
    /// OverrunErrors threshold written to every port (4 bits).
    pub overrun_errors: u8,
}

/// LinkSpeedExtEnabled: turn extended speeds off (IBA 1.3).
const SPEED_EXT_DISABLE: u8 = 30;
/// LinkSpeedExtEnabled: every supported extended speed.
const SPEED_EXT_SET_TO_SUPPORTED: u8 = 31;

/// Whether the ports of node `node` report extended speeds (a switch
/// reports it on port 0 for all its ports).
fn has_ext_speeds(fabric: &Fabric, node: usize, port: usize) -> bool {
    let n = &fabric.nodes[node];
    let port0 = if n.is_switch() { n.ports.first().and_then(|p| p.info) } else { None };
    n.ports.get(port).and_then(|p| p.info).is_some_and(|i| crate::port_info::has_extended_speeds(&i, port0.as_ref()))
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            max_op_vls: 5,
            hoq_life: 0x12,
            leaf_hoq_life: 0x10,
            vl_stall_count: 7,
            leaf_vl_stall_count: 7,
            subnet_timeout: 18,
            force_link_speed: link_speed::SET_TO_SUPPORTED,
            force_link_width: link_width::SET_TO_SUPPORTED,
            force_link_speed_ext: SPEED_EXT_SET_TO_SUPPORTED,
            local_phy_errors: 8,
            overrun_errors: 8,
        }
    }
}

/// What `port` of `fabric` should hold by `config`, from what it holds
/// now (`current`). OperationalVLs and NeighborMTU are the lower of the
/// two ends' VLCap and MTUCap (OperationalVLs capped by `max_op_vls`),
/// and are changed only while the port is Init: IBA lets a port take them
/// in no other state, so a port already Armed or Active keeps what it
/// has (logged; the snapshot then shows the engines what it really
/// operates).
fn wanted_link(fabric: &Fabric, node: usize, port: usize, current: &PortInfoRepr, config: &LinkConfig) -> PortInfoRepr {
    let n = &fabric.nodes[node];
    let mut want = *current;
    let addressed = !n.is_switch() || port == 0;
    if addressed {
        want.subnet_timeout = config.subnet_timeout;
    }
    // As OpenSM's link manager: every port, switch port 0 included.
    want.local_phy_errors = config.local_phy_errors;
    want.overrun_errors = config.overrun_errors;
    let Some((peer_node, peer_port)) = n.ports[port].peer.filter(|_| port != 0) else {
        return want;
    };
    let Some(peer) = fabric.nodes.get(peer_node) else { return want };
    let Some(remote) = peer.ports.get(usize::from(peer_port)).and_then(|p| p.info) else {
        return want;
    };
    let op_vls = current.vl_cap.min(remote.vl_cap).max(1).min(config.max_op_vls);
    let mtu = current.mtu_cap.min(remote.mtu_cap).max(1);
    if current.port_state == PortState::Init {
        want.operational_vls = op_vls;
        want.neighbor_mtu = mtu;
    } else if current.operational_vls != op_vls || current.neighbor_mtu != mtu {
        warn!(guid = format_args!("{:#018x}", n.guid), port, state = ?current.port_state,
            op_vls = current.operational_vls, wanted_op_vls = op_vls, mtu = current.neighbor_mtu, wanted_mtu = mtu,
            "port is past Init: OperationalVLs and NeighborMTU left as they are");
    }
    match (n.kind, peer.kind) {
        (NodeKind::Switch, NodeKind::Switch) => {
            want.hoq_life = config.hoq_life;
            want.vl_stall_count = config.vl_stall_count;
        }
        (NodeKind::Switch, _) => {
            want.hoq_life = config.leaf_hoq_life;
            want.vl_stall_count = config.leaf_vl_stall_count;
        }
        (NodeKind::Router, _) => want.hoq_life = config.leaf_hoq_life,
        _ => {}
    }
    let fw = config.force_link_width;
    if fw != 0 && (fw != link_width::SET_TO_SUPPORTED || current.link_width_enabled != current.link_width_supported) {
        want.link_width_enabled = fw;
    }
    let fs = config.force_link_speed;
    if fs != 0 && (fs != link_speed::SET_TO_SUPPORTED || current.link_speed_enabled != current.link_speed_supported) {
        want.link_speed_enabled = fs;
    }
    let fe = config.force_link_speed_ext;
    if fe != 0
        && has_ext_speeds(fabric, node, port)
        && has_ext_speeds(fabric, peer_node, usize::from(peer_port))
        && (fe != SPEED_EXT_SET_TO_SUPPORTED || current.link_speed_ext_enabled != current.link_speed_ext_supported)
    {
        want.link_speed_ext_enabled = fe;
    }
    want
}

/// The fields [`program_links`] writes, to recognise a port that
/// answered a Set with other values before.
fn link_fields(i: &PortInfoRepr) -> [u8; 10] {
    [
        i.operational_vls,
        i.neighbor_mtu,
        i.hoq_life,
        i.vl_stall_count,
        i.subnet_timeout,
        i.link_width_enabled,
        i.link_speed_enabled,
        i.link_speed_ext_enabled,
        i.local_phy_errors,
        i.overrun_errors,
    ]
}

/// Whether `now` holds what `want` asked for. "All supported" asks for
/// whatever the port supports.
fn link_holds(now: &PortInfoRepr, want: &PortInfoRepr) -> bool {
    let width = if want.link_width_enabled == link_width::SET_TO_SUPPORTED {
        now.link_width_supported
    } else {
        want.link_width_enabled
    };
    let speed = if want.link_speed_enabled == link_speed::SET_TO_SUPPORTED {
        now.link_speed_supported
    } else {
        want.link_speed_enabled
    };
    let ext = match want.link_speed_ext_enabled {
        SPEED_EXT_SET_TO_SUPPORTED => now.link_speed_ext_supported,
        SPEED_EXT_DISABLE => 0,
        v => v,
    };
    now.operational_vls == want.operational_vls
        && now.link_speed_ext_enabled == ext
        && now.neighbor_mtu == want.neighbor_mtu
        && now.hoq_life == want.hoq_life
        && now.vl_stall_count == want.vl_stall_count
        && now.subnet_timeout == want.subnet_timeout
        && now.local_phy_errors == want.local_phy_errors
        && now.overrun_errors == want.overrun_errors
        && now.link_width_enabled == width
        && now.link_speed_enabled == speed
}

/// What else [`program_links`]' PortInfo Sets carry: fields other passes
/// would write into the same ports by Sets of their own. A PortInfo Set
/// is one attribute: the SMA takes every field of it (OperationalVLs and
/// NeighborMTU as the port is when it arrives, i.e. Init), then the state
/// change; LIDs and enforcement bits are valid in any state. One Set per
/// port thus does what two or three did.
#[derive(Debug, Default)]
pub struct Riders<'a> {
    /// LID fields stage 2 decided and left to these Sets
    /// ([`super::stages::address`]), and the report their answers go to:
    /// a port that needs only them gets one Set with PortState NoChange.
    pub lids: Option<(&'a LidSets, &'a mut ProgramReport)>,
    /// The sweep's partitions: the enforcement bits of switch ports not
    /// Active yet go here (no packet passes such a port, so the bits may
    /// precede the P_Key tables stage 4 writes); counted in the P_Key
    /// phase. Ports already Active get theirs after their tables, from
    /// [`super::pkey::program_partitions`].
    pub partitions: Option<&'a mut Partitions>,
}

/// One PortInfo Set of [`program_links`] and what it carries.
struct PortSet<'a> {
    node: usize,
    port: usize,
    /// The link parameters wanted.
    want: PortInfoRepr,
    /// Whether the port held them already.
    holds: bool,
    arming: bool,
    lids: Option<&'a LidSet>,
    enforce: Option<(bool, bool)>,
}

/// Writes the link parameters OpenSM's link manager writes
/// (OperationalVLs, NeighborMTU, HOQLife, VLStallCount, SubnetTimeOut,
/// LinkWidthEnabled, LinkSpeedEnabled, LinkSpeedExtEnabled) into every port of `fabric` that
/// does not hold them, by read-modify-write PortInfo Sets with
/// PortPhysicalState as NoChange. Run before routing: OperationalVLs and
/// NeighborMTU take only in Init, and the engines must see the VLs the
/// ports will really operate.
///
/// The same Set moves a linked port in Init to Armed (counted in
/// `report.arm`): the SMA takes OperationalVLs and NeighborMTU as the port
/// is when the Set arrives (Init) and then arms it, so one SMP per port
/// does what OpenSM's link manager does in two. Armed passes no data (only
/// SMPs), so arming before the routing is in changes nothing for traffic;
/// ports go Active only after programming ([`activate_ports`]). A port the
/// Set leaves in Init is armed there.
///
/// It also carries the `riders`' fields (LIDs, partition enforcement),
/// whose answers are counted in their own reports (`lids`' report,
/// `report.pkey`); the SMPs are counted once, all in `report.link`, the
/// phase that sent them.
pub fn program_links(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    config: &LinkConfig,
    held: &mut HeldTables,
    riders: Riders<'_>,
    report: &mut RoutingProgramReport,
) {
    let before = client.stats().clone();
    let Riders { mut lids, mut partitions } = riders;
    let lid_sets: HashMap<(usize, usize), &LidSet> = lids
        .as_ref()
        .map(|(sets, _)| sets.ports.iter().map(|s| ((s.node, usize::from(s.port)), s)).collect())
        .unwrap_or_default();
    let mut targets = Vec::new();
    let mut ops = Vec::new();
    for node in 0..fabric.nodes.len() {
        let n = &fabric.nodes[node];
        for port in 0..n.ports.len() {
            let slot = &n.ports[port];
            let (Some(current), Some(path)) = (slot.info, slot.path.as_ref()) else { continue };
            let linked = if port == 0 {
                n.is_switch()
            } else {
                slot.peer.is_some() && current.port_state != PortState::Down
            };
            let lid_set = lid_sets.get(&(node, port)).copied();
            if !linked && lid_set.is_none() {
                continue;
            }
            let (want, holds) = if linked {
                let want = wanted_link(fabric, node, port, &current, config);
                let holds = link_holds(&current, &want)
                    || held.links.get(&(n.guid, port as u8)) == Some(&(link_fields(&want), link_fields(&current)));
                if holds {
                    report.link.unchanged += 1;
                }
                (want, holds)
            } else {
                (current, true)
            };
            let arming = port != 0 && slot.peer.is_some() && current.port_state == PortState::Init;
            let enforce = match partitions.as_deref_mut() {
                Some(p) if linked && port != 0 && n.is_switch() && current.port_state != PortState::Active => {
                    p.fold_enforcement(node, port as u8)
                }
                _ => None,
            }
            .filter(|&bits| {
                let holds = held.pkeys.enforcement_holds(n.guid, port as u8, bits, &current);
                if holds {
                    report.pkey.unchanged += 1;
                }
                !holds
            });
            if holds && !arming && lid_set.is_none() && enforce.is_none() {
                continue;
            }
            // The LIDs a port still lacks and its enforcement bits ride on
            // the link parameters' Set.
            let riders = |set: &mut PortInfoRepr| {
                if let (Some(s), Some((sets, _))) = (lid_set, lids.as_ref()) {
                    sets.apply(s, set);
                }
                if let Some((inbound, outbound)) = enforce {
                    set.partition_enforcement_inbound = inbound;
                    set.partition_enforcement_outbound = outbound;
                }
            };
            let ext = has_ext_speeds(fabric, node, port);
            ops.push(crate::port_info::link(want, arming, port as u8, path, ext, riders));
            targets.push(PortSet { node, port, want, holds, arming, lids: lid_set, enforce });
        }
    }
    let answers = client.run_many(&ops);
    let mut unkept = super::pkey::Unkept::default();
    let (phase, arm) = (&mut report.link, &mut report.arm);
    for (t, answer) in targets.into_iter().zip(answers) {
        let PortSet { node, port, want, holds, arming, .. } = t;
        let guid = fabric.nodes[node].guid;
        let answer = answer.and_then(|d| parse_port_info(&d));
        if let (Some(s), Some((sets, lid_report))) = (t.lids, lids.as_mut()) {
            sets.answered(s, guid, answer.as_ref(), lid_report);
        }
        if let Some(bits) = t.enforce {
            held.pkeys.enforcement_answered(guid, port as u8, bits, answer.as_ref(), &mut report.pkey, &mut unkept);
        }
        match answer {
            Ok(now) => {
                if arming && now.port_state == PortState::Armed {
                    arm.set += 1;
                } else if arming {
                    debug!(guid = format_args!("{guid:#018x}"), port, state = ?now.port_state,
                        "port not Armed with its link parameters; armed on its own later");
                }
                if holds {
                    // Only armed, or only the riders' fields: the link
                    // parameters were already there.
                } else if now.operational_vls != want.operational_vls || now.neighbor_mtu != want.neighbor_mtu {
                    warn!(guid = format_args!("{guid:#018x}"), port,
                        op_vls = now.operational_vls, wanted_op_vls = want.operational_vls,
                        mtu = now.neighbor_mtu, wanted_mtu = want.neighbor_mtu,
                        "OperationalVLs/NeighborMTU Set did not take effect");
                    phase.failed += 1;
                } else {
                    if link_holds(&now, &want) {
                        held.links.remove(&(guid, port as u8));
                    } else {
                        // Devices that do not keep a field (ibsim keeps no
                        // VLStallCount or SubnetTimeOut) would say so at
                        // every sweep: not worth a warning, nor a Set at
                        // every sweep.
                        debug!(guid = format_args!("{guid:#018x}"), port, "port keeps not every link parameter written");
                        held.links.insert((guid, port as u8), (link_fields(&want), link_fields(&now)));
                    }
                    phase.set += 1;
                }
                fabric.node_mut(node).ports[port].info = Some(now);
            }
            Err(e) if holds => {
                // Only the arming or the riders' fields (counted and
                // logged above) failed: the arm pass tries again.
                debug!(guid = format_args!("{guid:#018x}"), port, error = %e, "PortInfo Set (state or riders) failed");
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "link parameters Set failed");
                phase.failed += 1;
            }
        }
    }
    unkept.log();
    report.link.smps = client.stats().since(&before);
}

/// Where `guid2lid` lives: the file given, else `guid2lid` in the dump
/// directory, else nowhere (LIDs then persist only in the ports).
pub fn guid2lid_path(file: Option<&Path>, dump_dir: Option<&Path>) -> Option<PathBuf> {
    file.map(Path::to_path_buf)
        .or_else(|| dump_dir.map(|d| d.join("guid2lid")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_defaults_are_opensms() {
        let c = LinkConfig::default();
        assert_eq!((c.max_op_vls, c.hoq_life, c.leaf_hoq_life, c.vl_stall_count, c.leaf_vl_stall_count), (5, 0x12, 0x10, 7, 7));
        assert_eq!((c.subnet_timeout, c.force_link_speed, c.force_link_width, c.force_link_speed_ext), (18, 15, 255, 31));
    }

    #[test]
    fn wanted_block_drops_lids_above_top_and_past_the_table() {
        let ports: Vec<u8> = (0..70).map(|i| (i % 7) as u8).collect();
        let b0 = wanted_block(&ports, 0, 65);
        assert_eq!(b0[5], 5);
        let b1 = wanted_block(&ports, 1, 65);
        assert_eq!(&b1[..3], &[64 % 7, 65 % 7, NO_ROUTE]);
        assert!(b1[3..].iter().all(|&p| p == NO_ROUTE));
        let short = wanted_block(&ports[..10], 0, 65);
        assert_eq!(short[9], 2);
        assert_eq!(short[10], NO_ROUTE);
    }
}
