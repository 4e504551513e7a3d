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

const CLASS_SA: u8 = 0x03;
const SA_VERSION: u8 = 2;
const GET: u8 = 0x01;
const SET: u8 = 0x02;
const REPORT: u8 = 0x06;
const REPORT_RESP: u8 = 0x86;
const DELETE: u8 = 0x15;
const ATTR_NODE_RECORD: u16 = 0x0011;
const ATTR_PATH_RECORD: u16 = 0x0035;
const ATTR_MC_MEMBER: u16 = 0x0038;
const ATTR_INFORM_INFO: u16 = 0x0003;
const HDR: usize = 56;

fn sa_mad(method: u8, attr: u16, tid: u64, mask: u64, data: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = CLASS_SA;
    m[2] = SA_VERSION;
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[48..56].copy_from_slice(&mask.to_be_bytes());
    m[HDR..HDR + data.len()].copy_from_slice(data);
    m
}

fn status(m: &[u8]) -> u16 {
    u16::from_be_bytes([m[4], m[5]])
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
        let mut t = [0u8; 108];
        t[..2].copy_from_slice(&self.lid.to_be_bytes());
        let a = self.ask(GET, ATTR_NODE_RECORD, 1, &t)?;
        if status(&a) != 0 {
            return Err(format!(
                "NodeRecord of LID {}: status {:#06x}",
                self.lid,
                status(&a)
            ));
        }
        Ok(u64::from_be_bytes(
            a[HDR + 24..HDR + 32].try_into().map_err(|_| "short")?,
        ))
    }
}

