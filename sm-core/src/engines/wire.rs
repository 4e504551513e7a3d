//! What crosses between the SM and an engine host process
//! ([`super::host`]): the request (which engine, its configuration, the
//! fabric snapshot, the previous routing) and the answer (a routing, or
//! the engine's error), as flat little-endian records in a memory file.
//!
//! The answer comes from a process that runs third-party code, so it is
//! read as untrusted input: every length is checked against what is left,
//! every count against a bound, and anything that does not parse is a
//! [`WireError`] naming the field, never a panic or an allocation the
//! answer's own numbers could make huge.

use sm_abi::abi_stable::std_types::{RArc, ROption, RString, RVec};
use sm_abi::{
    Diagnostic, ErrorKind, FabricSnapshot, Level, Lft, Node, NodeKind, PathSl, Port, PortState, PreviousLft, PreviousRouting,
    Routing, Sl2Vl, SlTable, SpanningTree, TreeEdge, VlArb, VlWeight,
};
use thiserror::Error;

const REQUEST_MAGIC: &[u8; 8] = b"SMCEREQ1";
const ANSWER_MAGIC: &[u8; 8] = b"SMCEANS1";

/// The most LIDs a subnet has (unicast and multicast): bounds every
/// per-LID table an answer may carry.
const MAX_LIDS: usize = 1 << 16;

/// Why a record does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{what}: {why}")]
pub struct WireError {
    what: &'static str,
    why: String,
}

fn bad(what: &'static str, why: impl Into<String>) -> WireError {
    WireError { what, why: why.into() }
}

