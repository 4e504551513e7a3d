//! Link parameters under ibsim: ports forced back to one operational VL
//! with `ibportstate ... vls 1` before any SM runs (as a port comes out of
//! reset on hardware) get the VLs both ends can operate back from
//! `smcore --once`, read back with `smpquery portinfo`.
//!
//! ibsim keeps OperationalVLs, but not NeighborMTU (it always reports its
//! template's), so the MTU half is proven on the embedded fabric
//! (sm-core/tests/link_sim.rs).
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use smcore_tests::ibsim::Ibsim;
use smcore_tests::smcore::{Profile, Smcore};

fn run(sim: &Ibsim, program: &str, args: &[&str]) -> String {
    let out = sim
        .client_command(program)
        .unwrap_or_else(|e| panic!("{e}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{program} {args:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

/// `OperVLs` as `smpquery portinfo` prints it (e.g. "VL0-7").
fn op_vls(sim: &Ibsim, path: &str, port: &str) -> String {
    let text = run(sim, "smpquery", &["-D", "portinfo", path, port]);
    let line = text
        .lines()
        .find(|l| l.starts_with("OperVLs"))
        .unwrap_or_else(|| panic!("no OperVLs in smpquery portinfo {path} {port}:\n{text}"));
    // "OperVLs:.........................VL0-7"
    line.rsplit('.').next().unwrap_or("").trim().to_string()
}

#[test]
fn ports_forced_to_one_vl_get_their_vls_back() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("link-ibsim-").tempdir().expect("temp dir");
    let net = tmp.path().join("ft.net");
    sm.gen(&["fat-tree", "--leaves", "2", "--spines", "1", "--hosts-per-leaf", "2", "--uplinks", "1"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    // The SM host's own port, the leaf port facing it, and the leaf's
    // uplink: a CA port, a leaf port and a switch-to-switch port.
    let leaf = "0,1";
    let leaf_facing = first_port_facing_back(&sim, leaf);
    let uplink = uplink_of(&sim, leaf, &leaf_facing);
    let targets = [("0", "1".to_string()), (leaf, leaf_facing.clone()), (leaf, uplink)];
    let before: Vec<String> = targets.iter().map(|(p, n)| op_vls(&sim, p, n)).collect();
    for (path, port) in &targets {
        run(&sim, "ibportstate", &["-D", path, port, "vls", "1"]);
        assert_eq!(op_vls(&sim, path, port), "VL0", "ibportstate vls 1 on {path} port {port}");
    }

    let out = run(&sim, sm.bin().to_str().expect("UTF-8 path"), &["--once"]);
    for ((path, port), was) in targets.iter().zip(&before) {
        assert_eq!(&op_vls(&sim, path, port), was, "{path} port {port} restored:\n{out}");
        assert_ne!(op_vls(&sim, path, port), "VL0", "{path} port {port} operates more than VL0");
    }
}

/// The port of the switch at `path` that leads back to the SM host.
fn first_port_facing_back(sim: &Ibsim, path: &str) -> String {
    // The SMP went out of the host's port 1 and arrived on the switch's
    // port given by NodeInfo LocalPortNum.
    let text = run(sim, "smpquery", &["-D", "nodeinfo", path]);
    let line = text.lines().find(|l| l.starts_with("LocalPort")).unwrap_or_else(|| panic!("no LocalPort:\n{text}"));
    line.rsplit('.').next().unwrap_or("").trim().to_string()
}

/// A port of the switch at `path`, other than `not`, whose peer is a
/// switch.
fn uplink_of(sim: &Ibsim, path: &str, not: &str) -> String {
    let text = run(sim, "smpquery", &["-D", "nodeinfo", path]);
    let ports: u8 = text
        .lines()
        .find(|l| l.starts_with("NumPorts"))
        .and_then(|l| l.rsplit('.').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no NumPorts:\n{text}"));
    for p in 1..=ports {
        let p = p.to_string();
        if p == not {
            continue;
        }
        let next = format!("{path},{p}");
        let Ok(out) = sim.client_command("smpquery").map(|mut c| c.args(["-D", "nodeinfo", &next]).output()) else {
            continue;
        };
        let Ok(out) = out else { continue };
        let text = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && text.lines().any(|l| l.starts_with("NodeType") && l.contains("Switch")) {
            return p;
        }
    }
    panic!("switch at {path} has no uplink");
}
