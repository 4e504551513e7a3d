//! Writer for the ibsim net format (in the ibnetdiscover dialect).
//!
//! The output is what `ibnetdiscover` would print for the fabric, so that
//! ibsim (`ibsim -s FILE`), ibnetdiscover-based tools and
//! [`crate::parse`] all read it, and `parse(emit(t)) == t` for every valid
//! topology in canonical form (which the parser and the generators produce).
//!
//! Choices made for ibsim 0.10's reader (`ibsim/sim_net.c`):
//!
//! * Every node is preceded by `sysimgguid=` and by `switchguid=`,
//!   `caguid=` or `rtguid=`. ibsim otherwise numbers nodes from its own
//!   counters and ignores the GUID in the id, so without these lines the
//!   GUIDs ibnetdiscover reports would not be the topology's. ibsim gives a
//!   switch's ports the node GUID and a CA's port `p` the GUID
//!   `node GUID + p` whatever the file says; topologies whose port GUIDs
//!   follow another rule are written faithfully but ibsim will not
//!   reproduce them (the generators follow ibsim's rule).
//! * Every link is written from both ends (ibsim refuses a link whose other
//!   end does not point back) with its rate as an ibnetdiscover comment
//!   (`lid 0 4xQDR`): ibsim reads that comment as the port's enabled width
//!   and speed, so both ends come up at the topology's rate. Without it
//!   ibsim would bring every link up at 4x SDR. ibsim 0.10 does not know
//!   NDR or XDR and leaves such links at its default speed.
//! * A blank line ends every record: ibsim drops the line that ends a
//!   record, so a record ended by the next header would lose that node.
//! * `=` is removed from the peer descriptions in link comments: ibsim
//!   scans the rest of a port line for `key=value` port options.
//!
//! ibsim attaches clients (`libumad2sim.so`) to the first node of the file
//! unless `SIM_HOST` names another; the generators put a host first so the
//! default attachment point is the snapshot's `sm_node`.

use std::fmt::Write as _;
use std::path::Path;

use sm_abi::NodeKind;

use crate::error::TopologyError;
use crate::model::{speed_name, Topology};

/// ibsim's default `-N`: at most this many nodes of all kinds.
pub const IBSIM_DEFAULT_MAX_NODES: usize = 2048;
/// ibsim's default `-S`: at most this many switches.
pub const IBSIM_DEFAULT_MAX_SWITCHES: usize = 256;
/// ibsim's default `-P`: at most this many ports (a switch uses
/// `num_ports + 1`, a CA or router `num_ports`).
pub const IBSIM_DEFAULT_MAX_PORTS: usize =
    IBSIM_DEFAULT_MAX_SWITCHES * 36 + IBSIM_DEFAULT_MAX_NODES * 2;
/// ibsim's default `-L`: linear forwarding table capacity, so the highest
/// LID a switch can route is one less.
pub const IBSIM_DEFAULT_LINEAR_CAP: usize = 30 * 1024;
/// ibsim keeps node ids in 65-byte buffers (64 characters + NUL).
pub const IBSIM_MAX_ID_LEN: usize = 64;
/// ibsim keeps node descriptions in 64-byte buffers (63 characters + NUL).
pub const IBSIM_MAX_DESC_LEN: usize = 63;
/// ibsim reads lines into a 256-byte buffer; longer lines are split.
pub const IBSIM_MAX_LINE_LEN: usize = 254;