/// Appends fields to any writer (a `Vec`, or the answer's memory file
/// through a buffer, so that a 148 M-entry routing is not first copied
/// whole into memory); the first error is kept and reported at the end.
struct Writer<W: std::io::Write> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> Writer<W> {
    fn new(out: W) -> Self {
        Writer { out, error: None }
    }
    fn raw(&mut self, b: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(b) {
                self.error = Some(e);
            }
        }
    }
    fn u8(&mut self, v: u8) {
        self.raw(&[v]);
    }
    fn u16(&mut self, v: u16) {
        self.raw(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.raw(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.raw(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.raw(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn finish(mut self) -> std::io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Takes fields, checking that each is there.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.rest.len() < n {
            return Err(bad(what, format!("{n} bytes wanted, {} left", self.rest.len())));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of items of at least `item` bytes each, at most `max`.
    fn count(&mut self, what: &'static str, item: usize, max: usize) -> Result<usize, WireError> {
        let n = self.u64(what)?;
        let n = usize::try_from(n).map_err(|_| bad(what, format!("count {n}")))?;
        if n > max {
            return Err(bad(what, format!("{n} items, at most {max}")));
        }
        if n.saturating_mul(item.max(1)) > self.rest.len() {
            return Err(bad(what, format!("{n} items do not fit in the {} bytes left", self.rest.len())));
        }
        Ok(n)
    }
    fn bytes(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], WireError> {
        let n = self.count(what, 1, max)?;
        self.take(n, what)
    }
    fn str(&mut self, what: &'static str) -> Result<String, WireError> {
        let b = self.bytes(what, 1 << 20)?;
        String::from_utf8(b.to_vec()).map_err(|_| bad(what, "not UTF-8"))
    }
    fn end(&self, what: &'static str) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(bad(what, format!("{} bytes after the end", self.rest.len())))
        }
    }
}

/// What the host is asked.
#[derive(Debug, Clone)]
pub struct Request {
    /// The engine's name.
    pub engine: String,
    /// Its library.
    pub library: std::path::PathBuf,
    /// Its configuration text.
    pub config: String,
    /// The fabric.
    pub fabric: FabricSnapshot,
    /// The routing in force, for a re-route.
    pub previous: Option<PreviousRouting>,
}

/// What [`encode_request`] writes: the parts of a [`Request`], borrowed
/// from the SM (the snapshot is not copied to be sent).
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    /// The engine's name.
    pub engine: &'a str,
    /// Its library.
    pub library: &'a std::path::Path,
    /// Its configuration text.
    pub config: &'a str,
    /// The fabric.
    pub fabric: &'a FabricSnapshot,
    /// The routing in force, for a re-route.
    pub previous: Option<&'a PreviousRouting>,
}

/// The request as bytes.
pub fn encode_request(r: &RequestParts<'_>) -> Vec<u8> {
    let mut w = Writer::new(Vec::new());
    w.raw(REQUEST_MAGIC);
    w.str(r.engine);
    w.bytes(r.library.as_os_str().as_encoded_bytes());
    w.str(r.config);
    let f = r.fabric;
    w.u8(f.lmc);
    w.u16(f.max_lid);
    w.u32(f.sm_node);
    w.len(f.nodes.len());
    for n in f.nodes.iter() {
        w.u64(n.guid);
        w.u64(n.system_guid);
        w.u8(n.kind.0);
        w.u8(n.num_ports);
        w.u32(n.first_port);
        w.str(n.description.as_str());
    }
    w.len(f.ports.len());
    for p in f.ports.iter() {
        w.u32(p.node);
        w.u8(p.num);
        w.u64(p.guid);
        w.u16(p.lid);
        w.u8(p.lmc);
        w.u32(p.peer);
        w.u8(p.state.0);
        w.u8(p.op_vls);
        w.u8(p.width);
        w.u8(p.speed);
    }
    match r.previous {
        None => w.u8(0),
        Some(p) => {
            w.u8(1);
            w.str(p.engine.as_str());
            w.len(p.lfts.len());
            for l in p.lfts.iter() {
                w.u64(l.guid);
                w.bytes(&l.ports);
            }
        }
    }
    // Writing into a Vec cannot fail.
    w.finish().unwrap_or_default()
}

/// The request back from bytes (in the host; written by the SM itself).
pub fn decode_request(bytes: &[u8]) -> Result<Request, WireError> {
    let mut r = Reader { rest: bytes };
    if r.take(8, "magic")? != REQUEST_MAGIC {
        return Err(bad("magic", "not an engine request"));
    }
    let engine = r.str("engine")?;
    let library = r.bytes("library", 1 << 16)?;
    let library = std::path::PathBuf::from(String::from_utf8_lossy(library).into_owned());
    let config = r.str("config")?;
    let lmc = r.u8("lmc")?;
    let max_lid = r.u16("max_lid")?;
    let sm_node = r.u32("sm_node")?;
    let n = r.count("nodes", 27, usize::MAX)?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        nodes.push(Node {
            guid: r.u64("node guid")?,
            system_guid: r.u64("system guid")?,
            kind: NodeKind(r.u8("node kind")?),
            num_ports: r.u8("num ports")?,
            first_port: r.u32("first port")?,
            description: RString::from(r.str("description")?),
        });
    }
    let n = r.count("ports", 24, usize::MAX)?;
    let mut ports = Vec::with_capacity(n);
    for _ in 0..n {
        ports.push(Port {
            node: r.u32("port node")?,
            num: r.u8("port num")?,
            guid: r.u64("port guid")?,
            lid: r.u16("lid")?,
            lmc: r.u8("port lmc")?,
            peer: r.u32("peer")?,
            state: PortState(r.u8("state")?),
            op_vls: r.u8("op vls")?,
            width: r.u8("width")?,
            speed: r.u8("speed")?,
        });
    }
    let previous = match r.u8("previous")? {
        0 => None,
        _ => {
            let engine = r.str("previous engine")?;
            let n = r.count("previous lfts", 16, usize::MAX)?;
            let mut lfts = Vec::with_capacity(n);
            for _ in 0..n {
                let guid = r.u64("previous guid")?;
                let ports = r.bytes("previous ports", MAX_LIDS)?.to_vec();
                lfts.push(PreviousLft { guid, ports: ports.into() });
            }
            Some(PreviousRouting { engine: engine.into(), lfts: lfts.into() })
        }
    };
    r.end("request")?;
    let fabric = FabricSnapshot { nodes: nodes.into(), ports: ports.into(), lmc, max_lid, sm_node };
    Ok(Request { engine, library, config, fabric, previous })
}

/// What the engine did, as the host reports it.
pub enum Answer {
    /// It routed.
    Routed(Routing),
    /// It could not be created.
    Create(sm_abi::EngineError),
    /// `route` returned an error (or panicked: see the error's kind).
    Error(sm_abi::EngineError),
}

/// Path SLs, made whole for the trip: the oracle itself cannot cross.
enum Sls {
    Uniform(u8),
    Table(SlTable),
    /// `dim × dim` SLs, destination major, for LIDs `0..dim`.
    Matrix(u32, Vec<u8>),
}

/// A routing's path SLs given by a full matrix (an engine whose oracle
/// has no table answers pair by pair; the host asks it every pair).
struct MatrixSl {
    dim: u32,
    sl: Vec<u8>,
}

impl PathSl for MatrixSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let (s, d) = (u32::from(slid), u32::from(dlid));
        if s >= self.dim || d >= self.dim {
            return 0;
        }
        self.sl.get((d * self.dim + s) as usize).copied().unwrap_or(0)
    }
}

