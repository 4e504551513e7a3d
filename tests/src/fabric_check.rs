//! What an SM really left in an ibsim fabric, read back with
//! infiniband-diags through umad2sim, compared with the SM's own dumps.
//!
//! * [`lfts_read_back`]: `ibroute <switch LID>` of every switch in the
//!   dump must print exactly the dumped LFT.
//! * [`trace`]: `ibtracert <from> <to>` must walk the LFTs from one CA's
//!   LID to another's.
//! * [`discovered_lids`] / [`lids_read_back`]: `ibnetdiscover -p` must see
//!   every port with the LID the SM's `guid2lid` gives it.
//!
//! Every tool runs as an [`Ibsim::client_command`] under a deadline.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sm_core::dump::lfts_parse::{parse_lfts, parse_lfts_file_detailed};

use crate::ibsim::Ibsim;
use crate::lfts::lid_map_for_dump_dir;
use crate::proc::{self, Outcome};
use crate::smcore::Smcore;
use crate::{Error, Result};

/// How long one diagnostic tool may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One finished client program.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// Exited on its own with status 0.
    pub ok: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time.
    pub wall: Duration,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// Run `program args` against `sim` (umad2sim), killed after `timeout`.
pub fn run_client(sim: &Ibsim, program: impl AsRef<OsStr>, args: &[&str], timeout: Duration) -> Result<ClientRun> {
    run_client_on(sim, None, program, args, timeout)
}

/// [`run_client`] attached to the CA `host` (umad2sim's `SIM_HOST`, a
/// node description of the simulated fabric) when given.
pub fn run_client_on(
    sim: &Ibsim,
    host: Option<&str>,
    program: impl AsRef<OsStr>,
    args: &[&str],
    timeout: Duration,
) -> Result<ClientRun> {
    let name = program.as_ref().to_string_lossy().into_owned();
    let mut cmd = sim.client_command(program)?;
    if let Some(h) = host {
        cmd.env("SIM_HOST", h);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| Error::io(format!("starting {name}"), e))?;
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let outcome = proc::wait_with_timeout(&mut child, timeout, Duration::from_secs(2))?;
    if !matches!(outcome, Outcome::Exited(_)) {
        // A killed client keeps its simulator slot until freed.
        sim.disconnect_stale()?;
    }
    Ok(ClientRun {
        ok: outcome.success(),
        outcome,
        wall: start.elapsed(),
        stdout: proc::collect(out),
        stderr: proc::collect(err),
    })
}

