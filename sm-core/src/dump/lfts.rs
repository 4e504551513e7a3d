//! `opensm-lfts.dump`: what OpenSM writes with `-D 0x43` and what its `file`
//! routing engine (`-U`) reads back.
//!
//! ```text
//! Unicast lids [0-6] of switch Lid 2 guid 0x0002c90000000100 ('sw1'):
//! 0x0001 001 # Channel Adapter portguid 0x0002c90000001001: 'h1'
//! 0x0002 000 # Switch portguid 0x0002c90000000100: 'sw1'
//! 6 lids dumped
//! ```
//!
//! Entries without a valid port are left out. The trailer repeats the top of
//! the LID range, not the number of entries, exactly as OpenSM does.

use std::io::{self, Write};

use super::{node_type_str, print_desc, Ctx, DumpInput};

/// Write `opensm-lfts.dump`.
pub fn write_lfts(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>) -> io::Result<()> {
    for &sw in &ctx.switches_in_order {
        let node = ctx.node(sw);
        writeln!(
            w,
            "Unicast lids [0-{}] of switch Lid {} guid 0x{:016x} ('{}'):",
            ctx.max_lid,
            ctx.port_of(sw, 0).lid,
            node.guid,
            print_desc(&node.description)
        )?;
        if let Some(lft) = ctx.lft(sw) {
            let top = (ctx.max_lid as usize).min(lft.ports.len().saturating_sub(1));
            for (lid, &port) in lft.ports.iter().enumerate().take(top + 1) {
                if port > node.num_ports {
                    continue;
                }
                write!(w, "0x{lid:04x} {port:03} # ")?;
                match ctx.owner(lid as u16) {
                    Some(owner) => {
                        let p = ctx.port(owner);
                        let n = ctx.node(p.node);
                        writeln!(
                            w,
                            "{} portguid 0x{:016x}: '{}'",
                            node_type_str(n.kind),
                            p.guid,
                            print_desc(&n.description)
                        )?;
                    }
                    None => writeln!(w, "unknown node and type")?,
                }
            }
        }
        writeln!(w, "{} lids dumped", ctx.max_lid)?;
    }
    Ok(())
}
