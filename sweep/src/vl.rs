//! Programming SL2VL and VL arbitration tables, when the engine gives any.
//!
//! Deadlock-free engines (torus-2QoS, lash, dfsssp, nue) keep their routes
//! apart by virtual lane: the path SL picks a layer and the SL2VL tables
//! map it to a VL at every hop, so a routing whose LFTs are in but whose
//! SL2VL tables are not is not the routing that was verified. They are
//! written after the LFTs and before the ports go Active, so traffic never
//! flows on the new routes with the old lanes.
//!
//! As with LFT blocks, only what differs from what the node is known to
//! hold is written. What an earlier sweep wrote is trusted while the node
//! cannot have been reset: a switch whose LFT cache was trusted, a CA
//! whose port did not come back through Init. Otherwise the table is
//! written again (a Set costs what a Get costs).

use std::sync::Arc;

use sm_abi::Routing;
use sm_mad::mad::attr;
use sm_mad::smp::DATA_LEN;
use sm_mad::{PortState, Sl2VlModifier, Sl2VlPacket, Sl2VlRepr, VlArbBlock, VlArbEntry, VlArbModifier, VlArbPacket, VlArbRepr};
use tracing::{debug, warn};

use super::discovery::Fabric;
use super::program::{HeldTables, RoutingProgramReport};
use super::transport::{SmpClient, SmpError, SmpOp};

fn enhanced_port0(node: &super::discovery::FabricNode) -> bool {
    node.switch_info.as_ref().is_some_and(|s| s.enhanced_port0)
}

/// One SL2VL table the routing wants written.
struct Sl2VlWant {
    key: (u64, u8, u8),
    path: Vec<u8>,
    modifier: u32,
    vl: [u8; 16],
    /// Written by a Set of its own (not held, or overwritten by an
    /// all-input-ports Set with another table).
    write: bool,
    /// The node held it before this sweep.
    was_held: bool,
    /// Whether the switch takes AllInputPorts (SwitchInfo
    /// OptimizedSLtoVLMappingProgramming) and the option is on.
    optimizable: bool,
}

