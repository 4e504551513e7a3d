//! Reading what the SM in charge programmed: every switch's LFT, SL2VL,
//! VLArb, P_Key tables and MFTs, by SubnGet alone.
//!
//! The tables are read into the shapes the engines' routing has
//! ([`sm_abi::Lft`], [`sm_abi::Sl2Vl`], [`sm_abi::VlArb`]) in the node
//! numbering of the discovered fabric, so the verifier judges the live
//! routing exactly as it judges an engine's, and the two can be compared
//! entry by entry.

use std::collections::BTreeMap;

use sm_abi::{Lft, Sl2Vl, VlArb, VlWeight, NO_ROUTE};
use sm_mad::forwarding::{LftPacket, LftRepr, MftModifier, MftPacket, MftRepr, LFT_BLOCK_LEN, MFT_BLOCK_LEN, MULTICAST_LID_BASE};
use sm_mad::mad::attr;
use sm_mad::pkey_table::{Packet as PkeyTablePacket, Repr as PkeyTableRepr};
use sm_mad::{Sl2VlModifier, Sl2VlPacket, Sl2VlRepr, VlArbBlock, VlArbModifier, VlArbPacket, VlArbRepr};
use sm_transport::{SmpClient, SmpError, SmpOp};

use crate::sweep::discovery::{Fabric, FabricNode};

/// Multicast LIDs read at most per switch (the MFT blocks of the first
/// 16,384 multicast LIDs: every multicast LID there is).
const MAX_MLIDS: u16 = 0x4000;

/// P_Key table entries read at most per port.
const MAX_PKEYS: u16 = 32 * 16;

/// What the SM in charge holds in the fabric's tables.
#[derive(Debug, Clone, Default)]
pub struct LiveTables {
    /// One LFT per switch that answered, indexed by LID up to its
    /// LinearFDBTop ([`NO_ROUTE`] beyond and where empty).
    pub lfts: Vec<Lft>,
    /// LinearFDBTop per switch node index.
    pub tops: BTreeMap<u32, u16>,
    /// SL2VL of every (switch, in port, out port) pair of linked ports,
    /// and of every linked CA port.
    pub sl2vl: Vec<Sl2Vl>,
    /// VL arbitration tables of every linked port with more than one
    /// operational VL.
    pub vlarb: Vec<VlArb>,
    /// The P_Keys (non-zero entries) of every CA port and switch port 0,
    /// by (node, port).
    pub pkeys: BTreeMap<(u32, u8), Vec<u16>>,
    /// Multicast forwarding: per switch node, per MLID, the port mask.
    pub mfts: BTreeMap<u32, BTreeMap<u16, u64>>,
    /// Reads that got no usable answer, by attribute name.
    pub unread: BTreeMap<&'static str, u64>,
}

impl LiveTables {
    /// Total reads that failed.
    pub fn unread_total(&self) -> u64 {
        self.unread.values().sum()
    }

    /// Entries of every LFT that hold a port.
    pub fn lft_entries(&self) -> u64 {
        self.lfts.iter().map(|l| l.ports.iter().filter(|&&p| p != NO_ROUTE).count() as u64).sum()
    }
}

/// Reads every table of `fabric` through `client` (SubnGets only).
pub fn read_tables(client: &mut SmpClient<'_>, fabric: &Fabric) -> LiveTables {
    let mut live = LiveTables::default();
    read_lfts(client, fabric, &mut live);
    read_sl2vl(client, fabric, &mut live);
    read_vlarb(client, fabric, &mut live);
    read_pkeys(client, fabric, &mut live);
    read_mfts(client, fabric, &mut live);
    live
}

fn switches(fabric: &Fabric) -> impl Iterator<Item = (u32, &FabricNode)> {
    fabric.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()).map(|(i, n)| (i as u32, &**n))
}

fn miss(live: &mut LiveTables, what: &'static str) {
    *live.unread.entry(what).or_default() += 1;
}

