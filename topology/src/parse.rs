//! Reader for ibnetdiscover output and ibsim net files.
//!
//! Both are the same line-oriented format: node records made of a header
//! line (`Switch 24 "id"`, `Ca 2 "id"` / `Hca 2 "id"`, `Rt 1 "id"`) followed
//! by one line per linked port (`[p] "peer"[q]`) and ended by a blank line,
//! with `key=value` lines between records that apply to the next node.
//!
//! The reader follows ibsim 0.10's interpretation wherever the file is one
//! ibsim accepts, so that a topology read here has the GUIDs ibsim will
//! report for the same file:
//!
//! * GUIDs come from per-kind counters, exactly as in ibsim: CAs start at
//!   0x100000, switches at 0x200000, routers at 0; a switch takes one GUID,
//!   a CA or router with `n` ports takes `n + 1` (its node GUID and one per
//!   port). `switchguid=`, `caguid=` (`hcaguids=`), `rtguid=` set the
//!   counter of their kind (`=v` absolute, `+v` relative to the last
//!   absolute value). `sysimgguid=` applies to the next node only.
//! * When no GUID line set the counter since the previous node of that
//!   kind and the id has the ibnetdiscover form (`S-`/`H-`/`R-` and 16 hex
//!   digits), the GUID is taken from the id. ibsim would use its counter
//!   there; the id is what the author of such a (hand-edited) file meant.
//!   ibnetdiscover output always has GUID lines, and [`crate::emit`] writes
//!   them, so ibsim and this reader agree on those files.
//! * A description comes from `# "desc"` after the header (or the unquoted
//!   text up to ` base port `/` enhanced port `/` lid `/` lmc `); without
//!   one, ibsim uses the node id, and so does this reader.
//! * Port lines may carry `(guid)` after the local port (ibnetdiscover does
//!   this for CA ports) and after the peer port (for CA peers); those GUIDs
//!   are kept. Missing ones default to ibsim's `node GUID + port`.
//! * The link rate comes from an ibnetdiscover `# ... lid N 4xQDR` comment
//!   (an observation: both ends must agree), from ibsim's `w=`/`s=`/`e=`
//!   enable masks before the comment (the highest enabled value is taken),
//!   or from `width=`/`speed=`/`extspeed=` lines that set defaults for the
//!   nodes that follow. Ends that say something are combined by taking the
//!   lower width and speed; with nothing said, 4x QDR
//!   ([`crate::model::DEFAULT_SPEED`]).
//!
//! Where ibsim is silently lenient the reader is strict, because a silent
//! misreading makes routing tests meaningless: a port line outside a record
//! is an error (ibsim ignores it), `include`, `module`, `do` and `@alias`
//! lines are rejected rather than half-supported. Links declared from one
//! end only are accepted (ibsim rejects them); two ends that disagree about
//! each other are an error.

use std::collections::HashMap;
use std::path::Path;

use sm_abi::NodeKind;

use crate::error::TopologyError;
use crate::model::{
    is_valid_width, kind_name, speed_from_name, unwritable, TopoLink, TopoNode, Topology,
    DEFAULT_SPEED, DEFAULT_WIDTH, SPEED_DDR, SPEED_EDR, SPEED_FDR, SPEED_HDR, SPEED_NDR, SPEED_QDR,
    SPEED_SDR,
};

/// Read a topology file. Errors name the path as given.
pub fn parse_file(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
    Ok(parse_file_stated(path)?.0)
}

/// Read a topology from text; `origin` names it in error messages.
pub fn parse_str(text: &str, origin: &str) -> Result<Topology, TopologyError> {
    Ok(parse_str_stated(text, origin)?.0)
}

/// The links of a topology whose rate its file states (an ibnetdiscover
/// `lid N 4xQDR` comment, ibsim's `w=`/`s=`/`e=` port options, or
/// `width=`/`speed=`/`extspeed=` lines before one of its nodes), by their
/// two ends as (node, port), lower end first. The other links carry the
/// default rate, which says nothing of the cable.
pub type StatedRates = std::collections::BTreeSet<((usize, u8), (usize, u8))>;

/// [`parse_file`], with the links whose rate the file states.
pub fn parse_file_stated(path: impl AsRef<Path>) -> Result<(Topology, StatedRates), TopologyError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|source| TopologyError::Io { path: path.to_path_buf(), source })?;
    // Node descriptions come from hardware and are not always UTF-8; a
    // replacement character in a description beats refusing the fabric.
    let text = String::from_utf8_lossy(&bytes);
    parse_str_stated(&text, &path.display().to_string())
}

