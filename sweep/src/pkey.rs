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
use sm_mad::{PortInfoRepr, PortState};
use tracing::{debug, warn};

use super::discovery::{parse_port_info, DrPath, Fabric};
use super::program::{HeldTables, PhaseReport};
use super::transport::{SmpClient, SmpError, SmpOp};
use sm_partition::{resolve_fabric, PartEnforce, PartitionSettings, PartitionState, Resolved, SaPartitions};

/// (PartitionEnforcementInbound, PartitionEnforcementOutbound).
type Enforcement = (bool, bool);

pub use sm_partition::HeldTablesByPort;

/// What earlier sweeps left in the ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldPkeys {
    /// The partitions in force (re-read at every heavy sweep).
    pub state: PartitionState,
    /// Table contents known, per (node GUID, port), whole blocks: of the
    /// ports programmed in the last sweep only, so that the SA's view
    /// ([`SaPartitions::held`]) is this very map, shared, not a copy
    /// made at every sweep.
    tables: Arc<HeldTablesByPort>,
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
struct Target<'a> {
    node: usize,
    port: u8,
    /// Directed route to the port's SMA.
    path: DrPath,
    /// AttributeModifier port bits (the port on a switch, 0 on a CA).
    modifier_port: u8,
    /// Entries the port holds (PartitionCap / PartitionEnforcementCap).
    cap: usize,
    /// The wanted table: at most `cap` entries, zeros after them.
    want: std::borrow::Cow<'a, [u16]>,
}

impl Target<'_> {
    /// Entries of block `b` wanted.
    fn block(&self, b: usize) -> [u16; PKEYS] {
        let mut out = [0u16; PKEYS];
        let start = (b * PKEYS).min(self.want.len());
        let end = ((b + 1) * PKEYS).min(self.want.len());
        out[..end - start].copy_from_slice(&self.want[start..end]);
        out
    }

    /// `have` (whole blocks, as the port answered them) is the whole
    /// table wanted.
    fn held_by(&self, have: &[u16]) -> bool {
        have.len() == blocks(self.cap) * PKEYS
            && have[..self.want.len()] == self.want[..]
            && have[self.want.len()..].iter().all(|&e| e == 0)
    }
}

