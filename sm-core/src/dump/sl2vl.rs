//! `opensm-sl2vl.dump`: the SL-to-VL table of every port, in the format
//! OpenSM writes when QoS is on or its routing engine sets SL2VL (lash,
//! dfsssp, torus-2QoS). `ibdmchk -d` reads this very format.
//!
//! ```text
//! Switch 0x0002c90000000100, base LID 2, "sw1"
//! #in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15
//! #--------------------------------------------------------
//! 0   1   : 0  1  2  3  4  5  6  7  0  1  2  3  4  5  6  7
//! ...
//! #--------------------------------------------------------
//!
//! Channel Adapter 0x0002c90000001001, base LID 1, "h1"
//! ...
//! 0   0   : 0  1  2  3  4  5  6  7  0  1  2  3  4  5  6  7
//! ```
//!
//! A switch gets a row for every input port (0 to the last) for each of its
//! linked output ports; a CA or router port gets one row, `0 0`. Where
//! [`Routing::sl2vl`](sm_abi::Routing::sl2vl) has no table for an
//! (input, output) pair — always, when it is empty — the row is the identity
//! map, SL n on VL n, the contract's meaning of "left alone". `ibdmchk`
//! counts the VLs in use as the highest VL in the file plus one, so an
//! identity dump makes it report 16 VLs; that changes nothing in its
//! credit-loop verdict.

use std::collections::HashMap;
use std::io::{self, Write};

use sm_abi::NodeKind;

use super::{invalid, node_type_str, print_desc, Ctx, DumpInput};

const HEADER: &str = "#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15";
const SEPARATOR: &str = "#--------------------------------------------------------";
const IDENTITY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Write `opensm-sl2vl.dump`.
pub fn write_sl2vl(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>) -> io::Result<()> {
    let mut tables: HashMap<(u32, u8, u8), &[u8; 16]> =
        HashMap::with_capacity(ctx.routing.sl2vl.len());
    for t in ctx.routing.sl2vl.iter() {
        if let Some(vl) = t.vl.iter().find(|&&vl| vl > 15) {
            return Err(invalid(format!(
                "SL2VL table of node {} ports {}→{} maps an SL to VL {vl}",
                t.node, t.in_port, t.out_port
            )));
        }
        tables.insert((t.node, t.in_port, t.out_port), &t.vl);
    }
    let table = |node: u32, in_port: u8, out_port: u8| {
        tables.get(&(node, in_port, out_port)).copied().unwrap_or(&IDENTITY)
    };

    for &index in &ctx.lid_ports_in_order {
        let port = ctx.port(index);
        let node = ctx.node(port.node);
        if node.num_ports == 0 {
            continue;
        }
        writeln!(
            w,
            "{} 0x{:016x}, base LID {}, \"{}\"\n{HEADER}\n{SEPARATOR}",
            node_type_str(node.kind),
            port.guid,
            port.lid,
            print_desc(&node.description)
        )?;
        if node.kind == NodeKind::Switch {
            for out_port in 0..=node.num_ports {
                if !ctx.port_of(port.node, out_port).is_linked() {
                    continue;
                }
                for in_port in 0..=node.num_ports {
                    write_row(w, in_port, out_port, table(port.node, in_port, out_port))?;
                }
            }
        } else {
            write_row(w, 0, 0, table(port.node, 0, port.num))?;
        }
        writeln!(w, "{SEPARATOR}\n")?;
    }
    Ok(())
}

fn write_row(w: &mut dyn Write, in_port: u8, out_port: u8, vls: &[u8; 16]) -> io::Result<()> {
    let mut line = format!("{in_port:<3} {out_port:<3} :");
    for vl in vls {
        use std::fmt::Write as _;
        let _ = write!(line, " {vl:<2}");
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}
