//! Write a generated fabric in ibsim net format to stdout, for trying it
//! with ibsim by hand: `cargo run -p sm-topology --example emit_net -- fat 4 2 4 2`.

use std::process::ExitCode;

use sm_topology::{emit, gen, Topology, TopologyError};

fn arg(args: &[String], i: usize) -> Result<usize, TopologyError> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| TopologyError::Generator(format!("argument {i} missing or not a number")))
}

fn build(args: &[String]) -> Result<(Topology, Option<String>), TopologyError> {
    let family = args.first().map(String::as_str).unwrap_or("");
    Ok(match family {
        "fat" => (
            gen::fat_tree_2level(arg(args, 1)?, arg(args, 2)?, arg(args, 3)?, arg(args, 4)?)?,
            None,
        ),
        "kary" => (gen::kary_ntree(arg(args, 1)?, arg(args, 2)?, arg(args, 3)?)?, None),
        "torus" | "mesh" => {
            let dims: Vec<usize> =
                args[1..args.len() - 1].iter().filter_map(|a| a.parse().ok()).collect();
            let hosts = arg(args, args.len() - 1)?;
            let (t, layout) = gen::torus(&dims, hosts, family == "mesh")?;
            (t, Some(gen::torus_2qos_conf(&layout)))
        }
        "cube" => (gen::hypercube(arg(args, 1)?, arg(args, 2)?)?, None),
        "random" => (
            gen::random_irregular(
                arg(args, 1)?,
                arg(args, 2)?,
                arg(args, 3)?,
                arg(args, 4)?,
                arg(args, 5)? as u64,
            )?,
            None,
        ),
        _ => {
            return Err(TopologyError::Generator(
                "families: fat kary torus mesh cube random".into(),
            ))
        }
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match build(&args).and_then(|(t, conf)| Ok((emit::to_net_string(&t)?, conf))) {
        Ok((text, conf)) => {
            print!("{text}");
            if let Some(c) = conf {
                eprint!("{c}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
