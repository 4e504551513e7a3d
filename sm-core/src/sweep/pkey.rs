//! P_Key tables (IBA 14.2.5.7) and partition enforcement, as OpenSM's
//! `osm_pkey_mgr.c` programs them:
//!
//! * every end port (CA and router ports, switch port 0) gets the table
//!   its partitions resolve to, cut to its NodeInfo.PartitionCap;
//! * with `part_enforce` other than `off`, a switch port facing an end
//!   port gets that port's table (cut to SwitchInfo.PartitionEnforcementCap;
//!   a table that does not fit leaves the port unenforced, as in OpenSM)
//!   and PortInfo PartitionEnforcementInbound/Outbound; switch-to-switch
//!   ports are never enforced. The enforcement bits of a port not yet
//!   Active ride on the PortInfo Set stage 3 sends it anyway (link
//!   parameters, arming: [`super::program::Riders`]); only ports already
//!   Active get a Set of their own here, after their tables.
//!
//! Only 32-entry blocks that differ from what the port holds are written.
//! What a port holds is known from an earlier sweep's writes while the
//! port stayed Active (a reset port comes back in Init with its power-up
//! table). A block not known is written without reading it first: a read
//! costs an SMP as a write does, and a block read would mostly have to be
//! written anyway, so writing blind is never more SMPs and usually half.
//! The answer to the Set is what the port now holds.

use std::collections::HashMap;
use std::sync::Arc;

use sm_mad::mad::attr;
use sm_mad::pkey_table::{self, Packet as PkeyPacket, Repr as PkeyRepr, PKEYS};
use sm_mad::smp::DATA_LEN;
use sm_mad::{PhysState, PortInfoPacket, PortInfoRepr, PortState};
use tracing::warn;

use super::discovery::{parse_port_info, DrPath, Fabric};
use super::program::{HeldTables, PhaseReport};
use super::transport::{SmpClient, SmpError, SmpOp};
use crate::config::Config;
use crate::partition::{resolve_fabric, PartEnforce, PartitionSettings, PartitionState, Resolved, SaPartitions};

/// (PartitionEnforcementInbound, PartitionEnforcementOutbound).
type Enforcement = (bool, bool);

/// What earlier sweeps left in the ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldPkeys {
    /// The partitions in force (re-read at every heavy sweep).
    pub state: PartitionState,
    /// Table contents known, per (node GUID, port), whole blocks.
    tables: HashMap<(u64, u8), Vec<u16>>,
    /// What the last sweep gave the SA.
    last: Option<Arc<SaPartitions>>,
    /// Switch ports that did not keep the enforcement bits written (ibsim
    /// keeps none): (wanted, what the port answered). Not written again
    /// while both hold.
    enforce_ignored: HashMap<(u64, u8), (Enforcement, Enforcement)>,
}

impl HeldPkeys {
    /// The partitions of the last sweep, for the SA.
    pub fn sa_view(&self) -> Option<Arc<SaPartitions>> {
        self.last.clone()
    }
}

/// One table to program.
struct Target {
    node: usize,
    port: u8,
    /// Directed route to the port's SMA.
    path: DrPath,
    /// AttributeModifier port bits (the port on a switch, 0 on a CA).
    modifier_port: u8,
    /// Entries the port holds (PartitionCap / PartitionEnforcementCap).
    cap: usize,
    /// The wanted table, `cap` long.
    want: Vec<u16>,
}

fn blocks(len: usize) -> usize {
    len.div_ceil(PKEYS)
}

fn parse_block(data: &[u8; DATA_LEN]) -> Result<[u16; PKEYS], SmpError> {
    PkeyPacket::new_checked(&data[..pkey_table::LEN])
        .and_then(|p| PkeyRepr::parse(&p))
        .map(|r| r.pkeys)
        .map_err(|e| SmpError::Malformed(format!("P_KeyTable: {e}")))
}


/// `table` cut or padded to `cap` entries; `None` when it does not fit.
fn fitted(table: &[u16], cap: usize) -> Option<Vec<u16>> {
    if table.len() > cap {
        return None;
    }
    let mut out = table.to_vec();
    out.resize(cap, 0);
    Some(out)
}

