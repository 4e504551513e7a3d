//! `opensm-lid-matrix.dump`: the hop counts OpenSM routes with, which its
//! `-M` option loads back.
//!
//! ```text
//! Switch: guid 0x0002c90000000100
//! 0x0002: 00 ff ff 02 02 ff ff ff ff # portguid 0x0002c90000000100
//! 0x0003: 01 ff ff 01 01 ff ff ff ff # portguid 0x0002c90000000200
//! ```
//!
//! One row per *switch* LID the switch can reach (OpenSM's matrix holds no
//! CA LIDs: a CA is one hop beyond its switch), one hex column per port from
//! 0 to the last port, `ff` where the port leads nowhere towards that LID.
//! The cost is switches² × ports, streamed straight to the writer.

use std::io::{self, Write};

use super::hops::{Hops, NO_PATH};
use super::{Ctx, DumpInput};

/// Write `opensm-lid-matrix.dump`.
pub fn write_lid_matrix(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    let ctx = Ctx::new(*input)?;
    write(out, &ctx, &Hops::new(&ctx))
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>, hops: &Hops) -> io::Result<()> {
    // Switch base LIDs in ascending order, with the switch's rank.
    let mut targets: Vec<(u16, usize, u64)> = ctx
        .fabric
        .switches()
        .filter_map(|sw| {
            let p0 = ctx.port_of(sw, 0);
            let rank = hops.rank(sw)?;
            (p0.lid != 0 && ctx.owner(p0.lid).is_some()).then_some((p0.lid, rank, p0.guid))
        })
        .collect();
    targets.sort_unstable();

    let mut line = String::new();
    for &sw in &ctx.switches_in_order {
        let node = ctx.node(sw);
        writeln!(w, "Switch: guid 0x{:016x}", node.guid)?;
        let Some(me) = hops.rank(sw) else { continue };
        for &(lid, target, guid) in &targets {
            if hops.dist(me, target) == NO_PATH {
                continue;
            }
            line.clear();
            use std::fmt::Write as _;
            let _ = write!(line, "0x{lid:04x}:");
            for port in 0..=node.num_ports {
                let _ = write!(line, " {:02x}", hops.via_port(ctx, sw, port, target));
            }
            let _ = writeln!(line, " # portguid 0x{guid:016x}");
            w.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}
