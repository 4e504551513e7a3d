//! OpenSM-compatible dump files.
//!
//! Site admins already read OpenSM's dumps with their own scripts and with
//! `ibdmchk`, so smcore writes the same files, under the same names, in the
//! same formats (checked line by line against OpenSM 3.3.23 under ibsim, see
//! `sm-core/tests/data/dump/README.md`):
//!
//! | file                        | writer               | read by                          |
//! |-----------------------------|----------------------|----------------------------------|
//! | `opensm-lfts.dump`          | [`write_lfts`]       | OpenSM `-U` (`file` engine), [`lfts_parse`] |
//! | `opensm-lid-matrix.dump`    | [`write_lid_matrix`] | OpenSM `-M`                      |
//! | `opensm-subnet.lst`         | [`write_subnet_lst`] | `ibdmchk -s`                     |
//! | `opensm.fdbs`               | [`write_fdbs`]       | `ibdmchk -f`                     |
//! | `opensm.mcfdbs`             | [`write_mcfdbs`]     | `ibdmchk -m`                     |
//! | `guid2lid`                  | [`write_guid2lid`]   | OpenSM's LID cache (`OSM_CACHE_DIR`) |
//! | `opensm-sl2vl.dump`         | [`write_sl2vl`]      | `ibdmchk -d`                     |
//! | `smcore-path-sl.psl`        | [`write_path_sl`]    | `ibdmchk -c`                     |
//!
//! OpenSM has no path-SL dump; the `.psl` file uses the format of
//! `ibdiagnet.psl` (`0x<source node GUID> <DLID> <SL>`), the only path-SL
//! format `ibdmchk -c` documents. [`ibdmchk`] runs the checker on a dump
//! directory and parses its verdict.
//!
//! Like OpenSM, every writer lists nodes in the order of OpenSM's GUID maps,
//! which are keyed by the GUID in network byte order: on the little-endian
//! hosts OpenSM runs on, that is ascending *byte-swapped* GUID. Matching it
//! lets a plain `diff` compare our dumps with OpenSM's.

mod fdbs;
mod guid2lid;
mod hops;
pub mod ibdmchk;
mod lfts;
pub mod lfts_parse;
mod lid_matrix;
pub mod mcfdbs;
mod path_sl;
mod sl2vl;
mod subnet;

use std::borrow::Cow;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sm_abi::{
    FabricSnapshot, Lft, NodeKind, Port, PortState, Routing, MAX_UNICAST_LID, NONE, NO_ROUTE,
};

pub use fdbs::write_fdbs;
pub use guid2lid::write_guid2lid;
pub use lfts::write_lfts;
pub use lid_matrix::write_lid_matrix;
pub use mcfdbs::write_mcfdbs;
pub use path_sl::write_path_sl;
pub use sl2vl::write_sl2vl;
pub use subnet::write_subnet_lst;

/// `opensm-lfts.dump`: every switch's LFT with destination names.
pub const LFTS_FILE: &str = "opensm-lfts.dump";
/// `opensm-lid-matrix.dump`: per-port hop counts to every switch LID.
pub const LID_MATRIX_FILE: &str = "opensm-lid-matrix.dump";
/// `opensm-subnet.lst`: one line per port-to-port link, both directions.
pub const SUBNET_FILE: &str = "opensm-subnet.lst";
/// `opensm.fdbs`: LFTs with hop counts and an optimality verdict.
pub const FDBS_FILE: &str = "opensm.fdbs";
/// `opensm.mcfdbs`: multicast forwarding tables.
pub const MCFDBS_FILE: &str = "opensm.mcfdbs";
/// `guid2lid`: OpenSM's port GUID to LID range cache.
pub const GUID2LID_FILE: &str = "guid2lid";
/// `opensm-sl2vl.dump`: SL-to-VL tables of every port.
pub const SL2VL_FILE: &str = "opensm-sl2vl.dump";
/// Path SLs per (source node, destination LID), for `ibdmchk -c`.
pub const PATH_SL_FILE: &str = "smcore-path-sl.psl";

