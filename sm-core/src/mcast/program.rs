//! MFT programming: the blocks of 32 MLIDs × 16 ports that differ from
//! what each switch holds.
//!
//! What a switch holds is known once we wrote it. A switch met for the
//! first time gets every block in use written (zeros included), so entries
//! a previous SM left behind cannot leak traffic; after that only changed
//! blocks go out, which is also how a group that ended is cleared.
//!
//! A switch that advertises IsMulticastFDBTopSupported ignores entries
//! above its SwitchInfo.MulticastFDBTop, so that is set to the last MLID of
//! the highest block it uses (0xBFFF: none), as OpenSM does; the SwitchInfo
//! is read first and written back with only that field changed.

use std::collections::{BTreeMap, HashMap};

use sm_mad::forwarding::{MftModifier, MFT_BLOCK_LEN};
use sm_mad::mad::attr;
use sm_mad::port_info::capability::IS_MULTICAST_FDB_TOP_SUPPORTED;
use sm_mad::smp::DATA_LEN;
use sm_mad::{SwitchInfoPacket, SwitchInfoRepr};
use tracing::{debug, warn};

use super::tree::McastPlan;
use sm_transport::{SmpClient, SmpOp};
use sm_model::Fabric;

/// First multicast LID.
const MLID_BASE: u16 = 0xC000;

/// One MFT block's masks.
type Block = [u16; MFT_BLOCK_LEN];

/// The MFT blocks each switch holds, as far as we wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldMfts {
    /// Switch GUID → (block, position) → masks. A switch absent here is
    /// unknown: its next programming writes every block in use.
    switches: HashMap<u64, BTreeMap<(u16, u8), Block>>,
    /// MulticastFDBTop as we set it, per switch GUID.
    tops: HashMap<u64, u16>,
}

impl HeldMfts {
    /// Nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget a switch (it rebooted or left): it is rewritten in full.
    pub fn forget(&mut self, guid: u64) {
        self.switches.remove(&guid);
        self.tops.remove(&guid);
    }

    /// Keep only the switches `keep` says are still trusted.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        self.switches.retain(|g, _| keep(*g));
        self.tops.retain(|g, _| keep(*g));
    }

    /// The port mask switch `guid` holds for `mlid`, if known.
    pub fn mask(&self, guid: u64, mlid: u16, position: u8) -> Option<u16> {
        let offset = mlid.checked_sub(MLID_BASE)?;
        let block = offset / MFT_BLOCK_LEN as u16;
        let held = self.switches.get(&guid)?;
        Some(
            held.get(&(block, position))
                .map_or(0, |b| b[usize::from(offset) % MFT_BLOCK_LEN]),
        )
    }
}

/// What one MFT programming did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MftReport {
    /// Blocks written.
    pub written: u64,
    /// Blocks whose write was not answered (retried at the next change).
    pub failed: u64,
    /// Blocks that already held what they should.
    pub unchanged: u64,
    /// MLIDs beyond a switch's MulticastFDBCap, left out.
    pub over_capacity: u64,
    /// MulticastFDBTop Sets (switches that support it, when it changes).
    pub tops_set: u64,
}

