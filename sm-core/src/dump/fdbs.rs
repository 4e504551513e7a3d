//! `opensm.fdbs`: every switch's LFT with the hop count of each route and
//! whether it is a shortest one. `ibdmchk -f` reads the LID and port
//! columns.
//!
//! ```text
//! dump_ucast_routes: Switch 0x0002c90000000100
//! LID    : Port : Hops : Optimal
//! 0x0001 : 001  : 01   : yes
//! 0x0005 : 003  : 02   : yes
//! 0x0007 : UNREACHABLE
//! ```
//!
//! Hop counts follow OpenSM's `dump_ucast_routes`: towards a CA they are
//! counted to the CA's switch plus one, and a CA on the dumping switch
//! itself is always one optimal hop away whatever port the LFT names. For a
//! route that is not a shortest one OpenSM names the port its min-hop
//! balancing would pick; we name the lowest-numbered shortest-path port.

use std::io::{self, Write};

use sm_abi::{NodeKind, NO_ROUTE};

use super::hops::{Hops, NO_PATH};
use super::{Ctx, DumpInput};

/// Write `opensm.fdbs`.
pub fn write_fdbs(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    let ctx = Ctx::new(*input)?;
    write(out, &ctx, &Hops::new(&ctx))
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>, hops: &Hops) -> io::Result<()> {
    for &sw in &ctx.switches_in_order {
        writeln!(w, "dump_ucast_routes: Switch 0x{:016x}", ctx.node(sw).guid)?;
        writeln!(w, "LID    : Port : Hops : Optimal")?;
        let me = hops.rank(sw);
        for lid in 1..=ctx.max_lid {
            write!(w, "0x{lid:04X} : ")?;
            let port = ctx.lft_port(sw, lid);
            let (Some(owner), Some(me)) = (ctx.owner(lid), me) else {
                writeln!(w, "UNREACHABLE")?;
                continue;
            };
            if port == NO_ROUTE {
                writeln!(w, "UNREACHABLE")?;
                continue;
            }
            let target = ctx.port(owner);
            let (num_hops, best_hops, target_switch) =
                if ctx.node(target.node).kind == NodeKind::Switch {
                    match hops.rank(target.node) {
                        Some(t) => (hops.via_port(ctx, sw, port, t), hops.dist(me, t), Some(t)),
                        None => (NO_PATH, NO_PATH, None),
                    }
                } else {
                    // Counted to the switch the CA hangs off, plus the last hop.
                    let switch = ctx.live_peer(owner).map(|q| ctx.port(q).node);
                    match switch.and_then(|s| hops.rank(s).map(|t| (s, t))) {
                        Some((s, t)) => {
                            let via = if s == sw { 0 } else { hops.via_port(ctx, sw, port, t) };
                            if via == NO_PATH {
                                (NO_PATH, NO_PATH, None)
                            } else {
                                (via.saturating_add(1), hops.dist(me, t).saturating_add(1), Some(t))
                            }
                        }
                        None => (NO_PATH, NO_PATH, None),
                    }
                };
            if num_hops == NO_PATH {
                writeln!(w, "{port:03}  : HOPS UNKNOWN")?;
                continue;
            }
            write!(w, "{port:03}  : {num_hops:02}   : ")?;
            if best_hops == num_hops {
                writeln!(w, "yes")?;
            } else {
                let best_port = target_switch.map_or(0, |t| hops.best_port(ctx, sw, t));
                writeln!(w, "No {best_hops} hop path possible via port {best_port}!")?;
            }
        }
    }
    Ok(())
}