/// What the writers dump: the fabric and the routing computed for it.
#[derive(Clone, Copy)]
pub struct DumpInput<'a> {
    /// The fabric as routed.
    pub fabric: &'a FabricSnapshot,
    /// The routing result.
    pub routing: &'a Routing,
}

/// A dump file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The dump directory could not be created.
    #[error("cannot create dump directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Writing one file failed, or the input cannot be dumped (then the
    /// error kind is [`io::ErrorKind::InvalidData`]).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The dump directory is one another local user could write to.
    #[error("dump directory not used: {0}")]
    Untrusted(#[from] sm_fs::UntrustedDir),
}

/// Write every dump file into `dir` (created if missing) and return their
/// paths, in the order of the table in the module documentation.
///
/// Each file is written to a temporary name and renamed into place, so a
/// reader polling the directory never sees a half-written dump.
pub fn write_all(
    dir: &Path,
    fabric: &FabricSnapshot,
    routing: &Routing,
) -> Result<Vec<PathBuf>, DumpError> {
    write_files(dir, fabric, routing, true)
}

/// [`write_all`] without `guid2lid`: the SM keeps that file itself, with
/// the ports that are away as well, and writes it once per sweep.
pub fn write_routing_dumps(
    dir: &Path,
    fabric: &FabricSnapshot,
    routing: &Routing,
) -> Result<Vec<PathBuf>, DumpError> {
    write_files(dir, fabric, routing, false)
}

fn write_files(
    dir: &Path,
    fabric: &FabricSnapshot,
    routing: &Routing,
    with_guid2lid: bool,
) -> Result<Vec<PathBuf>, DumpError> {
    if fs::symlink_metadata(dir).is_err() {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| DumpError::CreateDir { path: dir.to_path_buf(), source })?;
    }
    // Checked at every write: the directory may be changed while the SM
    // runs.
    sm_fs::check_trusted_dir(dir)?;
    let input = DumpInput { fabric, routing };
    // Validation errors are reported against the first file so the caller
    // still learns which dump was not written.
    let ctx =
        Ctx::new(input).map_err(|source| DumpError::Write { path: dir.join(LFTS_FILE), source })?;
    // Computed once: both the LID matrix and the FDB dump need it.
    let hops = hops::Hops::new(&ctx);

    let mut written = Vec::with_capacity(8);
    let mut emit = |name: &str,
                    f: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>|
     -> Result<(), DumpError> {
        let path = dir.join(name);
        write_atomically(&path, f)
            .map_err(|source| DumpError::Write { path: path.clone(), source })?;
        written.push(path);
        Ok(())
    };
    emit(LFTS_FILE, &mut |w| lfts::write(w, &ctx))?;
    emit(LID_MATRIX_FILE, &mut |w| lid_matrix::write(w, &ctx, &hops))?;
    emit(SUBNET_FILE, &mut |w| subnet::write(w, &ctx))?;
    emit(FDBS_FILE, &mut |w| fdbs::write(w, &ctx, &hops))?;
    emit(MCFDBS_FILE, &mut |w| mcfdbs::write(w, &ctx))?;
    if with_guid2lid {
        emit(GUID2LID_FILE, &mut |w| guid2lid::write(w, &ctx))?;
    }
    emit(SL2VL_FILE, &mut |w| sl2vl::write(w, &ctx))?;
    emit(PATH_SL_FILE, &mut |w| path_sl::write(w, &ctx))?;
    Ok(written)
}

/// Through a temporary of an unpredictable name (a link planted in the
/// directory is never followed), then renamed over `path`.
fn write_atomically(
    path: &Path,
    f: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    sm_fs::replace(path, sm_fs::PUBLIC, |w| f(w))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Indexes shared by the writers, built once per dump after checking that
/// every index in the snapshot and the routing is in range (so the writers
/// can index directly).
pub(crate) struct Ctx<'a> {
    pub fabric: &'a FabricSnapshot,
    pub routing: &'a Routing,
    /// Highest LID the dumps cover.
    pub max_lid: u16,
    /// Port index owning each LID (`NONE` for unassigned LIDs), `max_lid + 1` long.
    pub lid_owner: Vec<u32>,
    /// Index into `routing.lfts` per node, `NONE` for nodes without an LFT.
    pub lft_of: Vec<u32>,
    /// All node indices in OpenSM's map order.
    pub nodes_in_order: Vec<u32>,
    /// Switch node indices in OpenSM's map order.
    pub switches_in_order: Vec<u32>,
    /// Ports owning LIDs (switch port 0, CA and router ports) in the order
    /// of OpenSM's port GUID map.
    pub lid_ports_in_order: Vec<u32>,
    /// LID of the SM port, for the `-SM` marks of the subnet list.
    pub sm_lid: Option<u16>,
}

