//! `qos-policy.conf`, OpenSM's QoS policy file (doc/QoS_management_in_OpenSM.txt):
//! what SL a PathRecord query gets.
//!
//! Read: `qos-ulps` (`default`, `any` with `service-id`, `pkey`,
//! `target-port-guid`, `source-port-guid`, `source-target-port-guid`;
//! `ipoib` with or without `pkey`; `sdp`, `rds`, `iser` with or without
//! `port-num`; `srp, target-port-guid`), `qos-levels` (`name`, `sl`),
//! `qos-match-rules` (`service-id`, `pkey`, `qos-class`, `source`,
//! `destination`, `qos-level-name`) and `port-groups` by `port-guid`.
//! Accepted and reported as not supported (one warning each): a level's
//! `mtu-limit`, `rate-limit`, `pkey`, `packet-life`; a port group's
//! `port-name`, `partition`, `pkey`, `node-type` (the group then holds only
//! its `port-guid`s); the `qos-setup` section (OpenSM ignores it too).
//!
//! Order as OpenSM: match rules first, in file order; then qos-ulps rules
//! in file order; then the `default` ULP, else the level named `DEFAULT`.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::PathQuery;

/// A policy file that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PolicyError {
    /// Unreadable file.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        message: String,
    },
    /// A syntax or reference error.
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

/// Inclusive ranges of numbers.
type Ranges = Vec<(u64, u64)>;

fn in_ranges(r: &Ranges, v: u64) -> bool {
    r.iter().any(|&(lo, hi)| lo <= v && v <= hi)
}

/// One matching rule (of qos-match-rules or qos-ulps) and its SL. Empty
/// criteria match anything; a criterion the query does not carry fails.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rule {
    service_ids: Ranges,
    pkeys: Ranges,
    qos_classes: Ranges,
    sources: Option<Ranges>,
    destinations: Option<Ranges>,
    either: Option<Ranges>,
    /// Level name, resolved to `sl` at the end of the file.
    level: Option<(String, usize)>,
    sl: u8,
}

impl Rule {
    fn matches(&self, q: &PathQuery) -> bool {
        let opt = |r: &Ranges, v: Option<u64>| r.is_empty() || v.is_some_and(|v| in_ranges(r, v));
        opt(&self.service_ids, q.service_id)
            && opt(&self.pkeys, q.pkey.map(|p| u64::from(p & 0x7FFF)))
            && opt(&self.qos_classes, q.qos_class.map(u64::from))
            && self.sources.as_ref().is_none_or(|r| in_ranges(r, q.source_guid))
            && self.destinations.as_ref().is_none_or(|r| in_ranges(r, q.destination_guid))
            && self.either.as_ref().is_none_or(|r| in_ranges(r, q.source_guid) || in_ranges(r, q.destination_guid))
    }
}

/// A parsed `qos-policy.conf`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosPolicy {
    rules: Vec<Rule>,
    ulps: Vec<Rule>,
    default_sl: Option<u8>,
    /// What the file asks that smcore does not do (file:line: what), to be
    /// logged once when the policy is loaded.
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Section {
    Top,
    PortGroups,
    PortGroup,
    QosSetup,
    Levels,
    Level,
    MatchRules,
    MatchRule,
    Ulps,
}

/// A number in C syntax (decimal, 0x hex, leading-0 octal).
fn number(t: &str) -> Option<u64> {
    super::c_number(t)
}

/// `a, b-c, d`: numbers and inclusive ranges.
fn ranges(text: &str) -> Result<Ranges, String> {
    text.split(',')
        .map(|item| {
            let item = item.trim();
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (number(a), number(b)),
                None => (number(item), number(item)),
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
                (Some(_), Some(_)) => Err(format!("range `{item}` runs backwards")),
                _ => Err(format!("`{item}` is not a number or a range of numbers")),
            }
        })
        .collect()
}

fn sl_value(text: &str) -> Result<u8, String> {
    number(text).filter(|&v| v <= 15).map(|v| v as u8).ok_or_else(|| format!("SL `{}` is not 0-15", text.trim()))
}

impl QosPolicy {
    /// The SL the policy gives `query`, if any rule (or a default) says.
    pub fn sl_for(&self, query: &PathQuery) -> Option<u8> {
        self.rules
            .iter()
            .chain(&self.ulps)
            .find(|r| r.matches(query))
            .map(|r| r.sl)
            .or(self.default_sl)
    }