fn path_template(slid: u16, dlid: u16) -> [u8; 64] {
    let mut t = [0u8; 64];
    t[40..42].copy_from_slice(&dlid.to_be_bytes());
    t[42..44].copy_from_slice(&slid.to_be_bytes());
    t
}
const PR_MASK_SLID_DLID: u64 = (1 << 4) | (1 << 5);

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
            GET,
            ATTR_PATH_RECORD,
            PR_MASK_SLID_DLID,
            &path_template(slid, dlid),
        )?;
        let r = &a[HDR..];
        println!(
            "slid={} dlid={} sl={} mtu={} rate={} status={:#06x}",
            u16::from_be_bytes([r[42], r[43]]),
            u16::from_be_bytes([r[40], r[41]]),
            r[53] & 0x0F,
            r[54] & 0x3F,
            r[55] & 0x3F,
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
                GET,
                ATTR_PATH_RECORD,
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
            Some((_, m)) if m[1] == CLASS_SA && m[3] & 0x80 != 0 => {
                let tid = u32::from_be_bytes([m[12], m[13], m[14], m[15]]);
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

const MCR_MGID: u64 = 1 << 0;
const MCR_PORT_GID: u64 = 1 << 1;
const MCR_QKEY: u64 = 1 << 2;
const MCR_TCLASS: u64 = 1 << 6;
const MCR_PKEY: u64 = 1 << 7;
const MCR_SL: u64 = 1 << 12;
const MCR_FLOW: u64 = 1 << 13;
const MCR_JOIN_STATE: u64 = 1 << 16;

fn member(args: &Args, join: bool) -> Result<(), String> {
    let mut c = Client::open(args, 0)?;
    let mgid = parse_gid(args.value("--mgid").ok_or("--mgid GID is required")?)?;
    let join_state = args.num("--join-state", 1)? as u8;
    let guid = c.port_guid()?;
    let port_gid = (0xfe80u128 << 112) | u128::from(guid);
    let mut t = [0u8; 52];
    t[..16].copy_from_slice(&mgid.to_be_bytes());
    t[16..32].copy_from_slice(&port_gid.to_be_bytes());
    t[32..36].copy_from_slice(&0x0000_0B1Bu32.to_be_bytes());
    t[40..42].copy_from_slice(&0xFFFFu16.to_be_bytes());
    t[48] = 0x20 | (join_state & 0x0F);
    let bare = args.0.iter().any(|a| a == "--bare");
    let with_pkey = args.0.iter().any(|a| a == "--with-pkey");
    let (method, mask) = if join && bare {
        (SET, MCR_MGID | MCR_PORT_GID | MCR_JOIN_STATE | if with_pkey { MCR_PKEY } else { 0 })
    } else if join {
        (
            SET,
            MCR_MGID
                | MCR_PORT_GID
                | MCR_QKEY
                | MCR_TCLASS
                | MCR_PKEY
                | MCR_SL
                | MCR_FLOW
                | MCR_JOIN_STATE,
        )
    } else {
        (DELETE, MCR_MGID | MCR_PORT_GID | MCR_JOIN_STATE)
    };
    let a = c.ask(method, ATTR_MC_MEMBER, mask, &t)?;
    let r = &a[HDR..];
    let got = u128::from_be_bytes(r[..16].try_into().map_err(|_| "short")?);
    println!(
        "mgid={} mlid={:#06x} port_gid={} status={:#06x} qkey={:#x} pkey={:#06x} mtu={:#04x} rate={:#04x}",
        Ipv6Addr::from(got),
        u16::from_be_bytes([r[36], r[37]]),
        Ipv6Addr::from(port_gid),
        status(&a),
        u32::from_be_bytes([r[32], r[33], r[34], r[35]]),
        u16::from_be_bytes([r[40], r[41]]),
        r[38],
        r[42],
    );
    if status(&a) != 0 {
        return Err(format!("status {:#06x}", status(&a)));
    }
    Ok(())
}

const ATTR_SERVICE: u16 = 0x0031;
// ServiceRecord components (IBA 15.2.5.14).
const SR_ID: u64 = 1 << 0;
const SR_GID: u64 = 1 << 1;
const SR_PKEY: u64 = 1 << 2;
const SR_LEASE: u64 = 1 << 4;
const SR_KEY: u64 = 1 << 5;
const SR_NAME: u64 = 1 << 6;
const SR_DATA8_0: u64 = 1 << 7;
const SR_DATA16_0: u64 = 1 << 23;
const SR_DATA32_0: u64 = 1 << 31;
const SR_DATA64_1: u64 = 1 << 36;

fn service(args: &Args) -> Result<(), String> {
    let op = args.0.get(1).map(String::as_str).ok_or("set|get|delete")?;
    let method = match op {
        "set" => SET,
        "get" => GET,
        "delete" => DELETE,
        other => return Err(format!("unknown service operation {other}")),
    };
    let mut c = Client::open(args, 0)?;
    let id = args.num("--id", 0)?;
    let name = args.value("--name").ok_or("--name NAME is required")?;
    if name.len() > 63 {
        return Err("--name: at most 63 bytes".into());
    }
    let guid = c.port_guid()?;
    let mut t = [0u8; 176];
    t[..8].copy_from_slice(&id.to_be_bytes());
    t[8..24].copy_from_slice(&((0xfe80u128 << 112) | u128::from(guid)).to_be_bytes());
    t[24..26].copy_from_slice(&0xFFFFu16.to_be_bytes());
    t[28..32].copy_from_slice(&(args.num("--lease", 0xFFFF_FFFF)? as u32).to_be_bytes());
    t[47] = args.num("--key-lsb", 0)? as u8;
    t[48..48 + name.len()].copy_from_slice(name.as_bytes());
    let mut mask = SR_ID | SR_NAME;
    if method != GET {
        mask |= SR_GID | SR_PKEY | SR_LEASE | SR_KEY;
    }
    if let Some(d) = args.value("--data") {
        let d = parse_num(d).ok_or("--data: not a number")?;
        t[112] = d as u8;
        t[128..130].copy_from_slice(&(d as u16).to_be_bytes());
        t[144..148].copy_from_slice(&(d as u32).to_be_bytes());
        t[168..176].copy_from_slice(&d.to_be_bytes());
        mask |= SR_DATA8_0 | SR_DATA16_0 | SR_DATA32_0 | SR_DATA64_1;
    }
    let a = c.ask(method, ATTR_SERVICE, mask, &t)?;
    let r = &a[HDR..];
    let got_name: String = r[48..112].iter().take_while(|&&b| b != 0).map(|&b| char::from(b)).collect();
    println!(
        "status={:#06x} id={:#x} name={} lease={:#x} data8_0={:#x} data64_1={:#x} data={}",
        status(&a),
        u64::from_be_bytes(r[..8].try_into().map_err(|_| "short")?),
        got_name,
        u32::from_be_bytes(r[28..32].try_into().map_err(|_| "short")?),
        r[112],
        u64::from_be_bytes(r[168..176].try_into().map_err(|_| "short")?),
        r[112..176].iter().map(|b| format!("{b:02x}")).collect::<String>(),
    );
    Ok(())
}

fn inform(args: &Args) -> Result<(), String> {
    let mut c = Client::open(args, 1u128 << REPORT)?;
    let trap = args.num("--trap", 64)? as u16;
    let seconds = args.num("--seconds", 10)?;
    let mut t = [0u8; 36];
    t[16..18].copy_from_slice(&0xFFFFu16.to_be_bytes());
    t[22] = 1;
    t[23] = 1;
    t[24..26].copy_from_slice(&0xFFFFu16.to_be_bytes());
    t[26..28].copy_from_slice(&trap.to_be_bytes());
    t[28..31].copy_from_slice(&[0, 0, 1]);
    t[33..36].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
    let a = c.ask(SET, ATTR_INFORM_INFO, 0, &t)?;
    println!("subscribed trap={trap} status={:#06x}", status(&a));
    if status(&a) != 0 {
        return Err(format!("status {:#06x}", status(&a)));
    }
    let end = Instant::now() + Duration::from_secs(seconds);
    while let Some((slid, m)) = c.gsi.receive(end).map_err(|e| e.to_string())? {
        if m[1] != CLASS_SA || m[3] != REPORT {
            continue;
        }
        let n = &m[HDR..];
        let number = u16::from_be_bytes([n[4], n[5]]);
        let gid = u128::from_be_bytes(n[16..32].try_into().map_err(|_| "short")?);
        println!("report trap={number} gid={}", Ipv6Addr::from(gid));
        let mut resp = m.clone();
        resp[3] = REPORT_RESP;
        let _ = c.gsi.send(slid, 1, &resp, 0);
    }
    Ok(())
}

fn handler_bench(args: &Args) -> Result<(), String> {
    use sm_core::sweep::{self, Guid2Lid, HeldTables, OnceOptions, SweepOptions};
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
    let mut out = sweep::once(
        &mut sm_core::sim::SimPort::new(&mut sim),
        &options,
        &registry,
        &config,
        &mut g2l,
        &mut held,
    )
    .map_err(|e| e.to_string())?;
    let db = sm_core::sa::SaDb::build_shared(&mut out);
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
                GET,
                ATTR_PATH_RECORD,
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
