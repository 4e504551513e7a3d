//! `opensm.mcfdbs`: multicast forwarding tables.
//!
//! OpenSM lists, per switch, every MLID whose port mask is not empty, and
//! writes nothing at all for a switch without such MLIDs. A routing dump
//! (`smcore route`, or a heavy sweep) is written before any group is
//! programmed, so it is empty, which is also what OpenSM writes for a
//! subnet where nobody joined a group; `ibdmchk -m` accepts it. The SM
//! rewrites the file from its multicast plan ([`write_plan`]) whenever it
//! programs MFTs.

use std::io::{self, Write};

use super::{Ctx, DumpInput};

/// Write `opensm.mcfdbs`.
pub fn write_mcfdbs(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(_w: &mut dyn Write, _ctx: &Ctx<'_>) -> io::Result<()> {
    Ok(())
}

/// `opensm.mcfdbs` for the MFTs `plan` programs on `fabric`, switches in
/// discovery order, MLIDs ascending, ports ascending.
pub fn write_plan(w: &mut impl Write, fabric: &sm_model::Fabric, plan: &crate::mcast::tree::McastPlan) -> io::Result<()> {
    let mut per_switch: std::collections::BTreeMap<u32, Vec<(u16, &[u8])>> = std::collections::BTreeMap::new();
    for t in &plan.trees {
        for (node, ports) in &t.switches {
            per_switch.entry(*node).or_default().push((t.mlid, ports.as_slice()));
        }
    }
    for (node, mut entries) in per_switch {
        let Some(n) = fabric.nodes.get(node as usize) else { continue };
        entries.sort_by_key(|e| e.0);
        write!(w, "\nSwitch 0x{:016x}\nLID    : Out Port(s)\n", n.guid)?;
        for (mlid, ports) in entries {
            write!(w, "0x{mlid:04X} :")?;
            for p in ports {
                write!(w, " 0x{p:03X} ")?;
            }
            writeln!(w)?;
        }
    }
    Ok(())
}
