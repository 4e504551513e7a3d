//! The SA's queryable snapshot of the fabric: every record the SA serves,
//! built once per heavy sweep from the sweep's outcome (`pipeline::OnceOutcome`), so that a
//! query never touches the sweep's state and never waits for it. The
//! records of nodes the sweep left alone (the same shared fabric node, the
//! same LID) are taken from the database in force
//! ([`SaDb::build_after`]), whatever the fabric's size.
//!
//! Records are kept as wire bytes (padded to their AttributeOffset), sorted
//! by LID: a query is a component-mask comparison of bytes, and a GetTable
//! answer is a concatenation. The routing itself is not copied: the
//! database holds the sweep's [`AcceptedRouting`], and PathRecords are
//! computed per query from its LFTs (a walk from source to destination)
//! and its own path-SL oracle; LFT records are cut from its LFTs per
//! query. Nothing is precomputed per pair.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use sm_abi::{NodeKind, NO_ROUTE};
use sm_mad::forwarding::LFT_BLOCK_LEN;
use sm_mad::{
    sa_guid_info_record as gir, sa_lft_record as lftr, sa_link_record as lr, sa_node_record as nr,
    sa_pkey_table_record as pkr, sa_port_info_record as pir, sa_sl2vl_record as slr,
    sa_switch_info_record as swr, sa_vlarb_record as var, NodeDescriptionRepr, NodeInfoRepr, NodeType, PortInfoRepr,
};

use sm_partition::SaPartitions;
use crate::qos::QosPolicy;
use crate::routing::AcceptedRouting;
use sm_model::FabricNode;
use sm_model::Fabric;

/// The subnet prefix used when no port reports one (IBA default).
pub const DEFAULT_GID_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// One addressable end port: a CA or router port, or a switch's port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndPort {
    /// Node index (as in the fabric and the snapshot).
    pub node: u32,
    /// Port number (0 on a switch).
    pub port: u8,
    /// Port GUID.
    pub guid: u64,
    /// Base LID.
    pub lid: u16,
    /// LMC of the port (0 on switches).
    pub lmc: u8,
    /// Whether the node is a switch.
    pub switch: bool,
    /// PortInfo.GUIDCap: GUIDInfo entries of the port.
    pub guid_cap: u8,
}

impl EndPort {
    /// The port's LIDs.
    pub fn lids(&self) -> std::ops::RangeInclusive<u16> {
        let last = u32::from(self.lid) + (1u32 << self.lmc) - 1;
        self.lid..=last.min(u32::from(u16::MAX)) as u16
    }
}

/// What a path walk needs of one port: where its cable goes, and the MTU
/// and rate the link runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Wire {
    pub peer: Option<(u32, u8)>,
    /// MTU code both ends support (IBA: 1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Data rate in units of 0.1 Gb/s (lanes × lane rate).
    pub rate: u32,
}

/// The SA's view of the fabric after one heavy sweep.
#[derive(Debug)]
pub struct SaDb {
    pub(crate) gid_prefix: u64,
    pub(crate) lmc: u8,
    /// LID of the SM's (and SA's) port.
    pub(crate) sm_lid: u16,
    pub(crate) ends: Vec<EndPort>,
    /// LID → index into `ends`.
    pub(crate) by_lid: HashMap<u16, u32>,
    pub(crate) by_guid: HashMap<u64, u32>,
    pub(crate) node_kind: Vec<NodeKind>,
    /// Index of a node's first port in `wires` (every node has ports 0..=n).
    pub(crate) first_wire: Vec<u32>,
    pub(crate) wires: Vec<Wire>,
    /// The routing in force (`None`: nothing routed, no paths).
    pub(crate) routing: Option<Arc<AcceptedRouting>>,
    pub(crate) node_records: Vec<[u8; nr::PADDED_LEN]>,
    pub(crate) port_records: Vec<[u8; pir::PADDED_LEN]>,
    pub(crate) link_records: Vec<[u8; lr::PADDED_LEN]>,
    pub(crate) switch_records: Vec<[u8; swr::PADDED_LEN]>,
    pub(crate) guid_records: Vec<[u8; gir::PADDED_LEN]>,
    pub(crate) pkey_records: Vec<[u8; pkr::PADDED_LEN]>,
    /// The SL2VL maps the routing had programmed, by (node, in port, out
    /// port); a CA's with in port 0.
    vl_maps: HashMap<(u32, u8, u8), [u8; 16]>,
    /// The nonempty VLArb blocks the routing had programmed, by (node,
    /// port, block 1-4).
    vl_arbs: HashMap<(u32, u8, u8), [(u8, u8); var::ENTRIES]>,
    /// Every addressed port the SL2VL and VLArb records are of: (LID,
    /// node, port, switch, ports of the node), sorted. The records are
    /// made when asked for ([`SaDb::sl2vl_records`]): a switch has one
    /// map for each pair of its ports, too many to make at every sweep.
    vl_ports: Vec<(u16, u32, u8, bool, u8)>,
    /// Partition membership and programmed P_Key tables; `None` for a
    /// database built without a sweep (every port then a full member of
    /// the default partition).
    pub(crate) partitions: Option<Arc<SaPartitions>>,
    /// The fabric's nodes the records were made from, and the LID each
    /// node's records are keyed by: the next database takes the records
    /// of the nodes that are still these ([`SaDb::build_after`]).
    source: Vec<Arc<FabricNode>>,
    node_lid: Vec<u16>,
    /// Whether each LID keys the records of one node at most: only then
    /// can one node's records be told from the others' and replaced.
    keys_unique: bool,
    /// Nodes whose records were made for this database (the others'
    /// were taken from the previous one).
    rebuilt: usize,
    /// The QoS policy PathRecords follow (`None`: the engine's SLs).
    pub(crate) qos_policy: Option<Arc<QosPolicy>>,
    /// (policy SL, engine SL) cases already logged: the engine's SL won
    /// where the policy asked for another (see [`crate::qos::decide_sl`]).
    pub(crate) sl_overruled: Mutex<HashSet<(u8, u8)>>,
    /// The SA's alias GUID tables (shared with the SA, which changes them
    /// on GUIDInfoRecord Set and Delete): GIDs of alias GUIDs resolve to
    /// their port.
    pub(crate) aliases: Arc<Mutex<super::alias::AliasGuids>>,
}

