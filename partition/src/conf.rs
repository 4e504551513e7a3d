//! OpenSM's `partitions.conf`, read as OpenSM reads it
//! (`osm_prtn_config.c`, doc/partition-config.txt):
//!
//! ```text
//! [Name][=PKey][,ipoib][,mtu=..][,rate=..][,sl=..][,scope=..][,Q_Key=..]
//!     [,TClass=..][,FlowLabel=..][,indx0][,defmember=full|limited|both] :
//!     member[=full|limited|both], ... | mgid=gid[,flag=val]* <newline> ... ;
//! ```
//!
//! `#` starts a comment to the end of the line; a definition may go on
//! over several lines until its `;` (the header, up to `:`, must be on one
//! line); an `mgid=` group takes the rest of its line. Flag names and
//! member keywords may be abbreviated as OpenSM's prefix comparisons
//! allow (`limi` is `limited`). Like OpenSM, unknown flags and bad flag
//! values are warnings; a header without `:`, a bad P_Key or a bad port
//! GUID is an error, named by file and line.

use std::path::{Path, PathBuf};

use thiserror::Error;
use tracing::warn;

/// The default partition's P_Key (without the membership bit).
pub const DEFAULT_PKEY: u16 = 0x7FFF;
/// OpenSM's default multicast group rate (3 = 10 Gb/s).
pub const DEFAULT_MGRP_RATE: u8 = 3;
/// OpenSM's default multicast group MTU (4 = 2048).
pub const DEFAULT_MGRP_MTU: u8 = 4;
/// Q_Key of IPoIB groups when none is given.
pub const IPOIB_QKEY: u32 = 0x0B1B;
/// The IPoIB IPv4 broadcast MGID with P_Key bits 0 (`ff12:401b::ffff:ffff`).
pub const IPOIB_BROADCAST_MGID: u128 = 0xff12_401b_0000_0000_0000_0000_ffff_ffff;

/// A partitions.conf that cannot be used.
#[derive(Debug, Error)]
pub enum PartitionError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A definition OpenSM too would refuse.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Membership a rule gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Membership {
    /// Full member (P_Key bit 15 set).
    Full,
    /// Limited member.
    Limited,
    /// Both (a full and a limited entry when `allow_both_pkeys`; else full).
    Both,
}

/// Which ports a rule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Members {
    /// `ALL`: every end port.
    All,
    /// `ALL_CAS`: every CA port.
    AllCas,
    /// `ALL_SWITCHES`: every switch's port 0.
    AllSwitches,
    /// `ALL_ROUTERS`: every router port.
    AllRouters,
    /// `SELF`: the SM's port.
    SelfPort,
    /// One port GUID.
    Guid(u64),
}

/// One member rule, in file order (a later rule overrides an earlier one
/// for the ports both name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemberRule {
    /// Ports named.
    pub members: Members,
    /// Membership given.
    pub membership: Membership,
    /// Line of the rule (0 for the implicit default rules).
    pub line: usize,
}

/// Multicast group settings (OpenSM's `mgroup_flag`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupFlags {
    /// MTU code (IBA: 4 = 2048).
    pub mtu: u8,
    /// Rate code (IBA: 3 = 10 Gb/s).
    pub rate: u8,
    /// SL.
    pub sl: u8,
    /// Scopes as a bit mask (bit `s` for scope `s`); 0 means the default,
    /// link-local (2). Each scope set makes one group.
    pub scope_mask: u16,
    /// Q_Key; 0 means the default (0x0b1b for IP groups, 0 for others).
    pub qkey: u32,
    /// TClass.
    pub tclass: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
}

impl Default for GroupFlags {
    fn default() -> Self {
        Self {
            mtu: DEFAULT_MGRP_MTU,
            rate: DEFAULT_MGRP_RATE,
            sl: 0,
            scope_mask: 0,
            qkey: 0,
            tclass: 0,
            flow_label: 0,
        }
    }
}