/// [`parse_str`], with the links whose rate the text states.
pub fn parse_str_stated(text: &str, origin: &str) -> Result<(Topology, StatedRates), TopologyError> {
    let mut p = Parser::new(origin);
    for (i, raw) in text.lines().enumerate() {
        p.line(raw, i + 1)?;
    }
    p.finish()
}

/// A link rate as (lanes, speed code).
type Rate = (u8, u8);

struct Draft {
    node: TopoNode,
    line: usize,
    /// Half-link declared on each port, by index into `Parser::halves`.
    ports: Vec<Option<usize>>,
    /// Port GUIDs the file states for CA/router ports, with the line saying so.
    guid_claims: Vec<Option<(u64, usize)>>,
    /// Rate set by `width=`/`speed=` lines before this node, if any.
    default_rate: Option<Rate>,
}

struct Half {
    node: usize,
    port: u8,
    peer: String,
    peer_port: u8,
    peer_guid: Option<u64>,
    rate: Option<EndRate>,
    line: usize,
}

#[derive(Clone, Copy)]
struct EndRate {
    rate: Rate,
    /// Read from an ibnetdiscover comment: the rate the link was seen
    /// running at, as opposed to what a port is enabled for.
    observed: bool,
}

/// ibsim's node-kind slots for its GUID counters.
fn kind_slot(kind: NodeKind) -> usize {
    match kind {
        NodeKind::Ca => 0,
        NodeKind::Switch => 1,
        // The parser only makes the three kinds ibsim knows.
        _ => 2,
    }
}

struct Parser<'o> {
    origin: &'o str,
    drafts: Vec<Draft>,
    by_name: HashMap<String, usize>,
    by_guid: HashMap<u64, usize>,
    halves: Vec<Half>,
    guid_base: [u64; 3],
    guid_next: [u64; 3],
    guid_explicit: [bool; 3],
    pending_sys_guid: Option<u64>,
    pending_switch_port_guid: Option<u64>,
    /// ibsim enable masks from `width=`/`speed=`/`extspeed=`, once any is seen.
    masks: Option<(u32, u32, u32)>,
    current: Option<usize>,
}

impl<'o> Parser<'o> {
    fn new(origin: &'o str) -> Self {
        Parser {
            origin,
            drafts: Vec::new(),
            by_name: HashMap::new(),
            by_guid: HashMap::new(),
            halves: Vec::new(),
            guid_base: [0x100000, 0x200000, 0],
            guid_next: [0x100000, 0x200000, 0],
            guid_explicit: [false; 3],
            pending_sys_guid: None,
            pending_switch_port_guid: None,
            masks: None,
            current: None,
        }
    }

    fn err(&self, line: usize, msg: impl Into<String>) -> TopologyError {
        TopologyError::parse(self.origin, line, msg)
    }

    fn line(&mut self, raw: &str, n: usize) -> Result<(), TopologyError> {
        let line = raw.trim_end_matches('\r').trim_start();
        if line.is_empty() {
            self.current = None;
            return Ok(());
        }
        if line.starts_with('#') {
            return Ok(());
        }
        if line.starts_with('[') {
            return self.port_line(line, n);
        }
        if line.starts_with('@') {
            return Err(self.err(n, "ibsim port aliases (@name) are not supported"));
        }
        let word_len = line.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(line.len());
        let (word, rest) = line.split_at(word_len);
        // Any other line ends a record, as it does in ibsim.
        self.current = None;
        match word {
            "Switch" => self.header(NodeKind::Switch, word, rest, n),
            "Ca" | "Hca" => self.header(NodeKind::Ca, word, rest, n),
            "Rt" => self.header(NodeKind::Router, word, rest, n),
            "switchguid" => self.guid_line(NodeKind::Switch, word, rest, n),
            "caguid" | "caguids" | "hcaguid" | "hcaguids" => {
                self.guid_line(NodeKind::Ca, word, rest, n)
            }
            "rtguid" => self.guid_line(NodeKind::Router, word, rest, n),
            "sysimgguid" => {
                let v = self.assigned_number(word, rest, n)?;
                // ibsim treats 0 as "none": the node reports its own GUID.
                self.pending_sys_guid = (v != 0).then_some(v);
                Ok(())
            }
            "width" | "speed" | "extspeed" => self.mask_line(word, rest, n),
            "include" | "module" | "do" => Err(self.err(
                n,
                format!("ibsim \"{word}\" lines are not supported; flatten the file first"),
            )),
            // vendid, devid, pdebug, ibnetdiscover -g chassis lines, ...
            _ => Ok(()),
        }
    }