fn sls_of(routing: &Routing, max_lid: u16) -> Sls {
    if let ROption::RSome(sl) = routing.path_sl.uniform() {
        return Sls::Uniform(sl);
    }
    if let ROption::RSome(table) = routing.path_sl.sl_table() {
        return Sls::Table((*table).clone());
    }
    let dim = u32::from(max_lid) + 1;
    let mut sl = Vec::with_capacity((dim * dim) as usize);
    for d in 0..dim {
        for s in 0..dim {
            sl.push(routing.path_sl.path_sl(s as u16, d as u16));
        }
    }
    Sls::Matrix(dim, sl)
}

/// The answer as bytes (in the host). `max_lid` bounds the path-SL matrix
/// of an oracle without a table.
pub fn encode_answer(a: &Answer, max_lid: u16) -> Vec<u8> {
    // Writing into a Vec cannot fail.
    write_answer(Vec::new(), a, max_lid).unwrap_or_default()
}

/// [`encode_answer`] into `out`.
pub fn write_answer<W: std::io::Write>(out: W, a: &Answer, max_lid: u16) -> std::io::Result<W> {
    let mut w = Writer::new(out);
    w.raw(ANSWER_MAGIC);
    match a {
        Answer::Create(e) | Answer::Error(e) => {
            w.u8(if matches!(a, Answer::Create(_)) { 1 } else { 2 });
            w.u8(e.kind.0);
            w.str(e.reason.as_str());
        }
        Answer::Routed(r) => {
            w.u8(0);
            w.len(r.lfts.len());
            for l in r.lfts.iter() {
                w.u32(l.node);
                w.bytes(&l.ports);
            }
            match sls_of(r, max_lid) {
                Sls::Uniform(sl) => {
                    w.u8(0);
                    w.u8(sl);
                }
                Sls::Table(t) => {
                    w.u8(1);
                    w.len(t.class_of.len());
                    for &c in t.class_of.iter() {
                        w.u32(c);
                    }
                    w.u32(t.classes);
                    w.bytes(&t.sl);
                }
                Sls::Matrix(dim, sl) => {
                    w.u8(2);
                    w.u32(dim);
                    w.bytes(&sl);
                }
            }
            w.len(r.sl2vl.len());
            for e in r.sl2vl.iter() {
                w.u32(e.node);
                w.u8(e.in_port);
                w.u8(e.out_port);
                w.raw(&e.vl);
            }
            w.len(r.vlarb.len());
            for v in r.vlarb.iter() {
                w.u32(v.node);
                w.u8(v.port);
                w.u8(v.high_limit);
                for table in [&v.high, &v.low] {
                    w.len(table.len());
                    for x in table.iter() {
                        w.u8(x.vl);
                        w.u8(x.weight);
                    }
                }
            }
            match &r.mcast_tree {
                ROption::RNone => w.u8(0),
                ROption::RSome(t) => {
                    w.u8(1);
                    w.u32(t.root);
                    w.len(t.edges.len());
                    for e in t.edges.iter() {
                        w.u32(e.node);
                        w.u8(e.port);
                    }
                }
            }
            w.u8(r.vls_used);
            w.len(r.diagnostics.len());
            for d in r.diagnostics.iter() {
                w.u8(d.level.0);
                w.str(d.message.as_str());
            }
        }
    }
    w.finish()
}

/// The answer back from bytes (in the SM: untrusted). `fabric` bounds
/// what a routing of it can hold.
pub fn decode_answer(bytes: &[u8], fabric: &FabricSnapshot) -> Result<Answer, WireError> {
    decode_answer_into(bytes, fabric, Vec::new())
}

/// Tables for the LFTs of an answer about `fabric`, one per switch, with
/// every page already touched: made while the engine host routes, so that
/// decoding the answer is a copy into memory that is there, not the first
/// touch of 148 MB on a 34-ary 3-tree.
pub fn lft_pool(fabric: &FabricSnapshot) -> Vec<Vec<u8>> {
    let lids = usize::from(fabric.max_lid) + 1;
    let switches = fabric.nodes.iter().filter(|n| n.kind == sm_abi::NodeKind::Switch).count();
    (0..switches).map(|_| vec![sm_abi::NO_ROUTE; lids]).collect()
}