impl GroupFlags {
    /// The scopes groups are made in (link-local when none is given).
    pub fn scopes(&self) -> Vec<u8> {
        if self.scope_mask == 0 {
            return vec![2];
        }
        (0..16u8).filter(|s| self.scope_mask & (1 << s) != 0).collect()
    }
}

/// An `mgid=` line of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct McGroupConf {
    /// The MGID; for IP groups (`ff1x:401b::`, `ff1x:601b::`) the P_Key
    /// bits (bytes 4-5) already carry the partition's full P_Key.
    pub mgid: u128,
    /// Its settings: the partition's (mtu, rate, sl, Q_Key, FlowLabel,
    /// scopes; not TClass, as OpenSM), overridden by the line's own. For
    /// IP groups a Q_Key of 0 is already 0x0b1b.
    pub flags: GroupFlags,
    /// Line of the group.
    pub line: usize,
}

/// One partition as the file defines it (definitions with the same P_Key
/// merged, the first name kept, as OpenSM does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Partition {
    /// Name (for logs; may be empty).
    pub name: String,
    /// P_Key, low 15 bits (bit 15 is the membership bit of table entries).
    pub pkey: u16,
    /// `ipoib`: the IPoIB broadcast group of the partition is made, with
    /// `flags`.
    pub ipoib: bool,
    /// The partition's group flags (mtu, rate, sl, scope, Q_Key, TClass,
    /// FlowLabel); those of the broadcast group.
    pub flags: GroupFlags,
    /// `indx0`: the P_Key goes to index 0 of block 0.
    pub indx0: bool,
    /// `mgid=` groups.
    pub groups: Vec<McGroupConf>,
    /// Member rules in order.
    pub rules: Vec<MemberRule>,
    /// Line of the first definition (0 for the implicit default).
    pub line: usize,
}

impl Partition {
    /// MGID of the partition's IPoIB IPv4 broadcast group
    /// (`ff12:401b:PKEY::ffff:ffff`, P_Key with the full bit).
    pub fn ipoib_broadcast_mgid(&self) -> u128 {
        with_pkey(IPOIB_BROADCAST_MGID, self.pkey | 0x8000)
    }
}

/// `mgid` with bytes 4-5 set to `pkey`.
fn with_pkey(mgid: u128, pkey: u16) -> u128 {
    (mgid & !(0xFFFFu128 << 80)) | (u128::from(pkey) << 80)
}

/// Whether `mgid` is an IPoIB IPv4 or IPv6 group (signature 0x401b or
/// 0x601b in bytes 2-3).
pub fn mgid_is_ip(mgid: u128) -> bool {
    let sig = (mgid >> 96) as u16;
    (mgid >> 120) as u8 == 0xFF && (sig == 0x401B || sig == 0x601B)
}

/// A parsed partitions.conf (or OpenSM's default without one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionConfig {
    /// Partitions in order of first definition; the default partition
    /// (0x7fff) is always first.
    pub partitions: Vec<Partition>,
    /// The file read (`None`: OpenSM's default partition only).
    pub source: Option<PathBuf>,
}

impl Default for PartitionConfig {
    /// No file: `Default=0x7fff, ipoib : ALL=full ;` (and SELF=full).
    fn default() -> Self {
        Self {
            partitions: vec![default_partition(false)],
            source: None,
        }
    }
}

/// The partition OpenSM makes before reading the file: with no file every
/// port is a full member and the IPoIB broadcast group is made; with one,
/// ports are limited members unless the file says otherwise. The SM's port
/// is always a full member.
fn default_partition(with_file: bool) -> Partition {
    let all = if with_file { Membership::Limited } else { Membership::Full };
    Partition {
        name: "Default".into(),
        pkey: DEFAULT_PKEY,
        ipoib: !with_file,
        flags: GroupFlags::default(),
        indx0: false,
        groups: Vec::new(),
        rules: vec![
            MemberRule {
                members: Members::All,
                membership: all,
                line: 0,
            },
            MemberRule {
                members: Members::SelfPort,
                membership: Membership::Full,
                line: 0,
            },
        ],
        line: 0,
    }
}

