//! `torus-2QoS.conf` (torus-2QoS.conf(5)): the torus shape, the seeds that
//! anchor coordinates, datelines, port groups and port order.
//!
//! The format is line based: blank lines and lines whose first
//! non-whitespace character is `#` are ignored, and tokens after the ones a
//! keyword uses are ignored too (the man page's example puts comments
//! there). Every error names the file and the line.

use std::path::Path;

use smcore_kit::config::parse_guid;
use thiserror::Error;

/// Highest radix a dimension may have (coordinates are stored as bytes).
pub const MAX_RADIX: usize = 255;

/// Why a torus-2QoS.conf cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfError {
    /// The file could not be read.
    #[error("{file}: cannot read: {reason}")]
    Io {
        /// File name.
        file: String,
        /// Cause.
        reason: String,
    },
    /// A line is malformed.
    #[error("{file}:{line}: {message}")]
    Line {
        /// File name.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Something is missing from the whole file.
    #[error("{file}: {message}")]
    File {
        /// File name.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// One seed: a switch and the directions some of its links point in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seed {
    /// Node GUID of the switch all links of this seed start at.
    pub origin: Option<u64>,
    /// Neighbour GUID per direction: index `2*dim` for +, `2*dim+1` for -.
    pub links: [Option<u64>; 6],
    /// Dateline offsets per dimension (moves the origin of coordinates).
    pub dateline: [i64; 3],
    /// Line of the first keyword of this seed (for messages).
    pub line: usize,
}

/// A parsed torus-2QoS.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorusConf {
    /// Radix per dimension (1 = dimension absent).
    pub radix: [usize; 3],
    /// Dimension is a torus (looped) rather than a mesh.
    pub looped: [bool; 3],
    /// Seeds in file order; discovery uses the first that works.
    pub seeds: Vec<Seed>,
    /// Most parallel links per direction and most host ports (plus the
    /// management port) per switch.
    pub portgroup_max_ports: usize,
    /// Order in which end ports of a destination switch are visited.
    pub port_order: Vec<u8>,
    /// Most topology changes reported per sweep.
    pub max_changes: usize,
    /// Problems that do not stop routing, naming file and line.
    pub warnings: Vec<String>,
}

impl Default for TorusConf {
    fn default() -> Self {
        TorusConf {
            radix: [1; 3],
            looped: [false; 3],
            seeds: Vec::new(),
            portgroup_max_ports: 16,
            port_order: Vec::new(),
            max_changes: 32,
            warnings: Vec::new(),
        }
    }
}

const LINK_KEYWORDS: [&str; 6] = [
    "xp_link", "xm_link", "yp_link", "ym_link", "zp_link", "zm_link",
];
const DATELINE_KEYWORDS: [&str; 3] = ["x_dateline", "y_dateline", "z_dateline"];
const AXES: [char; 3] = ['x', 'y', 'z'];

