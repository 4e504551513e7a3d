//! `smcore gen`: write generated topology files.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use sm_topology::{gen, Topology, TopologyError};

#[derive(Args, Debug)]
pub struct GenArgs {
    #[command(subcommand)]
    family: Family,
    /// Output file (ibsim net format); standard output when omitted.
    #[arg(short, long, global = true, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Remove this many random switch-to-switch links (fault injection).
    #[arg(long, global = true, default_value_t = 0)]
    remove_links: usize,
    /// Remove this many random switches (their hosts stay, disconnected).
    #[arg(long, global = true, default_value_t = 0)]
    remove_switches: usize,
    /// Seed for the faults.
    #[arg(long, global = true, default_value_t = 1)]
    fault_seed: u64,
}

#[derive(Subcommand, Debug)]
enum Family {
    /// k-ary n-tree (switches of 2k ports, k^n hosts by default).
    KaryNtree {
        #[arg(long)]
        k: usize,
        #[arg(long)]
        n: usize,
        /// Hosts per leaf switch (default k).
        #[arg(long)]
        hosts_per_leaf: Option<usize>,
    },
    /// Two-level fat tree; give --hosts-per-leaf and --uplinks, or
    /// --leaf-ports and --oversubscription H:U.
    FatTree {
        #[arg(long)]
        leaves: usize,
        #[arg(long)]
        spines: usize,
        #[arg(long)]
        hosts_per_leaf: Option<usize>,
        #[arg(long)]
        uplinks: Option<usize>,
        #[arg(long)]
        leaf_ports: Option<usize>,
        /// Oversubscription as hosts:uplinks, e.g. 2:1.
        #[arg(long, value_name = "H:U")]
        oversubscription: Option<String>,
    },
    /// 2D/3D torus, e.g. --dims 4x4x4.
    Torus {
        #[arg(long, value_name = "XxY[xZ]")]
        dims: String,
        #[arg(long, default_value_t = 1)]
        hosts: usize,
        /// Also write the matching torus-2QoS.conf here.
        #[arg(long, value_name = "FILE")]
        torus_conf: Option<PathBuf>,
    },
    /// 2D/3D mesh (no wrap-around links).
    Mesh {
        #[arg(long, value_name = "XxY[xZ]")]
        dims: String,
        #[arg(long, default_value_t = 1)]
        hosts: usize,
        /// Also write the matching torus-2QoS.conf (a `mesh` line) here.
        #[arg(long, value_name = "FILE")]
        torus_conf: Option<PathBuf>,
    },
    /// Hypercube of 2^dim switches.
    Hypercube {
        #[arg(long)]
        dim: usize,
        #[arg(long, default_value_t = 1)]
        hosts: usize,
    },
    /// Random connected irregular fabric.
    Random {
        #[arg(long)]
        switches: usize,
        #[arg(long, default_value_t = 36)]
        ports: usize,
        #[arg(long, default_value_t = 4)]
        hosts: usize,
        #[arg(long, default_value_t = 0)]
        extra_links: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn dims(text: &str) -> Result<Vec<usize>, String> {
    text.split(['x', 'X', ','])
        .map(|d| d.trim().parse::<usize>().map_err(|_| format!("bad dimension `{d}` in `{text}`")))
        .collect()
}

fn ratio(text: &str) -> Result<(usize, usize), String> {
    let (h, u) = text.split_once(':').ok_or_else(|| format!("oversubscription `{text}` is not H:U"))?;
    let p = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("oversubscription `{text}` is not H:U"));
    Ok((p(h)?, p(u)?))
}

fn build(args: &GenArgs) -> Result<(Topology, Option<(PathBuf, String)>), String> {
    let e = |e: TopologyError| e.to_string();
    Ok(match &args.family {
        Family::KaryNtree { k, n, hosts_per_leaf } => (gen::kary_ntree(*k, *n, hosts_per_leaf.unwrap_or(*k)).map_err(e)?, None),
        Family::FatTree { leaves, spines, hosts_per_leaf, uplinks, leaf_ports, oversubscription } => {
            let t = match (hosts_per_leaf, uplinks, leaf_ports, oversubscription) {
                (Some(h), Some(u), None, None) => gen::fat_tree_2level(*leaves, *spines, *h, *u),
                (None, None, Some(p), Some(r)) => gen::fat_tree_2level_oversubscribed(*leaves, *spines, *p, ratio(r)?),
                _ => return Err("fat-tree: give --hosts-per-leaf and --uplinks, or --leaf-ports and --oversubscription".into()),
            };
            (t.map_err(e)?, None)
        }
        Family::Torus { dims: d, hosts, torus_conf } | Family::Mesh { dims: d, hosts, torus_conf } => {
            let mesh = matches!(args.family, Family::Mesh { .. });
            let (t, layout) = gen::torus(&dims(d)?, *hosts, mesh).map_err(e)?;
            (t, torus_conf.clone().map(|p| (p, gen::torus_2qos_conf(&layout))))
        }
        Family::Hypercube { dim, hosts } => (gen::hypercube(*dim, *hosts).map_err(e)?, None),
        Family::Random { switches, ports, hosts, extra_links, seed } => {
            (gen::random_irregular(*switches, *ports, *hosts, *extra_links, *seed).map_err(e)?, None)
        }
    })
}

pub fn run(args: &GenArgs) -> ExitCode {
    let (mut topo, conf) = match build(args) {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("smcore: error: {msg}");
            return ExitCode::from(2);
        }
    };
    if args.remove_links > 0 || args.remove_switches > 0 {
        match gen::with_faults(&topo, args.remove_links, args.remove_switches, args.fault_seed) {
            Ok((t, report)) => {
                for s in &report.removed_switches {
                    eprintln!("removed switch {s}");
                }
                for ((a, pa), (b, pb)) in &report.removed_links {
                    eprintln!("removed link {a}[{pa}] -- {b}[{pb}]");
                }
                topo = t;
            }
            Err(e) => {
                eprintln!("smcore: error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let text = match sm_topology::emit::to_net_string(&topo) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("smcore: error: {e}");
            return ExitCode::from(2);
        }
    };
    let written = match &args.output {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    };
    let conf_written = match conf {
        Some((p, c)) => std::fs::write(&p, c).map_err(|e| format!("{}: {e}", p.display())),
        None => Ok(()),
    };
    match written.and(conf_written) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("smcore: error: {msg}");
            ExitCode::from(2)
        }
    }
}