impl<'a> Ctx<'a> {
    pub fn new(input: DumpInput<'a>) -> io::Result<Self> {
        let DumpInput { fabric, routing } = input;
        let nodes = &fabric.nodes;
        let ports = &fabric.ports;
        for (i, n) in nodes.iter().enumerate() {
            let last = n.first_port as usize + n.num_ports as usize;
            if last >= ports.len() {
                return Err(invalid(format!(
                    "node {i} (GUID 0x{:016x}) has ports up to index {last}, but the snapshot has {} ports",
                    n.guid,
                    ports.len()
                )));
            }
        }
        for (i, p) in ports.iter().enumerate() {
            let Some(owner) = nodes.get(p.node as usize) else {
                return Err(invalid(format!(
                    "port {i} belongs to node {}, which does not exist",
                    p.node
                )));
            };
            if p.num > owner.num_ports || owner.first_port as usize + p.num as usize != i {
                return Err(invalid(format!(
                    "port {i} (number {} of node 0x{:016x}) is not at its node's first_port + number",
                    p.num, owner.guid
                )));
            }
            if p.peer != NONE && p.peer as usize >= ports.len() {
                return Err(invalid(format!(
                    "port {i} is linked to port {}, which does not exist",
                    p.peer
                )));
            }
        }

        // fabric.max_lid is authoritative for the LID ranges OpenSM prints,
        // but a LID beyond it must still resolve to its port.
        let mut max_lid = fabric.max_lid.min(MAX_UNICAST_LID);
        for (i, p) in ports.iter().enumerate() {
            if is_lid_port(fabric, i as u32) {
                max_lid = max_lid.max(lid_range_end(p).min(MAX_UNICAST_LID));
            }
        }
        let mut lid_owner = vec![NONE; max_lid as usize + 1];
        for (i, p) in ports.iter().enumerate() {
            if !is_lid_port(fabric, i as u32) {
                continue;
            }
            for lid in p.lid..=lid_range_end(p).min(max_lid) {
                // A LID claimed twice stays with the first claimant; the
                // verifier, not the dump, reports such fabrics.
                if lid_owner[lid as usize] == NONE {
                    lid_owner[lid as usize] = i as u32;
                }
            }
        }

        let mut lft_of = vec![NONE; nodes.len()];
        for (i, lft) in routing.lfts.iter().enumerate() {
            let Some(node) = nodes.get(lft.node as usize) else {
                return Err(invalid(format!(
                    "LFT {i} is for node {}, which does not exist",
                    lft.node
                )));
            };
            if node.kind != NodeKind::Switch {
                return Err(invalid(format!(
                    "LFT {i} is for node 0x{:016x}, which is not a switch",
                    node.guid
                )));
            }
            if lft_of[lft.node as usize] != NONE {
                return Err(invalid(format!("switch 0x{:016x} has two LFTs", node.guid)));
            }
            lft_of[lft.node as usize] = i as u32;
        }

        let mut nodes_in_order: Vec<u32> = (0..nodes.len() as u32).collect();
        nodes_in_order.sort_by_key(|&n| (nodes[n as usize].guid.swap_bytes(), n));
        let switches_in_order = nodes_in_order
            .iter()
            .copied()
            .filter(|&n| nodes[n as usize].kind == NodeKind::Switch)
            .collect();

        let mut lid_ports_in_order: Vec<u32> =
            (0..ports.len() as u32).filter(|&p| is_lid_port(fabric, p)).collect();
        lid_ports_in_order.sort_by_key(|&p| (ports[p as usize].guid.swap_bytes(), p));

        let sm_lid = nodes.get(fabric.sm_node as usize).and_then(|sm| {
            let range = sm.first_port..=sm.first_port + sm.num_ports as u32;
            range.filter(|&p| is_lid_port(fabric, p)).map(|p| ports[p as usize].lid).next()
        });

        Ok(Ctx {
            fabric,
            routing,
            max_lid,
            lid_owner,
            lft_of,
            nodes_in_order,
            switches_in_order,
            lid_ports_in_order,
            sm_lid,
        })
    }

