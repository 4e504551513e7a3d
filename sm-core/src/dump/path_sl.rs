//! `smcore-path-sl.psl`: the SL of every path, for `ibdmchk -c`.
//!
//! OpenSM writes no such file; this is the format of `ibdiagnet.psl`, which
//! `ibdmchk` documents for `-c`: one line per (source node, destination LID),
//!
//! ```text
//! 0x0002c90000001000 5 1
//! ```
//!
//! with the source *node* GUID in hex and the LID and SL in decimal.
//! `ibdmchk` keys path SLs by source node, not by source LID, so a node
//! with several ports (or an LMC) gets the SLs of its lowest-numbered port's
//! base LID; its other source LIDs are assumed to use the same SLs.
//! Sources are every node with a LID (switches too, which `ibdmchk -a`
//! uses), destinations every LID the node does not own itself.
//!
//! When every path uses SL 0 the file is left empty: `ibdmchk` then uses
//! SL 0 for every path, exactly as without `-c`, and a large fabric is
//! spared a nodes × LIDs file.

use std::io::{self, Write};

use sm_abi::abi_stable::std_types::ROption;

use super::{invalid, is_lid_port, Ctx, DumpInput};

/// Write the path-SL file.
pub fn write_path_sl(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>) -> io::Result<()> {
    let oracle = &ctx.routing.path_sl;
    let uniform = match oracle.uniform() {
        ROption::RSome(0) => return Ok(()),
        ROption::RSome(sl) => Some(sl),
        ROption::RNone => None,
    };
    if let Some(sl) = uniform.filter(|&sl| sl > 15) {
        return Err(invalid(format!("the path SL oracle says every path uses SL {sl}")));
    }

    let mut line = String::with_capacity(40);
    for &n in &ctx.nodes_in_order {
        let node = ctx.node(n);
        let first = node.first_port;
        let Some(src) =
            (first..=first + node.num_ports as u32).find(|&p| is_lid_port(ctx.fabric, p))
        else {
            continue;
        };
        let slid = ctx.port(src).lid;
        for dlid in 1..=ctx.max_lid {
            let Some(owner) = ctx.owner(dlid) else { continue };
            if ctx.port(owner).node == n {
                continue;
            }
            let sl = match uniform {
                Some(sl) => sl,
                None => oracle.path_sl(slid, dlid),
            };
            if sl > 15 {
                return Err(invalid(format!(
                    "path SL of LID {slid} to LID {dlid} is {sl}, beyond SL 15"
                )));
            }
            line.clear();
            use std::fmt::Write as _;
            let _ = writeln!(line, "0x{:016x} {dlid} {sl}", node.guid);
            w.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}
