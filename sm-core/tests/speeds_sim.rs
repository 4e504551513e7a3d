//! Link generations on the embedded fabric (`--sim-caps speed=…,width=…`):
//! ports report the speeds of their generation in the fields IBA gives
//! them (XDR in LinkSpeedExt*2, valid by CapabilityMask2), links train to
//! the best both ends support, and the sweep, portstatus and the route
//! report name each link as infiniband-diags does (`4X NDR`) with its rate.

mod common;

use common::{bin_dir, sm_location};
use sm_core::config::Config;
use sm_core::control::view::SweepView;
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sim::{CapsSpec, SimFabric, SimOptions, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_mad::speed::LaneSpeed;
use sm_topology::{Topology, TopologyBuilder};

/// Two switches; h0 on s0, h1 and h2 on s1.
fn topology() -> Topology {
    let mut b = TopologyBuilder::new();
    let s0 = b.add_switch("s0", 4).expect("switch");
    let s1 = b.add_switch("s1", 4).expect("switch");
    let h0 = b.add_ca("h0", 1).expect("ca");
    let h1 = b.add_ca("h1", 1).expect("ca");
    let h2 = b.add_ca("h2", 1).expect("ca");
    b.link((s0, 1), (s1, 1)).expect("link");
    b.link((h0, 1), (s0, 2)).expect("link");
    b.link((h1, 1), (s1, 2)).expect("link");
    b.link((h2, 1), (s1, 3)).expect("link");
    b.finish().expect("topology")
}

fn guid(topo: &Topology, name: &str) -> u64 {
    topo.nodes.iter().find(|n| n.desc == name).map(|n| n.node_guid).expect("node")
}

/// The fabric with `specs` applied in order (`name:` stands for the node's
/// GUID).
fn fabric(topo: &Topology, specs: &[&str]) -> SimFabric {
    let mut options = SimOptions::default();
    for spec in specs {
        let text = match spec.split_once(':') {
            Some((name, rest)) => format!("{:#x}:{rest}", guid(topo, name)),
            None => spec.to_string(),
        };
        options.apply_caps(&text.parse::<CapsSpec>().expect("spec"));
    }
    let (node, port) = sm_location(topo);
    SimFabric::with_options(topo, node, port, options).expect("sim")
}

fn sweep(f: &mut SimFabric, config: &Config, g2l: &mut Guid2Lid, held: &mut HeldTables) -> OnceOutcome {
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let out = sm_core::pipeline::once(&mut SimPort::new(f), &options, &registry, config, g2l, held).expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

fn once(f: &mut SimFabric) -> OnceOutcome {
    sweep(f, &Config::default(), &mut Guid2Lid::default(), &mut HeldTables::default())
}

/// How the sweep names the link behind `name`'s port `port`.
fn link(out: &OnceOutcome, name: &str, port: u8) -> String {
    let n = out.sweep.fabric.nodes.iter().find(|n| n.description == name).expect("swept node");
    n.link_description(port).expect("port read")
}

#[test]
fn an_xdr_switch_and_an_ndr_hca_train_to_ndr_and_two_xdr_ends_to_xdr() {
    let topo = topology();
    let mut f = fabric(&topo, &["speed=XDR", "h0:speed=NDR", "h2:speed=HDR,width=1x"]);
    let out = once(&mut f);
    assert_eq!(link(&out, "h0", 1), "4X NDR (400 Gb/s)");
    assert_eq!(link(&out, "s0", 2), "4X NDR (400 Gb/s)", "the XDR switch's end of the NDR HCA's link");
    assert_eq!(link(&out, "s0", 1), "4X XDR (800 Gb/s)");
    assert_eq!(link(&out, "s1", 1), "4X XDR (800 Gb/s)");
    assert_eq!(link(&out, "h1", 1), "4X XDR (800 Gb/s)");
    assert_eq!(link(&out, "h2", 1), "1X HDR (50 Gb/s)");

    // XDR is in LinkSpeedExt*2, with the CapabilityMask2 bit that makes
    // them valid; an NDR port leaves them empty.
    let h1 = out.sweep.fabric.nodes.iter().find(|n| n.description == "h1").expect("h1");
    let info = h1.ports[1].info.expect("read");
    assert_eq!((info.link_speed_ext2_supported, info.link_speed_ext2_active), (1, 1));
    assert_ne!(info.capability_mask2 & sm_mad::port_info::capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED, 0);
    let h0 = out.sweep.fabric.nodes.iter().find(|n| n.description == "h0").expect("h0");
    let info = h0.ports[1].info.expect("read");
    assert_eq!((info.link_speed_ext2_supported, info.link_speed_ext_active), (0, sm_mad::port_info::link_speed_ext::NDR));

    // The routing engines see the same lane speeds.
    let snapshot = out.snapshot();
    let speeds: Vec<u8> = snapshot.ports.iter().filter(|p| p.is_linked()).map(|p| p.speed).collect();
    assert_eq!(speeds.iter().filter(|&&s| s == LaneSpeed::Xdr.units()).count(), 4, "{speeds:?}");
    assert_eq!(speeds.iter().filter(|&&s| s == LaneSpeed::Ndr.units()).count(), 2, "{speeds:?}");

    // portstatus: by name and rate, every linked port counted.
    let text = SweepView::of(&out).render_ports();
    assert!(text.contains("links: 1X HDR (50 Gb/s) 2, 4X NDR (400 Gb/s) 2, 4X XDR (800 Gb/s) 4\n"), "{text}");
    assert!(text.contains("speeds: HDR 2, NDR 2, XDR 4\n"), "{text}");
    assert!(text.contains("reduced speed: 0\n") && text.contains("reduced width: 0\n"), "{text}");
    // The route report: each link once.
    let report = out.report.to_string();
    assert!(report.contains("links         1X HDR (50 Gb/s): 1, 4X NDR (400 Gb/s): 1, 4X XDR (800 Gb/s): 2\n"), "{report}");
}

#[test]
fn without_caps_links_run_at_the_topologys_rate_and_an_xdr_cable_reads_as_xdr() {
    let mut b = TopologyBuilder::new();
    let s = b.add_switch("s", 4).expect("switch");
    let h0 = b.add_ca("h0", 1).expect("ca");
    let h1 = b.add_ca("h1", 1).expect("ca");
    b.link((h0, 1), (s, 1)).expect("link");
    b.set_rate(4, LaneSpeed::Xdr.units());
    b.link((h1, 1), (s, 2)).expect("link");
    let topo = b.finish().expect("topology");
    let mut f = fabric(&topo, &[]);
    let out = once(&mut f);
    assert_eq!(link(&out, "h0", 1), "4X QDR (40 Gb/s)");
    assert_eq!(link(&out, "h1", 1), "4X XDR (800 Gb/s)");
    assert_eq!(link(&out, "s", 2), "4X XDR (800 Gb/s)");
}

#[test]
fn xdr_switches_that_want_the_bit_are_still_read_right() {
    let topo = topology();
    let mut options = SimOptions::default();
    options.apply_caps(&"speed=XDR".parse::<CapsSpec>().expect("spec"));
    options.ext_speeds_on_request = topo.nodes.iter().filter(|n| n.is_switch()).map(|n| n.node_guid).collect();
    let (node, port) = sm_location(&topo);
    let mut f = SimFabric::with_options(&topo, node, port, options).expect("sim");
    let out = once(&mut f);
    for (name, port) in [("s0", 1), ("s0", 2), ("s1", 1), ("h0", 1)] {
        assert_eq!(link(&out, name, port), "4X XDR (800 Gb/s)", "{name} port {port}");
    }
}

/// force_link_speed_ext is programmed into LinkSpeedExtEnabled of every
/// port whose two ends support extended speeds; the link then trains to
/// what is left (LinkSpeedExtEnabled2, which the key does not touch,
/// keeps XDR).
#[test]
fn force_link_speed_ext_reaches_the_ports_and_the_links_train_to_it() {
    let topo = topology();
    let mut f = fabric(&topo, &["speed=NDR", "h1:speed=XDR", "s1:speed=XDR"]);
    let config = Config::parse("force_link_speed_ext = 2\n", std::path::Path::new("x.toml")).expect("config");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let first = sweep(&mut f, &config, &mut g2l, &mut held);
    assert_eq!(first.program.link.failed, 0, "{:?}", first.program.link);
    for (i, n) in topo.nodes.iter().enumerate() {
        for p in 1..=n.num_ports {
            if topo.port_links()[i][usize::from(p)].is_none() {
                continue;
            }
            let info = f.held_port_info(i, p).expect("port");
            assert_eq!(info.link_speed_ext_enabled, 2, "{} port {p}", n.desc);
        }
    }
    let again = sweep(&mut f, &config, &mut g2l, &mut held);
    assert_eq!(link(&again, "h0", 1), "4X EDR (100 Gb/s)");
    assert_eq!(link(&again, "s0", 1), "4X EDR (100 Gb/s)");
    assert_eq!(link(&again, "h1", 1), "4X XDR (800 Gb/s)");
}
