//! The analysis half of `bench/recovery.sh`: which ports the fault events
//! hit, and what an SM's re-route did, judged from LFTs read back from the
//! switches (`dump_fts` from a host, the `ibroute` format) rather than from
//! the SM's own dumps, so that smcore and OpenSM are judged alike.
//!
//! ```text
//! bench_recovery pick NET
//!     sm_host H-...                 the SM's CA (first CA)
//!     diag_host H-...               the CA the diags run from (last CA)
//!     link "S-..."[p]               a leaf's first switch link (a leaf uplink on a tree)
//!     switch "S-..."                a switch without CAs and with most switch links (a spine),
//!                                   neither end of the link nor the host's switch
//!     host "H-..."[1]               a CA's cable, on neither the SM's nor the diags' switch
//! bench_recovery analyse NET BEFORE AFTER [DOWN...]
//!     changed N switches N busiest N mean F reachable R pairs P unseen U
//! bench_recovery poll LID PORT OUT MS
//!     appends "ms value" to OUT: PortXmitPkts of LID's PORT, read every MS
//! ```
//!
//! `poll` runs on a host of the fabric (under umad2sim: `SIM_HOST`) until
//! it is killed: one PMA PortCounters Get (what `perfquery` sends) every MS
//! milliseconds through one umad agent kept open, so a poll costs the
//! round trip and not a process start (`perfquery` in a shell loop polled
//! every 70–135 ms, coarser than the small fabrics' re-routes). Each line
//! is the time the answer arrived (ms since the epoch) and the counter.
//!
//! DOWN are the ibsim console targets (`"S-..."[p]` or `"S-..."`) that are
//! unlinked when AFTER was read: the fabric the routes are judged on.
//! `changed` counts (switch, LID) entries that differ between BEFORE and
//! AFTER (another port, or present in one only) on the switches read back
//! both times; `busiest` and `mean` are CA-to-CA routes per directed
//! inter-switch link of AFTER ([`smcore_tests::lfts::quality`]);
//! `reachable` of `pairs` CA pairs reach each other through AFTER, over the
//! CAs some entry of AFTER names; `unseen` counts the cabled CA ports that
//! no entry names (no switch routes to them, or the read-back missed them)
//! in the part of the fabric the named ones are in.

use std::collections::BTreeSet;
use std::process::ExitCode;

