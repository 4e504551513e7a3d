//! What the embedded fabric (`smcore --fabric`) offers beyond the SM's own
//! port: its hosts ask the running SM's SA through the fabric, as a real
//! host's `saquery` would (`smcore ctl saquery`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::control::SaQuery;
use crate::sa::client::{self, PathAnswer};
use sm_sim::SharedFabric;

/// How long a simulated host waits for the SA.
const SA_TIMEOUT: Duration = Duration::from_secs(2);

/// A host of the fabric named by its NodeDescription, node GUID (hex) or
/// one of its LIDs: the node and its first cabled port.
pub fn find_host(fabric: &SharedFabric, name: &str) -> Result<(usize, u8), String> {
    let f = fabric.lock();
    let topo = f.topology();
    let guid = name.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok());
    let lid: Option<u16> = name.parse().ok();
    for (i, port) in topo.cabled_cas() {
        let node = &topo.nodes[i];
        let by_lid = lid.is_some_and(|l| f.port_lid(i, port) == Some(l) && l != 0);
        if node.desc == name || guid == Some(node.node_guid) || by_lid {
            return Ok((i, port));
        }
    }
    Err(format!("no host called {name:?} on the embedded fabric (a NodeDescription, node GUID or LID)"))
}

/// A host port's LID and the SM LID it was given (where it finds the
/// SA), both set by a heavy sweep.
fn addresses(fabric: &SharedFabric, at: (usize, u8)) -> Result<(u16, u16), String> {
    let info = fabric.lock().held_port_info(at.0, at.1).ok_or("no such port")?;
    if info.lid == 0 || info.master_sm_lid == 0 {
        return Err("the host has no LID or no SM LID yet: no heavy sweep has programmed it".into());
    }
    Ok((info.lid, info.master_sm_lid))
}

/// `saquery [--from HOST] path DEST`: a PathRecord Get from HOST (the
/// SM's own host when not given) to DEST, sent to the SA at the SM LID
/// HOST's port was given, through the fabric's LFTs.
pub fn saquery(fabric: SharedFabric) -> SaQuery {
    let tid = AtomicU64::new(u64::from(sm_transport::port::random_u64() as u32));
    Arc::new(move |args: &[&str]| {
        let (from, rest) = match args {
            ["--from", host, rest @ ..] => (find_host(&fabric, host)?, rest),
            rest => (fabric.lock().sm_location(), rest),
        };
        let dest = match rest {
            ["path", dest] => find_host(&fabric, dest)?,
            _ => return Err("usage: saquery [--from HOST] path DEST (hosts by NodeDescription, GUID or LID)".into()),
        };
        let (slid, sa_lid) = addresses(&fabric, from)?;
        let dlid = fabric.lock().port_lid(dest.0, dest.1).unwrap_or(0);
        let mut agent = fabric.agent(from);
        let started = Instant::now();
        let n = tid.fetch_add(1, Ordering::Relaxed) & 0xFFFF_FFFF;
        let answer = client::path_record(&mut agent, sa_lid, slid, dlid, n, SA_TIMEOUT).map_err(|e| e.to_string())?;
        Ok(render(&answer, slid, dlid, sa_lid, started.elapsed()))
    })
}

fn render(answer: &PathAnswer, slid: u16, dlid: u16, sa_lid: u16, took: Duration) -> (String, Value) {
    let head = format!("PathRecord {slid} -> {dlid}, asked of the SA at LID {sa_lid} ({} µs)", took.as_micros());
    match &answer.record {
        None => (
            format!("{head}: status {:#06x}\n", answer.status),
            json!({ "slid": slid, "dlid": dlid, "sa_lid": sa_lid, "status": answer.status }),
        ),
        Some(r) => (
            format!(
                "{head}\n  slid {}  dlid {}  sl {}  mtu {}  rate {}  pkey {:#06x}  packet_life {}  reversible {}\n",
                r.slid, r.dlid, r.sl, r.mtu, r.rate, r.pkey, r.packet_life_time, r.reversible
            ),
            json!({
                "slid": r.slid, "dlid": r.dlid, "sa_lid": sa_lid, "status": 0, "sl": r.sl,
                "mtu": r.mtu, "rate": r.rate, "pkey": r.pkey, "packet_life": r.packet_life_time,
                "reversible": r.reversible,
            }),
        ),
    }
}