impl TorusConf {
    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<TorusConf, ConfError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfError::Io {
            file: file.clone(),
            reason: e.to_string(),
        })?;
        TorusConf::parse(&text, &file)
    }

    /// Parse configuration text; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<TorusConf, ConfError> {
        let mut conf = TorusConf::default();
        let mut shape_seen = false;
        let mut seed = Seed::default();
        let err = |line: usize, message: String| ConfError::Line {
            file: file.to_string(),
            line,
            message,
        };
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let mut tokens = raw.split_whitespace();
            let Some(key) = tokens.next() else { continue };
            if key.starts_with('#') {
                continue;
            }
            let key_lc = key.to_ascii_lowercase();
            if !shape_seen && key_lc != "torus" && key_lc != "mesh" {
                return Err(err(
                    line,
                    format!("`{key}` before the `torus` or `mesh` keyword, which must come first"),
                ));
            }
            match key_lc.as_str() {
                "torus" | "mesh" => {
                    if shape_seen {
                        return Err(err(line, format!("a second `{key}` line")));
                    }
                    shape_seen = true;
                    let default_loop = key_lc == "torus";
                    for d in 0..3 {
                        let tok = tokens.next().ok_or_else(|| {
                            err(
                                line,
                                format!(
                                    "`{key}` needs three radices (x y z), the {} is missing",
                                    AXES[d]
                                ),
                            )
                        })?;
                        let (num, looped) = match tok.chars().last() {
                            Some('m') | Some('M') => (&tok[..tok.len() - 1], false),
                            Some('t') | Some('T') => (&tok[..tok.len() - 1], true),
                            _ => (tok, default_loop),
                        };
                        let r: usize = num.parse().map_err(|_| {
                            err(line, format!("{} radix `{tok}` is not a number (with optional m/M/t/T suffix)", AXES[d]))
                        })?;
                        if r == 0 || r > MAX_RADIX {
                            return Err(err(
                                line,
                                format!("{} radix {r} out of range 1-{MAX_RADIX}", AXES[d]),
                            ));
                        }
                        conf.radix[d] = r;
                        conf.looped[d] = looped && r > 1;
                    }
                }
                k if LINK_KEYWORDS.contains(&k) => {
                    let dir = LINK_KEYWORDS.iter().position(|w| *w == k).unwrap_or(0);
                    let mut guid = |what: &str| -> Result<u64, ConfError> {
                        let t = tokens.next().ok_or_else(|| {
                            err(
                                line,
                                format!("`{key}` needs two switch GUIDs, {what} is missing"),
                            )
                        })?;
                        match parse_guid(t) {
                            Some(g) if g != 0 => Ok(g),
                            _ => Err(err(line, format!("`{t}` is not a switch GUID"))),
                        }
                    };
                    let from = guid("the first")?;
                    let to = guid("the second")?;
                    if from == to {
                        return Err(err(
                            line,
                            format!("`{key}` links switch {from:#x} to itself"),
                        ));
                    }
                    match seed.origin {
                        None => {
                            seed.origin = Some(from);
                            if seed.line == 0 {
                                seed.line = line;
                            }
                        }
                        Some(o) if o != from => {
                            return Err(err(
                                line,
                                format!("`{key}` starts at {from:#x}, but this seed's links start at {o:#x}; all links of one seed must share the first switch (use next_seed)"),
                            ))
                        }
                        Some(_) => {}
                    }
                    if let Some(prev) = seed.links[dir] {
                        if prev != to {
                            conf.warnings.push(format!("{file}:{line}: `{key}` given twice in one seed; {to:#x} replaces {prev:#x}"));
                        }
                    }
                    seed.links[dir] = Some(to);
                }
                k if DATELINE_KEYWORDS.contains(&k) => {
                    let d = DATELINE_KEYWORDS.iter().position(|w| *w == k).unwrap_or(0);
                    let t = tokens
                        .next()
                        .ok_or_else(|| err(line, format!("`{key}` needs a position")))?;
                    let v: i64 = t.parse().map_err(|_| {
                        err(line, format!("dateline position `{t}` is not an integer"))
                    })?;
                    seed.dateline[d] = v;
                    if seed.line == 0 {
                        seed.line = line;
                    }
                }
                "next_seed" => {
                    if seed.origin.is_some() {
                        conf.seeds.push(std::mem::take(&mut seed));
                    } else if seed.line != 0 {
                        conf.warnings.push(format!("{file}:{line}: next_seed ends a seed without links; its datelines are dropped"));
                        seed = Seed::default();
                    }
                }
                "portgroup_max_ports" => {
                    let t = tokens
                        .next()
                        .ok_or_else(|| err(line, "`portgroup_max_ports` needs a number".into()))?;
                    let v: usize = t
                        .parse()
                        .map_err(|_| err(line, format!("`{t}` is not a port count")))?;
                    if v == 0 || v > 255 {
                        return Err(err(
                            line,
                            format!("portgroup_max_ports {v} out of range 1-255"),
                        ));
                    }
                    conf.portgroup_max_ports = v;
                }
                "port_order" => {
                    let mut any = false;
                    for t in tokens.by_ref() {
                        if t.starts_with('#') {
                            break;
                        }
                        let p: u8 = t.parse().map_err(|_| {
                            err(
                                line,
                                format!("port_order: `{t}` is not a port number (1-254)"),
                            )
                        })?;
                        if p == 0 || p == 255 {
                            return Err(err(
                                line,
                                format!("port_order: port {p} out of range 1-254"),
                            ));
                        }
                        any = true;
                        if !conf.port_order.contains(&p) {
                            conf.port_order.push(p);
                        }
                    }
                    if !any {
                        return Err(err(line, "`port_order` needs at least one port".into()));
                    }
                }
                "max_changes" => {
                    let t = tokens
                        .next()
                        .ok_or_else(|| err(line, "`max_changes` needs a number".into()))?;
                    conf.max_changes = t
                        .parse()
                        .map_err(|_| err(line, format!("`{t}` is not a number")))?;
                }
                _ => {
                    conf.warnings
                        .push(format!("{file}:{line}: unknown keyword `{key}` ignored"));
                }
            }
        }
        if !shape_seen {
            return Err(ConfError::File {
                file: file.to_string(),
                message: "no `torus` or `mesh` line".into(),
            });
        }
        if seed.origin.is_some() {
            conf.seeds.push(seed);
        }
        if conf.seeds.is_empty() {
            return Err(ConfError::File {
                file: file.to_string(),
                message: "no seed: give the links of one switch with xp_link/xm_link/yp_link/ym_link/zp_link/zm_link".into(),
            });
        }
        if conf.radix.iter().filter(|&&r| r > 1).count() < 2 {
            conf.warnings.push(format!(
                "{file}: torus {}x{}x{} has fewer than two dimensions of radix 2 or more",
                conf.radix[0], conf.radix[1], conf.radix[2]
            ));
        }
        let ins = conf.seed_problems(file);
        conf.warnings.extend(ins);
        Ok(conf)
    }

    /// Seeds that cannot anchor discovery by themselves: a dimension of
    /// radix 2 or more without a link, or a radix-4 torus dimension without
    /// both directions (a ring of four is itself a 4-loop, so discovery
    /// cannot tell the far switch of the ring from the face of a cube).
    pub fn seed_problems(&self, file: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (i, s) in self.seeds.iter().enumerate() {
            for d in 0..3 {
                if self.radix[d] < 2 {
                    continue;
                }
                let p = s.links[2 * d].is_some();
                let m = s.links[2 * d + 1].is_some();
                if !p && !m {
                    out.push(format!(
                        "{file}:{}: insufficient seed {}: no {}p_link or {}m_link for the {} dimension (radix {})",
                        s.line,
                        i + 1,
                        AXES[d],
                        AXES[d],
                        AXES[d],
                        self.radix[d]
                    ));
                } else if self.radix[d] == 4 && self.looped[d] && !(p && m) {
                    out.push(format!(
                        "{file}:{}: insufficient seed {}: the {} dimension is a radix-4 torus, which needs both {}p_link and {}m_link",
                        s.line,
                        i + 1,
                        AXES[d],
                        AXES[d],
                        AXES[d]
                    ));
                }
            }
        }
        out
    }

    /// The dimensions with radix 2 or more, in DOR order.
    pub fn dims(&self) -> Vec<usize> {
        (0..3).filter(|&d| self.radix[d] > 1).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_man_page_example() {
        let text = "# Look for a 2D (since x radix is one) 4x5 torus.\n\
                    torus 1 4 5\n\
                    yp_link 0x200000 0x200005  # sw @ y=0,z=0 -> sw @ y=1,z=0\n\
                    ym_link 0x200000 0x20000f  # sw @ y=0,z=0 -> sw @ y=3,z=0\n\
                    zp_link 0x200000 0x200001  # sw @ y=0,z=0 -> sw @ y=0,z=1\n\
                    next_seed\n\
                    yp_link 0x20000b 0x200010\n\
                    ym_link 0x20000b 0x200006\n\
                    zp_link 0x20000b 0x20000c\n\
                    y_dateline -2\n\
                    z_dateline -1\n\
                    port_order 7 10 8 11 9 12 25 28 26 29 27 30 7\n";
        let c = TorusConf::parse(text, "t.conf").unwrap();
        assert_eq!(c.radix, [1, 4, 5]);
        assert_eq!(c.looped, [false, true, true]);
        assert_eq!(c.seeds.len(), 2);
        assert_eq!(c.seeds[0].origin, Some(0x200000));
        assert_eq!(c.seeds[0].links[2], Some(0x200005));
        assert_eq!(c.seeds[0].links[3], Some(0x20000f));
        assert_eq!(c.seeds[1].dateline, [0, -2, -1]);
        assert_eq!(
            c.port_order,
            vec![7, 10, 8, 11, 9, 12, 25, 28, 26, 29, 27, 30]
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn suffixes_set_mesh_or_torus_per_dimension() {
        let a =
            TorusConf::parse("mesh 3T 4 5\nxp_link 1 2\nyp_link 1 3\nzp_link 1 4\n", "f").unwrap();
        let b = TorusConf::parse(
            "torus 3 4M 5m\nxp_link 1 2\nyp_link 1 3\nzp_link 1 4\n",
            "f",
        )
        .unwrap();
        assert_eq!(a.looped, [true, false, false]);
        assert_eq!(a.looped, b.looped);
        assert_eq!(a.radix, b.radix);
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            ("xp_link 1 2\n", "c.conf:1:"),
            ("torus 4 4\nxp_link 1 2\n", "c.conf:1:"),
            ("torus 4 4 q\n", "c.conf:1:"),
            ("torus 4 0 4\n", "c.conf:1:"),
            ("torus 5 5 1\nxp_link 1 2\nyp_link 3 4\n", "c.conf:3:"),
            ("torus 5 5 1\n\nxp_link 1 zz\n", "c.conf:3:"),
            ("torus 5 5 1\nxp_link 1 2\nx_dateline one\n", "c.conf:3:"),
            (
                "torus 5 5 1\nxp_link 1 2\nportgroup_max_ports 0\n",
                "c.conf:3:",
            ),
            ("torus 5 5 1\nxp_link 1 2\nport_order 3 x\n", "c.conf:3:"),
            ("torus 5 5 1\n", "c.conf: no seed"),
            ("# only a comment\n", "c.conf: no `torus`"),
        ];
        for (text, want) in cases {
            let e = TorusConf::parse(text, "c.conf").unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn warns_about_insufficient_seeds() {
        let c = TorusConf::parse("torus 4 5 1\nxp_link 1 2\nyp_link 1 3\n", "s.conf").unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("radix-4") && c.warnings[0].starts_with("s.conf:2:"),
            "{:?}",
            c.warnings
        );
        let c = TorusConf::parse(
            "torus 4 5 1\nxp_link 1 2\nxm_link 1 5\nyp_link 1 3\n",
            "s.conf",
        )
        .unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let c = TorusConf::parse("torus 5 5 3\nxp_link 1 2\nyp_link 1 3\n", "s.conf").unwrap();
        assert!(c.warnings[0].contains("z dimension"), "{:?}", c.warnings);
        // A radix-4 mesh dimension needs one direction only.
        let c = TorusConf::parse("torus 4M 5 1\nxp_link 1 2\nyp_link 1 3\n", "s.conf").unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn unknown_keywords_warn_and_last_portgroup_wins() {
        let c = TorusConf::parse(
            "torus 5 5 1\nxp_link 1 2\nyp_link 1 3\nfrobnicate 3\nportgroup_max_ports 20\nportgroup_max_ports 24\nmax_changes 5\n",
            "u.conf",
        )
        .unwrap();
        assert_eq!(c.portgroup_max_ports, 24);
        assert_eq!(c.max_changes, 5);
        assert!(
            c.warnings.iter().any(|w| w.starts_with("u.conf:4:")),
            "{:?}",
            c.warnings
        );
    }
}
