//! The SM loop with M_Key protection level 2 on the embedded fabric: every
//! SMP of every phase (heavy sweep, light sweeps, peer checks, multicast
//! programming) carries the port's key, so no port counts a violation and
//! nothing but the first sweep is heavy.
//!
//! Needs the daemon's clients to be built with the sweep's `MKeys`
//! (`SmpClient::new(..).with_m_keys(options.once.sweep.m_keys.clone())`).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{bin_dir, sm_location};
use sm_abi::NodeKind;
use sm_core::config::Config;
use sm_core::daemon::{self, DaemonOptions, Signals};
use sm_core::engines::Registry;
use sm_core::sim::{SimFabric, SimOptions, SimPort, TrapDelivery};
use sm_core::sweep::mkey::derive_port_key;
use sm_core::sweep::{Guid2Lid, HeldTables, MKeyConfig, MKeys, SmpPort, SweepOptions, TransportError, TrapMad};
use sm_core::pipeline::OnceOptions;
use sm_mad::PortState;
use sm_topology::gen;

const SECRET: u64 = 0x0123_4567_89ab_cdef;

/// Stops the loop after `left` waits for traps (one per light sweep).
struct Countdown<'a> {
    port: SimPort<'a>,
    signals: &'a Signals,
    left: u32,
}

impl SmpPort for Countdown<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.signals.stop.store(true, Ordering::Relaxed);
        }
        self.port.wait_trap(timeout)
    }
}

#[test]
fn light_sweeps_at_level_2_carry_the_keys_and_trigger_nothing() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    // Violations reach the SM as trap 256 even before routes exist.
    let sim_options = SimOptions { trap_delivery: TrapDelivery::Always, ..SimOptions::default() };
    let mut sim = SimFabric::with_options(&topo, sm_node, sm_port, sim_options).expect("sim");
    let config = MKeyConfig { m_key: SECRET, protect_bits: 2, lease_period: 0, per_port: true };
    let options = DaemonOptions {
        config_file: None,
        once: OnceOptions {
            sweep: SweepOptions { m_keys: MKeys::new(config, None).expect("keys"), ..SweepOptions::default() },
            engines: "minhop",
            dump_dir: None,
        },
        interval: Duration::from_millis(20),
        trap_settle: Duration::from_millis(5),
        trap_limits: Default::default(),
        guid2lid_path: None,
        ucast_cache: false,
        incremental: Some(sm_core::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY),
        standby: None,
        groups: None,
        sa: None,
        status: None,
        force_heavy_sweep: false,
        sweep_on_trap: true,
        honor_guid2lid_file: false,
    };
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let summary = {
        let mut port = Countdown { port: SimPort::new(&mut sim), signals: &signals, left: 12 };
        daemon::run(daemon::DaemonContext { port: &mut port, options: &options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut |_, _, _| {})
    };
    assert!(summary.light_sweeps >= 5, "{summary:?}");
    assert_eq!(summary.heavy_sweeps, 1, "nothing but the first sweep is heavy: {summary:?}");
    assert_eq!(summary.traps, 0, "no trap 256: {summary:?}");
    for (i, n) in topo.nodes.iter().enumerate() {
        let guarded: Vec<u8> = if n.kind == NodeKind::Switch { vec![0] } else { (1..=n.num_ports).collect() };
        for p in guarded {
            if n.kind != NodeKind::Switch && sim.port_state(i, p) != Some(PortState::Active) {
                continue;
            }
            let held = sim.m_key_state(i, p).expect("port");
            assert_eq!(
                (held.key, held.protect_bits, held.violations),
                (derive_port_key(SECRET, n.port_guids[usize::from(p)]), 2, 0),
                "node {i} port {p}"
            );
        }
    }
}