/// What `smcore --fabric … --once` shows of the fabric's general MADs
/// after its sweep: a host's PathRecord query answered by the SA through
/// the fabric, and that host port's PMA counters read by the SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfCheck {
    /// The host that asked, by NodeDescription.
    pub host: String,
    /// Its LID, the SM's LID it asked, the SA's answer.
    pub slid: u16,
    /// The SA's LID (the SM's).
    pub sa_lid: u16,
    /// What the SA answered.
    pub answer: PathAnswer,
    /// How long the round trip took.
    pub took: Duration,
    /// PortXmitPkts and PortRcvPkts of the host's port as its PMA answered
    /// (`None`: no answer).
    pub packets: Option<(u64, u64)>,
}

impl std::fmt::Display for SelfCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.answer.record {
            Some(r) => write!(
                f,
                "SA            {}'s PathRecord to the SM (LID {} -> {}: SL {}, MTU code {}, rate code {}) answered through the fabric in {} µs",
                self.host, r.slid, r.dlid, r.sl, r.mtu, r.rate, self.took.as_micros()
            )?,
            None => write!(f, "SA            {}'s PathRecord to the SM answered status {:#06x}", self.host, self.answer.status)?,
        }
        match self.packets {
            Some((xmit, rcv)) => write!(f, "\nPMA           {}: {xmit} packets sent, {rcv} received", self.host),
            None => write!(f, "\nPMA           {}: no answer", self.host),
        }
    }
}

/// Runs the SA for one query from the fabric's last host to the SM, then
/// reads that host port's PMA: what `--once` on the embedded fabric
/// reports after its sweep.
pub fn self_check(fabric: &SharedFabric, outcome: &crate::pipeline::OnceOutcome) -> Result<SelfCheck, String> {
    let sm = fabric.lock().sm_location();
    let host = {
        let f = fabric.lock();
        let topo = f.topology();
        (0..topo.nodes.len())
            .rev()
            .filter(|&i| topo.nodes[i].kind == sm_abi::NodeKind::Ca && i != sm.0)
            .find_map(|i| f.port_lid(i, 1).filter(|&l| l != 0).map(|_| (i, 1u8)))
            .ok_or("no host with a LID")?
    };
    let (slid, sa_lid) = addresses(fabric, host)?;
    let name = fabric.lock().topology().nodes[host.0].desc.clone();
    let groups = Arc::new(std::sync::Mutex::new(crate::mcast::McGroups::new()));
    let sa = crate::sa::spawn(fabric.sender(), fabric.sa_requests(16), groups, crate::sa::SaConfig::default());
    sa.publish(crate::sa::SaDb::build_shared(outcome));
    let started = Instant::now();
    let mut agent = fabric.agent(host);
    let answer = client::path_record(&mut agent, sa_lid, slid, sa_lid, 1, SA_TIMEOUT);
    let took = started.elapsed();
    sa.stop();
    let answer = answer.map_err(|e| e.to_string())?;
    let target = crate::perfmgr::targets_from_fabric(&outcome.sweep.fabric, false)
        .into_iter()
        .find(|t| t.lid == slid && t.port == host.1)
        .ok_or("the host's port is no target of the performance manager")?;
    let mut pma = fabric.agent(sm);
    let (mut tid, mut stats) = (1u64, crate::perfmgr::query::QueryStats::default());
    let samples = crate::perfmgr::query::read_all(&mut pma, &[target], 1, SA_TIMEOUT, &mut tid, &mut stats);
    let name_of = |n: &str| sm_mad::perf::COUNTER_NAMES.iter().position(|(c, _)| *c == n).unwrap_or(0);
    let packets = samples
        .first()
        .and_then(Option::as_ref)
        .map(|s| (s.values[name_of("PortXmitPkts")], s.values[name_of("PortRcvPkts")]));
    Ok(SelfCheck { host: name, slid, sa_lid, answer, took, packets })
}
