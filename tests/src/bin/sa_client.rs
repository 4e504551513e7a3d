//! `sa_client`: a small SA client on QP1 for tests and figures.
//!
//! ```text
//! sa_client path-load --seconds N [--window W] [--dlids a,b,..] [--sa-lid L]
//!     PathRecord Gets (SLID = this port, DLID cycling over the list) kept
//!     W in flight for N seconds; prints how many were answered per second.
//! sa_client path --slid S --dlid D | --pairs S:D,S:D,..
//!     PathRecord Gets: prints "slid= dlid= sl= mtu= rate= status=" per pair.
//! sa_client join --mgid GID [--join-state N]   (creates the group if new)
//! sa_client join --mgid GID --bare [--with-pkey]
//!     a join that cannot create: MGID, PortGID and JoinState only (with
//!     P_Key 0xffff: what Linux IPoIB sends for its broadcast group)
//! sa_client leave --mgid GID [--join-state N]
//!     MCMemberRecord Set/Delete for this port; prints "mgid mlid status"
//!     and the group's qkey, pkey, mtu, rate (codes with their selector).
//! sa_client service set|get|delete --id ID --name NAME [--lease S]
//!         [--key-lsb K] [--data D]
//!     ServiceRecord for this port's GID. --data D puts D in the first
//!     ServiceData8/16/32 and the second ServiceData64 (and names them in
//!     the component mask). Prints "status id name lease" of the answer.
//! sa_client inform --trap N --seconds S
//!     InformInfo subscription to generic trap N, then prints every Report
//!     that arrives within S seconds as "report trap=N gid=..". (ibsim
//!     hands unsolicited MADs on QP1 only to a client holding the port's
//!     issm device, which also takes the port's SMPs: there Reports reach
//!     no plain client.)
//! ```
//!
//! sa_client handler-bench --fabric FILE.net [--engines E] [--seconds N]
//!     no transport: sweeps FILE on the embedded simulated fabric, routes it,
//!     and calls the SA's handler with PathRecord Gets (every end-port LID
//!     pair in turn) for N seconds on this thread; prints answers per second.
//!
//! Under ibsim, `SIM_HOST=<node>` picks the CA umad2sim attaches to. The
//! SA is found at the port's SM LID unless `--sa-lid` says otherwise.

use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sm_core::sweep::umad::GsiClient;

use sm_mad::mad::{attr as mad_attr, class, class_version, method};
use sm_mad::notice::Packet as Notice;
use sm_mad::sa::{self, attr};
use sm_mad::{sa_inform_info as ii, sa_mc_member_record as mcr, sa_node_record as nr, sa_path_record as pr};
use sm_mad::sa_service_record as sr;

const CLASS_SA: u8 = class::SUBN_ADM;
const SA_VERSION: u8 = class_version::SUBN_ADM;

fn sa_mad(method: u8, attribute_id: u16, transaction_id: u64, component_mask: u64, data: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    let mut p = sa::Packet::new_unchecked(&mut m[..]);
    sa::Repr { method, transaction_id, attribute_id, component_mask, ..Default::default() }.emit(&mut p);
    p.data_mut()[..data.len()].copy_from_slice(data);
    m
}

/// An SA answer as a view (the transport hands over whole MADs).
fn answer(m: &[u8]) -> Result<sa::Packet<&[u8]>, String> {
    sa::Packet::new_checked(m).map_err(|e| format!("SA answer: {e}"))
}

fn status(m: &[u8]) -> u16 {
    answer(m).map_or(u16::MAX, |p| p.status())
}

/// The record an answer carries.
fn record<'a, P>(m: &'a [u8], view: impl FnOnce(&'a [u8]) -> sm_mad::Result<P>) -> Result<P, String> {
    let data = &m[sa::HEADER_LEN.min(m.len())..];
    view(data).map_err(|e| format!("record in the SA answer: {e}"))
}

struct Args(Vec<String>);

impl Args {
    fn value(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.0.get(i + 1))
            .map(String::as_str)
    }
    fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.value(name) {
            None => Ok(default),
            Some(v) => parse_num(v).ok_or_else(|| format!("{name}: not a number: {v}")),
        }
    }
}