impl PartitionConfig {
    /// The partition with P_Key `pkey` (membership bit ignored).
    pub fn get(&self, pkey: u16) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.pkey == pkey & 0x7FFF)
    }

    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Self, PartitionError> {
        let text = std::fs::read_to_string(path).map_err(|source| PartitionError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses `text` as the file `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, PartitionError> {
        let mut parser = Parser {
            path,
            out: PartitionConfig {
                partitions: vec![default_partition(true)],
                source: Some(path.to_path_buf()),
            },
            current: None,
            next_pkey: 0,
        };
        for (i, line) in text.lines().enumerate() {
            parser.line(line, i + 1)?;
        }
        Ok(parser.out)
    }
}

/// The definition being read (until its `;`).
struct Current {
    /// Index in `partitions`.
    index: usize,
    /// defmember.
    membership: Membership,
    /// The definition's own flags (groups inherit them).
    flags: GroupFlags,
}

struct Parser<'a> {
    path: &'a Path,
    out: PartitionConfig,
    current: Option<Current>,
    /// Last P_Key generated for a partition given without one.
    next_pkey: u16,
}

/// Whether `word` abbreviates `full` as OpenSM's `strncmp(word, full,
/// strlen(word))` allows (the empty word too).
fn abbreviates(word: &str, full: &str) -> bool {
    full.starts_with(word)
}

/// A number as C's `strtoul(s, &end, 0)` reads it when all of `s` must be
/// used: `0x` hex, leading `0` octal, else decimal.
fn c_number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `name[=value]`, both trimmed.
fn name_value(token: &str) -> (&str, Option<&str>) {
    match token.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (token.trim(), None),
    }
}

/// An IPv6 address as `inet_pton` reads it.
fn parse_gid(s: &str) -> Option<u128> {
    s.trim().parse::<std::net::Ipv6Addr>().ok().map(u128::from)
}

/// Applies a group flag; `false` when `flag` is none.
fn group_flag(flags: &mut GroupFlags, flag: &str, val: Option<&str>, line: usize) -> bool {
    let num = |max: u64| -> Option<u64> { val.and_then(c_number).filter(|&v| v <= max) };
    let skip = |name: &str| warn!(line, flag = name, value = val.unwrap_or(""), "partitions.conf: flag requires a valid value; skipped");
    if abbreviates(flag, "mtu") {
        // OpenSM's code (1-5), or the MTU in bytes.
        let bytes = num(0xFFFF).and_then(|b| (1..=5u8).find(|&c| sm_mad::port_info::mtu::bytes(c) == Some(b as u16)));
        match bytes.or_else(|| num(0xFF).filter(|&v| v != 0).map(|v| v as u8)) {
            Some(v) => flags.mtu = v,
            None => skip("mtu"),
        }
    } else if abbreviates(flag, "rate") {
        // OpenSM's code, or the rate as `400G`/`800Gb/s`.
        match val.and_then(sm_mad::rate::code_of_name).or_else(|| num(0xFF).filter(|&v| v != 0).map(|v| v as u8)) {
            Some(v) => flags.rate = v,
            None => skip("rate"),
        }
    } else if abbreviates(flag, "scope") {
        match num(0xF).filter(|&v| v != 0) {
            Some(v) => flags.scope_mask |= 1 << v,
            None => skip("scope"),
        }
    } else if abbreviates(flag, "Q_Key") {
        match num(u64::from(u32::MAX)) {
            Some(v) => flags.qkey = v as u32,
            None => skip("Q_Key"),
        }
    } else if abbreviates(flag, "TClass") {
        match num(0xFF) {
            Some(v) => flags.tclass = v as u8,
            None => skip("TClass"),
        }
    } else if abbreviates(flag, "sl") {
        match num(15) {
            Some(v) => flags.sl = v as u8,
            None => skip("sl"),
        }
    } else if abbreviates(flag, "FlowLabel") {
        match num(0xF_FFFF) {
            Some(v) => flags.flow_label = v as u32,
            None => skip("FlowLabel"),
        }
    } else {
        return false;
    }
    true
}

/// A membership word; anything unrecognised is limited (OpenSM warns).
fn membership_word(word: &str, line: usize) -> Membership {
    if abbreviates(word, "full") {
        Membership::Full
    } else if abbreviates(word, "both") {
        Membership::Both
    } else {
        if !abbreviates(word, "limited") {
            warn!(line, flag = word, "partitions.conf: unrecognised port flag; limited assumed");
        }
        Membership::Limited
    }
}

impl Parser<'_> {
    fn error(&self, line: usize, message: impl Into<String>) -> PartitionError {
        PartitionError::Parse {
            path: self.path.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    fn line(&mut self, text: &str, line: usize) -> Result<(), PartitionError> {
        let text = text.split('#').next().unwrap_or("");
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                return Ok(());
            }
            let (segment, ends) = match rest.split_once(';') {
                Some((s, r)) => {
                    rest = r;
                    (s, true)
                }
                None => {
                    let s = rest;
                    rest = "";
                    (s, false)
                }
            };
            self.segment(segment, line)?;
            if ends {
                self.current = None;
            }
        }
    }

    /// Part of a definition up to `;` or the end of the line.
    fn segment(&mut self, text: &str, line: usize) -> Result<(), PartitionError> {
        let members = if self.current.is_none() {
            let Some((header, members)) = text.split_once(':') else {
                return Err(self.error(line, "no partition definition found (a header ends with ':')"));
            };
            self.header(header, line)?;
            members
        } else {
            text
        };
        let mut tokens = members.split(',');
        while let Some(token) = tokens.next() {
            let (name, value) = name_value(token);
            if name == "mgid" {
                // The group takes the rest of the line.
                let flags: Vec<&str> = tokens.collect();
                self.group(value.unwrap_or(""), &flags, line);
                return Ok(());
            }
            self.member(name, value, line)?;
        }
        Ok(())
    }

    fn header(&mut self, header: &str, line: usize) -> Result<(), PartitionError> {
        let mut parts = header.split(',');
        let (mut name, mut id) = name_value(parts.next().unwrap_or(""));
        let mut membership = Membership::Limited;
        let mut flags = GroupFlags::default();
        let mut ipoib = false;
        let mut indx0 = false;
        for part in parts {
            let (flag, val) = name_value(part);
            if group_flag(&mut flags, flag, val, line) {
                continue;
            }
            if abbreviates(flag, "ipoib") {
                ipoib = true;
            } else if abbreviates(flag, "defmember") {
                match val.filter(|v| {
                    abbreviates(v, "limited") || abbreviates(v, "both") || abbreviates(v, "full")
                }) {
                    Some(v) => membership = membership_word(v, line),
                    None => warn!(line, "partitions.conf: defmember requires limited, full or both; skipped"),
                }
            } else if flag == "indx0" {
                indx0 = true;
            } else {
                warn!(line, flag, "partitions.conf: unrecognised partition flag; ignored");
            }
        }
        if id.is_none() && name.starts_with(|c: char| c.is_ascii_digit()) {
            id = Some(name);
            name = "";
        }
        let pkey = match id {
            Some(id) => match c_number(id) {
                Some(v) if v <= u64::from(u16::MAX) => v as u16 & 0x7FFF,
                _ => return Err(self.error(line, format!("bad partition definition: P_Key {id:?} is not a 16-bit number"))),
            },
            None => 0,
        };
        let pkey = if pkey == 0 { self.generate_pkey(line)? } else { pkey };
        let index = match self.out.partitions.iter().position(|p| p.pkey == pkey) {
            Some(i) => {
                // Merged, the first name kept, as OpenSM does.
                let p = &mut self.out.partitions[i];
                if ipoib && !p.ipoib {
                    p.ipoib = true;
                    p.flags = flags;
                }
                p.flags.sl = flags.sl;
                p.indx0 |= indx0;
                i
            }
            None => {
                self.out.partitions.push(Partition {
                    name: name.to_string(),
                    pkey,
                    ipoib,
                    flags,
                    indx0,
                    groups: Vec::new(),
                    rules: Vec::new(),
                    line,
                });
                self.out.partitions.len() - 1
            }
        };
        self.current = Some(Current { index, membership, flags });
        Ok(())
    }

    /// OpenSM's `generate_pkey`: the next counter value no partition has.
    fn generate_pkey(&mut self, line: usize) -> Result<u16, PartitionError> {
        loop {
            self.next_pkey += 1;
            if self.next_pkey >= 0x7FFF {
                return Err(self.error(line, "no P_Key left to generate"));
            }
            if !self.out.partitions.iter().any(|p| p.pkey == self.next_pkey) {
                return Ok(self.next_pkey);
            }
        }
    }

    fn member(&mut self, name: &str, flag: Option<&str>, line: usize) -> Result<(), PartitionError> {
        let Some(current) = &self.current else { return Ok(()) };
        if name.is_empty() || abbreviates(name, "NONE") {
            return Ok(());
        }
        let membership = match flag {
            Some(f) => membership_word(f, line),
            None => current.membership,
        };
        let members = if abbreviates(name, "ALL") {
            Members::All
        } else if abbreviates(name, "ALL_CAS") {
            Members::AllCas
        } else if abbreviates(name, "ALL_SWITCHES") {
            Members::AllSwitches
        } else if abbreviates(name, "ALL_ROUTERS") {
            Members::AllRouters
        } else if abbreviates(name, "SELF") {
            Members::SelfPort
        } else {
            match c_number(name) {
                Some(g) if g != 0 => Members::Guid(g),
                _ => return Err(self.error(line, format!("bad PortGUID {name:?}"))),
            }
        };
        let index = current.index;
        self.out.partitions[index].rules.push(MemberRule { members, membership, line });
        Ok(())
    }

    fn group(&mut self, mgid: &str, flag_tokens: &[&str], line: usize) {
        let Some(current) = &self.current else { return };
        let Some(mut mgid) = parse_gid(mgid).filter(|g| (g >> 120) == 0xFF) else {
            // OpenSM logs this as an error and goes on without the group.
            warn!(line, mgid, "partitions.conf: mgid is not a multicast GID; group skipped");
            return;
        };
        let mut flags = GroupFlags {
            tclass: 0,
            ..current.flags
        };
        for token in flag_tokens {
            let (flag, val) = name_value(token);
            if !group_flag(&mut flags, flag, val, line) {
                warn!(line, flag, "partitions.conf: unrecognised mgroup flag; ignored");
            }
        }
        let p = &mut self.out.partitions[current.index];
        if mgid_is_ip(mgid) {
            let full = p.pkey | 0x8000;
            let in_mgid = (mgid >> 80) as u16;
            if in_mgid != 0 && in_mgid & 0x7FFF != p.pkey {
                warn!(line, "partitions.conf: IP group's P_Key bits are not the partition's; group skipped");
                return;
            }
            mgid = with_pkey(mgid, full);
            if flags.qkey == 0 {
                flags.qkey = IPOIB_QKEY;
            }
        }
        if p.groups.iter().any(|g| g.mgid == mgid) {
            return;
        }
        p.groups.push(McGroupConf { mgid, flags, line });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PartitionConfig {
        match PartitionConfig::parse(text, Path::new("p.conf")) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    fn rule(members: Members, membership: Membership) -> (Members, Membership) {
        (members, membership)
    }

    fn rules(p: &Partition) -> Vec<(Members, Membership)> {
        p.rules.iter().map(|r| (r.members, r.membership)).collect()
    }

    #[test]
    fn no_file_is_opensms_default() {
        let c = PartitionConfig::default();
        assert_eq!(c.partitions.len(), 1);
        let d = &c.partitions[0];
        assert_eq!((d.pkey, d.ipoib), (0x7FFF, true));
        assert_eq!(rules(d), vec![rule(Members::All, Membership::Full), rule(Members::SelfPort, Membership::Full)]);
        assert_eq!(d.ipoib_broadcast_mgid(), 0xff12_401b_ffff_0000_0000_0000_ffff_ffff);
    }

    #[test]
    fn empty_file_leaves_ports_limited_in_the_default() {
        let c = parse("# nothing\n\n");
        let d = &c.partitions[0];
        assert!(!d.ipoib);
        assert_eq!(rules(d), vec![rule(Members::All, Membership::Limited), rule(Members::SelfPort, Membership::Full)]);
    }

    #[test]
    fn opensm_doc_examples() {
        let text = "\
 Default=0x7fff : ALL, SELF=full ;
 Default=0x7fff : ALL, ALL_SWITCHES=full, SELF=full ;

 NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;

 YetAnotherOne = 0x300 : SELF=full ;
 YetAnotherOne = 0x300 : ALL=limited ;

 ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;
 # 0x123453, 0x123454 will be limited
 ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;
 # 0x123456, 0x123457 will be limited
 ShareIO = 0x80 , defmember=limited : 0x123456, 0x123457, 0x123458=full;
 ShareIO = 0x80 , defmember=full : 0x123459, 0x12345a;
 ShareIO = 0x80 , defmember=full : 0x12345b, 0x12345c=limited, 0x12345d;

 # multicast groups added to default
 Default=0x7fff,ipoib:
        mgid=ff12:401b::0707,sl=1 # random IPv4 group
        mgid=ff12:601b::16    # MLDv2-capable routers
        mgid=ff12:401b::16    # IGMP
        mgid=ff12:601b::2     # All routers
        mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group
        ALL=full;
";
        let c = parse(text);
        let pkeys: Vec<u16> = c.partitions.iter().map(|p| p.pkey).collect();
        // NewPartition had no P_Key: OpenSM's generator gives 1.
        assert_eq!(pkeys, vec![0x7FFF, 1, 0x300, 0x80]);
        let d = &c.partitions[0];
        assert!(d.ipoib);
        assert_eq!(d.rules.last().map(|r| (r.members, r.membership, r.line)), Some((Members::All, Membership::Full, 24)));
        assert_eq!(d.groups.len(), 5);
        let g0 = d.groups[0];
        assert_eq!(g0.mgid, 0xff12_401b_ffff_0000_0000_0000_0000_0707, "IP group gets the partition's P_Key");
        assert_eq!((g0.flags.sl, g0.flags.qkey, g0.line), (1, IPOIB_QKEY, 19));
        let g4 = d.groups[4];
        assert_eq!(g4.mgid, 0xff12_0000_0000_0000_0000_0000_0000_0001);
        assert_eq!((g4.flags.sl, g4.flags.qkey, g4.flags.rate, g4.flags.mtu), (1, 0xDEAD_BEEF, 3, 2));
        let np = &c.partitions[1];
        assert_eq!((np.name.as_str(), np.ipoib), ("NewPartition", true));
        assert_eq!(
            rules(np),
            vec![
                rule(Members::Guid(0x123456), Membership::Full),
                rule(Members::Guid(0x3456789034), Membership::Limited),
                rule(Members::Guid(0x2134af2306), Membership::Limited),
            ]
        );
        let share = &c.partitions[3];
        let m: Vec<Membership> = share.rules.iter().map(|r| r.membership).collect();
        use Membership::{Full as F, Limited as L};
        assert_eq!(m, vec![F, F, L, L, F, L, L, F, F, F, F, L, F]);
        assert_eq!(c.partitions[2].rules.len(), 2, "the two YetAnotherOne lines merge");
    }

    #[test]
    fn rates_and_mtus_as_admins_write_them() {
        let c = parse("ndr=0x10, ipoib, rate=400G, mtu=4096 : ALL=full;\nxdr=0x11, rate=800Gb/s, mtu=2048 : ALL=full;\nodd=0x12, rate=123G, mtu=1500 : ALL=full;\n");
        let flags = |i: usize| (c.partitions[i].flags.rate, c.partitions[i].flags.mtu);
        assert_eq!(flags(1), (21, 5));
        assert_eq!(flags(2), (23, 4));
        // No code for either: skipped with a warning, the defaults stay.
        assert_eq!(flags(3), (DEFAULT_MGRP_RATE, GroupFlags::default().mtu));
    }

    #[test]
    fn flags_of_a_partition_and_its_groups() {
        let c = parse("p1=0x8001, ipoib, mtu=5, rate=7, sl=2, scope=5, scope=2, TClass=3, FlowLabel=9, indx0 : mgid=ff15::1, mtu=4\n ALL_CAS=both, ALL_ROUTERS;");
        let p = &c.partitions[1];
        assert_eq!(p.pkey, 1, "bit 15 is dropped");
        assert!(p.ipoib && p.indx0);
        assert_eq!((p.flags.mtu, p.flags.rate, p.flags.sl, p.flags.tclass, p.flags.flow_label), (5, 7, 2, 3, 9));
        assert_eq!(p.flags.scopes(), vec![2, 5]);
        let g = p.groups[0];
        assert_eq!((g.flags.mtu, g.flags.rate, g.flags.tclass, g.flags.qkey), (4, 7, 0, 0), "TClass not inherited");
        assert_eq!(rules(p), vec![rule(Members::AllCas, Membership::Both), rule(Members::AllRouters, Membership::Limited)]);
    }

    #[test]
    fn definitions_span_lines_and_share_lines() {
        let c = parse("a=0x10:\n  0x1=full,\n  0x2 ; b=0x20: 0x3 ; c=0x30 : ;\n 0x31 : SELF;");
        assert_eq!(rules(c.get(0x10).unwrap()).len(), 2);
        assert_eq!(rules(c.get(0x20).unwrap()), vec![rule(Members::Guid(3), Membership::Limited)]);
        assert!(c.get(0x30).unwrap().rules.is_empty());
        assert_eq!(c.get(0x31).unwrap().name, "", "a number alone is the P_Key");
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = PartitionConfig::parse("Default=0x7fff : ALL ;\n\nbroken line\n", Path::new("/etc/p.conf")).unwrap_err();
        assert_eq!(e.to_string(), "/etc/p.conf:3: no partition definition found (a header ends with ':')");
        let e = PartitionConfig::parse("a=0x10 : 0x1,\n 0xzz ;", Path::new("p.conf")).unwrap_err();
        assert!(matches!(e, PartitionError::Parse { line: 2, .. }), "{e}");
        assert!(e.to_string().contains("0xzz"));
        let e = PartitionConfig::parse("a=12q : ALL;", Path::new("p.conf")).unwrap_err();
        assert!(matches!(e, PartitionError::Parse { line: 1, .. }), "{e}");
        let e = PartitionConfig::parse("a=0x10 : 0 ;", Path::new("p.conf")).unwrap_err();
        assert!(matches!(e, PartitionError::Parse { line: 1, .. }), "a GUID of 0 is refused: {e}");
    }

    #[test]
    fn warnings_do_not_fail() {
        let c = parse("a=0x10, bogus, mtu=x, defmember=nope : 0x5=weird, mgid=fe80::1 ;");
        let p = c.get(0x10).unwrap();
        assert_eq!(p.flags.mtu, DEFAULT_MGRP_MTU);
        assert_eq!(rules(p), vec![rule(Members::Guid(5), Membership::Limited)]);
        assert!(p.groups.is_empty(), "a unicast mgid is skipped");
    }
}