/// MTU code a port supports: its MTUCap (NeighborMTU when that is lower and set).
fn port_mtu(info: &PortInfoRepr) -> u8 {
    let cap = if info.mtu_cap == 0 { 1 } else { info.mtu_cap };
    if info.neighbor_mtu != 0 {
        cap.min(info.neighbor_mtu)
    } else {
        cap
    }
}

/// Link data rate in 0.1 Gb/s from LinkWidthActive and the speeds
/// (`caps`: the speed groups the port's capability masks make valid); a
/// port that says no width or speed counts as 1x SDR.
pub(crate) fn port_rate(info: &PortInfoRepr, caps: sm_mad::speed::SpeedCaps) -> u32 {
    let lanes = sm_mad::speed::active_lanes(info).max(1);
    let lane = sm_mad::speed::active(info, caps).unwrap_or(sm_mad::speed::LaneSpeed::Sdr);
    sm_mad::speed::link_rate(lanes, Some(lane))
}

// The IBA rate codes live with the wire formats.
pub use sm_mad::rate::{rate_code, rate_of, RATES};

/// What an SA database is made of: one heavy sweep's fabric and LMC, the
/// routing it accepted and the partitions it programmed. A sweep's
/// outcome gives one (`From<&pipeline::OnceOutcome>`).
#[derive(Debug, Clone, Copy)]
pub struct SaSource<'a> {
    /// The fabric as the sweep left it.
    pub fabric: &'a Fabric,
    /// The subnet's LMC.
    pub lmc: u8,
    /// The routing in force (`None`: nothing routed, no paths).
    pub accepted: Option<&'a Arc<AcceptedRouting>>,
    /// Partition membership and programmed P_Key tables.
    pub partitions: Option<&'a Arc<SaPartitions>>,
}