fn parse_num(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn parse_gid(v: &str) -> Result<u128, String> {
    v.parse::<Ipv6Addr>()
        .map(u128::from)
        .map_err(|e| format!("GID {v}: {e}"))
}

struct Client {
    gsi: GsiClient,
    lid: u16,
    sa_lid: u16,
    tid: u64,
}

impl Client {
    fn open(args: &Args, methods: u128) -> Result<Self, String> {
        let gsi = GsiClient::open(None, None, CLASS_SA, SA_VERSION, methods)
            .map_err(|e| e.to_string())?;
        let (lid, sm_lid) = gsi.lids();
        let lid = lid
            .filter(|&l| l != 0)
            .ok_or("this port has no LID (is an SM running?)")?;
        let sa_lid = match args.value("--sa-lid") {
            Some(v) => parse_num(v).ok_or("--sa-lid: not a number")? as u16,
            None => sm_lid
                .filter(|&l| l != 0)
                .ok_or("this port knows no SM LID")?,
        };
        Ok(Self {
            gsi,
            lid,
            sa_lid,
            tid: u64::from(std::process::id()) << 20,
        })
    }

    fn next_tid(&mut self) -> u64 {
        self.tid += 1;
        self.tid & 0xFFFF_FFFF
    }

    fn ask(&mut self, method: u8, attr: u16, mask: u64, data: &[u8]) -> Result<Vec<u8>, String> {
        let tid = self.next_tid();
        let mad = sa_mad(method, attr, tid, mask, data);
        self.gsi
            .request(self.sa_lid, &mad, Duration::from_secs(2))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no answer from the SA at LID {}", self.sa_lid))
    }

    /// This port's GUID, from its NodeRecord.
    fn port_guid(&mut self) -> Result<u64, String> {
        let mut t = [0u8; nr::LEN];
        nr::Packet::new_unchecked(&mut t[..]).set_lid(self.lid);
        let a = self.ask(method::GET, attr::NODE_RECORD, nr::component::LID, &t)?;
        if status(&a) != 0 {
            return Err(format!(
                "NodeRecord of LID {}: status {:#06x}",
                self.lid,
                status(&a)
            ));
        }
        let r = record(&a, nr::Packet::new_checked)?;
        Ok(nr::Repr::parse(&r).map_err(|e| e.to_string())?.node_info.port_guid)
    }
}

fn path_template(slid: u16, dlid: u16) -> [u8; pr::LEN] {
    let mut t = [0u8; pr::LEN];
    pr::Repr { slid, dlid, ..Default::default() }.emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    t
}
const PR_MASK_SLID_DLID: u64 = pr::component::SLID | pr::component::DLID;

fn path(args: &Args) -> Result<(), String> {
    let mut c = Client::open(args, 0)?;
    let pairs: Vec<(u16, u16)> = match args.value("--pairs") {
        Some(list) => list
            .split(',')
            .map(|p| {
                let (a, b) = p
                    .split_once(':')
                    .ok_or_else(|| format!("--pairs: {p} is not SLID:DLID"))?;
                Ok((
                    parse_num(a).ok_or("--pairs: bad SLID")? as u16,
                    parse_num(b).ok_or("--pairs: bad DLID")? as u16,
                ))
            })
            .collect::<Result<_, String>>()?,
        None => vec![(
            args.num("--slid", u64::from(c.lid))? as u16,
            args.num("--dlid", 0)? as u16,
        )],
    };
    for (slid, dlid) in pairs {
        let a = c.ask(
            method::GET,
            attr::PATH_RECORD,
            PR_MASK_SLID_DLID,
            &path_template(slid, dlid),
        )?;
        let r = record(&a, pr::Packet::new_checked)?;
        println!(
            "slid={} dlid={} sl={} mtu={} rate={} status={:#06x}",
            r.slid(),
            r.dlid(),
            r.sl(),
            r.mtu(),
            r.rate(),
            status(&a)
        );
    }
    Ok(())
}

fn path_load(args: &Args) -> Result<(), String> {
    let mut c = Client::open(args, 0)?;
    let seconds = args.num("--seconds", 5)?;
    let window = args.num("--window", 16)?.clamp(1, 256) as usize;
    let dlids: Vec<u16> = match args.value("--dlids") {
        Some(list) => list
            .split(',')
            .filter_map(parse_num)
            .map(|v| v as u16)
            .collect(),
        None => vec![c.lid],
    };
    if dlids.is_empty() {
        return Err("--dlids: no LID".into());
    }
    let (mut sent, mut ok, mut no_records, mut other, mut lost) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut inflight: HashMap<u32, Instant> = HashMap::new();
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut k = 0usize;
    while Instant::now() < end || !inflight.is_empty() {
        while Instant::now() < end && inflight.len() < window {
            let tid = c.next_tid();
            let mad = sa_mad(
                method::GET,
                attr::PATH_RECORD,
                tid,
                PR_MASK_SLID_DLID,
                &path_template(c.lid, dlids[k % dlids.len()]),
            );
            k += 1;
            c.gsi
                .send(c.sa_lid, 1, &mad, 1000)
                .map_err(|e| e.to_string())?;
            inflight.insert(tid as u32, Instant::now());
            sent += 1;
        }
        let deadline = Instant::now() + Duration::from_millis(200);
        match c.gsi.receive(deadline).map_err(|e| e.to_string())? {
            Some((_, m)) if answer(&m).is_ok_and(|p| p.mgmt_class() == CLASS_SA && p.header().is_response()) => {
                // The kernel owns the upper half of the TID.
                let tid = answer(&m).map_or(0, |p| p.transaction_id() as u32);
                if inflight.remove(&tid).is_some() {
                    match status(&m) {
                        0 => ok += 1,
                        0x0300 => no_records += 1,
                        _ => other += 1,
                    }
                }
            }
            Some(_) => {}
            None => {
                // Give up on requests older than 2 s (lost on the way).
                let before = inflight.len();
                inflight.retain(|_, t| t.elapsed() < Duration::from_secs(2));
                lost += (before - inflight.len()) as u64;
                if Instant::now() > end + Duration::from_secs(3) {
                    lost += inflight.len() as u64;
                    break;
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64().max(seconds as f64);
    let answered = ok + no_records + other;
    println!(
        "path-load sent={sent} answered={answered} ok={ok} no_records={no_records} other={other} lost={lost} \
         seconds={secs:.2} window={window} per_second={:.1}",
        answered as f64 / secs
    );
    Ok(())
}

fn member(args: &Args, join: bool) -> Result<(), String> {
    let mut c = Client::open(args, 0)?;
    let mgid = parse_gid(args.value("--mgid").ok_or("--mgid GID is required")?)?;
    let join_state = args.num("--join-state", 1)? as u8;
    let guid = c.port_guid()?;
    let port_gid = (0xfe80u128 << 112) | u128::from(guid);
    let mut t = [0u8; mcr::LEN];
    mcr::Repr {
        mgid,
        port_gid,
        qkey: 0x0000_0B1B,
        pkey: 0xFFFF,
        // Link-local.
        scope: 2,
        join_state: join_state & 0x0F,
        ..Default::default()
    }
    .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
    use mcr::component::{FLOW_LABEL, JOIN_STATE, MGID, PKEY, PORT_GID, QKEY, SL, TCLASS};
    let bare = args.0.iter().any(|a| a == "--bare");
    let with_pkey = args.0.iter().any(|a| a == "--with-pkey");
    let (method, mask) = if join && bare {
        (method::SET, MGID | PORT_GID | JOIN_STATE | if with_pkey { PKEY } else { 0 })
    } else if join {
        (method::SET, MGID | PORT_GID | QKEY | TCLASS | PKEY | SL | FLOW_LABEL | JOIN_STATE)
    } else {
        (method::DELETE, MGID | PORT_GID | JOIN_STATE)
    };
    let a = c.ask(method, attr::MC_MEMBER_RECORD, mask, &t)?;
    let r = record(&a, mcr::Packet::new_checked)?;
    // MTU and rate are printed as the record holds them: the code with its
    // selector in the top two bits.
    println!(
        "mgid={} mlid={:#06x} port_gid={} status={:#06x} qkey={:#x} pkey={:#06x} mtu={:#04x} rate={:#04x}",
        Ipv6Addr::from(r.mgid()),
        r.mlid(),
        Ipv6Addr::from(port_gid),
        status(&a),
        r.qkey(),
        r.pkey(),
        r.mtu_selector() << 6 | r.mtu(),
        r.rate_selector() << 6 | r.rate(),
    );
    if status(&a) != 0 {
        return Err(format!("status {:#06x}", status(&a)));
    }
    Ok(())
}

fn service(args: &Args) -> Result<(), String> {
    let op = args.0.get(1).map(String::as_str).ok_or("set|get|delete")?;
    let method = match op {
        "set" => method::SET,
        "get" => method::GET,
        "delete" => method::DELETE,
        other => return Err(format!("unknown service operation {other}")),
    };
    let mut c = Client::open(args, 0)?;
    let id = args.num("--id", 0)?;
    let name = args.value("--name").ok_or("--name NAME is required")?;
    if name.len() > 63 {
        return Err("--name: at most 63 bytes".into());
    }
    let guid = c.port_guid()?;
    use sr::component::{DATA16_0, DATA32_0, DATA64_1, DATA8_0, GID, ID, KEY, LEASE, NAME, PKEY};
    let mut want = sr::Repr {
        service_id: id,
        service_gid: (0xfe80u128 << 112) | u128::from(guid),
        service_pkey: 0xFFFF,
        service_lease: args.num("--lease", u64::from(sr::INFINITE_LEASE))? as u32,
        service_key: u128::from(args.num("--key-lsb", 0)? as u8),
        ..Default::default()
    };
    want.service_name[..name.len()].copy_from_slice(name.as_bytes());
    let mut mask = ID | NAME;
    if method != method::GET {
        mask |= GID | PKEY | LEASE | KEY;
    }
    if let Some(d) = args.value("--data") {
        let d = parse_num(d).ok_or("--data: not a number")?;
        // ServiceData8[0], ServiceData16[0], ServiceData32[0] and
        // ServiceData64[1], as offsets into the 64-byte ServiceData.
        want.service_data[0] = d as u8;
        want.service_data[16..18].copy_from_slice(&(d as u16).to_be_bytes());
        want.service_data[32..36].copy_from_slice(&(d as u32).to_be_bytes());
        want.service_data[56..64].copy_from_slice(&d.to_be_bytes());
        mask |= DATA8_0 | DATA16_0 | DATA32_0 | DATA64_1;
    }
    let mut t = [0u8; sr::LEN];
    want.emit(&mut sr::Packet::new_unchecked(&mut t[..]));
    let a = c.ask(method, attr::SERVICE_RECORD, mask, &t)?;
    let r = sr::Repr::parse(&record(&a, sr::Packet::new_checked)?).map_err(|e| e.to_string())?;
    let got_name: String = r.service_name.iter().take_while(|&&b| b != 0).map(|&b| char::from(b)).collect();
    let data = &r.service_data;
    println!(
        "status={:#06x} id={:#x} name={} lease={:#x} data8_0={:#x} data64_1={:#x} data={}",
        status(&a),
        r.service_id,
        got_name,
        r.service_lease,
        data[0],
        u64::from_be_bytes(data[56..64].try_into().map_err(|_| "short")?),
        data.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    );
    Ok(())
}

fn inform(args: &Args) -> Result<(), String> {
    let mut c = Client::open(args, 1u128 << method::REPORT)?;
    let trap = args.num("--trap", 64)? as u16;
    let seconds = args.num("--seconds", 10)?;
    let mut t = [0u8; ii::LEN];
    ii::Repr {
        // Every LID, any trap type, any producer; Reports to QP1.
        lid_range_begin: 0xFFFF,
        is_generic: 1,
        subscribe: 1,
        trap_type: 0xFFFF,
        trap_number: trap,
        qpn: 1,
        producer_type: 0xFF_FFFF,
        ..Default::default()
    }
    .emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    let a = c.ask(method::SET, attr::INFORM_INFO, 0, &t)?;
    println!("subscribed trap={trap} status={:#06x}", status(&a));
    if status(&a) != 0 {
        return Err(format!("status {:#06x}", status(&a)));
    }
    let end = Instant::now() + Duration::from_secs(seconds);
    while let Some((slid, m)) = c.gsi.receive(end).map_err(|e| e.to_string())? {
        let Ok(p) = answer(&m) else { continue };
        if p.mgmt_class() != CLASS_SA || p.method() != method::REPORT || p.attribute_id() != mad_attr::NOTICE {
            continue;
        }
        let Ok(n) = Notice::new_checked(p.data()) else { continue };
        // Traps 64/65 (GID in/out of service): the GID after 6 reserved
        // bytes of the details.
        let gid = n.data_details().get(6..22).and_then(|g| g.try_into().ok()).map_or(0, u128::from_be_bytes);
        println!("report trap={} gid={}", n.trap_number_or_device_id(), Ipv6Addr::from(gid));
        let mut resp = m.clone();
        sa::Packet::new_unchecked(&mut resp[..]).set_method(method::REPORT_RESP);
        let _ = c.gsi.send(slid, 1, &resp, 0);
    }
    Ok(())
}

fn handler_bench(args: &Args) -> Result<(), String> {
    use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
    use sm_core::pipeline::OnceOptions;
    let file = args.value("--fabric").ok_or("--fabric FILE is required")?;
    let engines = args.value("--engines").unwrap_or("minhop");
    let seconds = args.num("--seconds", 5)?;
    let topo = sm_topology::parse_file(file).map_err(|e| e.to_string())?;
    let links = topo.port_links();
    let (node, port) = topo
        .nodes
        .iter()
        .enumerate()
        .find_map(|(i, n)| {
            (!n.is_switch())
                .then(|| {
                    (1..=n.num_ports)
                        .find(|&p| links[i].get(usize::from(p)).is_some_and(Option::is_some))
                })
                .flatten()
                .map(|p| (i, p))
        })
        .ok_or("no CA with a cable")?;
    let mut sim =
        sm_core::sim::SimFabric::from_topology(&topo, node, port).map_err(|e| e.to_string())?;
    let exe_dir = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .parent()
        .map(std::path::Path::to_path_buf)
        .ok_or("no exe dir")?;
    let registry = sm_core::engines::Registry::scan(&[exe_dir]);
    let options = OnceOptions {
        sweep: SweepOptions::default(),
        engines,
        dump_dir: None,
    };
    let config = sm_core::config::Config::default();
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sm_core::pipeline::once(
        &mut sm_core::sim::SimPort::new(&mut sim),
        &options,
        &registry,
        &config,
        &mut g2l,
        &mut held,
    )
    .map_err(|e| e.to_string())?;
    let db = sm_core::sa::SaDb::build_shared(&out);
    let lids: Vec<u16> = db.end_ports().iter().map(|e| e.lid).collect();
    let groups = std::sync::Arc::new(std::sync::Mutex::new(sm_core::mcast::McGroups::new()));
    let sa = sm_core::sa::Sa::new(groups, Default::default());
    sa.publish(db);
    let (mut n, mut ok, mut k) = (0u64, 0u64, 0usize);
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    while Instant::now() < end {
        for _ in 0..1000 {
            let (s, d) = (lids[k % lids.len()], lids[(k / lids.len()) % lids.len()]);
            k += 1;
            let mad = sa_mad(
                method::GET,
                attr::PATH_RECORD,
                k as u64,
                PR_MASK_SLID_DLID,
                &path_template(s, d),
            );
            if let Some(reply) = sa.handle(s, 1, &mad).reply {
                n += 1;
                ok += u64::from(status(&reply) == 0);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "handler-bench fabric={file} end_ports={} answered={n} ok={ok} seconds={secs:.2} per_second={:.0}",
        lids.len(),
        n as f64 / secs
    );
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first().cloned() else {
        eprintln!(
            "usage: sa_client path-load|path|join|leave|inform|service [options] (see the source's header)"
        );
        return ExitCode::from(2);
    };
    let args = Args(argv);
    let result = match cmd.as_str() {
        "path-load" => path_load(&args),
        "path" => path(&args),
        "join" => member(&args, true),
        "leave" => member(&args, false),
        "inform" => inform(&args),
        "service" => service(&args),
        "handler-bench" => handler_bench(&args),
        other => Err(format!("unknown command {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sa_client {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}