/// `want` arranged as OpenSM's `keep_pkey_indexes` does: an entry the
/// port holds (`have`) stays at its index (the same P_Key, else the same
/// partition of the other membership), the others take the free entries
/// in order; trailing zeros dropped.
fn keep_indexes(want: &[u16], have: &[u16], cap: usize) -> Vec<u16> {
    let mut out = vec![0u16; cap];
    let mut placed = vec![false; want.len()];
    for same in [|a: u16, b: u16| a == b, |a: u16, b: u16| a & 0x7FFF == b & 0x7FFF] {
        for (i, &h) in have.iter().enumerate().take(cap) {
            if h & 0x7FFF == 0 || out[i] != 0 {
                continue;
            }
            if let Some(j) = (0..want.len()).find(|&j| !placed[j] && same(want[j], h)) {
                out[i] = want[j];
                placed[j] = true;
            }
        }
    }
    let mut free = (0..cap).filter(|&i| out[i] == 0).collect::<Vec<_>>().into_iter();
    for (j, &w) in want.iter().enumerate() {
        if !placed[j] {
            match free.next() {
                Some(i) => out[i] = w,
                None => break,
            }
        }
    }
    let len = out.iter().rposition(|&e| e != 0).map_or(0, |i| i + 1);
    out.truncate(len);
    out
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


/// What a switch port with a peer is to enforce (switch-to-switch ports:
/// nothing, and bits that say so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SwitchPort {
    /// The port GUID of the end port it faces, whose table it is to hold
    /// (cut to SwitchInfo.PartitionEnforcementCap); `None`: the port is
    /// not enforced.
    table_of: Option<u64>,
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
/// Sets carry the enforcement bits of ports not yet Active, or beside
/// routing in stage 4; programmed by [`program_partitions`] in stage 4.
#[derive(Debug)]
pub struct Partitions {
    resolved: Resolved,
    /// `keep_pkey_indexes`.
    keep_indexes: bool,
    /// By node, then port: switch ports with a PortInfo and a peer.
    switch_ports: Vec<Vec<Option<SwitchPort>>>,
}

impl Partitions {
    /// Reads the partition file of `settings` again and resolves it
    /// against `fabric`; `held` keeps the last good set.
    pub fn resolve(fabric: &Fabric, settings: &PartitionSettings, held: &mut HeldPkeys) -> Self {
        let partitions = held.state.refresh(settings);
        let resolved = resolve_fabric(partitions, fabric, settings.allow_both);
        let enforcing = settings.enforce != PartEnforce::Off;
        let switch_ports = fabric
            .nodes
            .iter()
            .map(|n| {
                if !n.is_switch() {
                    return Vec::new();
                }
                let enforce_cap = n.switch_info.map(|s| usize::from(s.partition_enforcement_cap)).unwrap_or(0);
                let enforce_cap = if enforcing { enforce_cap } else { 0 };
                n.ports
                    .iter()
                    .enumerate()
                    .map(|(p, slot)| {
                        let (Some(_), Some((peer, peer_port))) = (slot.info, slot.peer) else { return None };
                        let peer_node = &fabric.nodes[peer];
                        let mut port = SwitchPort { table_of: None, bits: (false, false), folded: false };
                        if p == 0 || peer_node.is_switch() || enforce_cap == 0 {
                            return (p != 0).then_some(port);
                        }
                        let peer_guid = peer_node.ports.get(usize::from(peer_port)).map(|s| s.guid).unwrap_or(0);
                        let partitions = resolved.tables.get(&peer_guid).map_or(0, Vec::len);
                        if partitions <= enforce_cap {
                            port.table_of = Some(peer_guid);
                            port.bits = settings.enforce.bits();
                        } else {
                            warn!(guid = format_args!("{:#018x}", n.guid), port = p, partitions, cap = enforce_cap,
                                "the peer's partitions do not fit the switch port's table; port not enforced");
                        }
                        Some(port)
                    })
                    .collect()
            })
            .collect();
        Self { resolved, switch_ports, keep_indexes: settings.keep_indexes }
    }

    /// The enforcement bits wanted on `port` of switch `node`, if it is
    /// one with a peer; from now on a Set of the caller's carries them
    /// (the caller counts them in the P_Key phase), not
    /// [`program_partitions`].
    pub(super) fn fold_enforcement(&mut self, node: usize, port: u8) -> Option<Enforcement> {
        let p = self.switch_ports.get_mut(node)?.get_mut(usize::from(port))?.as_mut()?;
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
        unkept: &mut Unkept,
    ) {
        match answer {
            Ok(now) => {
                let got = (now.partition_enforcement_inbound, now.partition_enforcement_outbound);
                if got == bits {
                    self.enforce_ignored.remove(&(guid, port));
                    phase.set += 1;
                } else {
                    // Not retried while the port answers the same: it
                    // would refuse at every sweep. A switch model without
                    // the bits refuses on every host port at once, so the
                    // ports are summed up in one warning (`Unkept::log`).
                    debug!(guid = format_args!("{guid:#018x}"), port, wanted = ?bits, got = ?got,
                        "the port does not keep partition enforcement; not written again");
                    unkept.add(guid, port, bits, got);
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

/// Switch ports found not keeping the enforcement bits written to them,
/// in one batch of Sets: logged as one warning rather than one per port.
#[derive(Debug, Default)]
pub(super) struct Unkept {
    ports: usize,
    switches: std::collections::BTreeSet<u64>,
    first: Option<(u64, u8, Enforcement, Enforcement)>,
}

impl Unkept {
    fn add(&mut self, guid: u64, port: u8, wanted: Enforcement, got: Enforcement) {
        self.ports += 1;
        self.switches.insert(guid);
        self.first.get_or_insert((guid, port, wanted, got));
    }

    /// One warning for the batch (none when every port kept its bits);
    /// each port is at debug level.
    pub(super) fn log(&self) {
        let Some((guid, port, wanted, got)) = self.first else { return };
        warn!(ports = self.ports, switches = self.switches.len(),
            first = format_args!("{guid:#018x} port {port}"), wanted = ?wanted, got = ?got,
            "switch ports do not keep partition enforcement; not written again while they answer the same");
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
    let Partitions { resolved, switch_ports, keep_indexes: keep } = partitions;
    let held = &mut held.pkeys;

    // Ports reset since the last sweep hold their power-up tables again.
    // A switch counts as reset when a linked port of it is not Active.
    let mut reset = Vec::new();
    for n in &fabric.nodes {
        let active = |info: Option<sm_mad::PortInfoRepr>| info.is_some_and(|i| i.port_state == PortState::Active);
        let switch_reset = n.is_switch() && n.ports.iter().skip(1).any(|s| s.peer.is_some() && !active(s.info));
        for (p, slot) in n.ports.iter().enumerate() {
            let is_reset = if p == 0 && n.is_switch() { switch_reset } else { !active(slot.info) };
            if is_reset && held.tables.contains_key(&(n.guid, p as u8)) {
                reset.push((n.guid, p as u8));
            }
        }
    }
    if !reset.is_empty() {
        let tables = Arc::make_mut(&mut held.tables);
        for key in &reset {
            tables.remove(key);
        }
    }

    // The tables wanted; those the ports hold already cost nothing more
    // (most of them, at a sweep after the first).
    let no_table: &[u16] = &[];
    let table_of = |guid: u64| resolved.tables.get(&guid).map_or(no_table, Vec::as_slice);
    // With keep_pkey_indexes, what a port holds decides where its entries go.
    let arrange = |key: (u64, u8), want: &'_ [u16], cap: usize| -> Vec<u16> {
        match held.tables.get(&key).filter(|_| keep) {
            Some(have) => keep_indexes(want, have, cap),
            None => want.to_vec(),
        }
    };
    let mut targets: Vec<Target<'_>> = Vec::new();
    let mut enforce: Vec<(usize, u8, Enforcement)> = Vec::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        // Discovery read NodeInfo, PartitionCap with it.
        let cap = usize::from(n.partition_cap);
        let end_ports = if n.is_switch() { 0..=0 } else { 1..=n.num_ports };
        for p in end_ports {
            let Some(slot) = n.ports.get(usize::from(p)) else { continue };
            let (Some(_), Some(path)) = (slot.info, slot.path.clone().or_else(|| n.is_switch().then(|| n.path.clone())))
            else {
                continue;
            };
            if cap == 0 {
                continue;
            }
            let mut want = table_of(slot.guid);
            if want.len() > cap {
                warn!(guid = format_args!("{:#018x}", slot.guid), port = p, partitions = want.len(), cap,
                    "more partitions than the port's PartitionCap; the last ones left out");
                want = &want[..cap];
            }
            let want = std::borrow::Cow::Owned(arrange((n.guid, p), want, cap));
            targets.push(Target { node: i, port: p, path, modifier_port: 0, cap, want });
        }
        let Some(ports) = switch_ports.get(i) else { continue };
        let enforce_cap = n.switch_info.map(|s| usize::from(s.partition_enforcement_cap)).unwrap_or(0);
        for (p, port) in ports.iter().enumerate() {
            let (Some(info), Some(port)) = (n.ports.get(p).and_then(|s| s.info), port) else { continue };
            let p = p as u8;
            if let Some(guid) = port.table_of {
                let want = std::borrow::Cow::Owned(arrange((n.guid, p), table_of(guid), enforce_cap));
                targets.push(Target { node: i, port: p, path: n.path.clone(), modifier_port: p, cap: enforce_cap, want });
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

    // Every port programmed; how many of them hold a table known.
    let keys: Vec<(u64, u8)> = targets.iter().map(|t| (fabric.nodes[t.node].guid, t.port)).collect();
    let mut programmed = targets.len();
    targets.retain(|t| {
        let have = held.tables.get(&(fabric.nodes[t.node].guid, t.port));
        let holds = have.is_some_and(|h| t.held_by(h));
        if holds {
            phase.unchanged += blocks(t.cap);
        }
        !holds
    });
    // Every block that differs or is not known.
    let mut ops = Vec::new();
    let mut writes = Vec::new();
    // Per target to write: each block as now known (`None`: not known).
    let mut known: Vec<Vec<Option<[u16; PKEYS]>>> = Vec::with_capacity(targets.len());
    for (t, target) in targets.iter().enumerate() {
        let have = held.tables.get(&(fabric.nodes[target.node].guid, target.port));
        let mut blocks_known = Vec::with_capacity(blocks(target.cap));
        for b in 0..blocks(target.cap) {
            let want = target.block(b);
            let was = have
                .and_then(|h| h.get(b * PKEYS..(b + 1) * PKEYS))
                .and_then(|s| <[u16; PKEYS]>::try_from(s).ok());
            blocks_known.push(was);
            if was == Some(want) {
                phase.unchanged += 1;
                continue;
            }
            let mut data = [0u8; DATA_LEN];
            PkeyRepr { pkeys: want }.emit(&mut PkeyPacket::new_unchecked(&mut data[..pkey_table::LEN]));
            ops.push(SmpOp::set(attr::P_KEY_TABLE, pkey_table::modifier(target.modifier_port, b as u16), &target.path, data));
            writes.push((t, b, want));
        }
        known.push(blocks_known);
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
    if !targets.is_empty() {
        let tables = Arc::make_mut(&mut held.tables);
        for (target, blocks_known) in targets.iter().zip(&known) {
            let key = (fabric.nodes[target.node].guid, target.port);
            if blocks_known.iter().all(Option::is_some) {
                tables.insert(key, blocks_known.iter().flatten().flatten().copied().collect());
            } else {
                programmed -= 1;
                tables.remove(&key);
            }
        }
    }
    // What ports left the fabric, or are no longer programmed, took with
    // them is no longer known (nor for the SA to report). Counting tells
    // whether there is any, so the usual sweep hashes nothing more.
    if held.tables.len() != programmed {
        let keep: std::collections::HashSet<(u64, u8)> = keys.into_iter().collect();
        Arc::make_mut(&mut held.tables).retain(|k, _| keep.contains(k));
    }

    // Enforcement bits, by read-modify-write PortInfo Sets.
    let mut ops = Vec::new();
    let mut sets = Vec::new();
    for (node, port, (inbound, outbound)) in enforce {
        let n = &fabric.nodes[node];
        let Some(current) = n.ports[usize::from(port)].info else { continue };
        ops.push(crate::port_info::enforcement(current, inbound, outbound, port, &n.path));
        sets.push((node, port, (inbound, outbound)));
    }
    let mut unkept = Unkept::default();
    for ((node, port, bits), answer) in sets.into_iter().zip(client.run_many(&ops)) {
        let guid = fabric.nodes[node].guid;
        let now = answer.and_then(|d| parse_port_info(&d));
        held.enforcement_answered(guid, port, bits, now.as_ref(), phase, &mut unkept);
        if let Ok(now) = now {
            fabric.node_mut(node).ports[usize::from(port)].info = Some(now);
        }
    }
    unkept.log();

    held.last = Some(Arc::new(SaPartitions { resolved, held: Arc::clone(&held.tables) }));
    phase.smps = client.stats().since(&before);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_cut_into_blocks_padded_to_its_cap() {
        let want: Vec<u16> = (1..=40).collect();
        let t = Target { node: 0, port: 1, path: Arc::from(&[][..]), modifier_port: 0, cap: 64, want: want[..].into() };
        assert_eq!(t.block(0)[..], want[..32]);
        assert_eq!(t.block(1)[..8], want[32..]);
        assert!(t.block(1)[8..].iter().all(|&e| e == 0));
        let mut held = want.clone();
        held.resize(64, 0);
        assert!(t.held_by(&held));
        // Shorter (another cap), longer, or a stray entry after the wanted ones: not held.
        assert!(!t.held_by(&held[..32]));
        held.push(0);
        assert!(!t.held_by(&held));
        held.pop();
        held[50] = 0x8001;
        assert!(!t.held_by(&held));
        // A cap short of a block: the block is held whole.
        let short = Target { cap: 8, want: want[..8].into(), ..t };
        let mut block = want[..8].to_vec();
        block.resize(PKEYS, 0);
        assert!(short.held_by(&block));
        assert!(!short.held_by(&block[..8]));
        assert_eq!(blocks(128), 4);
        assert_eq!(blocks(8), 1);
    }

    #[test]
    fn kept_indexes_stay_and_new_entries_take_the_free_ones() {
        // 0x8001 left, 0x8003 came: it takes the freed index 1.
        assert_eq!(keep_indexes(&[0xFFFF, 0x8002, 0x8003], &[0xFFFF, 0x8001, 0x8002, 0, 0], 8), vec![0xFFFF, 0x8003, 0x8002]);
        // The same partition of the other membership keeps the index.
        assert_eq!(keep_indexes(&[0x8005, 0x7FFF], &[0xFFFF, 0x0005], 8), vec![0x7FFF, 0x8005]);
        // Nothing held: the wanted order; a hole at the end is dropped.
        assert_eq!(keep_indexes(&[0xFFFF, 0x8002], &[], 4), vec![0xFFFF, 0x8002]);
        assert_eq!(keep_indexes(&[0x8002], &[0xFFFF, 0x8002], 4), vec![0, 0x8002]);
    }
}