    fn assigned_number(&self, word: &str, rest: &str, n: usize) -> Result<u64, TopologyError> {
        let Some(eq) = rest.find('=') else {
            return Err(self.err(n, format!("expected '=' after \"{word}\"")));
        };
        match c_number(&rest[eq + 1..]) {
            Some((v, _)) => Ok(v),
            None => Err(self.err(n, format!("expected a number after \"{word}=\""))),
        }
    }

    fn guid_line(
        &mut self,
        kind: NodeKind,
        word: &str,
        rest: &str,
        n: usize,
    ) -> Result<(), TopologyError> {
        // ibsim looks for '=' anywhere first, then for '+'.
        let (pos, relative) = match (rest.find('='), rest.find('+')) {
            (Some(p), _) => (p, false),
            (None, Some(p)) => (p, true),
            (None, None) => {
                return Err(self.err(n, format!("expected '=' or '+' after \"{word}\"")))
            }
        };
        let Some((value, used)) = c_number(&rest[pos + 1..]) else {
            return Err(self.err(n, format!("expected a GUID after \"{word}\"")));
        };
        let slot = kind_slot(kind);
        if relative {
            self.guid_next[slot] = self.guid_base[slot].wrapping_add(value);
        } else {
            self.guid_base[slot] = value;
            self.guid_next[slot] = value;
        }
        self.guid_explicit[slot] = true;
        if kind == NodeKind::Switch {
            // ibnetdiscover writes the switch port GUID in parentheses.
            let tail = rest[pos + 1 + used..].trim_start();
            self.pending_switch_port_guid = match tail.strip_prefix('(') {
                Some(t) => {
                    let Some(close) = t.find(')') else {
                        return Err(self.err(n, "unterminated \"(port GUID)\""));
                    };
                    Some(self.hex_guid(&t[..close], n)?)
                }
                None => None,
            };
        }
        Ok(())
    }

    fn mask_line(&mut self, word: &str, rest: &str, n: usize) -> Result<(), TopologyError> {
        let v = self.assigned_number(word, rest, n)?;
        let (mut w, mut s, mut e) = self.masks.unwrap_or((2, 1, 0));
        match word {
            "width" if (1..=31).contains(&v) => w = v as u32,
            "speed" if (1..=7).contains(&v) => s = v as u32,
            "extspeed" if v <= 31 => e = v as u32,
            _ => return Err(self.err(n, format!("{word}={v} is not a valid ibsim enable mask"))),
        }
        self.masks = Some((w, s, e));
        Ok(())
    }

    fn hex_guid(&self, text: &str, n: usize) -> Result<u64, TopologyError> {
        let t = text.trim();
        let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
        u64::from_str_radix(t, 16)
            .map_err(|_| self.err(n, format!("\"{}\" is not a hexadecimal GUID", text.trim())))
    }

    fn header(
        &mut self,
        kind: NodeKind,
        word: &str,
        rest: &str,
        n: usize,
    ) -> Result<(), TopologyError> {
        let rest = rest.trim_start();
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(self.err(n, format!("expected the number of ports after \"{word}\"")));
        }
        let num_ports = match rest[..digits].parse::<u32>() {
            Ok(p) if (1..=255).contains(&p) => p as u8,
            _ => {
                return Err(self
                    .err(n, format!("{word} port count {} out of range (1-255)", &rest[..digits])))
            }
        };
        let after = &rest[digits..];
        let Some(open) = after.find('"') else {
            return Err(
                self.err(n, format!("expected a quoted node id after \"{word} {num_ports}\""))
            );
        };
        let Some(len) = after[open + 1..].find('"') else {
            return Err(self.err(n, "unterminated node id (missing closing '\"')"));
        };
        let name = &after[open + 1..open + 1 + len];
        if name.is_empty() {
            return Err(self.err(n, "empty node id"));
        }
        if let Some(c) = bad_char(name) {
            return Err(self.err(n, format!("node id \"{name}\" contains the character {c:?}")));
        }
        if let Some(&prev) = self.by_name.get(name) {
            return Err(self.err(
                n,
                format!("node id \"{name}\" already used at line {}", self.drafts[prev].line),
            ));
        }
        let desc = match header_desc(&after[open + 2 + len..]) {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => name.to_string(),
        };
        if let Some(c) = bad_char(&desc) {
            return Err(
                self.err(n, format!("description of \"{name}\" contains the character {c:?}"))
            );
        }