/// The fabric as ibsim net text. Fails only if the topology is invalid
/// (see [`Topology::validate`]).
pub fn to_net_string(topo: &Topology) -> Result<String, TopologyError> {
    topo.validate()?;
    let mut out = String::new();
    let links = topo.port_links();
    let _ = writeln!(
        out,
        "# Fabric topology in ibsim net format (ibnetdiscover dialect), written by sm-topology.\n\
         # {} nodes ({} switches), {} links.",
        topo.nodes.len(),
        topo.num_switches(),
        topo.links.len()
    );
    for (i, n) in topo.nodes.iter().enumerate() {
        let _ = writeln!(out);
        let _ = writeln!(out, "sysimgguid={:#x}", n.sys_guid);
        match n.kind {
            NodeKind::Switch => {
                let _ = writeln!(out, "switchguid={:#x}({:x})", n.node_guid, n.port_guid(0));
                let _ = writeln!(out, "Switch\t{} \"{}\"\t\t# \"{}\"", n.num_ports, n.name, n.desc);
            }
            _ => {
                let (key, word) =
                    if n.kind == NodeKind::Ca { ("caguid", "Ca") } else { ("rtguid", "Rt") };
                let _ = writeln!(out, "{key}={:#x}", n.node_guid);
                let _ = writeln!(out, "{word}\t{} \"{}\"\t\t# \"{}\"", n.num_ports, n.name, n.desc);
            }
        }
        for p in 1..=n.num_ports {
            let Some(li) = links[i][p as usize] else { continue };
            let l = &topo.links[li];
            let Some((pn, pp)) = l.other_end((i, p)) else { continue };
            let peer = &topo.nodes[pn];
            let rate = format!("{}x{}", l.width, speed_name(l.speed).unwrap_or("QDR"));
            let peer_desc = peer.desc.replace('=', "-");
            let peer_guid = if peer.is_switch() {
                String::new()
            } else {
                format!("({:x})", peer.port_guid(pp))
            };
            if n.is_switch() {
                let _ = writeln!(
                    out,
                    "[{p}]\t\"{}\"[{pp}]{peer_guid}\t\t# \"{peer_desc}\" lid 0 {rate}",
                    peer.name
                );
            } else {
                let _ = writeln!(
                    out,
                    "[{p}]({:x}) \t\"{}\"[{pp}]{peer_guid}\t\t# lid 0 lmc 0 \"{peer_desc}\" lid 0 {rate}",
                    n.port_guid(p),
                    peer.name
                );
            }
        }
    }
    Ok(out)
}

/// Write the fabric to `path` in ibsim net format.
pub fn write_file(topo: &Topology, path: impl AsRef<Path>) -> Result<(), TopologyError> {
    let path = path.as_ref();
    let text = to_net_string(topo)?;
    std::fs::write(path, text)
        .map_err(|source| TopologyError::Io { path: path.to_path_buf(), source })
}

/// The ibsim capacity a fabric needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbsimLimits {
    /// Nodes of all kinds (`-N`).
    pub nodes: usize,
    /// Switches (`-S`).
    pub switches: usize,
    /// Port slots (`-P`): `num_ports + 1` per switch, `num_ports` per CA or router.
    pub ports: usize,
}

impl IbsimLimits {
    /// What `topo` needs.
    pub fn of(topo: &Topology) -> Self {
        let switches = topo.num_switches();
        let ports =
            topo.nodes.iter().map(|n| n.num_ports as usize + usize::from(n.is_switch())).sum();
        IbsimLimits { nodes: topo.nodes.len(), switches, ports }
    }

    /// The `-N`/`-S`/`-P` options to pass to ibsim, only for the limits
    /// that exceed its defaults (so small fabrics need none).
    pub fn args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, need, default) in [
            ("-N", self.nodes, IBSIM_DEFAULT_MAX_NODES),
            ("-S", self.switches, IBSIM_DEFAULT_MAX_SWITCHES),
            ("-P", self.ports, IBSIM_DEFAULT_MAX_PORTS),
        ] {
            if need > default {
                v.push(flag.to_string());
                v.push(need.to_string());
            }
        }
        v
    }
}

/// Check that ibsim 0.10 can load the fabric unchanged and return the
/// capacity it needs. Beyond [`Topology::validate`]: ids of at most 64
/// bytes without `#` or `@` (ibsim reserves them), descriptions of at most
/// 63 bytes (ibsim truncates longer ones), lines short enough for ibsim's
/// line buffer.
pub fn ibsim_check(topo: &Topology) -> Result<IbsimLimits, TopologyError> {
    let text = to_net_string(topo)?;
    for n in &topo.nodes {
        if n.name.len() > IBSIM_MAX_ID_LEN {
            return Err(TopologyError::Invalid(format!(
                "node id \"{}\" is longer than ibsim's {IBSIM_MAX_ID_LEN} bytes",
                n.name
            )));
        }
        if n.name.contains(['#', '@']) {
            return Err(TopologyError::Invalid(format!(
                "node id \"{}\" contains '#' or '@', which ibsim reserves",
                n.name
            )));
        }
        if n.desc.len() > IBSIM_MAX_DESC_LEN {
            return Err(TopologyError::Invalid(format!(
                "description of \"{}\" is longer than ibsim's {IBSIM_MAX_DESC_LEN} bytes",
                n.name
            )));
        }
    }
    if let Some((i, l)) = text.lines().enumerate().find(|(_, l)| l.len() > IBSIM_MAX_LINE_LEN) {
        return Err(TopologyError::Invalid(format!(
            "line {} is {} bytes long, more than ibsim reads in one line",
            i + 1,
            l.len()
        )));
    }
    Ok(IbsimLimits::of(topo))
}