use sm_topology::Topology;
use smcore_tests::lfts::{parse_lfts_file, quality, Lfts, LidMap};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["pick", net] => load(net).and_then(|t| pick(&t)),
        ["analyse", net, before, after, down @ ..] => analyse(net, before, after, down),
        ["poll", lid, port, out, ms] => poll(lid, port, out, ms),
        _ => Err("usage: bench_recovery pick NET | analyse NET BEFORE AFTER [DOWN...] | poll LID PORT OUT MS".to_string()),
    };
    match out {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_recovery: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Polls PortXmitPkts of `port` at LID `lid` into `out` every `ms` (see
/// the module comment); returns only on an error.
fn poll(lid: &str, port: &str, out: &str, ms: &str) -> Result<String, String> {
    use std::io::Write;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use sm_core::perfmgr::query::request;
    use sm_core::sweep::umad::GsiClient;
    use sm_mad::perf::{attr, Counters, CountersRepr, CLASS_VERSION, DATA_OFFSET, MGMT_CLASS};

    let number = |s: &str, what: &str| -> Result<u64, String> {
        let (digits, radix) = match s.strip_prefix("0x") {
            Some(hex) => (hex, 16),
            None => (s, 10),
        };
        u64::from_str_radix(digits, radix).map_err(|e| format!("{what} {s:?}: {e}"))
    };
    let lid = u16::try_from(number(lid, "LID")?).map_err(|_| format!("LID {lid} out of range"))?;
    let port = u8::try_from(number(port, "port")?).map_err(|_| format!("port {port} out of range"))?;
    let every = Duration::from_millis(number(ms, "interval")?);
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(out).map_err(|e| format!("{out}: {e}"))?;
    let mut client = GsiClient::open(None, None, MGMT_CLASS, CLASS_VERSION, 0).map_err(|e| format!("umad: {e}"))?;
    // PortXmitPkts in the order of CountersRepr::values.
    let xmit_pkts = sm_mad::perf::COUNTER_NAMES.iter().position(|&(n, _)| n == "PortXmitPkts").ok_or("no PortXmitPkts")?;
    for tid in 1u64.. {
        let started = Instant::now();
        let mad = request(attr::PORT_COUNTERS, port, tid, None);
        if let Some(answer) = client.request(lid, &mad, Duration::from_millis(200)).map_err(|e| format!("umad: {e}"))? {
            let value = answer
                .get(DATA_OFFSET..)
                .and_then(|d| Counters::new_checked(d).ok())
                .and_then(|c| CountersRepr::parse(&c).ok())
                .map(|c| c.values[xmit_pkts]);
            if let Some(v) = value {
                let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
                writeln!(file, "{at} {v}").map_err(|e| format!("{out}: {e}"))?;
            }
        }
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
    Ok(String::new())
}

fn load(net: &str) -> Result<Topology, String> {
    sm_topology::parse_file(net).map_err(|e| format!("{net}: {e}"))
}

/// Whether a node is a switch with at least one CA cabled to it.
fn ca_count(t: &Topology, sw: usize) -> usize {
    t.neighbors(sw).iter().filter(|&&n| !t.nodes[n].is_switch()).count()
}

fn switch_links(t: &Topology, sw: usize) -> Vec<u8> {
    let mut ports: Vec<u8> = t
        .links_of(sw)
        .filter_map(|l| {
            let (mine, other) = if l.a.0 == sw { (l.a, l.b) } else { (l.b, l.a) };
            t.nodes[other.0].is_switch().then_some(mine.1)
        })
        .collect();
    ports.sort_unstable();
    ports
}

fn pick(t: &Topology) -> Result<String, String> {
    let cas: Vec<usize> =
        t.end_nodes().filter(|&n| t.peer(n, 1).is_some_and(|(s, _)| t.nodes[s].is_switch())).collect();
    let (Some(&sm), Some(&diag)) = (cas.first(), cas.last()) else {
        return Err("the fabric has no CA cabled to a switch".to_string());
    };
    let leaf_of = |ca: usize| t.peer(ca, 1).map(|(s, _)| s);
    let busy: BTreeSet<usize> = [leaf_of(sm), leaf_of(diag)].into_iter().flatten().collect();
    // The host: the middle CA of those on other switches.
    let others: Vec<usize> = cas.iter().copied().filter(|&c| leaf_of(c).is_some_and(|s| !busy.contains(&s))).collect();
    let host = *others.get(others.len() / 2).ok_or("every CA sits on the SM's or the diags' switch")?;
    let host_leaf = leaf_of(host).ok_or("the picked CA has no switch")?;
    // The link: that CA's switch's first switch link.
    let link_port = *switch_links(t, host_leaf).first().ok_or("the picked CA's switch has no switch link")?;
    // The switch: no CAs and most switch links (a spine), else the
    // middle switch with most switch links away from the SM and diags;
    // neither end of the link nor the host's switch, so that each event
    // changes ports the others left alone (a port changed again and again
    // is a flapping port to an SM that damps flapping).
    let far_end = t.peer(host_leaf, link_port).map(|(s, _)| s);
    let switches: Vec<usize> =
        t.switches().filter(|&s| !busy.contains(&s) && s != host_leaf && Some(s) != far_end).collect();
    let bare: Vec<usize> = switches.iter().copied().filter(|&s| ca_count(t, s) == 0).collect();
    let pool = if bare.is_empty() { &switches } else { &bare };
    let most = pool.iter().map(|&s| switch_links(t, s).len()).max().ok_or("no switch to take down")?;
    let candidates: Vec<usize> = pool.iter().copied().filter(|&s| switch_links(t, s).len() == most).collect();
    let switch = candidates[candidates.len() / 2];
    let name = |n: usize| &t.nodes[n].name;
    Ok(format!(
        "sm_host {}\ndiag_host {}\nlink \"{}\"[{}]\nswitch \"{}\"\nhost \"{}\"[1]\n",
        name(sm),
        name(diag),
        name(host_leaf),
        link_port,
        name(switch),
        name(host)
    ))
}

/// `"name"[port]` or `"name"`, as the ibsim console takes them.
fn parse_target(t: &Topology, spec: &str) -> Result<(usize, Option<u8>), String> {
    let bad = || format!("bad console target `{spec}` (want \"NAME\" or \"NAME\"[PORT])");
    let rest = spec.strip_prefix('"').ok_or_else(bad)?;
    let (name, tail) = rest.split_once('"').ok_or_else(bad)?;
    let node = t.find_node(name).ok_or_else(|| format!("`{spec}`: no node {name} in the fabric"))?;
    let port = match tail {
        "" => None,
        _ => Some(
            tail.strip_prefix('[')
                .and_then(|p| p.strip_suffix(']'))
                .and_then(|p| p.parse::<u8>().ok())
                .ok_or_else(bad)?,
        ),
    };
    Ok((node, port))
}

/// The fabric with the links of every DOWN target removed.
fn degraded(t: &Topology, down: &[&str]) -> Result<Topology, String> {
    let targets = down.iter().map(|d| parse_target(t, d)).collect::<Result<Vec<_>, _>>()?;
    let hit = |end: (usize, u8)| targets.iter().any(|&(n, p)| n == end.0 && p.is_none_or(|p| p == end.1));
    let mut out = t.clone();
    out.links.retain(|l| !hit(l.a) && !hit(l.b));
    Ok(out)
}

/// LIDs as the read-back names them: every entry carries its destination's
/// port GUID (`dump_fts` without `-n`).
fn lids_of(read: &[(u16, u64)]) -> LidMap {
    LidMap { by_lid: read.iter().copied().collect() }
}

fn read_back(path: &str) -> Result<(Lfts, Vec<(u16, u64)>), String> {
    let lfts = parse_lfts_file(path).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let detailed = sm_core::dump::lfts_parse::parse_lfts_detailed(&text, path).map_err(|e| e.to_string())?;
    let named =
        detailed.iter().flat_map(|sw| sw.entries.iter().filter_map(|e| e.port_guid.map(|g| (e.lid, g)))).collect();
    Ok((lfts, named))
}

/// CA ports cabled to a switch in `t` that no read-back entry names, in
/// the part of the fabric the named ports are in (a switch taken down may
/// cut CAs off from the SM: those are gone, not unseen). Their LID is
/// unknown, so the pairs of [`quality`] leave them out.
fn unseen(t: &Topology, named: &[(u16, u64)]) -> usize {
    let seen: BTreeSet<u64> = named.iter().map(|&(_, g)| g).collect();
    let named_node = |n: usize| (1..=t.nodes[n].num_ports).any(|p| seen.contains(&t.nodes[n].port_guid(p)));
    let live: BTreeSet<usize> =
        t.connected_components().into_iter().filter(|c| c.iter().any(|&n| named_node(n))).flatten().collect();
    t.end_nodes()
        .filter(|n| live.contains(n))
        .flat_map(|n| (1..=t.nodes[n].num_ports).map(move |p| (n, p)))
        .filter(|&(n, p)| t.peer(n, p).is_some_and(|(s, _)| t.nodes[s].is_switch()))
        .filter(|&(n, p)| !seen.contains(&t.nodes[n].port_guid(p)))
        .count()
}

/// (switch, LID) entries that differ between two read-backs, over the
/// switches present in both; and how many those are.
fn changed_entries(before: &Lfts, after: &Lfts) -> (usize, usize) {
    let mut changed = 0;
    let mut compared = 0;
    for (guid, b) in &before.switches {
        let Some(a) = after.get(*guid) else { continue };
        compared += 1;
        let top = b.ports.len().max(a.ports.len());
        changed += (0..top).filter(|&lid| b.port(lid as u16) != a.port(lid as u16)).count();
    }
    (changed, compared)
}

fn analyse(net: &str, before: &str, after: &str, down: &[&str]) -> Result<String, String> {
    let t = load(net)?;
    let now = degraded(&t, down)?;
    let (b, _) = read_back(before)?;
    let (a, named) = read_back(after)?;
    let (changed, switches) = changed_entries(&b, &a);
    let q = quality(&now, &a, &lids_of(&named)).map_err(|e| e.to_string())?;
    Ok(format!(
        "changed {changed} switches {switches} busiest {} mean {:.1} reachable {} pairs {} unseen {}\n",
        q.max_routes_per_link,
        q.mean_routes_per_link,
        q.reachable_pairs,
        q.pairs,
        unseen(&now, &named)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcore_tests::lfts::parse_lfts_str;

    const NET: &str = r#"
Switch 4 "S-1"
[1] "H-1"[1]
[3] "S-2"[3]
[4] "S-2"[4]

Switch 4 "S-2"
[1] "H-2"[1]

Hca 1 "H-1"
Hca 1 "H-2"
"#;

    #[test]
    fn targets_remove_a_port_or_a_node() {
        let t = sm_topology::parse_str(NET, "t.net").expect("parses");
        assert_eq!(degraded(&t, &["\"S-1\"[3]"]).expect("ok").links.len(), t.links.len() - 1);
        assert_eq!(degraded(&t, &["\"S-2\""]).expect("ok").links.len(), 1);
        assert!(degraded(&t, &["S-2"]).is_err());
        assert!(degraded(&t, &["\"S-9\""]).is_err());
    }

    #[test]
    fn unseen_counts_cabled_cas_no_entry_names() {
        let t = sm_topology::parse_str(NET, "t.net").expect("parses");
        let h1 = t.nodes[t.find_node("H-1").expect("H-1")].port_guid(1);
        assert_eq!(unseen(&t, &[(1, h1)]), 1);
        // H-2 cabled off, or cut off with its switch: nothing is missing.
        assert_eq!(unseen(&degraded(&t, &["\"H-2\"[1]"]).expect("ok"), &[(1, h1)]), 0);
        let cut = degraded(&t, &["\"S-1\"[3]", "\"S-1\"[4]"]).expect("ok");
        assert_eq!(unseen(&cut, &[(1, h1)]), 0);
    }

    #[test]
    fn changed_counts_other_ports_and_lost_entries() {
        let head = |g: u64| format!("Unicast lids [0x0-0x4] of switch Lid 3 guid 0x{g:016x} (s):\n");
        let before = parse_lfts_str(&format!("{}0x0001 001\n0x0002 003\n0x0004 003\n", head(1)), "b").expect("b");
        let after =
            parse_lfts_str(&format!("{}0x0001 001\n0x0002 004\n{}0x0001 003\n", head(1), head(2)), "a").expect("a");
        // LID 2 moved, LID 4 lost; switch 2 was not read before.
        assert_eq!(changed_entries(&before, &after), (2, 1));
    }
}