    pub fn port(&self, index: u32) -> &Port {
        &self.fabric.ports[index as usize]
    }

    pub fn node(&self, index: u32) -> &sm_abi::Node {
        &self.fabric.nodes[index as usize]
    }

    /// Port `num` of `node`.
    pub fn port_of(&self, node: u32, num: u8) -> &Port {
        &self.fabric.ports[(self.node(node).first_port + num as u32) as usize]
    }

    /// The port that answers to `lid`, if any.
    pub fn owner(&self, lid: u16) -> Option<u32> {
        self.lid_owner.get(lid as usize).copied().filter(|&p| p != NONE)
    }

    pub fn lft(&self, node: u32) -> Option<&'a Lft> {
        let i = self.lft_of[node as usize];
        (i != NONE).then(|| &self.routing.lfts[i as usize])
    }

    /// Output port of `switch` for `lid`; [`NO_ROUTE`] when the switch has
    /// no LFT or the LFT is too short.
    pub fn lft_port(&self, switch: u32, lid: u16) -> u8 {
        self.lft(switch).and_then(|l| l.ports.get(lid as usize).copied()).unwrap_or(NO_ROUTE)
    }

    /// The port carrying the node's LID in the dumps: port 0 for a switch,
    /// the port itself otherwise (OpenSM's "default physp").
    pub fn lid_port_for(&self, port: u32) -> &Port {
        let p = self.port(port);
        if self.node(p.node).kind == NodeKind::Switch {
            self.port_of(p.node, 0)
        } else {
            p
        }
    }

    /// The port at the other end of a link that carries traffic.
    pub fn live_peer(&self, port: u32) -> Option<u32> {
        let p = self.port(port);
        if p.peer == NONE || p.state == PortState::Down {
            return None;
        }
        let q = self.port(p.peer);
        (q.state != PortState::Down).then_some(p.peer)
    }
}

/// Ports that own LIDs: a switch's port 0, a CA's or router's ports from 1.
fn is_lid_port(fabric: &FabricSnapshot, index: u32) -> bool {
    let p = &fabric.ports[index as usize];
    if p.lid == 0 {
        return false;
    }
    match fabric.nodes[p.node as usize].kind {
        NodeKind::Switch => p.num == 0,
        NodeKind::Ca | NodeKind::Router => p.num != 0,
        _ => false,
    }
}

/// Last LID of a port's LMC range, saturating instead of wrapping past 0xFFFF.
fn lid_range_end(p: &Port) -> u16 {
    let count = 1u32 << p.lmc.min(7);
    (p.lid as u32 + count - 1).min(u16::MAX as u32) as u16
}

/// OpenSM's `ib_get_node_type_str`.
pub(crate) fn node_type_str(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Ca => "Channel Adapter",
        NodeKind::Switch => "Switch",
        NodeKind::Router => "Router",
        _ => "Unknown",
    }
}

/// OpenSM prints node descriptions through `clean_nodedesc`: at most 63
/// bytes, and every byte that is not printable ASCII becomes a space (so a
/// multi-byte UTF-8 character becomes several spaces).
pub(crate) fn print_desc(desc: &str) -> Cow<'_, str> {
    let bytes = &desc.as_bytes()[..desc.len().min(63)];
    if bytes.len() == desc.len() && bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Cow::Borrowed(desc);
    }
    Cow::Owned(
        bytes.iter().map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { ' ' }).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_desc_cleans_like_opensm() {
        assert_eq!(print_desc("sw1 HCA-1"), "sw1 HCA-1");
        assert_eq!(print_desc("a\tb"), "a b");
        assert_eq!(print_desc("é"), "  ");
        let long = "x".repeat(70);
        assert_eq!(print_desc(&long).len(), 63);
    }
}
