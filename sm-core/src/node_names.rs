//! The node name map of rdma-core's diagnostics (`ibnetdiscover
//! --node-name-map`, OpenSM's `node_name_map_name`): one node a line,
//! `0x<node GUID> "name"`; blank lines and `#` comments are skipped. Where
//! smcore shows a node to a person (the OpenSM dumps, `smcore route
//! --explain`), a node the map names is shown by that name instead of its
//! NodeDescription, as OpenSM does for its logs and dumps. The SA keeps
//! answering with the NodeDescription the node gave.
//!
//! OpenSM gives up the whole map at a line it cannot read, with a warning
//! on stderr; here such a line is an error naming file and line, so that a
//! typo does not silently lose every name.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sm_abi::FabricSnapshot;
use thiserror::Error;

/// A node name map that cannot be used.
#[derive(Debug, Error)]
pub enum NodeNameMapError {
    /// The file cannot be read.
    #[error("node name map {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A line that is not `GUID "name"`.
    #[error("node name map {}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Names by node GUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeNameMap {
    names: HashMap<u64, String>,
}

impl NodeNameMap {
    /// Read the map at `path`.
    pub fn load(path: &Path) -> Result<NodeNameMap, NodeNameMapError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| NodeNameMapError::Io { path: path.to_path_buf(), source })?;
        NodeNameMap::parse(&text, path)
    }

    /// Parse map text; `path` only names it in errors. A GUID given twice
    /// takes the later name.
    pub fn parse(text: &str, path: &Path) -> Result<NodeNameMap, NodeNameMapError> {
        let mut names = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let fail = |message: String| NodeNameMapError::Line { path: path.to_path_buf(), line: i + 1, message };
            let line = raw.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let end = line.find(|c: char| c.is_whitespace() || c == '#').unwrap_or(line.len());
            let (word, rest) = line.split_at(end);
            let guid = smcore_kit::config::parse_guid(word).ok_or_else(|| fail(format!("`{word}` is not a GUID (0x hex, 0 octal or decimal)")))?;
            let rest = rest.trim_start();
            let name = if let Some(quoted) = rest.strip_prefix('"') {
                let close = quoted.find('"').ok_or_else(|| fail("the name's closing `\"` is missing".into()))?;
                &quoted[..close]
            } else {
                // rdma-core also takes a bare name, up to a `#`.
                rest.split('#').next().unwrap_or("").trim_end()
            };
            if name.is_empty() {
                return Err(fail(format!("no name for 0x{guid:016x}: write `0x{guid:016x} \"name\"`")));
            }
            names.insert(guid, name.to_string());
        }
        Ok(NodeNameMap { names })
    }

    /// True when the map names no node.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name the map gives the node of `guid`, if any.
    pub fn get(&self, guid: u64) -> Option<&str> {
        self.names.get(&guid).map(String::as_str)
    }

    /// How node `guid` with NodeDescription `description` is shown.
    pub fn name<'a>(&'a self, guid: u64, description: &'a str) -> &'a str {
        self.get(guid).unwrap_or(description)
    }

    /// `fabric` with every node the map names under that name, for the
    /// writers that show descriptions (borrowed as it is when the map
    /// names none of its nodes).
    pub fn rename<'a>(&self, fabric: &'a FabricSnapshot) -> Cow<'a, FabricSnapshot> {
        if !fabric.nodes.iter().any(|n| self.names.contains_key(&n.guid)) {
            return Cow::Borrowed(fabric);
        }
        let mut renamed = fabric.clone();
        for n in renamed.nodes.iter_mut() {
            if let Some(name) = self.names.get(&n.guid) {
                n.description = name.as_str().into();
            }
        }
        Cow::Owned(renamed)
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NodeNameMap, NodeNameMapError> {
        NodeNameMap::parse(text, Path::new("/etc/nn.map"))
    }

    #[test]
    fn reads_ibnetdiscover_maps() {
        let m = parse(
            "# site names\n\n0x0002c90300001234 \"leaf-1 (rack 3)\"\n  0x10 \"spine # one\"  # comment\n\
             0x20 bare name # comment\n0x10 \"spine-1\"\n",
        )
        .unwrap();
        assert_eq!(m.get(0x0002_c903_0000_1234), Some("leaf-1 (rack 3)"));
        assert_eq!(m.get(0x10), Some("spine-1"), "the later line wins");
        assert_eq!(m.get(0x20), Some("bare name"));
        assert_eq!(m.name(0x99, "host HCA-1"), "host HCA-1");
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        for (text, line, what) in [
            ("0x1 \"a\"\nzz \"b\"\n", 2, "`zz` is not a GUID"),
            ("0x1\n", 1, "no name for 0x0000000000000001"),
            ("# c\n0x1 \"open\n", 2, "closing"),
            ("0x1g \"a\"\n", 1, "`0x1g`"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("node name map /etc/nn.map:{line}: ")) && e.contains(what), "{text:?}: {e}");
        }
        let e = NodeNameMap::load(Path::new("/nonexistent/nn.map")).unwrap_err().to_string();
        assert!(e.starts_with("node name map /nonexistent/nn.map: "), "{e}");
    }
}