        let slot = kind_slot(kind);
        let counter = self.guid_next[slot];
        let node_guid = if self.guid_explicit[slot] {
            counter
        } else {
            guid_from_id(kind, name).unwrap_or(counter)
        };
        self.guid_explicit[slot] = false;
        let step = if kind == NodeKind::Switch { 1 } else { num_ports as u64 + 1 };
        self.guid_next[slot] = counter.wrapping_add(step);
        if node_guid == 0 {
            return Err(self.err(
                n,
                format!(
                    "{} \"{name}\" gets node GUID 0 (ibsim numbers routers from 0); \
                     give it a GUID with an \"rtguid=\"/\"caguid=\"/\"switchguid=\" line",
                    kind_name(kind)
                ),
            ));
        }
        if let Some(&prev) = self.by_guid.get(&node_guid) {
            let p = &self.drafts[prev];
            return Err(self.err(
                n,
                format!(
                    "node GUID {node_guid:#x} of \"{name}\" is already used by \"{}\" (line {})",
                    p.node.name, p.line
                ),
            ));
        }
        let sys_guid = self.pending_sys_guid.take().unwrap_or(node_guid);
        let mut port_guids = TopoNode::default_port_guids(kind, node_guid, num_ports);
        if kind == NodeKind::Switch {
            if let Some(pg) = self.pending_switch_port_guid.take() {
                port_guids.iter_mut().for_each(|g| *g = pg);
            }
        }
        let idx = self.drafts.len();
        self.by_name.insert(name.to_string(), idx);
        self.by_guid.insert(node_guid, idx);
        self.drafts.push(Draft {
            node: TopoNode {
                kind,
                name: name.to_string(),
                desc,
                num_ports,
                node_guid,
                sys_guid,
                port_guids,
            },
            line: n,
            ports: vec![None; num_ports as usize + 1],
            guid_claims: vec![None; num_ports as usize + 1],
            default_rate: self.masks.map(|(w, s, e)| (width_from_mask(w), speed_from_masks(s, e))),
        });
        self.current = Some(idx);
        Ok(())
    }

    fn port_line(&mut self, line: &str, n: usize) -> Result<(), TopologyError> {
        let Some(node) = self.current else {
            return Err(self.err(
                n,
                "port line outside a node record (records start with a Switch/Ca/Rt line \
                 and end at a blank line)",
            ));
        };
        let mut c = Cursor::new(line);
        let Some(port) = c.bracket_number() else {
            return Err(self.err(n, "expected a port number like \"[3]\""));
        };
        c.skip_ext();
        c.skip_ws();
        let local_guid = match c.paren() {
            Some(g) => Some(self.hex_guid(g, n)?),
            None => None,
        };
        c.skip_ws();
        let Some(peer) = c.quoted() else {
            return Err(self.err(n, "expected a quoted peer node id after the port number"));
        };
        let peer_port = if c.peek() == Some('[') {
            match c.bracket_number() {
                Some(q) => q,
                None => return Err(self.err(n, format!("bad peer port after \"{peer}\""))),
            }
        } else {
            // ibsim's default when the peer port is left out.
            1
        };
        c.skip_ext();
        c.skip_ws();
        let peer_guid = match c.paren() {
            Some(g) => Some(self.hex_guid(g, n)?),
            None => None,
        };
        let rest = c.rest();
        let (opts, comment) = match rest.find('#') {
            Some(h) => (&rest[..h], Some(&rest[h + 1..])),
            None => (rest, None),
        };
        let rate = match comment.and_then(comment_rate) {
            Some(r) => Some(EndRate { rate: r, observed: true }),
            None => self.option_rate(node, opts, n)?.map(|r| EndRate { rate: r, observed: false }),
        };

        let d = &self.drafts[node];
        if port == 0 || port > d.node.num_ports as u32 {
            return Err(self.err(
                n,
                format!(
                    "port {port} out of range for {} \"{}\" ({} ports)",
                    kind_name(d.node.kind),
                    d.node.name,
                    d.node.num_ports
                ),
            ));
        }
        let port = port as u8;
        if peer_port == 0 || peer_port > 255 {
            return Err(self.err(n, format!("peer port {peer_port} of \"{peer}\" out of range")));
        }
        if let Some(prev) = d.ports[port as usize] {
            return Err(self.err(
                n,
                format!(
                    "port {port} of \"{}\" is declared twice (first at line {})",
                    d.node.name, self.halves[prev].line
                ),
            ));
        }
        if let Some(g) = local_guid {
            if !d.node.is_switch() {
                self.claim_guid(node, port, g, n)?;
            }
        }
        let h = self.halves.len();
        self.halves.push(Half {
            node,
            port,
            peer: peer.to_string(),
            peer_port: peer_port as u8,
            peer_guid,
            rate,
            line: n,
        });
        self.drafts[node].ports[port as usize] = Some(h);
        Ok(())
    }

    /// ibsim's per-port `w=`, `s=`, `e=` enable masks.
    fn option_rate(
        &self,
        node: usize,
        opts: &str,
        n: usize,
    ) -> Result<Option<Rate>, TopologyError> {
        let (mut w, mut s, mut e) = (None, None, None);
        for tok in opts.split_whitespace() {
            let Some((k, v)) = tok.split_once('=') else { continue };
            let slot = match k {
                "w" => &mut w,
                "s" => &mut s,
                "e" => &mut e,
                _ => continue,
            };
            match c_number(v) {
                Some((x, _)) if x <= 31 => *slot = Some(x as u32),
                _ => return Err(self.err(n, format!("bad port option \"{tok}\""))),
            }
        }
        if w.is_none() && s.is_none() && e.is_none() {
            return Ok(None);
        }
        let (dw, ds) = self.drafts[node].default_rate.unwrap_or((DEFAULT_WIDTH, DEFAULT_SPEED));
        let width = w.map(width_from_mask).unwrap_or(dw);
        let speed = if s.is_some() || e.is_some() {
            speed_from_masks(s.unwrap_or(0), e.unwrap_or(0))
        } else {
            ds
        };
        if !is_valid_width(width) || speed == 0 {
            return Err(self.err(n, "port options enable no width or no speed"));
        }
        Ok(Some((width, speed)))
    }

    fn claim_guid(
        &mut self,
        node: usize,
        port: u8,
        guid: u64,
        n: usize,
    ) -> Result<(), TopologyError> {
        let d = &mut self.drafts[node];
        match d.guid_claims[port as usize] {
            Some((g, line)) if g != guid => {
                let name = d.node.name.clone();
                Err(self.err(
                    n,
                    format!(
                        "port {port} of \"{name}\" has GUID {guid:#x} here but {g:#x} at line {line}"
                    ),
                ))
            }
            Some(_) => Ok(()),
            None => {
                d.guid_claims[port as usize] = Some((guid, n));
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<(Topology, StatedRates), TopologyError> {
        let mut links = Vec::new();
        let mut stated = StatedRates::new();
        // A port nobody declared but a one-sided link points at.
        let mut claimed: HashMap<(usize, u8), usize> = HashMap::new();
        for h in 0..self.halves.len() {
            let half = &self.halves[h];
            let (a, p, line) = (half.node, half.port, half.line);
            let a_name = &self.drafts[a].node.name;
            let Some(&b) = self.by_name.get(&half.peer) else {
                return Err(self.err(
                    line,
                    format!("port {p} of \"{a_name}\" is linked to unknown node \"{}\"", half.peer),
                ));
            };
            let q = half.peer_port;
            let bd = &self.drafts[b];
            if q > bd.node.num_ports {
                return Err(self.err(
                    line,
                    format!(
                        "peer port {q} out of range for {} \"{}\" ({} ports)",
                        kind_name(bd.node.kind),
                        bd.node.name,
                        bd.node.num_ports
                    ),
                ));
            }
            if a == b && p == q {
                return Err(self.err(line, format!("port {p} of \"{a_name}\" is linked to itself")));
            }
            let rate = match bd.ports[q as usize] {
                Some(h2) => {
                    let other = &self.halves[h2];
                    if other.peer != *a_name || other.peer_port != p {
                        return Err(self.err(
                            line,
                            format!(
                                "\"{a_name}\"[{p}] is linked to \"{}\"[{q}], but line {} links \
                                 \"{}\"[{q}] to \"{}\"[{}]",
                                bd.node.name, other.line, bd.node.name, other.peer, other.peer_port
                            ),
                        ));
                    }
                    if h2 < h {
                        // Already made when the other end was read.
                        continue;
                    }
                    if other.rate.is_some() {
                        stated.insert(ordered((a, p), (b, q)));
                    }
                    self.combine_rates(half.rate, other.rate, a, b, line, other.line)?
                }
                None => {
                    if let Some(&h3) = claimed.get(&(b, q)) {
                        let o = &self.halves[h3];
                        return Err(self.err(
                            line,
                            format!(
                                "\"{}\"[{q}] is claimed by \"{a_name}\"[{p}] here and by \"{}\"[{}] at line {}",
                                bd.node.name,
                                self.drafts[o.node].node.name,
                                o.port,
                                o.line
                            ),
                        ));
                    }
                    claimed.insert((b, q), h);
                    self.combine_rates(half.rate, None, a, b, line, line)?
                }
            };
            let half = &self.halves[h];
            if half.rate.is_some() || self.drafts[a].default_rate.is_some() || self.drafts[b].default_rate.is_some() {
                stated.insert(ordered((a, p), (b, q)));
            }
            links.push(TopoLink { a: (a, p), b: (b, q), width: rate.0, speed: rate.1 });
        }
        for h in 0..self.halves.len() {
            let (b, q, line) = {
                let half = &self.halves[h];
                let Some(&b) = self.by_name.get(&half.peer) else { continue };
                (b, half.peer_port, half.line)
            };
            if let Some(g) = self.halves[h].peer_guid {
                if !self.drafts[b].node.is_switch() {
                    self.claim_guid(b, q, g, line)?;
                }
            }
        }
        for d in &mut self.drafts {
            for (p, claim) in d.guid_claims.iter().enumerate() {
                if let Some((g, _)) = claim {
                    d.node.port_guids[p] = *g;
                }
            }
        }
        let mut port_owner: HashMap<u64, (usize, u8, usize)> = HashMap::new();
        for (i, d) in self.drafts.iter().enumerate() {
            let ports: Vec<u8> =
                if d.node.is_switch() { vec![0] } else { (1..=d.node.num_ports).collect() };
            for p in ports {
                let g = d.node.port_guids[p as usize];
                let line = d.guid_claims[p as usize].map(|c| c.1).unwrap_or(d.line);
                if let Some((pn, pp, pl)) = port_owner.insert(g, (i, p, line)) {
                    return Err(self.err(
                        line,
                        format!(
                            "port {p} of \"{}\" has GUID {g:#x}, already the GUID of port {pp} \
                             of \"{}\" (line {pl})",
                            d.node.name, self.drafts[pn].node.name
                        ),
                    ));
                }
            }
        }
        let mut topo = Topology { nodes: self.drafts.into_iter().map(|d| d.node).collect(), links };
        topo.canonicalize();
        topo.validate().map_err(|e| match e {
            TopologyError::Invalid(m) => TopologyError::Invalid(format!("{}: {m}", self.origin)),
            other => other,
        })?;
        Ok((topo, stated))
    }

    fn combine_rates(
        &self,
        x: Option<EndRate>,
        y: Option<EndRate>,
        a: usize,
        b: usize,
        line: usize,
        other_line: usize,
    ) -> Result<Rate, TopologyError> {
        match (x, y) {
            (Some(x), Some(y)) => {
                if x.observed && y.observed && x.rate != y.rate {
                    return Err(self.err(
                        line,
                        format!(
                            "link \"{}\" -- \"{}\" runs at {} here but at {} at line {other_line}",
                            self.drafts[a].node.name,
                            self.drafts[b].node.name,
                            crate::model::rate_string(x.rate.0, x.rate.1),
                            crate::model::rate_string(y.rate.0, y.rate.1)
                        ),
                    ));
                }
                Ok((x.rate.0.min(y.rate.0), x.rate.1.min(y.rate.1)))
            }
            (Some(r), None) | (None, Some(r)) => Ok(r.rate),
            (None, None) => {
                let d = (DEFAULT_WIDTH, DEFAULT_SPEED);
                let ra = self.drafts[a].default_rate.unwrap_or(d);
                let rb = self.drafts[b].default_rate.unwrap_or(d);
                Ok((ra.0.min(rb.0), ra.1.min(rb.1)))
            }
        }
    }
}

/// A link's two ends, lower first (as [`Topology::canonicalize`] puts them).
fn ordered(x: (usize, u8), y: (usize, u8)) -> ((usize, u8), (usize, u8)) {
    if y < x {
        (y, x)
    } else {
        (x, y)
    }
}

fn bad_char(s: &str) -> Option<char> {
    s.chars().find(|&c| unwritable(c))
}

/// The description in the text after a header's node id, by ibsim's rules.
fn header_desc(rest: &str) -> Option<&str> {
    let hash = rest.find('#')?;
    let s = rest[hash + 1..].trim_start();
    if let Some(q) = s.strip_prefix('"') {
        return Some(match q.find('"') {
            Some(end) => &q[..end],
            None => q,
        });
    }
    let cut = [" enhanced port ", " base port ", " lid ", " lmc "]
        .iter()
        .filter_map(|pat| s.find(pat))
        .min()
        .unwrap_or(s.len());
    Some(s[..cut].trim_end())
}

/// The GUID in an ibnetdiscover id (`S-0008f10400411a08`), when the id has
/// that form and its letter matches the node kind.
fn guid_from_id(kind: NodeKind, id: &str) -> Option<u64> {
    let letter = match kind {
        NodeKind::Switch => "S-",
        NodeKind::Ca => "H-",
        NodeKind::Router => "R-",
        _ => return None,
    };
    let hex = id.strip_prefix(letter)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The observed rate in an ibnetdiscover link comment
/// (`"desc" lid 4 4xQDR`): the first `<lanes>x<SPEED>` token after the
/// last quote, so that a description cannot fake one.
fn comment_rate(comment: &str) -> Option<Rate> {
    let tail = match comment.rfind('"') {
        Some(q) => &comment[q + 1..],
        None => comment,
    };
    tail.split_whitespace().find_map(|tok| {
        let (w, s) = tok.split_once('x')?;
        let w: u8 = w.parse().ok()?;
        let s = speed_from_name(s)?;
        is_valid_width(w).then_some((w, s))
    })
}

/// Widest lane count enabled in an ibsim LinkWidthEnabled mask.
fn width_from_mask(mask: u32) -> u8 {
    // Bits: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x.
    [(8, 12), (4, 8), (2, 4), (16, 2), (1, 1)]
        .iter()
        .find(|(bit, _)| mask & bit != 0)
        .map(|&(_, w)| w)
        .unwrap_or(0)
}

/// Fastest speed enabled in ibsim's LinkSpeedEnabled and
/// LinkSpeedExtEnabled masks.
fn speed_from_masks(speed: u32, ext: u32) -> u8 {
    let ext_speed = [(8, SPEED_NDR), (4, SPEED_HDR), (2, SPEED_EDR), (1, SPEED_FDR)]
        .iter()
        .find(|(bit, _)| ext & bit != 0)
        .map(|&(_, s)| s);
    ext_speed
        .or_else(|| {
            [(4, SPEED_QDR), (2, SPEED_DDR), (1, SPEED_SDR)]
                .iter()
                .find(|(bit, _)| speed & bit != 0)
                .map(|&(_, s)| s)
        })
        .unwrap_or(0)
}

/// A number the way C's `strtoull(s, _, 0)` reads it (leading blanks, `0x`
/// hex, leading-0 octal, else decimal), with the number of bytes consumed.
fn c_number(s: &str) -> Option<(u64, usize)> {
    let trimmed = s.trim_start();
    let skipped = s.len() - trimmed.len();
    let (radix, body, prefix) =
        if let Some(h) = trimmed.strip_prefix("0x").or_else(|| trimmed.strip_prefix("0X")) {
            (16, h, 2)
        } else if trimmed.starts_with('0') {
            (8, trimmed, 0)
        } else {
            (10, trimmed, 0)
        };
    let len = body.find(|c: char| !c.is_digit(radix)).unwrap_or(body.len());
    if len == 0 {
        return None;
    }
    let v = u64::from_str_radix(&body[..len], radix).ok()?;
    Some((v, skipped + prefix + len))
}

/// Small scanner for port lines.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor { s, pos: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    /// `[digits]`.
    fn bracket_number(&mut self) -> Option<u32> {
        let r = self.rest().strip_prefix('[')?;
        let close = r.find(']')?;
        let v = r[..close].trim().parse::<u32>().ok()?;
        self.pos += close + 2;
        Some(v)
    }

    /// ibnetdiscover -g's `[ext N]` external port label.
    fn skip_ext(&mut self) {
        if let Some(r) = self.rest().strip_prefix("[ext ") {
            if let Some(close) = r.find(']') {
                self.pos += "[ext ".len() + close + 1;
            }
        }
    }

    /// `(text)`, returning the text.
    fn paren(&mut self) -> Option<&'a str> {
        let r = self.rest().strip_prefix('(')?;
        let close = r.find(')')?;
        self.pos += close + 2;
        Some(&r[..close])
    }

    /// `"text"`, returning the text.
    fn quoted(&mut self) -> Option<&'a str> {
        let r = self.rest().strip_prefix('"')?;
        let close = r.find('"')?;
        self.pos += close + 2;
        Some(&r[..close])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_numbers() {
        assert_eq!(c_number("0x1f)"), Some((31, 4)));
        assert_eq!(c_number(" 010"), Some((8, 4)));
        assert_eq!(c_number("42abc"), Some((42, 2)));
        assert_eq!(c_number("0"), Some((0, 1)));
        assert_eq!(c_number("x"), None);
        assert_eq!(c_number("0xfffffffffffffffff"), None);
    }

    #[test]
    fn masks() {
        assert_eq!(width_from_mask(3), 4);
        assert_eq!(width_from_mask(11), 12);
        assert_eq!(width_from_mask(16), 2);
        assert_eq!(speed_from_masks(7, 0), SPEED_QDR);
        assert_eq!(speed_from_masks(7, 3), SPEED_EDR);
        assert_eq!(speed_from_masks(1, 0), SPEED_SDR);
    }

    #[test]
    fn descriptions() {
        assert_eq!(
            header_desc("\t\t# \"ISR9024D Voltaire\" base port 0 lid 4 lmc 0"),
            Some("ISR9024D Voltaire")
        );
        assert_eq!(header_desc(" # MF0;sw base port 0 lid 4"), Some("MF0;sw"));
        assert_eq!(header_desc(" # plain"), Some("plain"));
        assert_eq!(header_desc(" no comment"), None);
    }

    #[test]
    fn the_links_whose_rate_the_file_states_are_told_apart() {
        let text = "Switch 3 \"S-0000000000000001\" # \"sw\"\n\
                    [1] \"H-0000000000000002\"[1] # \"a\" lid 2 1xSDR\n\
                    [2] \"H-0000000000000003\"[1]\n\n\
                    Ca 1 \"H-0000000000000002\" # \"a\"\n\
                    [1] \"S-0000000000000001\"[1]\n\n\
                    Ca 1 \"H-0000000000000003\" # \"b\"\n\
                    [1] \"S-0000000000000001\"[2]\n";
        let (topo, stated) = parse_str_stated(text, "t").expect("parses");
        assert_eq!(topo.links.len(), 2);
        let a = topo.find_node_by_desc("a").expect("a");
        let b = topo.find_node_by_desc("b").expect("b");
        let sw = topo.find_node_by_desc("sw").expect("sw");
        assert_eq!(stated.into_iter().collect::<Vec<_>>(), vec![ordered((sw, 1), (a, 1))]);
        let unstated = topo.links.iter().find(|l| l.touches(b)).expect("b's link");
        assert_eq!((unstated.width, unstated.speed), (DEFAULT_WIDTH, DEFAULT_SPEED));
    }

    #[test]
    fn comment_rates() {
        assert_eq!(comment_rate(" \"x 8xEDR\" lid 3 4xQDR"), Some((4, SPEED_QDR)));
        assert_eq!(comment_rate(" lid 0 lmc 0 \"sw\" lid 1 12xFDR10"), Some((12, SPEED_QDR)));
        assert_eq!(comment_rate(" \"sw\" lid 1 4x???"), None);
    }

    #[test]
    fn ids_carry_guids() {
        assert_eq!(guid_from_id(NodeKind::Switch, "S-0008f10400411a08"), Some(0x0008f10400411a08));
        assert_eq!(guid_from_id(NodeKind::Ca, "S-0008f10400411a08"), None);
        assert_eq!(guid_from_id(NodeKind::Ca, "H-0008f1040041"), None);
    }
}
