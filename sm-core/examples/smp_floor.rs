//! The SMP transport's floor under ibsim: how long N SMPs take when the SM
//! does nothing else with them. Sends N SubnGet(NodeInfo) one hop out of
//! the SM's port (the neighbour answers; nothing to route, nothing to
//! program) through the same transport and window as a sweep, and prints
//! the wall time of the whole process's work, from the first SMP to the
//! last answer.
//!
//! `bench/first-sweep.sh` runs it with the SMP count of smcore's sweep: no
//! SM that sends that many SMPs through umad2sim and ibsim on the same
//! machine can sweep faster, so `floor / OpenSM` bounds the ratio.
//!
//! usage (under umad2sim): `smp_floor N [WINDOW]` (WINDOW: the SMP window
//! ceiling, default the SM's `max_wire_smps`, 64)

use std::process::ExitCode;
use std::time::{Duration, Instant};

use sm_core::config::DEFAULT_MAX_WIRE_SMPS;
use sm_core::sweep::{SmpClient, SmpOp, UmadPort};
use sm_mad::mad::attr;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let count: Option<usize> = args.next().and_then(|a| a.parse().ok());
    let window = args.next().map_or(Some(DEFAULT_MAX_WIRE_SMPS), |a| a.parse().ok());
    let (Some(count), Some(window)) = (count, window) else {
        eprintln!("usage: smp_floor N [WINDOW]");
        return ExitCode::from(2);
    };
    let mut port = match UmadPort::open(None, None, Duration::from_millis(200), window) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("smp_floor: no umad port ({e}); run it under umad2sim with ibsim up");
            return ExitCode::FAILURE;
        }
    };
    let out_port = port.device().port;
    let mut client = SmpClient::new(&mut port, 2);
    // Batches as large as a sweep's biggest rounds.
    let batch: Vec<SmpOp> = (0..count.min(16_384)).map(|_| SmpOp::get(attr::NODE_INFO, 0, &[out_port])).collect();
    let t = Instant::now();
    let mut answered = 0;
    let mut sent = 0;
    while sent < count {
        let n = (count - sent).min(batch.len());
        answered += client.run_many(&batch[..n]).iter().filter(|a| a.is_ok()).count();
        sent += n;
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!("{count} SMPs, {answered} answered, {ms:.0} ms, {:.0} SMPs/s", count as f64 / (ms / 1e3));
    if answered == count {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
