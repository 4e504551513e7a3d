//! `opensm-subnet.lst`: one line per port that has a link, so every link
//! appears twice, once from each end. `ibdmchk -s` builds its fabric from it.
//!
//! ```text
//! { SW Ports:08 SystemGUID:... NodeGUID:... PortGUID:... VenID:000000 DevID:0000 Rev:00000000 {sw1} LID:0002 PN:01 } { CA-SM Ports:01 ... VenID:00000000 ... {h1} LID:0001 PN:01 } PHY=4x LOG=ACT SPD=2.5
//! ```
//!
//! Quirks kept from OpenSM so the file diffs cleanly against its output:
//! the vendor ID has 6 digits on the left and 8 on the right, and the LID
//! of a switch end is its port-0 LID. `-SM` marks the ends whose LID is the
//! SM's. The snapshot carries no vendor ID, device ID or revision, so those
//! are written as zeros.
//!
//! `ibdmchk` only understands `CA` and `SW` ends: it skips router links with
//! a "Wrong syntax code" warning, and it splits on `}` so a node description
//! containing one confuses it. Neither is ours to fix.

use std::io::{self, Write};

use sm_abi::{NodeKind, PortState};

use super::{print_desc, Ctx, DumpInput};

/// Write `opensm-subnet.lst`.
pub fn write_subnet_lst(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>) -> io::Result<()> {
    for &n in &ctx.nodes_in_order {
        let node = ctx.node(n);
        for num in 1..=node.num_ports {
            let index = node.first_port + num as u32;
            let port = ctx.port(index);
            if !port.is_linked() {
                continue;
            }
            write_end(w, ctx, index, 6)?;
            write_end(w, ctx, port.peer, 8)?;
            writeln!(
                w,
                "PHY={} LOG={} SPD={}",
                width_str(port.width),
                state_str(port.state),
                speed_str(port.speed)
            )?;
        }
    }
    Ok(())
}

fn write_end(w: &mut dyn Write, ctx: &Ctx<'_>, index: u32, vendor_digits: usize) -> io::Result<()> {
    let port = ctx.port(index);
    let node = ctx.node(port.node);
    let lid = ctx.lid_port_for(index).lid;
    let kind = match node.kind {
        NodeKind::Switch => "SW",
        NodeKind::Ca => "CA",
        NodeKind::Router => "Rt",
        _ => "??",
    };
    let sm = if ctx.sm_lid == Some(lid) { "-SM" } else { "" };
    write!(
        w,
        "{{ {kind}{sm} Ports:{:02X} SystemGUID:{:016x} NodeGUID:{:016x} PortGUID:{:016x} \
         VenID:{:0vendor_digits$X} DevID:{:04X} Rev:{:08X} {{{}}} LID:{lid:04X} PN:{:02X} }} ",
        node.num_ports,
        node.system_guid,
        node.guid,
        port.guid,
        0,
        0,
        0,
        print_desc(&node.description),
        port.num,
    )
}

/// Link width as OpenSM prints it (from the lane count).
fn width_str(lanes: u8) -> &'static str {
    match lanes {
        1 => "1x",
        2 => "2x",
        4 => "4x",
        8 => "8x",
        12 => "12x",
        _ => "??",
    }
}

fn state_str(state: PortState) -> &'static str {
    match state {
        PortState::Active => "ACT",
        PortState::Armed => "ARM",
        PortState::Init => "INI",
        PortState::Down => "DWN",
        _ => "???",
    }
}

/// Lane speed as OpenSM prints it, in Gb/s. The snapshot gives multiples of
/// 2.5 Gb/s, rounding FDR (14.0625) to 6, EDR (25.78125) to 10 and HDR
/// (53.125) to 21; OpenSM 3.3 prints those three as 14, 25 and 50 and has
/// no name for anything faster. QDR and FDR10 are indistinguishable here;
/// both print as QDR's 10.
fn speed_str(units: u8) -> &'static str {
    match units {
        1 => "2.5",
        2 => "5",
        4 => "10",
        5 | 6 => "14",
        10 => "25",
        20 | 21 => "50",
        _ => "??",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_and_widths_use_opensm_names() {
        assert_eq!(speed_str(1), "2.5");
        assert_eq!(speed_str(4), "10");
        assert_eq!(speed_str(6), "14");
        assert_eq!(speed_str(3), "??");
        assert_eq!(width_str(4), "4x");
        assert_eq!(width_str(3), "??");
    }
}