/// Writes `routing`'s SL2VL and VLArb tables into `fabric`. With
/// `optimized_sl2vl` (OpenSM `use_optimized_slvl`), a switch that takes
/// SwitchInfo:OptimizedSLtoVLMappingProgramming gets, per output port,
/// one Set with AllInputPorts carrying the table most of its input ports
/// want, then Sets of their own for the input ports that want another:
/// the tables end as without the option, for fewer SMPs.
pub fn program_vl_tables(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    routing: &Routing,
    held: &mut HeldTables,
    report: &mut RoutingProgramReport,
    optimized_sl2vl: bool,
    suppress_status_errors: bool,
) {
    // CAs whose port trained afresh may have lost their tables.
    for node in fabric.nodes.iter().filter(|n| !n.is_switch()) {
        let reset = node.ports.iter().any(|p| p.info.as_ref().is_some_and(|i| i.port_state == PortState::Init));
        if reset {
            held.forget_vl_tables(node.guid);
        }
    }
    let before = client.stats().clone();
    let mut wants = Vec::new();
    for entry in routing.sl2vl.iter() {
        let Some(node) = fabric.nodes.get(entry.node as usize) else {
            warn!(node = entry.node, "SL2VL for a node not in the fabric; ignored");
            report.sl2vl.failed += 1;
            continue;
        };
        // A switch is addressed on its own path with the port pair in the
        // modifier; a CA port through itself, modifier 0.
        let (path, modifier) = if node.is_switch() {
            let m = Sl2VlModifier { input_port: entry.in_port, output_port: entry.out_port, ..Default::default() };
            (Some(&node.path), m.to_u32())
        } else {
            (node.ports.get(usize::from(entry.out_port)).and_then(|p| p.path.as_ref()), 0)
        };
        let Some(path) = path else {
            // An unlinked CA port: nothing to program.
            continue;
        };
        if node.is_switch() && entry.out_port == 0 && !enhanced_port0(node) {
            // A base port 0 has no map (see `super::qos`).
            continue;
        }
        let key = (node.guid, entry.in_port, entry.out_port);
        let optimizable = optimized_sl2vl
            && node.is_switch()
            && node.switch_info.as_ref().is_some_and(|s| s.optimized_sl2vl_programming != 0);
        let write = held.sl2vl.get(&key) != Some(&entry.vl);
        wants.push(Sl2VlWant { key, path: path.to_vec(), modifier, vl: entry.vl, write, was_held: !write, optimizable });
    }
    // The AllInputPorts Sets: (node GUID, output port, table, the wants it
    // covers), where one saves SMPs.
    let mut all_inputs: Vec<((u64, u8), [u8; 16], Vec<usize>)> = Vec::new();
    if optimized_sl2vl {
        let mut by_output: std::collections::BTreeMap<(u64, u8), Vec<usize>> = Default::default();
        for (i, w) in wants.iter().enumerate().filter(|(_, w)| w.optimizable) {
            by_output.entry((w.key.0, w.key.2)).or_default().push(i);
        }
        for (output, members) in by_output {
            // The table most input ports want (the first met among equals).
            let mut counts: Vec<([u8; 16], usize)> = Vec::new();
            for &i in &members {
                match counts.iter_mut().find(|(t, _)| *t == wants[i].vl) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((wants[i].vl, 1)),
                }
            }
            let Some(&(common, _)) = counts.iter().reduce(|a, b| if b.1 > a.1 { b } else { a }) else { continue };
            let plain = members.iter().filter(|&&i| wants[i].write).count();
            let others = members.iter().filter(|&&i| wants[i].vl != common).count();
            if 1 + others >= plain {
                continue;
            }
            let covered: Vec<usize> = members.iter().copied().filter(|&i| wants[i].vl == common).collect();
            for &i in &members {
                // The AllInputPorts Set overwrites every input port's table.
                wants[i].write = wants[i].vl != common;
            }
            all_inputs.push((output, common, covered));
        }
    }
    let mut ops = Vec::new();
    for ((guid, out_port), vl, covered) in &all_inputs {
        let m = Sl2VlModifier { output_port: *out_port, all_input_ports: true, ..Default::default() };
        let mut data = [0u8; DATA_LEN];
        Sl2VlRepr { vl_by_sl: *vl }.emit(&mut Sl2VlPacket::new_unchecked(&mut data[..]));
        let path = &wants[covered[0]].path;
        ops.push(SmpOp::set(attr::SL_TO_VL_MAPPING_TABLE, m.to_u32(), path, data));
        // What the port held for any input is gone.
        held.sl2vl.retain(|k, _| !(k.0 == *guid && k.2 == *out_port));
    }
    let answers = client.run_many(&ops);
    for (((guid, out_port), vl, covered), answer) in all_inputs.into_iter().zip(answers) {
        let now = answer.and_then(|d| {
            Sl2VlPacket::new_checked(&d[..])
                .and_then(|p| Sl2VlRepr::parse(&p))
                .map_err(|e| SmpError::Malformed(format!("SL2VL: {e}")))
        });
        match now {
            Ok(now) if now.vl_by_sl == vl => {
                report.sl2vl.set += 1;
                for i in covered {
                    held.sl2vl.insert(wants[i].key, vl);
                }
            }
            other => {
                let error = other.err().map(|e| e.to_string()).unwrap_or_else(|| "did not take effect".into());
                warn!(guid = format_args!("{guid:#018x}"), out_port, error, "SL2VL Set for all input ports failed; one Set per input port");
                report.sl2vl.failed += 1;
                for i in covered {
                    wants[i].write = true;
                }
            }
        }
    }
    let mut targets = Vec::new();
    let mut ops = Vec::new();
    for w in &wants {
        if !w.write {
            if w.was_held {
                report.sl2vl.unchanged += 1;
            }
            continue;
        }
        let mut data = [0u8; DATA_LEN];
        Sl2VlRepr { vl_by_sl: w.vl }.emit(&mut Sl2VlPacket::new_unchecked(&mut data[..]));
        ops.push(SmpOp::set(attr::SL_TO_VL_MAPPING_TABLE, w.modifier, &w.path, data));
        targets.push((w.key, w.vl));
    }
    let answers = client.run_many(&ops);
    for ((key, vl), answer) in targets.into_iter().zip(answers) {
        let now = answer.and_then(|d| {
            Sl2VlPacket::new_checked(&d[..])
                .and_then(|p| Sl2VlRepr::parse(&p))
                .map_err(|e| SmpError::Malformed(format!("SL2VL: {e}")))
        });
        let (guid, in_port, out_port) = key;
        match now {
            Ok(now) if now.vl_by_sl == vl => {
                report.sl2vl.set += 1;
                held.sl2vl.insert(key, vl);
            }
            Ok(_) => {
                warn!(guid = format_args!("{guid:#018x}"), in_port, out_port, "SL2VL Set did not take effect");
                report.sl2vl.failed += 1;
                held.sl2vl.remove(&key);
            }
            Err(e @ SmpError::Status(_)) if suppress_status_errors => {
                // OpenSM's suppress_sl2vl_mad_status_errors: not an error.
                debug!(guid = format_args!("{guid:#018x}"), in_port, out_port, error = %e, "SL2VL Set refused");
                report.sl2vl.failed += 1;
                held.sl2vl.remove(&key);
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), in_port, out_port, error = %e, "SL2VL Set failed");
                report.sl2vl.failed += 1;
                held.sl2vl.remove(&key);
            }
        }
    }
    let after_sl2vl = client.stats().clone();
    report.sl2vl.smps = after_sl2vl.since(&before);

    let mut targets = Vec::new();
    let mut ops = Vec::new();
    for arb in routing.vlarb.iter() {
        let Some(node) = fabric.nodes.get(arb.node as usize) else {
            warn!(node = arb.node, "VLArb for a node not in the fabric; ignored");
            report.vlarb.failed += 1;
            continue;
        };
        if node.is_switch() && arb.port == 0 && !enhanced_port0(node) {
            // A base port 0 has no VLArb table (see `super::qos`).
            continue;
        }
        let path = if node.is_switch() {
            Some(&node.path)
        } else {
            node.ports.get(usize::from(arb.port)).and_then(|p| p.path.as_ref())
        };
        let Some(path) = path else { continue };
        let tables = [
            (VlArbBlock::Low0, &arb.low[..arb.low.len().min(32)]),
            (VlArbBlock::Low32, arb.low.get(32..).unwrap_or(&[])),
            (VlArbBlock::High0, &arb.high[..arb.high.len().min(32)]),
            (VlArbBlock::High32, arb.high.get(32..).unwrap_or(&[])),
        ];
        let info = node.ports.get(usize::from(arb.port)).and_then(|p| p.info.as_ref());
        for (block, weights) in tables {
            if weights.is_empty() {
                continue;
            }
            // A port has a second block only with a capacity above 32
            // entries; the SA shows one it lacks as empty.
            let cap = match block {
                VlArbBlock::Low32 => info.map(|i| i.vl_arbitration_low_cap),
                VlArbBlock::High32 => info.map(|i| i.vl_arbitration_high_cap),
                _ => None,
            };
            if cap.is_some_and(|c| c <= 32) {
                continue;
            }
            let mut want = [(0u8, 0u8); 32];
            for (slot, w) in want.iter_mut().zip(weights) {
                *slot = (w.vl, w.weight);
            }
            let key = (node.guid, arb.port, block as u16);
            if held.vlarb.get(&key) == Some(&want) {
                report.vlarb.unchanged += 1;
                continue;
            }
            let mut repr = VlArbRepr { entries: [VlArbEntry::default(); 32] };
            for (e, &(vl, weight)) in repr.entries.iter_mut().zip(&want) {
                *e = VlArbEntry { vl, weight };
            }
            let mut data = [0u8; DATA_LEN];
            repr.emit(&mut VlArbPacket::new_unchecked(&mut data[..]));
            let port = if node.is_switch() { u16::from(arb.port) } else { 0 };
            ops.push(SmpOp::set(attr::VL_ARBITRATION_TABLE, VlArbModifier { block, port }.to_u32(), path, data));
            targets.push((key, want));
        }
    }
    let answers = client.run_many(&ops);
    for ((key, want), answer) in targets.into_iter().zip(answers) {
        match answer {
            Ok(_) => {
                report.vlarb.set += 1;
                held.vlarb.insert(key, want);
            }
            Err(e) => {
                warn!(guid = format_args!("{:#018x}", key.0), port = key.1, error = %e, "VLArb Set failed");
                report.vlarb.failed += 1;
                held.vlarb.remove(&key);
            }
        }
    }
    program_high_limits(client, fabric, routing, report);
    report.vlarb.smps = client.stats().since(&after_sl2vl);
}

