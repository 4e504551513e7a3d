//! The light sweep: one SwitchInfo Get per switch, to learn whether
//! anything changed since the last heavy sweep.
//!
//! A switch sets SwitchInfo.PortStateChange whenever one of its ports goes
//! down or comes up through the link (IBA 14.2.5.4). Reading that bit from
//! every switch is a cheap census: a fabric of N switches costs N SMPs,
//! against the thousands of a heavy sweep. A switch that no longer answers
//! on its directed route is a change too (it, or a switch on the way, is
//! gone). The bits found set are cleared at once (the bit is
//! write-one-to-clear), so that a change during the heavy sweep that
//! follows is seen by the next light sweep rather than lost.
//!
//! A heavy sweep that missed something ([`Fabric::incomplete`]: SMPs
//! lost, nodes kept from memory, Sets that did not take) is retried at the
//! next light sweep: one sweep interval is the back-off between tries.

use sm_mad::mad::attr;
use sm_mad::smp::DATA_LEN;
use sm_mad::{SwitchInfoPacket, SwitchInfoRepr};

use super::discovery::Fabric;
use super::transport::{SmpClient, SmpOp};

/// What a light sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LightOutcome {
    /// Switches (node index, GUID) with PortStateChange set.
    pub changed: Vec<(usize, u64)>,
    /// Switches that did not answer, or answered garbage.
    pub lost: Vec<(usize, u64)>,
    /// SMPs sent.
    pub smps: u64,
    /// The last heavy sweep missed something (SMPs lost, nodes or links
    /// kept from memory, programming that did not take): it is tried again.
    pub incomplete: bool,
}

impl LightOutcome {
    /// Whether a heavy sweep is due.
    pub fn needs_heavy_sweep(&self) -> bool {
        self.incomplete || !self.changed.is_empty() || !self.lost.is_empty()
    }
}

/// The Set that clears a switch's PortStateChange (write one to clear):
/// everything else is written back as read.
fn clear_op(info: &SwitchInfoRepr, path: &[u8]) -> SmpOp {
    let mut data = [0u8; DATA_LEN];
    info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    SmpOp::set(attr::SWITCH_INFO, 0, path, data)
}

/// Clears PortStateChange on the switches whose SwitchInfo, as a heavy
/// sweep's discovery just read it, has it set: that sweep sees those
/// changes, so the next light sweep must not sweep for them again. Only
/// the master may do this (a standby's discovery writes nothing).
pub fn clear_seen_changes(client: &mut SmpClient<'_>, fabric: &Fabric) -> usize {
    let clears: Vec<SmpOp> = fabric
        .nodes
        .iter()
        .filter_map(|n| n.switch_info.filter(|i| i.port_state_change).map(|i| clear_op(&i, &n.path)))
        .collect();
    for (op, result) in clears.iter().zip(client.run_many(&clears)) {
        if let Err(e) = result {
            tracing::debug!(path = ?op.path, "PortStateChange not cleared: {e}");
        }
    }
    clears.len()
}

/// Reads PortStateChange from every switch of `fabric` (as the last heavy
/// sweep found it) and clears the bits found set.
pub fn light_sweep(client: &mut SmpClient<'_>, fabric: &Fabric) -> LightOutcome {
    let before = client.stats().sent;
    let mut out = LightOutcome { incomplete: fabric.incomplete, ..LightOutcome::default() };
    let switches: Vec<(usize, &super::FabricNode)> =
        fabric.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()).map(|(i, n)| (i, &**n)).collect();
    let ops: Vec<SmpOp> = switches.iter().map(|(_, n)| SmpOp::get(attr::SWITCH_INFO, 0, &n.path)).collect();
    let answers = client.run_many(&ops);
    let mut clears = Vec::new();
    for (&(i, node), answer) in switches.iter().zip(answers) {
        match answer.and_then(|d| super::discovery::parse_switch_info(&d)) {
            Ok(info) if info.port_state_change => {
                out.changed.push((i, node.guid));
                clears.push(clear_op(&info, &node.path));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(guid = format_args!("{:#018x}", node.guid), "light sweep: {e}");
                out.lost.push((i, node.guid));
            }
        }
    }
    for (op, result) in clears.iter().zip(client.run_many(&clears)) {
        if let Err(e) = result {
            tracing::debug!(path = ?op.path, "PortStateChange not cleared: {e}");
        }
    }
    out.smps = client.stats().sent - before;
    out
}