/// What `program args` printed (stdout then stderr) on `host` within
/// [`TOOL_TIMEOUT`]; fails the test, with that output, unless it
/// succeeded.
#[track_caller]
pub fn client_output(sim: &Ibsim, host: Option<&str>, program: impl AsRef<OsStr>, args: &[&str]) -> String {
    let name = program.as_ref().to_string_lossy().into_owned();
    let run = run_client_on(sim, host, program, args, TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(run.ok, "{name} {args:?} (host {host:?}) failed ({:?}):\n{text}", run.outcome);
    text
}

/// `smcore --once --engines ENGINES --dump-dir DIR [extra]` as an SM on
/// `sim`. The caller judges `ok` and the output.
pub fn sm_once(
    sim: &Ibsim,
    sm: &Smcore,
    engines: &str,
    dump_dir: &Path,
    extra_args: &[&str],
    timeout: Duration,
) -> Result<ClientRun> {
    let dir = dump_dir
        .to_str()
        .ok_or_else(|| Error::Failed(format!("{} is not UTF-8", dump_dir.display())))?;
    let mut args = vec!["--once", "--engines", engines, "--dump-dir", dir];
    args.extend_from_slice(extra_args);
    run_client(sim, sm.bin(), &args, timeout)
}

/// Compare `ibroute` of every switch in `dump_dir/opensm-lfts.dump` with
/// the dump; returns the number of switches compared. The first difference
/// is the error.
pub fn lfts_read_back(sim: &Ibsim, dump_dir: &Path) -> Result<usize> {
    let path = dump_dir.join("opensm-lfts.dump");
    let ours = parse_lfts_file_detailed(&path).map_err(|e| Error::Failed(e.to_string()))?;
    if ours.is_empty() {
        return Err(Error::Failed(format!("{} holds no switch", path.display())));
    }
    for sw in &ours {
        let lid = sw
            .lid
            .ok_or_else(|| Error::Failed(format!("switch {:#018x} has no LID in {}", sw.guid, path.display())))?;
        let lid_arg = lid.to_string();
        let run = run_client(sim, "ibroute", &[&lid_arg], TOOL_TIMEOUT)?;
        if !run.ok {
            return Err(Error::Failed(format!(
                "ibroute {lid} failed ({:?}):\n{}{}",
                run.outcome, run.stdout, run.stderr
            )));
        }
        let read = parse_lfts(&run.stdout, &format!("ibroute {lid}"))
            .map_err(|e| Error::Failed(format!("{e}\n{}", run.stdout)))?;
        let [(guid, held)] = &read[..] else {
            return Err(Error::Failed(format!(
                "ibroute {lid} printed {} switches:\n{}",
                read.len(),
                run.stdout
            )));
        };
        if *guid != sw.guid {
            return Err(Error::Failed(format!(
                "ibroute {lid} answered for switch {guid:#018x}, the dump has {:#018x} there",
                sw.guid
            )));
        }
        let held: BTreeMap<u16, u8> = held.iter().copied().collect();
        let mut dumped: BTreeMap<u16, u8> = sw.pairs().into_iter().collect();
        // infiniband-diags' ibroute never reads the block that holds the
        // top LID when that LID is a multiple of 64 (it prints LIDs below
        // it only, even asked for that LID alone), so that one entry cannot
        // be read back with it.
        if let Some((&top, _)) = dumped.last_key_value() {
            if top % 64 == 0 && !held.contains_key(&top) {
                dumped.remove(&top);
            }
        }
        if held != dumped {
            let diff: Vec<String> = held
                .keys()
                .chain(dumped.keys())
                .filter(|l| held.get(l) != dumped.get(l))
                .take(5)
                .map(|l| format!("LID {l}: switch holds {:?}, dump says {:?}", held.get(l), dumped.get(l)))
                .collect();
            return Err(Error::Failed(format!(
                "switch LID {lid} ({}) holds another LFT than {}: {}",
                sw.description,
                path.display(),
                diff.join("; ")
            )));
        }
    }
    Ok(ours.len())
}

/// `ibtracert FROM TO`; the trace must end at a CA. Returns its output.
pub fn trace(sim: &Ibsim, from: u16, to: u16) -> Result<String> {
    let run = run_client(sim, "ibtracert", &[&from.to_string(), &to.to_string()], TOOL_TIMEOUT)?;
    if !run.ok || !run.stdout.contains("To ca") {
        return Err(Error::Failed(format!(
            "ibtracert {from} {to} failed ({:?}):\n{}{}",
            run.outcome, run.stdout, run.stderr
        )));
    }
    Ok(run.stdout)
}

/// Port GUID → LID of every port `ibnetdiscover -p` lists (switches by
/// their port 0 GUID).
pub fn discovered_lids(sim: &Ibsim) -> Result<BTreeMap<u64, u16>> {
    let run = run_client(sim, "ibnetdiscover", &["-p"], TOOL_TIMEOUT)?;
    if !run.ok {
        return Err(Error::Failed(format!(
            "ibnetdiscover -p failed ({:?}):\n{}",
            run.outcome, run.stderr
        )));
    }
    parse_ports_report(&run.stdout)
}

/// Parse `ibnetdiscover -p` lines: `CA 22 1 0x0002c90100000f01 4x QDR -
/// SW 10 4 0x0002c90000000003 ( 'host-15' - 'leaf-3' )`, one end or two.
pub fn parse_ports_report(text: &str) -> Result<BTreeMap<u64, u16>> {
    let mut lids = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split(" ( ").next().unwrap_or(line);
        for end in line.split(" - ") {
            let f: Vec<&str> = end.split_whitespace().collect();
            if f.len() < 4 || !matches!(f[0], "CA" | "SW" | "RT") {
                continue;
            }
            let lid: u16 = f[1]
                .parse()
                .map_err(|_| Error::parse("ibnetdiscover -p", i + 1, "bad LID"))?;
            let guid = u64::from_str_radix(f[3].trim_start_matches("0x"), 16)
                .map_err(|_| Error::parse("ibnetdiscover -p", i + 1, "bad GUID"))?;
            if let Some(old) = lids.insert(guid, lid) {
                if old != lid {
                    return Err(Error::parse(
                        "ibnetdiscover -p",
                        i + 1,
                        format!("port {guid:#018x} listed with LIDs {old} and {lid}"),
                    ));
                }
            }
        }
    }
    Ok(lids)
}

/// Every port in the SM's LID file (`guid2lid`, base LIDs) is discovered
/// with that LID, and every discovered port has one. Returns the number
/// of ports compared.
pub fn lids_read_back(sim: &Ibsim, dump_dir: &Path) -> Result<usize> {
    let assigned = lid_map_for_dump_dir(dump_dir)?;
    // Base LID per port GUID.
    let mut base: BTreeMap<u64, u16> = BTreeMap::new();
    for (&lid, &guid) in &assigned.by_lid {
        base.entry(guid).or_insert(lid);
    }
    let seen = discovered_lids(sim)?;
    if seen.is_empty() {
        return Err(Error::Failed("ibnetdiscover -p listed no port".into()));
    }
    for (guid, lid) in &seen {
        match base.get(guid) {
            Some(l) if l == lid => {}
            Some(l) => {
                return Err(Error::Failed(format!(
                    "port {guid:#018x} answers to LID {lid}, the SM assigned {l}"
                )))
            }
            None => {
                return Err(Error::Failed(format!(
                    "port {guid:#018x} (LID {lid}) has no LID in the SM's dump"
                )))
            }
        }
    }
    if let Some((guid, lid)) = base.iter().find(|(g, _)| !seen.contains_key(g)) {
        return Err(Error::Failed(format!(
            "ibnetdiscover did not find port {guid:#018x} (LID {lid})"
        )));
    }
    Ok(seen.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_report() {
        let text = "CA    22  1 0x0002c90100000f01 4x QDR - SW    10  4 0x0002c90000000003 ( 'host-15' - 'leaf-3' )\n\
                    SW     6  5 0x0002c90000000004 4x QDR - SW    10  6 0x0002c90000000003 ( 'spine-0' - 'leaf-3' )\n\
                    SW     6  7 0x0002c90000000004 4x ???                                   ( 'spine-0' )\n";
        let m = parse_ports_report(text).expect("parses");
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(&0x0002c90100000f01), Some(&22));
        assert_eq!(m.get(&0x0002c90000000003), Some(&10));
        assert_eq!(m.get(&0x0002c90000000004), Some(&6));
        let bad = "CA 22 1 0x1 4x QDR - SW 10 4 0x2\nCA 23 1 0x1 4x QDR - SW 10 4 0x2\n";
        assert!(parse_ports_report(bad).is_err());
    }
}
