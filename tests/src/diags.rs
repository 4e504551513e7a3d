//! Glue shared by the tests that run smcore under ibsim and ask it with
//! infiniband-diags: a fabric generated into a temporary directory (which
//! also takes the SMs' dumps and reports), and the parsing of the diags'
//! `name....value` output.

use std::path::{Path, PathBuf};

use sm_topology::Topology;
use tempfile::TempDir;

use crate::smcore::{Profile, Smcore};
use crate::{Error, Result};

/// The debug `smcore` and a fabric it generated into a new temporary
/// directory.
pub struct Generated {
    /// The `smcore` binary.
    pub sm: Smcore,
    /// The directory holding the fabric; deleted on drop.
    pub tmp: TempDir,
    /// The topology file.
    pub net: PathBuf,
    /// The topology file, parsed.
    pub topo: Topology,
}

impl Generated {
    /// `smcore gen <args> -o <tmp>/<file>`; `args` gets the directory, so
    /// that files `gen` writes beside the fabric can go there too.
    pub fn new(prefix: &str, file: &str, args: impl FnOnce(&Path) -> Vec<String>) -> Result<Self> {
        let sm = Smcore::locate(Profile::Debug)?;
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| Error::io("creating a temporary directory", e))?;
        let net = tmp.path().join(file);
        let args = args(tmp.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sm.gen(&args, &net)?;
        let topo = sm_topology::parse_file(&net)
            .map_err(|e| Error::Failed(format!("{}: {e}", net.display())))?;
        Ok(Generated { sm, tmp, net, topo })
    }

    /// A two-level fat tree (`ft.net`).
    pub fn fat_tree(
        prefix: &str,
        leaves: u32,
        spines: u32,
        hosts_per_leaf: u32,
        uplinks: u32,
    ) -> Result<Self> {
        Generated::new(prefix, "ft.net", |_| {
            let mut args = vec!["fat-tree".to_string()];
            for (key, value) in [
                ("--leaves", leaves),
                ("--spines", spines),
                ("--hosts-per-leaf", hosts_per_leaf),
                ("--uplinks", uplinks),
            ] {
                args.push(key.into());
                args.push(value.to_string());
            }
            args
        })
    }

    /// A torus of `dims` with one host a switch (`torus.net`), and the
    /// torus-2QoS configuration written for it (`torus-2QoS.conf`).
    pub fn torus_2qos(prefix: &str, dims: &str) -> Result<(Self, PathBuf)> {
        let mut conf = PathBuf::new();
        let generated = Generated::new(prefix, "torus.net", |dir| {
            conf = dir.join("torus-2QoS.conf");
            ["torus", "--dims", dims, "--hosts", "1", "--torus-conf"]
                .iter()
                .map(|a| a.to_string())
                .chain([conf.display().to_string()])
                .collect()
        })?;
        Ok((generated, conf))
    }

    /// The temporary directory.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Indices of the topology's hosts (CAs), in file order.
    pub fn hosts(&self) -> Vec<usize> {
        (0..self.topo.nodes.len())
            .filter(|&i| !self.topo.nodes[i].is_switch())
            .collect()
    }
}

/// The values of the `name....value` lines of a diags dump (saquery,
/// smpquery), in order.
pub fn fields<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix(name)?;
            rest.starts_with('.')
                .then(|| rest.trim_start_matches('.').trim())
        })
        .collect()
}

/// A decimal or `0x` hexadecimal number; panics (naming it) otherwise.
pub fn num(v: &str) -> u64 {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    }
    .unwrap_or_else(|_| panic!("not a number: {v}"))
}

/// The first `name` field of a dump, as a number.
pub fn first_num(text: &str, name: &str) -> Option<u64> {
    fields(text, name).first().map(|v| num(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_numbers() {
        let text = "NodeRecord dump:\n\t\tlid.....................0x5\n\t\tlidx....9\n\
                    \t\tport_guid...............0x0002c90200000001\n\t\tlid.....7\n";
        assert_eq!(fields(text, "lid"), ["0x5", "7"]);
        assert_eq!(first_num(text, "lid"), Some(5));
        assert_eq!(first_num(text, "port_guid"), Some(0x0002_c902_0000_0001));
        assert_eq!(first_num(text, "sl"), None);
        assert_eq!(num("12"), 12);
    }
}