/// [`decode_answer`], copying the LFTs into `pool`'s tables (see
/// [`lft_pool`]) while they last.
pub fn decode_answer_into(bytes: &[u8], fabric: &FabricSnapshot, pool: Vec<Vec<u8>>) -> Result<Answer, WireError> {
    let mut r = Reader { rest: bytes };
    if r.take(8, "magic")? != ANSWER_MAGIC {
        return Err(bad("magic", "not an engine answer"));
    }
    let nodes = fabric.nodes.len();
    let lids = usize::from(fabric.max_lid) + 1;
    let answer = match r.u8("answer kind")? {
        kind @ (1 | 2) => {
            let e = sm_abi::EngineError { kind: ErrorKind(r.u8("error kind")?), reason: r.str("error reason")?.into() };
            if kind == 1 {
                Answer::Create(e)
            } else {
                Answer::Error(e)
            }
        }
        0 => {
            let n = r.count("lfts", 12, nodes)?;
            let mut parts = Vec::with_capacity(n);
            for _ in 0..n {
                let node = r.u32("lft node")?;
                parts.push((node, r.bytes("lft ports", MAX_LIDS)?));
            }
            // Copied on every core, into the pool's tables first.
            use rayon::prelude::*;
            let mut pool = pool;
            pool.resize_with(parts.len().max(pool.len()), Vec::new);
            pool.truncate(parts.len());
            let lfts: Vec<Lft> = parts
                .into_par_iter()
                .zip(pool)
                .map(|((node, ports), mut table)| {
                    table.clear();
                    table.extend_from_slice(ports);
                    Lft { node, ports: table.into() }
                })
                .collect();
            let path_sl = match r.u8("path SL kind")? {
                0 => sm_abi::path_sl_box(sm_abi::UniformSl(r.u8("uniform SL")?)),
                1 => {
                    let n = r.count("SL classes of LIDs", 4, MAX_LIDS)?;
                    let mut class_of = Vec::with_capacity(n);
                    for _ in 0..n {
                        class_of.push(r.u32("LID class")?);
                    }
                    let classes = r.u32("classes")?;
                    let sl = r.bytes("SL table", MAX_LIDS * MAX_LIDS)?.to_vec();
                    let table = SlTable { class_of: class_of.into(), classes, sl: sl.into() };
                    table.check(fabric.max_lid).map_err(|e| bad("SL table", e.to_string()))?;
                    sm_abi::table_sl_box(RArc::new(table))
                }
                2 => {
                    let dim = r.u32("SL matrix size")?;
                    if dim as usize != lids {
                        return Err(bad("SL matrix", format!("{dim} LIDs, the fabric has {lids}")));
                    }
                    let sl = r.bytes("SL matrix", lids * lids)?.to_vec();
                    if sl.len() != lids * lids {
                        return Err(bad("SL matrix", format!("{} SLs for {lids} × {lids} pairs", sl.len())));
                    }
                    sm_abi::path_sl_box(MatrixSl { dim, sl })
                }
                other => return Err(bad("path SL kind", format!("{other}"))),
            };
            let n = r.count("SL2VL", 22, usize::MAX)?;
            let mut sl2vl = Vec::with_capacity(n);
            for _ in 0..n {
                let node = r.u32("SL2VL node")?;
                let in_port = r.u8("SL2VL in port")?;
                let out_port = r.u8("SL2VL out port")?;
                let mut vl = [0u8; 16];
                vl.copy_from_slice(r.take(16, "SL2VL map")?);
                sl2vl.push(Sl2Vl { node, in_port, out_port, vl });
            }
            let n = r.count("VLArb", 22, usize::MAX)?;
            let mut vlarb = Vec::with_capacity(n);
            for _ in 0..n {
                let node = r.u32("VLArb node")?;
                let port = r.u8("VLArb port")?;
                let high_limit = r.u8("VLArb high limit")?;
                let mut tables = [Vec::new(), Vec::new()];
                for t in &mut tables {
                    let k = r.count("VLArb entries", 2, 64)?;
                    for _ in 0..k {
                        t.push(VlWeight { vl: r.u8("VLArb VL")?, weight: r.u8("VLArb weight")? });
                    }
                }
                let [high, low] = tables;
                vlarb.push(VlArb { node, port, high_limit, high: high.into(), low: low.into() });
            }
            let mcast_tree = match r.u8("mcast tree")? {
                0 => ROption::RNone,
                _ => {
                    let root = r.u32("tree root")?;
                    let k = r.count("tree edges", 5, usize::MAX)?;
                    let mut edges = Vec::with_capacity(k);
                    for _ in 0..k {
                        edges.push(TreeEdge { node: r.u32("edge node")?, port: r.u8("edge port")? });
                    }
                    ROption::RSome(SpanningTree { root, edges: edges.into() })
                }
            };
            let vls_used = r.u8("VLs used")?;
            let k = r.count("diagnostics", 9, 1 << 20)?;
            let mut diagnostics = Vec::with_capacity(k);
            for _ in 0..k {
                diagnostics.push(Diagnostic { level: Level(r.u8("level")?), message: r.str("message")?.into() });
            }
            Answer::Routed(Routing {
                lfts: lfts.into(),
                path_sl,
                sl2vl: RVec::from(sl2vl),
                vlarb: RVec::from(vlarb),
                mcast_tree,
                vls_used,
                diagnostics: diagnostics.into(),
            })
        }
        other => return Err(bad("answer kind", format!("{other}"))),
    };
    r.end("answer")?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric() -> FabricSnapshot {
        let topo = sm_topology::parse_str(
            "Switch 4 \"S-1\" # \"sw\"\n[1] \"H-1\"[1]\n[2] \"H-2\"[1]\n\nCa 1 \"H-1\" # \"a\"\n[1] \"S-1\"[1]\n\nCa 1 \"H-2\" # \"b\"\n[1] \"S-1\"[2]\n",
            "t.net",
        )
        .expect("topology");
        sm_topology::lids::snapshot(&topo, 0).expect("snapshot")
    }

    #[test]
    fn a_request_comes_back_as_it_went() {
        let f = fabric();
        let previous = PreviousRouting { engine: "minhop".into(), lfts: vec![PreviousLft { guid: 7, ports: vec![1, 2, 255].into() }].into() };
        let req = RequestParts {
            engine: "x",
            library: std::path::Path::new("/lib/x.so"),
            config: "a = 1",
            fabric: &f,
            previous: Some(&previous),
        };
        let back = decode_request(&encode_request(&req)).expect("decodes");
        assert_eq!((back.engine.as_str(), back.config.as_str()), ("x", "a = 1"));
        assert_eq!(back.fabric.nodes, f.nodes);
        assert_eq!(back.fabric.ports, f.ports);
        assert_eq!((back.fabric.max_lid, back.fabric.lmc, back.fabric.sm_node), (f.max_lid, f.lmc, f.sm_node));
        assert_eq!(back.previous, Some(previous));
    }

    struct Odd;
    impl PathSl for Odd {
        fn uniform(&self) -> ROption<u8> {
            ROption::RNone
        }
        fn path_sl(&self, s: u16, d: u16) -> u8 {
            ((s + 2 * d) % 16) as u8
        }
    }

    #[test]
    fn a_routing_comes_back_with_its_path_sls_made_whole() {
        let f = fabric();
        let mut routing = Routing::single_vl(vec![Lft { node: 0, ports: vec![255, 1, 2, 0].into() }]);
        routing.path_sl = sm_abi::path_sl_box(Odd);
        routing.sl2vl = vec![Sl2Vl { node: 0, in_port: 1, out_port: 2, vl: [3; 16] }].into();
        routing.vls_used = 4;
        routing.diag(Level::Info, "hello");
        let bytes = encode_answer(&Answer::Routed(routing), f.max_lid);
        let Ok(Answer::Routed(back)) = decode_answer(&bytes, &f) else { panic!("not a routing") };
        assert_eq!(back.lfts[0].ports.as_slice(), &[255, 1, 2, 0]);
        for s in 0..=f.max_lid {
            for d in 0..=f.max_lid {
                assert_eq!(back.path_sl.path_sl(s, d), ((s + 2 * d) % 16) as u8);
            }
        }
        assert_eq!((back.sl2vl[0].vl, back.vls_used, back.diagnostics[0].message.as_str()), ([3; 16], 4, "hello"));
    }

    #[test]
    fn a_bad_answer_is_an_error_naming_the_field_never_a_panic() {
        let f = fabric();
        let good = encode_answer(&Answer::Routed(Routing::single_vl(vec![Lft { node: 0, ports: vec![1; 4].into() }])), f.max_lid);
        // Every truncation, and every single byte changed, either decodes or
        // is an error.
        for cut in 0..good.len() {
            assert!(decode_answer(&good[..cut], &f).is_err(), "cut at {cut}");
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0xff;
            let _ = decode_answer(&b, &f);
        }
        // A count that claims more than the bytes hold.
        let mut huge = ANSWER_MAGIC.to_vec();
        huge.push(0);
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        let e = decode_answer(&huge, &f).err().expect("refused");
        assert!(e.to_string().starts_with("lfts"), "{e}");
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode_answer(&trailing, &f).is_err());
    }
}