/// Writes the MFT blocks `plan` needs that the switches do not hold.
pub fn program_mfts(
    client: &mut SmpClient<'_>,
    fabric: &Fabric,
    plan: &McastPlan,
    held: &mut HeldMfts,
) -> MftReport {
    let mut report = MftReport::default();
    // Wanted blocks per switch node.
    let mut wanted: HashMap<usize, BTreeMap<(u16, u8), Block>> = HashMap::new();
    // A tree below the multicast range has no MFT entry (the groups never
    // hand one out; a plan is not trusted to agree).
    let trees: Vec<_> = plan.trees.iter().filter(|t| t.mlid >= MLID_BASE).collect();
    let top_block = trees
        .iter()
        .map(|t| (t.mlid - MLID_BASE) / MFT_BLOCK_LEN as u16)
        .max();
    for tree in trees {
        for (&node, ports) in &tree.switches {
            let Some(n) = fabric.nodes.get(node as usize) else {
                continue;
            };
            let cap = n.switch_info.map_or(0, |i| i.multicast_fdb_cap);
            if cap != 0 && tree.mlid - MLID_BASE >= cap {
                report.over_capacity += 1;
                warn!(
                    guid = format_args!("{:#018x}", n.guid),
                    mlid = tree.mlid,
                    cap,
                    "MLID beyond the switch's MulticastFDBCap"
                );
                continue;
            }
            let blocks = wanted.entry(node as usize).or_default();
            for &port in ports {
                let Some((m, index, bit)) = MftModifier::locate(tree.mlid, port) else {
                    continue;
                };
                blocks
                    .entry((m.block, m.position))
                    .or_insert([0; MFT_BLOCK_LEN])[index] |= bit;
            }
        }
    }
    let mut ops = Vec::new();
    let mut targets = Vec::new();
    // Highest block each switch uses, for MulticastFDBTop.
    let mut top_blocks: HashMap<usize, u16> = HashMap::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        if !n.is_switch() {
            continue;
        }
        let want = wanted.remove(&i).unwrap_or_default();
        if let Some(&(block, _)) = want.keys().next_back() {
            top_blocks.insert(i, block);
        }
        let positions = n.num_ports / 16;
        let mut keys: Vec<(u16, u8)> = want.keys().copied().collect();
        match held.switches.get(&n.guid) {
            // Known: what it holds beyond `want` must be cleared too.
            Some(h) => keys.extend(h.keys().copied()),
            // Unknown: every block in use that it has, every position.
            None => {
                let cap = n.switch_info.map_or(0, |i| i.multicast_fdb_cap);
                let last_block = match cap {
                    // Not told: the blocks in use.
                    0 => top_block,
                    cap => top_block.map(|t| t.min((cap - 1) / MFT_BLOCK_LEN as u16)),
                };
                if let Some(top) = last_block {
                    for b in 0..=top {
                        keys.extend((0..=positions).map(|p| (b, p)));
                    }
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let known = held.switches.contains_key(&n.guid);
        for key in keys {
            let block = want.get(&key).copied().unwrap_or([0; MFT_BLOCK_LEN]);
            let holds = held
                .switches
                .get(&n.guid)
                .and_then(|h| h.get(&key))
                .copied();
            if known && holds.unwrap_or([0; MFT_BLOCK_LEN]) == block {
                report.unchanged += 1;
                continue;
            }
            let modifier = MftModifier {
                block: key.0,
                position: key.1,
            };
            let Ok(m) = modifier.to_u32() else { continue };
            let mut data = [0u8; DATA_LEN];
            for (k, mask) in block.iter().enumerate() {
                data[2 * k..2 * k + 2].copy_from_slice(&mask.to_be_bytes());
            }
            ops.push(SmpOp::set(
                attr::MULTICAST_FORWARDING_TABLE,
                m,
                &n.path,
                data,
            ));
            targets.push((n.guid, key, block));
        }
        // With nothing in use an unknown switch stays unknown: only a full
        // write makes its content known.
        if known || top_block.is_some() {
            held.switches.entry(n.guid).or_default();
        }
    }
    let results = client.run_many(&ops);
    for ((guid, key, block), result) in targets.into_iter().zip(results) {
        let blocks = held.switches.entry(guid).or_default();
        match result {
            Ok(_) => {
                report.written += 1;
                if block == [0; MFT_BLOCK_LEN] {
                    blocks.remove(&key);
                } else {
                    blocks.insert(key, block);
                }
            }
            Err(e) => {
                report.failed += 1;
                debug!(
                    guid = format_args!("{guid:#018x}"),
                    block = key.0,
                    position = key.1,
                    "MFT block not written: {e}"
                );
                // Unknown content: make the next programming write it.
                blocks.insert(key, [0xFFFF; MFT_BLOCK_LEN]);
            }
        }
    }
    set_tops(client, fabric, &top_blocks, held, &mut report);
    report
}

/// The last MLID of MFT block `block`: the MulticastFDBTop that covers
/// it. The last block ends at 0xFFFF, which must not wrap around.
fn last_mlid_of_block(block: u16) -> u16 {
    let last = u32::from(MLID_BASE) + (u32::from(block) + 1) * MFT_BLOCK_LEN as u32 - 1;
    u16::try_from(last).unwrap_or(u16::MAX)
}

/// MulticastFDBTop for every switch that supports it (see the module
/// documentation).
fn set_tops(
    client: &mut SmpClient<'_>,
    fabric: &Fabric,
    top_blocks: &HashMap<usize, u16>,
    held: &mut HeldMfts,
    report: &mut MftReport,
) {
    let mut changes = Vec::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        let supports = n
            .ports
            .first()
            .and_then(|p| p.info)
            .is_some_and(|i| i.capability_mask & IS_MULTICAST_FDB_TOP_SUPPORTED != 0);
        let Some(info) = n.switch_info.filter(|_| n.is_switch() && supports) else {
            continue;
        };
        let want = top_blocks.get(&i).map_or(MLID_BASE - 1, |&b| last_mlid_of_block(b));
        let holds = held
            .tops
            .get(&n.guid)
            .copied()
            .unwrap_or(info.multicast_fdb_top);
        if holds != want {
            changes.push((n.guid, n.path.clone(), want));
        }
    }
    if changes.is_empty() {
        return;
    }
    // Read-modify-write: LinearFDBTop and the rest stay as the switch
    // holds them now.
    let reads: Vec<SmpOp> = changes
        .iter()
        .map(|(_, path, _)| SmpOp::get(attr::SWITCH_INFO, 0, path))
        .collect();
    let mut sets = Vec::new();
    let mut set_for = Vec::new();
    for ((guid, path, want), answer) in changes.into_iter().zip(client.run_many(&reads)) {
        let parsed = answer.ok().and_then(|d| {
            SwitchInfoPacket::new_checked(&d[..])
                .ok()
                .and_then(|p| SwitchInfoRepr::parse(&p).ok())
        });
        let Some(mut info) = parsed else {
            report.failed += 1;
            continue;
        };
        info.multicast_fdb_top = want;
        // Write-one-to-clear: never clear a change the light sweep must see.
        info.port_state_change = false;
        let mut data = [0u8; DATA_LEN];
        info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
        sets.push(SmpOp::set(attr::SWITCH_INFO, 0, &path, data));
        set_for.push((guid, want));
    }
    for ((guid, want), result) in set_for.into_iter().zip(client.run_many(&sets)) {
        match result {
            Ok(_) => {
                report.tops_set += 1;
                held.tops.insert(guid, want);
            }
            Err(e) => {
                report.failed += 1;
                debug!(
                    guid = format_args!("{guid:#018x}"),
                    "MulticastFDBTop not set: {e}"
                );
            }
        }
    }
}