/// What a switch port facing an end port is to enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SwitchPort {
    /// The peer's table cut to SwitchInfo.PartitionEnforcementCap
    /// (`None`: the port is not enforced).
    table: Option<Vec<u16>>,
    /// PartitionEnforcementInbound/Outbound wanted.
    bits: Enforcement,
    /// Whether a Set of stage 3 took the bits along
    /// ([`Partitions::fold_enforcement`]): then [`program_partitions`]
    /// leaves them.
    folded: bool,
}

/// The partitions of one sweep: the file read again (keeping the last
/// good set; an error is logged once per sweep, here) and resolved against
/// the fabric, with what each switch port facing an end port is to
/// enforce. Made in stage 3 ([`super::stages::link`]), whose PortInfo
/// Sets carry the enforcement bits of ports not yet Active; programmed by
/// [`program_partitions`] in stage 4.
#[derive(Debug)]
pub struct Partitions {
    resolved: Resolved,
    /// Per switch port with a PortInfo and a peer: (node, port).
    switch_ports: HashMap<(usize, u8), SwitchPort>,
}

impl Partitions {
    /// Reads the partition file of `config` again and resolves it against
    /// `fabric`; `held` keeps the last good set.
    pub fn resolve(fabric: &Fabric, config: &Config, held: &mut HeldPkeys) -> Self {
        let settings = PartitionSettings::from_config(config);
        let partitions = held.state.refresh(&settings);
        let resolved = resolve_fabric(partitions, fabric, settings.allow_both);
        let mut switch_ports = HashMap::new();
        for (i, n) in fabric.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()) {
            let enforce_cap = n.switch_info.map(|s| usize::from(s.partition_enforcement_cap)).unwrap_or(0);
            for p in 1..=n.num_ports {
                let Some(slot) = n.ports.get(usize::from(p)) else { continue };
                let (Some(_), Some((peer, peer_port))) = (slot.info, slot.peer) else { continue };
                let peer_node = &fabric.nodes[peer];
                let mut port = SwitchPort { table: None, bits: (false, false), folded: false };
                if !peer_node.is_switch() && settings.enforce != PartEnforce::Off && enforce_cap > 0 {
                    let peer_guid = peer_node.ports.get(usize::from(peer_port)).map(|s| s.guid).unwrap_or(0);
                    let table = resolved.tables.get(&peer_guid).map(Vec::as_slice).unwrap_or(&[]);
                    match fitted(table, enforce_cap) {
                        Some(want) => {
                            port.table = Some(want);
                            port.bits = settings.enforce.bits();
                        }
                        None => warn!(guid = format_args!("{:#018x}", n.guid), port = p, partitions = table.len(),
                            cap = enforce_cap, "the peer's partitions do not fit the switch port's table; port not enforced"),
                    }
                }
                switch_ports.insert((i, p), port);
            }
        }
        Self { resolved, switch_ports }
    }

    /// The enforcement bits wanted on `port` of switch `node`, if it is
    /// one with a peer; from now on a Set of the caller's carries them
    /// (the caller counts them in the P_Key phase), not
    /// [`program_partitions`].
    pub(super) fn fold_enforcement(&mut self, node: usize, port: u8) -> Option<Enforcement> {
        let p = self.switch_ports.get_mut(&(node, port))?;
        p.folded = true;
        Some(p.bits)
    }
}

impl HeldPkeys {
    /// Whether switch port `port` of node `guid`, whose PortInfo is
    /// `info`, needs no Set for `bits`: it holds them, or it answered an
    /// earlier Set of them with what it holds now (it does not keep them).
    pub(super) fn enforcement_holds(&self, guid: u64, port: u8, bits: Enforcement, info: &PortInfoRepr) -> bool {
        let now = (info.partition_enforcement_inbound, info.partition_enforcement_outbound);
        now == bits || self.enforce_ignored.get(&(guid, port)) == Some(&(bits, now))
    }