impl SaDb {
    /// The SA's view of one sweep: records, VL tables, partitions, and the
    /// accepted routing itself (shared, not copied), whose LFTs the path
    /// walks follow and whose own oracle gives PathRecords the engine's
    /// SLs whatever the fabric's size. The one way an SA database is made,
    /// in the SM and in the tests.
    pub fn build_shared<'a>(source: impl Into<SaSource<'a>>) -> Self {
        Self::build_after(source, None)
    }

    /// [`SaDb::build_shared`], taking from `previous` (the database of an
    /// earlier sweep) the records of every node this sweep left as it
    /// was: after a host reboot, all but a few. The result is the same.
    pub fn build_after<'a>(source: impl Into<SaSource<'a>>, previous: Option<&SaDb>) -> Self {
        let source = source.into();
        let mut db = Self::records(source.fabric, source.lmc, previous);
        db.set_vl_tables(source.accepted.map(|a| &a.routing));
        if let Some(accepted) = source.accepted {
            db.routing = Some(Arc::clone(accepted));
        }
        if let Some(p) = source.partitions {
            db.set_partitions(source.fabric, Arc::clone(p));
        }
        db
    }

    /// The database with `policy` choosing PathRecord SLs, as far as the
    /// engine's own SLs allow (the daemon reads the policy file at each
    /// heavy sweep and hands it here).
    pub fn with_qos_policy(mut self, policy: Option<Arc<QosPolicy>>) -> Self {
        self.qos_policy = policy;
        self
    }

    /// The P_Key table of the end port with GUID `guid`, entries with the
    /// membership bit (empty: in no partition).
    pub fn pkey_table(&self, guid: u64) -> &[u16] {
        match &self.partitions {
            Some(p) => p.table(guid),
            None => sm_partition::DEFAULT_TABLE,
        }
    }

    /// Takes the partitions of a sweep: membership for the SA's checks,
    /// and P_KeyTableRecords of the tables the ports hold as programmed
    /// (ports whose table is unknown have none).
    pub fn set_partitions(&mut self, fabric: &Fabric, partitions: Arc<SaPartitions>) {
        self.pkey_records.clear();
        for e in &self.ends {
            let Some(node) = fabric.nodes.get(e.node as usize) else { continue };
            let ports: Vec<u8> = if e.switch { (0..=node.num_ports).collect() } else { vec![e.port] };
            for port in ports {
                let Some(table) = partitions.held.get(&(node.guid, port)) else { continue };
                for (block, chunk) in table.chunks(pkr::PKEYS).enumerate() {
                    let mut pkeys = [0u16; pkr::PKEYS];
                    pkeys[..chunk.len()].copy_from_slice(chunk);
                    let mut rec = [0u8; pkr::PADDED_LEN];
                    pkr::Repr {
                        lid: e.lid,
                        block_num: block as u16,
                        port_num: port,
                        pkeys,
                    }
                    .emit(&mut pkr::Packet::new_unchecked(&mut rec[..]));
                    self.pkey_records.push(rec);
                }
            }
        }
        self.pkey_records
            .sort_by_key(|r| (u16::from_be_bytes([r[0], r[1]]), r[4], u16::from_be_bytes([r[2], r[3]])));
        self.partitions = Some(partitions);
    }

    /// A database with no fabric: every query finds nothing.
    pub fn empty() -> Self {
        Self::records(&Fabric::default(), 0, None)
    }

    /// How many nodes' records were made for this database; the others'
    /// were taken from the one it was built after.
    pub fn nodes_rebuilt(&self) -> usize {
        self.rebuilt
    }

    /// Whether both hold the same records: what [`SaDb::build_after`]
    /// promises against a database built from scratch.
    pub fn same_records(&self, other: &SaDb) -> bool {
        (self.gid_prefix, self.lmc, self.sm_lid, &self.ends, &self.wires, &self.first_wire)
            == (other.gid_prefix, other.lmc, other.sm_lid, &other.ends, &other.wires, &other.first_wire)
            && (&self.node_records, &self.port_records, &self.link_records, &self.switch_records)
                == (&other.node_records, &other.port_records, &other.link_records, &other.switch_records)
            && (&self.guid_records, &self.pkey_records, &self.vl_maps, &self.vl_arbs, &self.vl_ports)
                == (&other.guid_records, &other.pkey_records, &other.vl_maps, &other.vl_arbs, &other.vl_ports)
    }

    /// End ports known.
    pub fn end_ports(&self) -> &[EndPort] {
        &self.ends
    }

    /// Whether a routing was accepted (PathRecords exist only then).
    pub fn routed(&self) -> bool {
        self.routing.is_some()
    }

    /// The routing in force.
    pub fn routing(&self) -> Option<&Arc<AcceptedRouting>> {
        self.routing.as_ref()
    }

    /// The subnet's LMC.
    pub fn lmc(&self) -> u8 {
        self.lmc
    }

    /// LID of the SM's (and the SA's) port.
    pub fn sm_lid(&self) -> u16 {
        self.sm_lid
    }

    /// The subnet prefix.
    pub fn gid_prefix(&self) -> u64 {
        self.gid_prefix
    }

    /// The GID of an end port.
    pub fn gid(&self, end: &EndPort) -> u128 {
        (u128::from(self.gid_prefix) << 64) | u128::from(end.guid)
    }

    /// The end port holding `lid` (any LID of its LMC range).
    pub fn end_by_lid(&self, lid: u16) -> Option<&EndPort> {
        self.by_lid.get(&lid).map(|&i| &self.ends[i as usize])
    }

    /// The end port with `guid`.
    pub fn end_by_guid(&self, guid: u64) -> Option<&EndPort> {
        self.by_guid.get(&guid).map(|&i| &self.ends[i as usize])
    }

    /// The end port a GID names, if its prefix is the subnet's: by its
    /// port GUID, or an alias GUID the SA gave the port.
    pub fn end_by_gid(&self, gid: u128) -> Option<&EndPort> {
        if (gid >> 64) as u64 != self.gid_prefix {
            return None;
        }
        self.end_by_guid(gid as u64).or_else(|| {
            let port = self.aliases.lock().ok()?.port_of(gid as u64)?;
            self.end_by_guid(port)
        })
    }

    /// The SL the routing gives the path `slid` → `dlid` (0 when nothing
    /// routed).
    pub fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.routing.as_ref().map_or(0, |r| r.path_sl(slid, dlid))
    }

    /// Whether every path has the same SL (also when nothing routed).
    pub fn uniform_sl(&self) -> bool {
        self.routing.as_ref().is_none_or(|r| r.uniform_sl().is_some())
    }

    /// LFTRecords (IBA 15.2.5.6) of the routing's LFTs, sorted by (LID,
    /// block): those of the switch holding the template's LID when `mask`
    /// selects the LID, all of them otherwise.
    pub fn lft_records(&self, mask: u64, template: &[u8]) -> Vec<[u8; lftr::PADDED_LEN]> {
        let Some(routing) = &self.routing else { return Vec::new() };
        let only = (mask & 1 != 0 && template.len() >= 2).then(|| u16::from_be_bytes([template[0], template[1]]));
        let mut switches: Vec<(u16, u32)> = self
            .ends
            .iter()
            .filter(|e| e.switch && only.is_none_or(|lid| lid == e.lid))
            .map(|e| (e.lid, e.node))
            .collect();
        switches.sort_unstable();
        let mut out = Vec::new();
        for (lid, node) in switches {
            let Some(lft) = routing.lft(node) else { continue };
            let top = lft.len().min(usize::from(sm_abi::MAX_UNICAST_LID) + 1);
            for (block, chunk) in lft[..top].chunks(LFT_BLOCK_LEN).enumerate() {
                let mut ports = [NO_ROUTE; LFT_BLOCK_LEN];
                ports[..chunk.len()].copy_from_slice(chunk);
                let mut rec = [0u8; lftr::PADDED_LEN];
                lftr::Repr { lid, block_num: block as u16, ports }.emit(&mut lftr::Packet::new_unchecked(&mut rec[..]));
                out.push(rec);
            }
        }
        out
    }

    pub(crate) fn wire(&self, node: u32, port: u8) -> Option<&Wire> {
        let first = *self.first_wire.get(node as usize)?;
        let next = self
            .first_wire
            .get(node as usize + 1)
            .copied()
            .unwrap_or(self.wires.len() as u32);
        let i = first + u32::from(port);
        (i < next).then(|| &self.wires[i as usize])
    }

    /// SL2VL and VLArb records for every port, as OpenSM's SA answers them
    /// (osm_sa_slvl_record.c, osm_sa_vlarb_record.c): on a switch, keyed
    /// by its LID, a map for every input port to every output port, ports
    /// 0 included, and VLArb blocks 1-4 of every port; on a CA or router,
    /// keyed by the port's LID, its one map (ports 0) and the four blocks
    /// of the port (by its number). The contents are what `routing` (the
    /// engine's tables and QoS's) had the core program: sweep::vl writes
    /// exactly these, every SL2VL entry, every nonempty VLArb block. A
    /// table the SM did not write is answered all zeros, as OpenSM answers
    /// the tables it never set (without `qos` it sets none).
    fn set_vl_tables(&mut self, routing: Option<&sm_abi::Routing>) {
        for entry in routing.map_or(&[][..], |r| &r.sl2vl[..]) {
            let switch = self.node_kind.get(entry.node as usize) == Some(&NodeKind::Switch);
            // A CA port's map is its port's, whatever input it names.
            let key = if switch { (entry.node, entry.in_port, entry.out_port) } else { (entry.node, 0, entry.out_port) };
            // Later entries for the same key replace earlier ones, as the
            // later write would on the port.
            self.vl_maps.insert(key, entry.vl);
        }
        for arb in routing.map_or(&[][..], |r| &r.vlarb[..]) {
            let parts: [(u8, &[sm_abi::VlWeight]); 4] = [
                (1, &arb.low[..arb.low.len().min(var::ENTRIES)]),
                (2, arb.low.get(var::ENTRIES..).unwrap_or(&[])),
                (3, &arb.high[..arb.high.len().min(var::ENTRIES)]),
                (4, arb.high.get(var::ENTRIES..).unwrap_or(&[])),
            ];
            for (block_num, weights) in parts {
                if weights.is_empty() {
                    continue;
                }
                let mut entries = [(0u8, 0u8); var::ENTRIES];
                for (slot, w) in entries.iter_mut().zip(weights) {
                    *slot = (w.vl, w.weight);
                }
                self.vl_arbs.insert((arb.node, arb.port, block_num), entries);
            }
        }
        let mut ports: Vec<(u16, u32, u8, bool, u8)> = Vec::with_capacity(self.ends.len());
        for e in &self.ends {
            let first = self.first_wire.get(e.node as usize).map_or(0, |&w| w as usize);
            let end = self.first_wire.get(e.node as usize + 1).map_or(self.wires.len(), |&w| w as usize);
            let count = end.saturating_sub(first).clamp(1, 256) - 1;
            ports.push((e.lid, e.node, e.port, e.switch, count as u8));
        }
        ports.sort_unstable();
        // A LID two ports share (a broken fabric): the first keys it.
        ports.dedup_by_key(|p| p.0);
        self.vl_ports = ports;
    }

    /// The ports the VL records of `lid` (all LIDs: `None`) are of.
    fn vl_ports_of(&self, lid: Option<u16>) -> &[(u16, u32, u8, bool, u8)] {
        match lid {
            Some(lid) => {
                let lo = self.vl_ports.partition_point(|p| p.0 < lid);
                let hi = self.vl_ports.partition_point(|p| p.0 <= lid);
                &self.vl_ports[lo..hi]
            }
            None => &self.vl_ports,
        }
    }

    /// SLtoVLMappingTableRecords of `lid` (every LID: `None`), sorted by
    /// (LID, in port, out port), as OpenSM's SA answers them
    /// (osm_sa_slvl_record.c): a switch, keyed by its LID, has a map for
    /// every input port to every output port, ports 0 included; a CA or
    /// router port, keyed by its LID, its one map (ports 0). A map is
    /// what the routing (the engine's tables and QoS's) had the core
    /// program, which sweep::vl writes exactly; one the SM did not write
    /// is answered all zeros, as OpenSM answers the tables it never set
    /// (without `qos` it sets none).
    pub(crate) fn sl2vl_records(&self, lid: Option<u16>) -> Vec<[u8; slr::PADDED_LEN]> {
        let mut out = Vec::new();
        for &(lid, node, port, switch, last) in self.vl_ports_of(lid) {
            let pairs: Vec<(u8, u8)> =
                if switch { (0..=last).flat_map(|i| (0..=last).map(move |o| (i, o))).collect() } else { vec![(0, port)] };
            for (input, output) in pairs {
                let vl = self.vl_maps.get(&(node, input, output)).copied().unwrap_or([0; 16]);
                let (in_port_num, out_port_num) = if switch { (input, output) } else { (0, 0) };
                let mut rec = [0u8; slr::PADDED_LEN];
                slr::Repr { lid, in_port_num, out_port_num, vl }.emit(&mut slr::Packet::new_unchecked(&mut rec[..]));
                out.push(rec);
            }
        }
        out
    }

    /// VLArbitrationTableRecords of `lid` (every LID: `None`), sorted by
    /// (LID, port, block), as OpenSM's SA answers them
    /// (osm_sa_vlarb_record.c): blocks 1-4 of every port of a switch (0
    /// included) and of a CA port (by its number); the blocks the routing
    /// had programmed, zeros for the others.
    pub(crate) fn vlarb_records(&self, lid: Option<u16>) -> Vec<[u8; var::PADDED_LEN]> {
        let mut out = Vec::new();
        for &(lid, node, port, switch, last) in self.vl_ports_of(lid) {
            let ports = if switch { 0..=last } else { port..=port };
            for out_port_num in ports {
                for block_num in 1..=4u8 {
                    let entries = self.vl_arbs.get(&(node, out_port_num, block_num)).copied().unwrap_or([(0, 0); var::ENTRIES]);
                    let mut rec = [0u8; var::PADDED_LEN];
                    var::Repr { lid, out_port_num, block_num, entries }.emit(&mut var::Packet::new_unchecked(&mut rec[..]));
                    out.push(rec);
                }
            }
        }
        out
    }

    /// The LID of switch `node` (its port 0), if it has one.
    pub(crate) fn switch_lid(&self, node: u32) -> Option<u16> {
        self.ends_of(node).iter().find(|e| e.switch).map(|e| e.lid)
    }

    fn ends_of(&self, node: u32) -> &[EndPort] {
        ends_of(&self.ends, node)
    }

    /// Everything but routing: end ports, wires, and the records read from
    /// the fabric.
    fn records(fabric: &Fabric, lmc: u8, previous: Option<&SaDb>) -> Self {
        let mut db = SaDb {
            gid_prefix: DEFAULT_GID_PREFIX,
            lmc,
            sm_lid: 0,
            ends: Vec::new(),
            by_lid: HashMap::new(),
            by_guid: HashMap::new(),
            node_kind: fabric.nodes.iter().map(|n| n.kind).collect(),
            first_wire: Vec::with_capacity(fabric.nodes.len()),
            wires: Vec::new(),
            routing: None,
            node_records: Vec::new(),
            port_records: Vec::new(),
            link_records: Vec::new(),
            switch_records: Vec::new(),
            guid_records: Vec::new(),
            pkey_records: Vec::new(),
            vl_maps: HashMap::new(),
            vl_arbs: HashMap::new(),
            vl_ports: Vec::new(),
            partitions: None,
            source: fabric.nodes.clone(),
            node_lid: Vec::new(),
            keys_unique: true,
            rebuilt: 0,
            qos_policy: None,
            sl_overruled: Mutex::new(HashSet::new()),
            aliases: Arc::default(),
        };
        if let Some(prefix) = fabric
            .nodes
            .iter()
            .flat_map(|n| n.ports.iter())
            .filter_map(|p| p.info.as_ref())
            .map(|i| i.gid_prefix)
            .find(|&g| g != 0)
        {
            db.gid_prefix = prefix;
        }
        // End ports and the LID every port's records are keyed by.
        let mut node_lid = vec![0u16; fabric.nodes.len()];
        for (i, n) in fabric.nodes.iter().enumerate() {
            let candidates: Vec<u8> = if n.is_switch() {
                vec![0]
            } else {
                (1..=n.num_ports).collect()
            };
            for p in candidates {
                let Some(port) = n.ports.get(usize::from(p)) else {
                    continue;
                };
                let Some(info) = &port.info else { continue };
                if info.lid == 0 || info.lid >= 0xC000 {
                    continue;
                }
                let end = EndPort {
                    node: i as u32,
                    port: p,
                    guid: port.guid,
                    lid: info.lid,
                    lmc: if n.is_switch() { 0 } else { info.lmc.min(7) },
                    switch: n.is_switch(),
                    guid_cap: info.guid_cap,
                };
                if node_lid[i] == 0 {
                    node_lid[i] = end.lid;
                }
                let idx = db.ends.len() as u32;
                for lid in end.lids() {
                    db.by_lid.entry(lid).or_insert(idx);
                }
                db.by_guid.entry(end.guid).or_insert(idx);
                db.ends.push(end);
            }
        }
        // In node order: `ends_of` looks a node's up by halving.
        debug_assert!(db.ends.windows(2).all(|w| w[0].node <= w[1].node));
        if let Some(n0) = fabric.nodes.first() {
            let p = n0.address_port(fabric.sm_port);
            db.sm_lid = n0
                .ports
                .get(usize::from(p))
                .and_then(|p| p.info.as_ref())
                .map_or(0, |i| i.lid);
        }
        // Wires: peers, MTU and rate of every port.
        for n in &fabric.nodes {
            db.first_wire.push(db.wires.len() as u32);
            for (num, port) in n.ports.iter().enumerate() {
                let mut wire = Wire {
                    peer: port.peer.map(|(node, q)| (node as u32, q)),
                    mtu: 0,
                    rate: 0,
                };
                if let Some(info) = &port.info {
                    wire.mtu = port_mtu(info);
                    wire.rate = port_rate(info, n.speed_caps(num as u8));
                }
                if let Some((pn, pq)) = port.peer {
                    if let Some((far, far_caps)) = fabric.nodes.get(pn).and_then(|f| {
                        Some((f.ports.get(usize::from(pq))?.info.as_ref()?, f.speed_caps(pq)))
                    }) {
                        let far_mtu = port_mtu(far);
                        wire.mtu = if wire.mtu == 0 {
                            far_mtu
                        } else {
                            wire.mtu.min(far_mtu)
                        };
                        let far_rate = port_rate(far, far_caps);
                        wire.rate = if wire.rate == 0 {
                            far_rate
                        } else {
                            wire.rate.min(far_rate)
                        };
                    }
                }
                db.wires.push(wire);
            }
        }
        db.keys_unique = keys_unique(fabric, &node_lid);
        // The records of each node, taken from `previous` where the node
        // and its LID are the same: keys unique, a node's records are the
        // ones keyed by its LIDs, and sorted they come out in the order a
        // build from scratch gives.
        let changed: Option<Vec<usize>> = previous
            .filter(|p| p.keys_unique && db.keys_unique && p.lmc == lmc && p.source.len() == fabric.nodes.len())
            .map(|p| {
                (0..fabric.nodes.len())
                    .filter(|&i| !Arc::ptr_eq(&p.source[i], &fabric.nodes[i]) || p.node_lid[i] != node_lid[i])
                    .collect::<Vec<_>>()
            })
            .filter(|changed| changed.len() * 4 <= fabric.nodes.len());
        match (previous, changed) {
            (Some(p), Some(changed)) => {
                let mut gone = vec![false; 1 << 16];
                for &i in &changed {
                    for lid in keys_of(&p.source[i], p.node_lid[i]) {
                        gone[usize::from(lid)] = true;
                    }
                }
                let kept = |records: &[u8]| !gone[usize::from(u16::from_be_bytes([records[0], records[1]]))];
                db.node_records = p.node_records.iter().filter(|r| kept(&r[..])).copied().collect();
                db.port_records = p.port_records.iter().filter(|r| kept(&r[..])).copied().collect();
                db.switch_records = p.switch_records.iter().filter(|r| kept(&r[..])).copied().collect();
                db.guid_records = p.guid_records.iter().filter(|r| kept(&r[..])).copied().collect();
                db.pkey_records = p.pkey_records.iter().filter(|r| kept(&r[..])).copied().collect();
                db.rebuilt = changed.len();
                for i in changed {
                    db.node_records_of(fabric, i, &node_lid);
                }
            }
            _ => {
                db.rebuilt = fabric.nodes.len();
                for i in 0..fabric.nodes.len() {
                    db.node_records_of(fabric, i, &node_lid);
                }
            }
        }
        // LinkRecords: both directions of every cable between addressed nodes.
        for ((a, ap), (b, bp)) in fabric.links() {
            let lid_of = |node: usize, port: u8| -> u16 {
                let n = &fabric.nodes[node];
                if n.is_switch() {
                    node_lid[node]
                } else {
                    n.ports
                        .get(usize::from(port))
                        .and_then(|p| p.info.as_ref())
                        .map_or(0, |i| i.lid)
                }
            };
            let (la, lb) = (lid_of(a, ap), lid_of(b, bp));
            if la == 0 || lb == 0 {
                continue;
            }
            for repr in [
                lr::Repr {
                    from_lid: la,
                    from_port: ap,
                    to_port: bp,
                    to_lid: lb,
                },
                lr::Repr {
                    from_lid: lb,
                    from_port: bp,
                    to_port: ap,
                    to_lid: la,
                },
            ] {
                let mut rec = [0u8; lr::PADDED_LEN];
                repr.emit(&mut lr::Packet::new_unchecked(&mut rec[..]));
                db.link_records.push(rec);
            }
        }
        let lid_key = |r: &[u8]| u16::from_be_bytes([r[0], r[1]]);
        db.node_records.sort_by_key(|r| lid_key(r));
        db.port_records.sort_by_key(|r| (lid_key(r), r[2]));
        db.link_records.sort_by_key(|r| (lid_key(r), r[2]));
        db.switch_records.sort_by_key(|r| lid_key(r));
        db.guid_records.sort_by_key(|r| lid_key(r));
        db.pkey_records.sort_by_key(|r| (lid_key(r), r[4]));
        db.node_lid = node_lid;
        db
    }

    /// Node `i`'s own records (all but LinkRecords): NodeRecords,
    /// PortInfoRecords, its SwitchInfoRecord, GUIDInfoRecords and the
    /// default P_KeyTableRecords, unsorted.
    fn node_records_of(&mut self, fabric: &Fabric, i: usize, node_lid: &[u16]) {
        let n = &fabric.nodes[i];
        let ends = ends_of(&self.ends, i as u32);
        // GUIDInfoRecords: block 0 of every end port holds its port GUID
        // (no alias GUIDs are assigned).
        for e in ends {
            let mut guids = [0u64; 8];
            guids[0] = e.guid;
            let mut rec = [0u8; gir::PADDED_LEN];
            gir::Repr {
                lid: e.lid,
                block_num: 0,
                guids,
            }
            .emit(&mut gir::Packet::new_unchecked(&mut rec[..]));
            self.guid_records.push(rec);
        }
        // P_KeyTableRecords: this SM manages the default partition only, so
        // every port's table is block 0 with the full-member default P_Key.
        for e in ends {
            let ports: Vec<u8> = if e.switch {
                (0..=n.num_ports).collect()
            } else {
                vec![e.port]
            };
            for port in ports {
                let mut pkeys = [0u16; pkr::PKEYS];
                pkeys[0] = 0xFFFF;
                let mut rec = [0u8; pkr::PADDED_LEN];
                pkr::Repr {
                    lid: e.lid,
                    block_num: 0,
                    port_num: port,
                    pkeys,
                }
                .emit(&mut pkr::Packet::new_unchecked(&mut rec[..]));
                self.pkey_records.push(rec);
            }
        }
        let node_type = match n.kind {
            NodeKind::Ca => NodeType::Ca,
            NodeKind::Switch => NodeType::Switch,
            NodeKind::Router => NodeType::Router,
            _ => return,
        };
        let description = description_bytes(&n.description);
        // NodeRecords: one per end port, as the node answers by that port.
        for end in ends_of(&self.ends, i as u32) {
            let repr = nr::Repr {
                lid: end.lid,
                node_info: NodeInfoRepr {
                    base_version: 1,
                    class_version: 1,
                    node_type,
                    num_ports: n.num_ports,
                    system_image_guid: n.system_guid,
                    node_guid: n.guid,
                    port_guid: end.guid,
                    partition_cap: 0,
                    device_id: 0,
                    revision: 0,
                    local_port_num: end.port,
                    vendor_id: 0,
                },
                node_description: description,
            };
            let mut rec = [0u8; nr::PADDED_LEN];
            repr.emit(&mut nr::Packet::new_unchecked(&mut rec[..]));
            self.node_records.push(rec);
        }
        // PortInfoRecords: every port with PortInfo, keyed by the LID of
        // the port that addresses it.
        for (p, port) in n.ports.iter().enumerate() {
            let Some(info) = &port.info else { continue };
            let lid = if n.is_switch() { node_lid[i] } else { info.lid };
            if lid == 0 || (!n.is_switch() && p == 0) {
                continue;
            }
            let mut info = *info;
            // The M_Key is the SM's secret: never handed out.
            info.m_key = 0;
            let repr = pir::Repr {
                lid,
                port_num: p as u8,
                options: 0,
                port_info: info,
            };
            let mut rec = [0u8; pir::PADDED_LEN];
            repr.emit(&mut pir::Packet::new_unchecked(&mut rec[..]));
            self.port_records.push(rec);
        }
        if let (true, Some(si), lid) = (n.is_switch(), n.switch_info, node_lid[i]) {
            if lid != 0 {
                let repr = swr::Repr {
                    lid,
                    switch_info: si,
                };
                let mut rec = [0u8; swr::PADDED_LEN];
                repr.emit(&mut swr::Packet::new_unchecked(&mut rec[..]));
                self.switch_records.push(rec);
            }
        }
    }
}