fn read_lfts(client: &mut SmpClient<'_>, fabric: &Fabric, live: &mut LiveTables) {
    let mut ops = Vec::new();
    let mut at = Vec::new();
    for (i, node) in switches(fabric) {
        let Some(info) = node.switch_info.as_ref() else {
            miss(live, "SwitchInfo");
            continue;
        };
        let top = info.linear_fdb_top.min(info.linear_fdb_cap.saturating_sub(1)).min(0xBFFF);
        live.tops.insert(i, top);
        for block in 0..=top / LFT_BLOCK_LEN as u16 {
            let Ok(modifier) = LftRepr::modifier(block) else { continue };
            ops.push(SmpOp::get(attr::LINEAR_FORWARDING_TABLE, modifier, &node.path));
            at.push((i, block));
        }
    }
    let answers = client.run_many(&ops);
    let mut tables: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    for ((i, block), answer) in at.into_iter().zip(answers) {
        let top = live.tops.get(&i).copied().unwrap_or(0);
        let ports = tables.entry(i).or_insert_with(|| vec![NO_ROUTE; usize::from(top) + 1]);
        match answer.and_then(|d| {
            LftPacket::new_checked(&d[..]).and_then(|p| LftRepr::parse(&p)).map_err(|e| SmpError::Malformed(format!("LFT: {e}")))
        }) {
            Ok(repr) => {
                let first = usize::from(block) * LFT_BLOCK_LEN;
                for (k, &port) in repr.ports.iter().enumerate() {
                    if let Some(slot) = ports.get_mut(first + k) {
                        *slot = port;
                    }
                }
            }
            Err(_) => miss(live, "LinearForwardingTable"),
        }
    }
    live.lfts = tables.into_iter().map(|(node, ports)| Lft { node, ports: ports.into() }).collect();
}

fn linked(node: &FabricNode, port: u8) -> bool {
    node.ports.get(usize::from(port)).is_some_and(|p| p.peer.is_some())
}

fn read_sl2vl(client: &mut SmpClient<'_>, fabric: &Fabric, live: &mut LiveTables) {
    let mut ops = Vec::new();
    let mut at = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        let i = i as u32;
        if node.is_switch() {
            let ports: Vec<u8> = (1..=node.num_ports).filter(|&p| linked(node, p)).collect();
            for &input in &ports {
                for &output in &ports {
                    if input == output {
                        continue;
                    }
                    let m = Sl2VlModifier { input_port: input, output_port: output, ..Default::default() };
                    ops.push(SmpOp::get(attr::SL_TO_VL_MAPPING_TABLE, m.to_u32(), &node.path));
                    at.push((i, input, output));
                }
            }
        } else {
            for p in (1..=node.num_ports).filter(|&p| linked(node, p)) {
                let Some(path) = node.ports.get(usize::from(p)).and_then(|x| x.path.as_ref()) else { continue };
                ops.push(SmpOp::get(attr::SL_TO_VL_MAPPING_TABLE, 0, path));
                at.push((i, 0, p));
            }
        }
    }
    let answers = client.run_many(&ops);
    for ((node, in_port, out_port), answer) in at.into_iter().zip(answers) {
        match answer.and_then(|d| {
            Sl2VlPacket::new_checked(&d[..]).and_then(|p| Sl2VlRepr::parse(&p)).map_err(|e| SmpError::Malformed(format!("SL2VL: {e}")))
        }) {
            Ok(repr) => live.sl2vl.push(Sl2Vl { node, in_port, out_port, vl: repr.vl_by_sl }),
            Err(_) => miss(live, "SLtoVLMappingTable"),
        }
    }
}

fn read_vlarb(client: &mut SmpClient<'_>, fabric: &Fabric, live: &mut LiveTables) {
    let mut ops = Vec::new();
    let mut at = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        for p in (1..=node.num_ports).filter(|&p| linked(node, p)) {
            let Some(slot) = node.ports.get(usize::from(p)) else { continue };
            let Some(info) = slot.info.as_ref() else { continue };
            // With one data VL there is nothing to arbitrate.
            if info.operational_vls <= 1 {
                continue;
            }
            let path = if node.is_switch() { Some(&node.path) } else { slot.path.as_ref() };
            let Some(path) = path else { continue };
            let port = if node.is_switch() { u16::from(p) } else { 0 };
            let mut blocks = vec![VlArbBlock::Low0, VlArbBlock::High0];
            if info.vl_arbitration_low_cap > 32 {
                blocks.push(VlArbBlock::Low32);
            }
            if info.vl_arbitration_high_cap > 32 {
                blocks.push(VlArbBlock::High32);
            }
            for block in blocks {
                ops.push(SmpOp::get(attr::VL_ARBITRATION_TABLE, VlArbModifier { block, port }.to_u32(), path));
                at.push((i as u32, p, block, info.vl_high_limit));
            }
        }
    }
    let answers = client.run_many(&ops);
    let mut tables: BTreeMap<(u32, u8), VlArb> = BTreeMap::new();
    for ((node, port, block, high_limit), answer) in at.into_iter().zip(answers) {
        let repr = match answer.and_then(|d| {
            VlArbPacket::new_checked(&d[..]).and_then(|p| VlArbRepr::parse(&p)).map_err(|e| SmpError::Malformed(format!("VLArb: {e}")))
        }) {
            Ok(r) => r,
            Err(_) => {
                miss(live, "VLArbitrationTable");
                continue;
            }
        };
        let table = tables
            .entry((node, port))
            .or_insert_with(|| VlArb { node, port, high_limit, high: Default::default(), low: Default::default() });
        let weights = repr.entries.iter().map(|e| VlWeight { vl: e.vl, weight: e.weight });
        match block {
            VlArbBlock::Low0 | VlArbBlock::Low32 => table.low.extend(weights),
            VlArbBlock::High0 | VlArbBlock::High32 => table.high.extend(weights),
        }
    }
    live.vlarb = tables.into_values().collect();
}

