//! Extended link speeds (FDR and up) on switches that only report them to
//! an SM that says it knows them (PortInfo AttributeModifier bit 31,
//! SMSupportExtendedSpeeds; OpenSM's fix for NDR fabrics): the sweep reads
//! such ports a second time with the bit and knows their speeds; a port
//! that reports them anyway costs no second read; the Sets carry the bit.

mod common;

use common::{bin_dir, sm_location, workspace};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sim::{SimFabric, SimOptions, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_mad::mad::attr;

fn fabric(on_request: bool) -> SimFabric {
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let mut options = SimOptions::default();
    if on_request {
        options.ext_speeds_on_request = topo.nodes.iter().filter(|n| n.is_switch()).map(|n| n.node_guid).collect();
    }
    SimFabric::with_options(&topo, node, port, options).expect("sim")
}

fn sweep(f: &mut SimFabric) -> OnceOutcome {
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "ftree", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sm_core::pipeline::once(&mut SimPort::new(f), &options, &registry, &sm_core::config::Config::default(), &mut g2l, &mut held)
        .expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

/// Switch ports (port 0 included) whose extended speeds the sweep knows.
fn known_extended(out: &OnceOutcome) -> (usize, usize) {
    let ports: Vec<_> = out.sweep.fabric.nodes.iter().filter(|n| n.is_switch()).flat_map(|n| n.ports.iter()).collect();
    (ports.iter().filter(|p| p.info.is_some_and(|i| i.link_speed_ext_supported != 0)).count(), ports.len())
}

#[test]
fn switches_that_want_the_bit_are_read_again_with_it() {
    let mut plain = fabric(false);
    let before = sweep(&mut plain);
    let mut strict = fabric(true);
    let after = sweep(&mut strict);
    let (known, ports) = known_extended(&after);
    assert_eq!(known, ports, "every switch port's extended speeds are known");
    assert_eq!(known_extended(&before), (ports, ports));
    // One more PortInfo Get per switch port, and nothing else more.
    let gets = |o: &OnceOutcome| o.sweep.discovery_smps.gets(attr::PORT_INFO);
    assert_eq!(gets(&after) - gets(&before), ports as u64);
    assert_eq!(after.sweep.discovery_smps.sent - before.sweep.discovery_smps.sent, ports as u64);
}

#[test]
fn without_the_bit_such_a_switch_hides_its_extended_speeds() {
    let mut strict = fabric(true);
    sweep(&mut strict);
    let sw = (0..strict.node_count()).find(|&n| strict.lft(n).is_some()).expect("a switch");
    let read = |f: &mut SimFabric, modifier: u32| {
        let get = sm_mad::smp::Repr::lid_get(7, attr::PORT_INFO, modifier, 0);
        let mut mad = sm_mad::Mad::zeroed();
        get.emit(&mut mad.smp_mut());
        let lid = f.port_lid(sw, 0).expect("a LID");
        let answer = f.handle_to(lid, &mad.0).expect("an answer").mad;
        let p = sm_mad::smp::Packet::new_checked(&answer[..]).expect("smp");
        sm_mad::PortInfoRepr::parse(&sm_mad::PortInfoPacket::new_checked(p.data()).expect("pi")).expect("parse")
    };
    assert_eq!(read(&mut strict, 1).link_speed_ext_supported, 0);
    assert_ne!(read(&mut strict, 1 | 1 << 31).link_speed_ext_supported, 0);
}