/// The LIDs that key node `n`'s records (`lid`: the LID its switch port 0
/// or first end port holds): a switch's records are all keyed by its port
/// 0's, a CA's by each port's own.
fn keys_of(n: &FabricNode, lid: u16) -> impl Iterator<Item = u16> + '_ {
    let ports = if n.is_switch() { &n.ports[..0] } else { n.ports.get(1..).unwrap_or(&[]) };
    std::iter::once(lid).chain(ports.iter().filter_map(|p| p.info.map(|i| i.lid))).filter(|&l| l != 0)
}

/// Whether no LID keys records of two nodes.
fn keys_unique(fabric: &Fabric, node_lid: &[u16]) -> bool {
    let mut owner = vec![u32::MAX; 1 << 16];
    for (i, n) in fabric.nodes.iter().enumerate() {
        for lid in keys_of(n, node_lid[i]) {
            let slot = &mut owner[usize::from(lid)];
            if *slot != u32::MAX && *slot != i as u32 {
                return false;
            }
            *slot = i as u32;
        }
    }
    true
}

/// NodeDescription bytes of `text`, cut to 64 bytes at a character boundary.
fn description_bytes(text: &str) -> NodeDescriptionRepr {
    let mut end = text.len().min(sm_mad::node_description::LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut bytes = [0u8; sm_mad::node_description::LEN];
    bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
    NodeDescriptionRepr { bytes }
}

/// The end ports of `node` in `ends`. They are taken node by node, so a
/// node's are found by halving: a scan per lookup would make building the
/// records quadratic in the fabric.
fn ends_of(ends: &[EndPort], node: u32) -> &[EndPort] {
    let first = ends.partition_point(|e| e.node < node);
    let count = ends[first..].partition_point(|e| e.node == node);
    &ends[first..first + count]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tree as discovery finds it, every end port given a LID.
    fn addressed() -> Fabric {
        let topo = sm_topology::gen::kary_ntree(2, 2, 2).expect("tree");
        let ca = topo.nodes.iter().position(|n| n.kind == NodeKind::Ca).expect("a host");
        let mut sim = crate::sim::SimFabric::from_topology(&topo, ca, 1).expect("sim");
        let mut port = crate::sim::SimPort::new(&mut sim);
        let mut client = sm_transport::SmpClient::new(&mut port, 0);
        let (mut fabric, _) = crate::sweep::discovery::discover(&mut client).expect("discovered");
        let mut lid = 0;
        for i in 0..fabric.nodes.len() {
            let node = fabric.node_mut(i);
            let ports = if node.is_switch() { 0..=0 } else { 1..=node.num_ports };
            for p in ports {
                if let Some(info) = node.ports[usize::from(p)].info.as_mut() {
                    lid += 1;
                    info.lid = lid;
                }
            }
        }
        fabric
    }

    #[test]
    fn records_taken_over_are_the_ones_made_anew_and_only_where_a_node_has_its_lids_alone() {
        let first = addressed();
        let before = SaDb::records(&first, 0, None);
        assert_eq!(before.nodes_rebuilt(), first.nodes.len());
        // One host moves to a LID nobody holds: its records alone are made.
        let mut moved = first.clone();
        let host = moved.nodes.iter().rposition(|n| !n.is_switch()).expect("a host");
        moved.node_mut(host).ports[1].info.as_mut().expect("PortInfo").lid = 0x100;
        let after = SaDb::records(&moved, 0, Some(&before));
        assert_eq!(after.nodes_rebuilt(), 1);
        assert!(after.same_records(&SaDb::records(&moved, 0, None)));
        assert!(after.end_by_lid(0x100).is_some());
        // Two nodes on one LID: whose records a LID keys is no longer
        // known, so all are made anew (and come out the same).
        let mut twice = moved.clone();
        let switch = twice.nodes.iter().position(|n| n.is_switch()).expect("a switch");
        twice.node_mut(switch).ports[0].info.as_mut().expect("PortInfo").lid = 0x100;
        let clash = SaDb::records(&twice, 0, Some(&after));
        assert_eq!(clash.nodes_rebuilt(), twice.nodes.len());
        assert!(clash.same_records(&SaDb::records(&twice, 0, None)));
        // Nor from it: the next database is made whole too.
        assert_eq!(SaDb::records(&moved, 0, Some(&clash)).nodes_rebuilt(), moved.nodes.len());
    }

    #[test]
    fn rate_codes_in_rate_order() {
        assert!(RATES.windows(2).all(|w| w[0].1 < w[1].1));
        assert_eq!(rate_code(400), 7, "4x QDR is 40 Gb/s");
        assert_eq!(rate_code(4 * 250), 16, "4x EDR is 100 Gb/s");
        assert_eq!(rate_code(10), 2, "below 2.5 Gb/s: the lowest code");
        assert_eq!(rate_of(rate_code(1250)), 1200);
        let qdr4 = PortInfoRepr {
            link_width_active: 0x02,
            link_speed_active: 0x04,
            ..Default::default()
        };
        let all = sm_mad::speed::SpeedCaps::ALL;
        assert_eq!(port_rate(&qdr4, all), 400);
        let edr4 = PortInfoRepr {
            link_speed_ext_active: 0x02,
            ..qdr4
        };
        assert_eq!(port_rate(&edr4, all), 1000);
        let xdr4 = PortInfoRepr { link_speed_ext2_active: 1, ..edr4 };
        assert_eq!(port_rate(&xdr4, all), 8000);
        assert_eq!(rate_code(port_rate(&xdr4, all)), 23, "4x XDR is 800 Gb/s");
    }
}