fn read_pkeys(client: &mut SmpClient<'_>, fabric: &Fabric, live: &mut LiveTables) {
    let mut ops = Vec::new();
    let mut at = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        let ports: Vec<u8> = if node.is_switch() { vec![0] } else { (1..=node.num_ports).filter(|&p| linked(node, p)).collect() };
        // A switch's PartitionCap is its port 0's; the external ports have
        // their own (SwitchInfo PartitionEnforcementCap), read only where
        // enforcement is on, which this reader leaves to the SA records.
        let cap = node.partition_cap.clamp(1, MAX_PKEYS);
        for p in ports {
            let path = if node.is_switch() { Some(&node.path) } else { node.ports.get(usize::from(p)).and_then(|x| x.path.as_ref()) };
            let Some(path) = path else { continue };
            for block in 0..cap.div_ceil(32) {
                ops.push(SmpOp::get(attr::P_KEY_TABLE, u32::from(block), path));
                at.push((i as u32, p));
            }
        }
    }
    let answers = client.run_many(&ops);
    for ((node, port), answer) in at.into_iter().zip(answers) {
        match answer.and_then(|d| {
            PkeyTablePacket::new_checked(&d[..])
                .and_then(|p| PkeyTableRepr::parse(&p))
                .map_err(|e| SmpError::Malformed(format!("P_Key table: {e}")))
        }) {
            Ok(repr) => {
                let keys = live.pkeys.entry((node, port)).or_default();
                keys.extend(repr.pkeys.iter().copied().filter(|&k| k & 0x7fff != 0));
            }
            Err(_) => miss(live, "P_KeyTable"),
        }
    }
}

fn read_mfts(client: &mut SmpClient<'_>, fabric: &Fabric, live: &mut LiveTables) {
    let mut ops = Vec::new();
    let mut at = Vec::new();
    for (i, node) in switches(fabric) {
        let Some(info) = node.switch_info.as_ref() else { continue };
        let cap = info.multicast_fdb_cap.min(MAX_MLIDS);
        let positions = node.num_ports / 16 + 1;
        for block in 0..cap.div_ceil(MFT_BLOCK_LEN as u16) {
            for position in 0..positions {
                let Ok(modifier) = (MftModifier { block, position }).to_u32() else { continue };
                ops.push(SmpOp::get(attr::MULTICAST_FORWARDING_TABLE, modifier, &node.path));
                at.push((i, block, position));
            }
        }
    }
    let answers = client.run_many(&ops);
    for ((node, block, position), answer) in at.into_iter().zip(answers) {
        match answer.and_then(|d| {
            MftPacket::new_checked(&d[..]).and_then(|p| MftRepr::parse(&p)).map_err(|e| SmpError::Malformed(format!("MFT: {e}")))
        }) {
            Ok(repr) => {
                for (k, &mask) in repr.port_masks.iter().enumerate() {
                    if mask == 0 {
                        continue;
                    }
                    let mlid = MULTICAST_LID_BASE + block * MFT_BLOCK_LEN as u16 + k as u16;
                    *live.mfts.entry(node).or_default().entry(mlid).or_default() |= u64::from(mask) << (16 * u32::from(position));
                }
            }
            Err(_) => miss(live, "MulticastForwardingTable"),
        }
    }
}