    /// Parse policy text; `path` only names it in errors and warnings.
    pub fn parse(text: &str, path: &Path) -> Result<QosPolicy, PolicyError> {
        let mut p = QosPolicy::default();
        let mut section = Section::Top;
        // Port groups by name: their GUID ranges.
        let mut groups: Vec<(String, Ranges)> = Vec::new();
        let mut group: Option<(Option<String>, Ranges, usize)> = None;
        // Levels by name: SL and the line that defined them.
        let mut levels: Vec<(String, Option<u8>, usize)> = Vec::new();
        let mut level: Option<(Option<String>, Option<u8>, usize)> = None;
        let mut rule: Option<(Rule, usize)> = None;
        let mut seen_levels = false;
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            last_line = line_no;
            let fail = |message: String| PolicyError::Parse { path: path.to_path_buf(), line: line_no, message };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let warn = |w: &mut Vec<String>, what: String| w.push(format!("{}:{line_no}: {what}", path.display()));
            // Section keywords stand alone on their line.
            let next = match (section, line) {
                (Section::Top, "port-groups") => Some(Section::PortGroups),
                (Section::PortGroups, "end-port-groups") => Some(Section::Top),
                (Section::PortGroups, "port-group") => {
                    group = Some((None, Vec::new(), line_no));
                    Some(Section::PortGroup)
                }
                (Section::PortGroup, "end-port-group") => {
                    let (name, guids, at) = group.take().unwrap_or((None, Vec::new(), line_no));
                    let name = name.ok_or_else(|| fail(format!("the port group begun at line {at} has no name")))?;
                    groups.push((name, guids));
                    Some(Section::PortGroups)
                }
                (Section::Top, "qos-setup") => {
                    warn(&mut p.warnings, "qos-setup is not supported (OpenSM ignores it too): SL2VL and VLArb come from the qos_* options".into());
                    Some(Section::QosSetup)
                }
                (Section::QosSetup, "end-qos-setup") => Some(Section::Top),
                (Section::QosSetup, _) => Some(Section::QosSetup),
                (Section::Top, "qos-levels") => {
                    seen_levels = true;
                    Some(Section::Levels)
                }
                (Section::Levels, "end-qos-levels") => Some(Section::Top),
                (Section::Levels, "qos-level") => {
                    level = Some((None, None, line_no));
                    Some(Section::Level)
                }
                (Section::Level, "end-qos-level") => {
                    let (name, sl, at) = level.take().unwrap_or((None, None, line_no));
                    let name = name.ok_or_else(|| fail(format!("the QoS level begun at line {at} has no name")))?;
                    if levels.iter().any(|l| l.0 == name) {
                        return Err(fail(format!("QoS level `{name}` defined twice")));
                    }
                    levels.push((name, sl, at));
                    Some(Section::Levels)
                }
                (Section::Top, "qos-match-rules") => Some(Section::MatchRules),
                (Section::MatchRules, "end-qos-match-rules") => Some(Section::Top),
                (Section::MatchRules, "qos-match-rule") => {
                    rule = Some((Rule::default(), line_no));
                    Some(Section::MatchRule)
                }
                (Section::MatchRule, "end-qos-match-rule") => {
                    let (r, at) = rule.take().unwrap_or((Rule::default(), line_no));
                    if r.level.is_none() {
                        return Err(fail(format!("the match rule begun at line {at} has no qos-level-name")));
                    }
                    p.rules.push(r);
                    Some(Section::MatchRules)
                }
                (Section::Top, "qos-ulps") => Some(Section::Ulps),
                (Section::Ulps, "end-qos-ulps") => Some(Section::Top),
                _ => None,
            };
            if let Some(next) = next {
                section = next;
                continue;
            }
            let (key, value) = match section {
                Section::Ulps => line.rsplit_once(':').ok_or_else(|| fail(format!("`{line}` is not `<ulp>[, <criterion>] : <sl>`")))?,
                Section::PortGroup | Section::Level | Section::MatchRule => line
                    .split_once(':')
                    .ok_or_else(|| fail(format!("`{line}` is not `<keyword>: <value>`")))?,
                _ => return Err(fail(format!("`{line}` is not expected here ({section:?})"))),
            };
            let (key, value) = (key.trim(), value.trim());
            match section {
                Section::PortGroup => {
                    let g = group.as_mut().ok_or_else(|| fail("no port group open".into()))?;
                    match key {
                        "name" => g.0 = Some(value.to_string()),
                        "use" => {}
                        "port-guid" => g.1.extend(ranges(value).map_err(fail)?),
                        "port-name" | "partition" | "pkey" | "node-type" => warn(
                            &mut p.warnings,
                            format!("port group {key} is not supported by smcore: the group holds only its port-guid entries"),
                        ),
                        _ => return Err(fail(format!("unknown port group keyword `{key}`"))),
                    }
                }
                Section::Level => {
                    let l = level.as_mut().ok_or_else(|| fail("no QoS level open".into()))?;
                    match key {
                        "name" => l.0 = Some(value.to_string()),
                        "use" => {}
                        "sl" => l.1 = Some(sl_value(value).map_err(fail)?),
                        "mtu-limit" | "rate-limit" | "pkey" | "packet-life" => {
                            ranges(value).map_err(fail)?;
                            warn(&mut p.warnings, format!("QoS level {key} is not supported by smcore: only the level's SL is applied"));
                        }
                        _ => return Err(fail(format!("unknown QoS level keyword `{key}`"))),
                    }
                }
                Section::MatchRule => {
                    let (r, _) = rule.as_mut().ok_or_else(|| fail("no match rule open".into()))?;
                    match key {
                        "use" => {}
                        "service-id" => r.service_ids.extend(ranges(value).map_err(fail)?),
                        "pkey" => r.pkeys.extend(ranges(value).map_err(fail)?.into_iter().map(|(a, b)| (a & 0x7FFF, b & 0x7FFF))),
                        "qos-class" => r.qos_classes.extend(ranges(value).map_err(fail)?),
                        "source" | "destination" => {
                            let mut guids = Vec::new();
                            for name in value.split(',').map(str::trim) {
                                let g = groups
                                    .iter()
                                    .find(|g| g.0 == name)
                                    .ok_or_else(|| fail(format!("no port group named `{name}`")))?;
                                guids.extend(g.1.iter().copied());
                            }
                            let slot = if key == "source" { &mut r.sources } else { &mut r.destinations };
                            slot.get_or_insert_with(Vec::new).extend(guids);
                        }
                        "qos-level-name" => r.level = Some((value.to_string(), line_no)),
                        _ => return Err(fail(format!("unknown match rule keyword `{key}`"))),
                    }
                }
                Section::Ulps => {
                    let sl = sl_value(value).map_err(fail)?;
                    let (ulp, criterion) = match key.split_once(',') {
                        Some((u, c)) => (u.trim(), Some(c.trim())),
                        None => (key, None),
                    };
                    let (what, args) = match criterion {
                        Some(c) => {
                            let (w, a) = c.split_once(char::is_whitespace).ok_or_else(|| fail(format!("`{c}` has no value")))?;
                            (Some(w), ranges(a).map_err(fail)?)
                        }
                        None => (None, Vec::new()),
                    };
                    let mut r = Rule { sl, ..Rule::default() };
                    // Service IDs of the ULPs OpenSM knows (its doc, section 6).
                    let ports = |base: u64| args.iter().map(move |&(a, b)| (base | (a & 0xFFFF), base | (b & 0xFFFF))).collect();
                    match (ulp, what) {
                        ("default", None) => {
                            p.default_sl = Some(sl);
                            continue;
                        }
                        ("any", Some("service-id")) => r.service_ids = args,
                        ("any", Some("pkey")) | ("ipoib", Some("pkey")) => {
                            r.pkeys = args.into_iter().map(|(a, b)| (a & 0x7FFF, b & 0x7FFF)).collect()
                        }
                        ("ipoib", None) => r.pkeys = vec![(0x7FFF, 0x7FFF)],
                        ("any", Some("target-port-guid")) | ("srp", Some("target-port-guid")) => r.destinations = Some(args),
                        ("any", Some("source-port-guid")) => r.sources = Some(args),
                        ("any", Some("source-target-port-guid")) => r.either = Some(args),
                        ("sdp", None) => r.service_ids = vec![(0x1_0000, 0x1_FFFF)],
                        ("sdp", Some("port-num")) => r.service_ids = ports(0x1_0000),
                        ("rds", None) => r.service_ids = vec![(0x106_48CA, 0x106_48CA)],
                        ("rds", Some("port-num")) | ("iser", Some("port-num")) => r.service_ids = ports(0x106_0000),
                        ("iser", None) => r.service_ids = vec![(0x106_0CBC, 0x106_0CBC)],
                        _ => return Err(fail(format!("unknown ULP rule `{key}`"))),
                    }
                    p.ulps.push(r);
                }
                _ => unreachable!("other sections returned above"),
            }
        }
        if section != Section::Top {
            return Err(PolicyError::Parse {
                path: path.to_path_buf(),
                line: last_line,
                message: format!("the file ends inside a section ({section:?}) that was not closed"),
            });
        }
        for r in &mut p.rules {
            if let Some((name, line)) = &r.level {
                let l = levels.iter().find(|l| &l.0 == name).ok_or_else(|| PolicyError::Parse {
                    path: path.to_path_buf(),
                    line: *line,
                    message: format!("no QoS level named `{name}`"),
                })?;
                r.sl = l.1.unwrap_or(0);
            }
        }
        if p.default_sl.is_none() {
            match levels.iter().find(|l| l.0 == "DEFAULT") {
                Some(l) => p.default_sl = Some(l.1.unwrap_or(0)),
                None if seen_levels => {
                    return Err(PolicyError::Parse {
                        path: path.to_path_buf(),
                        line: last_line,
                        message: "qos-levels has no level named DEFAULT (OpenSM requires one)".into(),
                    })
                }
                None => {}
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<QosPolicy, PolicyError> {
        QosPolicy::parse(t, Path::new("qos-policy.conf"))
    }

    fn sid(s: u64) -> PathQuery {
        PathQuery { service_id: Some(s), ..PathQuery::default() }
    }

    fn pkey(k: u16) -> PathQuery {
        PathQuery { pkey: Some(k), ..PathQuery::default() }
    }

    /// The simplified policy of OpenSM's doc, section 6, as given there.
    const ULPS: &str = "    qos-ulps
        default                       : 0 # default SL
        sdp, port-num 30000           : 0 # SL for application running on top
                                          # of SDP when a destination
                                          # TCP/IPport is 30000
        sdp, port-num 10000-20000     : 0
        sdp                           : 1 # default SL for any other
                                          # application running on top of SDP
        rds                           : 2 # SL for RDS traffic
        iser, port-num 900            : 0 # SL for iSER with a specific target
                                          # port
        iser                          : 3 # default SL for iSER
        ipoib, pkey 0x0001            : 0 # SL for IPoIB on partition with
                                          # pkey 0x0001
        ipoib                         : 4 # default IPoIB partition,
                                          # pkey=0x7FFF
        any, service-id 0x6234        : 6 # match any PR/MPR query with a
                                          # specific Service ID
        any, pkey 0x0ABC              : 6 # match any PR/MPR query with a
                                          # specific PKey
        srp, target-port-guid 0x1234  : 5 # SRP when SRP Target is located on
                                          # a specified IB port GUID
        any, target-port-guid 0x0ABC-0xFFFFF : 6 # match any PR/MPR query with
                                          # a specific target port GUID
        any, source-port-guid 0x5678  : 7 # match any PR/MPR query with
                                          # a specific source port
                                          # GUID
\tany, source-target-port-guid 0x9abcd : 8 # match any PR/MPR query with
\t\t\t\t\t  # a specific source or target port
\t\t\t\t\t  # GUID
    end-qos-ulps
";

    #[test]
    fn opensm_doc_simplified_policy() {
        let p = parse(ULPS).unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(p.sl_for(&PathQuery::default()), Some(0), "default");
        assert_eq!(p.sl_for(&sid(0x1_0000 + 30000)), Some(0), "SDP port 30000");
        assert_eq!(p.sl_for(&sid(0x1_0005)), Some(1), "other SDP");
        assert_eq!(p.sl_for(&sid(0x106_48CA)), Some(2), "RDS");
        assert_eq!(p.sl_for(&sid(0x106_0CBC)), Some(3), "iSER");
        assert_eq!(p.sl_for(&pkey(0x8001)), Some(0), "IPoIB, full member of 0x0001");
        assert_eq!(p.sl_for(&pkey(0xFFFF)), Some(4), "IPoIB default partition");
        assert_eq!(p.sl_for(&sid(0x6234)), Some(6));
        assert_eq!(p.sl_for(&pkey(0x0ABC)), Some(6));
        let to = |g| PathQuery { destination_guid: g, ..PathQuery::default() };
        assert_eq!(p.sl_for(&to(0x1234)), Some(5));
        assert_eq!(p.sl_for(&to(0xF_0000)), Some(6));
        assert_eq!(p.sl_for(&PathQuery { source_guid: 0x5678, ..PathQuery::default() }), Some(7));
        assert_eq!(p.sl_for(&PathQuery { source_guid: 0x9abcd, ..PathQuery::default() }), Some(8));
        assert_eq!(p.sl_for(&to(0x9abcd)), Some(6), "the earlier target-port-guid range takes it first");
    }

    /// The full example of OpenSM's doc, section 5.
    const FULL: &str = "
    port-groups
        port-group # using port GUIDs
            name: Storage
            use: SRP Targets
            port-guid: 0x10000000000001, 0x10000000000005-0x1000000000FFFA
            port-guid: 0x1000000000FFFF
        end-port-group
        port-group
            name: Virtual Servers
            port-name: vs1 HCA-1/P1, vs2 HCA-1/P1
        end-port-group
    end-port-groups
    qos-setup
        # parsed and ignored
    end-qos-setup
    qos-levels
        qos-level
            name: DEFAULT
            use: default QoS Level
            sl: 0
        end-qos-level
        qos-level
            name: WholeSet
            sl: 1
            mtu-limit: 4
            rate-limit: 5
            pkey: 0x1234
            packet-life: 8
        end-qos-level
    end-qos-levels
    qos-match-rules
        qos-match-rule
            use: by QoS class
            qos-class: 7-9,11
            qos-level-name: WholeSet
        end-qos-match-rule
        qos-match-rule
            use: Storage targets
            destination: Storage
            service-id: 0x10000000000001, 0x10000000000008-0x10000000000FFF
            qos-level-name: WholeSet
        end-qos-match-rule
        qos-match-rule
            use: match by all parameters
            qos-class: 7-9,11
            source: Virtual Servers
            destination: Storage
            service-id: 0x0000000000010000-0x000000000001FFFF
            pkey: 0x0F00-0x0FFF
            qos-level-name: WholeSet
        end-qos-match-rule
    end-qos-match-rules
    qos-ulps
        any, service-id 0x99 : 9
    end-qos-ulps
";

    #[test]
    fn opensm_doc_full_policy() {
        let p = parse(FULL).unwrap();
        // port-name, qos-setup, and the four level limits.
        assert_eq!(p.warnings.len(), 6, "{:?}", p.warnings);
        assert!(p.warnings[0].starts_with("qos-policy.conf:11: port group port-name"), "{:?}", p.warnings);
        let class = |c| PathQuery { qos_class: Some(c), ..PathQuery::default() };
        assert_eq!(p.sl_for(&class(8)), Some(1));
        assert_eq!(p.sl_for(&class(10)), Some(0), "DEFAULT");
        let storage = PathQuery { service_id: Some(0x10000000000009), destination_guid: 0x1000000000FFFF, ..PathQuery::default() };
        assert_eq!(p.sl_for(&storage), Some(1));
        let elsewhere = PathQuery { destination_guid: 0x2, ..storage };
        assert_eq!(p.sl_for(&elsewhere), Some(0));
        assert_eq!(p.sl_for(&PathQuery { destination_guid: 0x1000000000FFFF, ..PathQuery::default() }), Some(0), "no service ID in the query");
        assert_eq!(p.sl_for(&sid(0x99)), Some(9), "qos-ulps after the match rules");
    }

    #[test]
    fn shortest_files() {
        let a = parse("qos-levels\n qos-level\n  name: DEFAULT\n  sl: 0\n end-qos-level\nend-qos-levels\n").unwrap();
        let b = parse("qos-ulps\n default : 0 #default SL\nend-qos-ulps\n").unwrap();
        assert_eq!(a.sl_for(&sid(1)), Some(0));
        assert_eq!(b.sl_for(&sid(1)), Some(0));
        assert_eq!(parse("# nothing\n").unwrap().sl_for(&sid(1)), None);
    }

    #[test]
    fn errors_name_the_line() {
        let at = |t: &str| parse(t).unwrap_err().to_string();
        assert!(at("qos-ulps\n default : 0\n any, service-id 0x10 : 16\nend-qos-ulps\n").starts_with("qos-policy.conf:3: SL `16`"));
        assert!(at("qos-ulps\n default : 0\n nfs : 1\nend-qos-ulps\n").starts_with("qos-policy.conf:3: unknown ULP"));
        assert!(at("qos-ulps\n any, pkey 0x10-0x1 : 1\nend-qos-ulps\n").starts_with("qos-policy.conf:2: range"));
        assert!(at("qos-ulps\n default : 0\n").starts_with("qos-policy.conf:2: the file ends inside"));
        assert!(at("qos-levels\n qos-level\n  name: X\n  sl: 1\n end-qos-level\nend-qos-levels\n").contains("DEFAULT"));
        let e = at("qos-levels\n qos-level\n  name: DEFAULT\n end-qos-level\nend-qos-levels\nqos-match-rules\n qos-match-rule\n  pkey: 1\n  qos-level-name: Nope\n end-qos-match-rule\nend-qos-match-rules\n");
        assert!(e.starts_with("qos-policy.conf:9: no QoS level named `Nope`"), "{e}");
        let e = at("qos-match-rules\n qos-match-rule\n  source: Nobody\n");
        assert!(e.starts_with("qos-policy.conf:3: no port group named `Nobody`"), "{e}");
        assert!(at("sl: 3\n").starts_with("qos-policy.conf:1:"));
    }
}