/// PortInfo:VLHighLimit of every port given a VLArb table, where the port
/// holds another value (counted with the VLArb blocks). Discovery reads
/// every PortInfo at each heavy sweep, so no record of earlier writes is
/// needed to write only what differs.
fn program_high_limits(client: &mut SmpClient<'_>, fabric: &mut Fabric, routing: &Routing, report: &mut RoutingProgramReport) {
    let mut targets = Vec::new();
    let mut ops = Vec::new();
    for arb in routing.vlarb.iter() {
        let Some(node) = fabric.nodes.get(arb.node as usize) else { continue };
        if node.is_switch() && arb.port == 0 && !enhanced_port0(node) {
            continue;
        }
        let Some(slot) = node.ports.get(usize::from(arb.port)) else { continue };
        let path = if node.is_switch() { Some(&node.path) } else { slot.path.as_ref() };
        let (Some(current), Some(path)) = (slot.info, path) else { continue };
        if current.vl_high_limit == arb.high_limit {
            continue;
        }
        ops.push(crate::port_info::vl_high_limit(current, arb.high_limit, arb.port, path));
        targets.push((arb.node as usize, node.guid, arb.port, arb.high_limit));
    }
    let answers = client.run_many(&ops);
    for ((index, guid, port, want), answer) in targets.into_iter().zip(answers) {
        match answer.and_then(|d| super::discovery::parse_port_info(&d)) {
            Ok(now) => {
                if now.vl_high_limit == want {
                    report.vlarb.set += 1;
                } else {
                    warn!(guid = format_args!("{guid:#018x}"), port, want, now = now.vl_high_limit, "VLHighLimit Set did not take effect");
                    report.vlarb.failed += 1;
                }
                // Port state changes later in the sweep write this PortInfo
                // back: it must carry what the port holds now.
                if let Some(slot) = fabric.nodes.get_mut(index).and_then(|n| Arc::make_mut(n).ports.get_mut(usize::from(port))) {
                    slot.info = Some(now);
                }
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "VLHighLimit Set failed");
                report.vlarb.failed += 1;
            }
        }
    }
}