    /// Takes into `phase` the answer of switch port `port` of node `guid`
    /// to a PortInfo Set that carried `bits`.
    pub(super) fn enforcement_answered(
        &mut self,
        guid: u64,
        port: u8,
        bits: Enforcement,
        answer: Result<&PortInfoRepr, &SmpError>,
        phase: &mut PhaseReport,
    ) {
        match answer {
            Ok(now) => {
                let got = (now.partition_enforcement_inbound, now.partition_enforcement_outbound);
                if got == bits {
                    self.enforce_ignored.remove(&(guid, port));
                    phase.set += 1;
                } else {
                    // Logged and not retried while the port answers the
                    // same: it would refuse at every sweep.
                    warn!(guid = format_args!("{guid:#018x}"), port, wanted = ?bits, got = ?got,
                        "the port does not keep partition enforcement; not written again");
                    self.enforce_ignored.insert((guid, port), (bits, got));
                    phase.failed += 1;
                }
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "partition enforcement Set failed");
                phase.failed += 1;
            }
        }
    }
}

/// Programs the P_Key tables of `partitions` and the partition
/// enforcement that no Set of stage 3 took along
/// ([`Partitions::fold_enforcement`]). Run while the engines route (see
/// [`super::stages::route`]): the ports whose enforcement is written here
/// are Active, and get it after their tables, so that no packet of theirs
/// is dropped in between. Fills `phase` (its SMPs are the ones sent here);
/// the result for the SA is kept in `held` ([`HeldPkeys::sa_view`]).
pub fn program_partitions(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    partitions: Partitions,
    held: &mut HeldTables,
    phase: &mut PhaseReport,
) {
    let before = client.stats().clone();
    let Partitions { resolved, switch_ports } = partitions;
    let held = &mut held.pkeys;

    // Ports reset since the last sweep hold their power-up tables again.
    // A switch counts as reset when a linked port of it is not Active.
    for n in &fabric.nodes {
        let active = |info: Option<sm_mad::PortInfoRepr>| info.is_some_and(|i| i.port_state == PortState::Active);
        let switch_reset = n.is_switch() && n.ports.iter().skip(1).any(|s| s.peer.is_some() && !active(s.info));
        for (p, slot) in n.ports.iter().enumerate() {
            let reset = if p == 0 && n.is_switch() { switch_reset } else { !active(slot.info) };
            if reset {
                held.tables.remove(&(n.guid, p as u8));
            }
        }
    }

    // The tables wanted, and the enforcement of each switch port facing
    // an end port: (node, port, inbound, outbound).
    let mut targets: Vec<Target> = Vec::new();
    let mut enforce: Vec<(usize, u8, (bool, bool))> = Vec::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        // Discovery read NodeInfo, PartitionCap with it.
        let cap = n.partition_cap;
        let end_ports: Vec<u8> = if n.is_switch() { vec![0] } else { (1..=n.num_ports).collect() };
        for p in end_ports {
            let Some(slot) = n.ports.get(usize::from(p)) else { continue };
            let (Some(_), Some(path)) = (slot.info, slot.path.clone().or_else(|| n.is_switch().then(|| n.path.clone())))
            else {
                continue;
            };
            let table = resolved.tables.get(&slot.guid).map(Vec::as_slice).unwrap_or(&[]);
            let cap = usize::from(cap);
            if cap == 0 {
                continue;
            }
            let want = fitted(table, cap).unwrap_or_else(|| {
                warn!(guid = format_args!("{:#018x}", slot.guid), port = p, partitions = table.len(), cap,
                    "more partitions than the port's PartitionCap; the last ones left out");
                let mut t = table[..cap].to_vec();
                t.resize(cap, 0);
                t
            });
            targets.push(Target { node: i, port: p, path, modifier_port: 0, cap, want });
        }
        if !n.is_switch() {
            continue;
        }
        for p in 1..=n.num_ports {
            let (Some(info), Some(port)) = (n.ports.get(usize::from(p)).and_then(|s| s.info), switch_ports.get(&(i, p)))
            else {
                continue;
            };
            if let Some(want) = &port.table {
                let cap = want.len();
                targets.push(Target { node: i, port: p, path: n.path.clone(), modifier_port: p, cap, want: want.clone() });
            }
            if port.folded {
                // Counted where the Set went (stage 3).
            } else if held.enforcement_holds(n.guid, p, port.bits, &info) {
                phase.unchanged += 1;
            } else {
                enforce.push((i, p, port.bits));
            }
        }
    }

    // Known contents per target: `None` for a block unknown.
    let mut known: Vec<Vec<Option<[u16; PKEYS]>>> = targets
        .iter()
        .map(|t| {
            let have = held.tables.get(&(fabric.nodes[t.node].guid, t.port));
            (0..blocks(t.cap))
                .map(|b| {
                    have.and_then(|h| h.get(b * PKEYS..(b + 1) * PKEYS))
                        .and_then(|s| <[u16; PKEYS]>::try_from(s).ok())
                })
                .collect()
        })
        .collect();
    // Every block that differs or is not known.
    let mut ops = Vec::new();
    let mut writes = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        for b in 0..blocks(target.cap) {
            let mut want = [0u16; PKEYS];
            let end = ((b + 1) * PKEYS).min(target.cap);
            want[..end - b * PKEYS].copy_from_slice(&target.want[b * PKEYS..end]);
            if known[t][b] == Some(want) {
                phase.unchanged += 1;
                continue;
            }
            let mut data = [0u8; DATA_LEN];
            PkeyRepr { pkeys: want }.emit(&mut PkeyPacket::new_unchecked(&mut data[..pkey_table::LEN]));
            ops.push(SmpOp::set(attr::P_KEY_TABLE, pkey_table::modifier(target.modifier_port, b as u16), &target.path, data));
            writes.push((t, b, want));
        }
    }
    for ((t, b, want), answer) in writes.into_iter().zip(client.run_many(&ops)) {
        let guid = fabric.nodes[targets[t].node].guid;
        match answer.and_then(|d| parse_block(&d)) {
            Ok(now) if now == want => {
                phase.set += 1;
                known[t][b] = Some(now);
            }
            Ok(now) => {
                warn!(guid = format_args!("{guid:#018x}"), port = targets[t].port, block = b, "P_Key block Set did not take effect");
                phase.failed += 1;
                known[t][b] = Some(now);
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port = targets[t].port, block = b, error = %e, "P_Key block Set failed");
                phase.failed += 1;
                known[t][b] = None;
            }
        }
    }
    let mut tables = HashMap::new();
    for (t, target) in targets.iter().enumerate() {
        let key = (fabric.nodes[target.node].guid, target.port);
        if known[t].iter().all(Option::is_some) {
            let table: Vec<u16> = known[t].iter().flatten().flatten().copied().collect();
            held.tables.insert(key, table.clone());
            tables.insert(key, table);
        } else {
            held.tables.remove(&key);
        }
    }

    // Enforcement bits, by read-modify-write PortInfo Sets.
    let mut ops = Vec::new();
    let mut sets = Vec::new();
    for (node, port, (inbound, outbound)) in enforce {
        let n = &fabric.nodes[node];
        let Some(mut set) = n.ports[usize::from(port)].info else { continue };
        set.partition_enforcement_inbound = inbound;
        set.partition_enforcement_outbound = outbound;
        set.port_state = PortState::NoChange;
        set.port_physical_state = PhysState::NoChange;
        set.client_reregister = false;
        let mut data = [0u8; DATA_LEN];
        set.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
        ops.push(SmpOp::set(attr::PORT_INFO, u32::from(port), &n.path, data));
        sets.push((node, port, (inbound, outbound)));
    }
    for ((node, port, bits), answer) in sets.into_iter().zip(client.run_many(&ops)) {
        let guid = fabric.nodes[node].guid;
        let now = answer.and_then(|d| parse_port_info(&d));
        held.enforcement_answered(guid, port, bits, now.as_ref(), phase);
        if let Ok(now) = now {
            fabric.nodes[node].ports[usize::from(port)].info = Some(now);
        }
    }

    held.last = Some(Arc::new(SaPartitions { resolved, held: tables }));
    phase.smps = client.stats().since(&before);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_their_cap() {
        assert_eq!(fitted(&[0xFFFF, 0x8001], 4), Some(vec![0xFFFF, 0x8001, 0, 0]));
        assert_eq!(fitted(&[0xFFFF, 0x8001], 1), None);
        assert_eq!(blocks(128), 4);
        assert_eq!(blocks(8), 1);
    }
}
