//! `smcore doctor`: the checks a site runs before it starts the SM on a
//! host — which umad devices there are and on which link layer, the port
//! the SM would bind and why, whether it may open it and register its
//! agents, whether another SM already runs the subnet, the configuration
//! it would read, and the engines it would load. Nothing here writes to
//! the fabric: the only MAD sent is one SubnGet(SMInfo) to the SM the port
//! already knows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::engines::Registry;
use crate::sweep::umad::{self, LinkLayer, UmadDevice};

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Fine.
    Ok,
    /// The SM starts, but look at this.
    Warn,
    /// The SM cannot start (or would bind the wrong thing) until this is
    /// fixed.
    Fail,
}

/// One check: what, how it ended, what was found, and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Its name.
    pub name: &'static str,
    /// How it ended.
    pub verdict: Verdict,
    /// What was found.
    pub detail: String,
    /// The next step, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl Check {
    fn new(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Self {
        Self { name, verdict, detail: detail.into(), next: None }
    }

    fn next(mut self, step: impl Into<String>) -> Self {
        self.next = Some(step.into());
        self
    }
}

/// What the doctor is asked about.
#[derive(Debug, Clone, Default)]
pub struct Question {
    /// `--device`/`--port`, as the SM would be started.
    pub ca: Option<String>,
    /// The port number.
    pub port: Option<u8>,
    /// `--guid`.
    pub guid: Option<u64>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// Engine directories from the command line.
    pub engine_dirs: Vec<PathBuf>,
    /// `SMCORE_ENGINE_PATH`.
    pub engine_path: Option<String>,
    /// The engine list (`--engines`), if given.
    pub engines: Option<String>,
}

/// Every check, in the order a site would fix them.
pub fn examine(q: &Question) -> Vec<Check> {
    let mut checks = Vec::new();
    let root = umad::sysfs_root();
    let devices = umad::devices_in(&root);
    checks.push(devices_check(&devices, &root));
    let chosen = port_check(&devices, q, &root, &mut checks);
    if let Some(device) = &chosen {
        if access_check(device, &mut checks) {
            agent_check(device, &root, &mut checks);
        }
    }
    let config = config_check(q, &mut checks);
    engines_check(q, config.as_ref(), &mut checks);
    checks.push(sandbox_check(config.as_ref()));
    checks
}

fn sandbox_check(config: Option<&Config>) -> Check {
    use crate::engines::host::Mode;
    if config.is_some_and(|c| c.route_settings().isolation.mode == Mode::Inline) {
        return Check::new("engine sandbox", Verdict::Warn, "engine_isolation = \"inline\": engines run in the SM's process, unconfined")
            .next("keep \"inline\" for trusted builds only; the default \"process\" confines them");
    }
    match crate::engines::sandbox::support() {
        (Some(abi), true) => Check::new("engine sandbox", Verdict::Ok, format!("engines run in a process of their own: Landlock ABI {abi}, seccomp")),
        (abi, seccomp) => {
            let missing: Vec<&str> = [abi.is_none().then_some("Landlock"), (!seccomp).then_some("seccomp")].into_iter().flatten().collect();
            Check::new("engine sandbox", Verdict::Warn, format!("engines run in a process of their own, but this kernel has no {}", missing.join(" and ")))
                .next("a kernel with Landlock (5.13+, in CONFIG_LSM) and seccomp filters confines what an engine may write and call")
        }
    }
}

/// Whether the SM can start: no check failed.
pub fn can_start(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.verdict != Verdict::Fail)
}

/// The checks as a person reads them.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let tag = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        out.push_str(&format!("{tag}  {:<14} {}\n", c.name, c.detail));
        if let Some(next) = &c.next {
            out.push_str(&format!("      {:<14} next: {next}\n", ""));
        }
    }
    out.push_str(if can_start(checks) { "the SM can start\n" } else { "the SM cannot start: fix what FAILed\n" });
    out
}

fn describe(d: &UmadDevice) -> String {
    let state = match d.state {
        1 => "Down",
        2 => "Init",
        3 => "Armed",
        4 => "Active",
        _ => "state unknown",
    };
    format!("umad{} {} port {} ({}, {state}, GUID {:#018x})", d.index, d.ca, d.port, d.link_layer, d.port_guid)
}

fn devices_check(devices: &[UmadDevice], root: &str) -> Check {
    if devices.is_empty() {
        return Check::new(
            "devices",
            Verdict::Fail,
            format!("no InfiniBand device: no umad device under {root}/class/infiniband_mad"),
        )
        .next("install the HCA and its driver, then load ib_umad (`modprobe ib_umad`)");
    }
    let list: Vec<String> = devices.iter().map(describe).collect();
    let ib = devices.iter().filter(|d| d.link_layer == LinkLayer::InfiniBand).count();
    let verdict = if ib == 0 { Verdict::Fail } else { Verdict::Ok };
    let check = Check::new("devices", verdict, list.join("; "));
    if ib == 0 {
        check.next("every RDMA port here is on another link layer (RoCE): switch the HCA's port to InfiniBand mode, or run the SM on a host with an InfiniBand port")
    } else {
        check
    }
}

fn port_check(devices: &[UmadDevice], q: &Question, root: &str, checks: &mut Vec<Check>) -> Option<UmadDevice> {
    if devices.is_empty() {
        return None;
    }
    let chosen = match q.guid {
        Some(guid) => umad::find_guid(devices, guid).ok_or_else(|| format!("no local port has GUID {guid:#018x}")),
        None => umad::choose(devices, q.ca.as_deref(), q.port, root).map_err(|e| e.to_string()),
    };
    match chosen {
        Ok(d) if d.link_layer != LinkLayer::InfiniBand => {
            checks.push(
                Check::new("port", Verdict::Fail, format!("{} is not an InfiniBand port", describe(&d)))
                    .next("name an InfiniBand port (--device/--port or --guid)"),
            );
            None
        }
        Ok(d) => {
            let why = if q.guid.is_some() || q.ca.is_some() || q.port.is_some() {
                "the port named"
            } else if d.state == 4 {
                "the first Active InfiniBand port"
            } else if d.state >= 2 {
                "no InfiniBand port is Active; the first with a link"
            } else {
                "no InfiniBand port has a link; the first"
            };
            let verdict = if d.state >= 2 { Verdict::Ok } else { Verdict::Warn };
            let check = Check::new("port", verdict, format!("{}: {why}", describe(&d)));
            checks.push(if d.state >= 2 { check } else { check.next("plug the port's cable in: a port without a link reaches no fabric") });
            let gmp = match umad::gsi_pair(devices, &d) {
                Some(g) => format!(
                    "SMPs on {}, SA and PMA on {} (an SMI/GSI pair of port GUID {:#018x}: its GSI device says IsSMDisabled)",
                    describe(&d),
                    describe(&g),
                    d.port_guid
                ),
                None => "SMPs, SA and PMA on the same port (no SMI/GSI pair)".to_string(),
            };
            checks.push(Check::new("gmp port", Verdict::Ok, gmp));
            Some(d)
        }
        Err(e) => {
            checks.push(Check::new("port", Verdict::Fail, e).next("see `smcore doctor` devices above; name a port with --device/--port or --guid"));
            None
        }
    }
}

/// Whether this user may open the umad device of `d` (opened and closed:
/// that touches nothing on the fabric) and its issm device (only looked
/// at: opening it makes the port announce IsSM).
fn access_check(d: &UmadDevice, checks: &mut Vec<Check>) -> bool {
    use nix::unistd::{access, AccessFlags};
    let dev_root = std::env::var("SMCORE_DEV_ROOT").unwrap_or_else(|_| "/dev".to_string());
    let umad = format!("{dev_root}/infiniband/umad{}", d.index);
    let issm = format!("{dev_root}/infiniband/issm{}", d.index);
    // libc's open and close, as the umad transport does: under umad2sim
    // the descriptor is the simulator's, not the kernel's.
    let opened = std::ffi::CString::new(umad.clone()).map_err(|_| nix::errno::Errno::EINVAL).and_then(|path| {
        // SAFETY: a valid C string; the descriptor is closed right away.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(nix::errno::Errno::last());
        }
        // SAFETY: `fd` was just opened here and is not used again.
        unsafe { libc::close(fd) };
        Ok(())
    });
    match opened {
        Ok(()) => {}
        Err(e) => {
            checks.push(
                Check::new("access", Verdict::Fail, format!("{umad}: {}", e.desc()))
                    .next("run the SM as root, or give its user read-write access to the device files (a udev rule)"),
            );
            return false;
        }
    }
    match access(Path::new(&issm), AccessFlags::R_OK | AccessFlags::W_OK) {
        Ok(()) => checks.push(Check::new("access", Verdict::Ok, format!("{umad} and {issm} read-write"))),
        Err(e) => checks.push(
            Check::new("access", Verdict::Warn, format!("{umad} read-write; {issm}: {}", e.desc()))
                .next("without issm the port does not advertise IsSM: other SMs will not see this one (give the SM's user read-write access to it)"),
        ),
    }
    true
}

/// Registers the SM's agents on `d` (and lets them go), then asks the SM
/// the port knows for its SMInfo.
fn agent_check(d: &UmadDevice, root: &str, checks: &mut Vec<Check>) {
    let mut port = match umad::UmadPort::open(Some(&d.ca), Some(d.port), Duration::from_millis(200), 1) {
        Ok(p) => {
            checks.push(Check::new("agents", Verdict::Ok, "the kernel registered the SM's agents (SMI directed and LID-routed, SA)"));
            p
        }
        Err(e) => {
            checks.push(
                Check::new("agents", Verdict::Fail, format!("the kernel refused the SM's agents: {e}"))
                    .next("another SM on this port holds them (stop it: OpenSM, another smcore), or the kernel's ib_umad refuses QP0 agents to this user"),
            );
            return;
        }
    };
    let (lid, sm_lid) = umad::port_lids_in(root, d);
    match (lid, sm_lid) {
        (_, None | Some(0)) => checks.push(Check::new("other SM", Verdict::Ok, "no SM has configured this port yet")),
        (Some(own), Some(sm)) if own == sm => {
            checks.push(Check::new("other SM", Verdict::Ok, format!("this port (LID {own}) is its own SM's: an SM ran here before")))
        }
        (_, Some(sm)) => checks.push(sm_info_check(&mut port, sm)),
    }
}

fn sm_info_check(port: &mut umad::UmadPort, sm_lid: u16) -> Check {
    use crate::sweep::SmpPort;
    let request = sm_mad::smp::Repr::lid_get(crate::sweep::transport::random_u64() & 0xFFFF_FFFF, sm_mad::mad::attr::SM_INFO, 0, 0);
    let mut mad = sm_mad::Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    let answer = port.send_to(sm_lid, &mad.0).ok().flatten();
    let info = answer.as_deref().and_then(|a| {
        let p = sm_mad::smp::Packet::new_checked(a).ok()?;
        (p.smp_status() == 0).then_some(())?;
        sm_mad::SmInfoRepr::parse(&sm_mad::SmInfoPacket::new_checked(&p.data()[..sm_mad::sm_info::LEN]).ok()?).ok()
    });
    match info {
        Some(i) => Check::new(
            "other SM",
            Verdict::Warn,
            format!("an SM runs this subnet: GUID {:#018x}, priority {}, state {:?}, at LID {sm_lid}", i.guid, i.priority, i.state),
        )
        .next("smcore stands by behind a master of higher priority (or of equal priority and lower GUID) and takes over when it goes; `--priority` decides"),
        None => Check::new("other SM", Verdict::Warn, format!("the port's SM LID {sm_lid} does not answer SMInfo: its SM is gone or not reachable"))
            .next("smcore will take the subnet over on its first sweep"),
    }
}

fn config_check(q: &Question, checks: &mut Vec<Check>) -> Option<Config> {
    let config = match &q.config {
        None => {
            checks.push(Check::new("config", Verdict::Ok, "no --config: the built-in defaults"));
            Config::default()
        }
        Some(path) => match Config::load(path) {
            Ok(c) => {
                let warning = c.startup_warning(path);
                let check = Check::new("config", if warning.is_some() { Verdict::Warn } else { Verdict::Ok }, format!("{} reads", path.display()));
                checks.push(match warning {
                    Some(w) => check.next(w),
                    None => check,
                });
                c
            }
            Err(e) => {
                checks.push(Check::new("config", Verdict::Fail, e.to_string()).next("fix the line named, or start from config/smcore.toml"));
                return None;
            }
        },
    };
    match config.check_partitions() {
        Ok(p) => checks.push(Check::new("partitions", Verdict::Ok, format!("{} partition(s) defined", p.partitions.len()))),
        Err(e) => checks.push(Check::new("partitions", Verdict::Fail, e.to_string()).next("fix the partition file at the line named")),
    }
    match config.check_qos() {
        Ok(()) => checks.push(Check::new("qos", Verdict::Ok, if config.qos { "QoS on; its settings read" } else { "QoS off" })),
        Err(e) => checks.push(Check::new("qos", Verdict::Fail, e).next("fix the QoS setting or policy file named")),
    }
    let prefix = config.subnet_prefix.unwrap_or(crate::sweep::DEFAULT_SUBNET_PREFIX);
    let key = if config.sm_key.unwrap_or(0) == 0 { "SM_Key 0 (any SM may command this one)" } else { "SM_Key set" };
    let verdict = if config.sm_key.unwrap_or(0) == 0 { Verdict::Warn } else { Verdict::Ok };
    let check = Check::new("subnet", verdict, format!("subnet prefix {prefix:#018x}; {key}"));
    checks.push(if verdict == Verdict::Warn { check.next("set `sm_key` so that only your SMs can hand the subnet over") } else { check });
    Some(config)
}

fn engines_check(q: &Question, config: Option<&Config>, checks: &mut Vec<Check>) {
    let empty = Vec::new();
    let dirs = crate::engines::loader::search_path_with_config(&q.engine_dirs, config.map_or(&empty, |c| &c.engine_dirs), q.engine_path.as_deref());
    let registry = Registry::scan(&dirs);
    let names: Vec<&str> = registry.engines.iter().map(|e| e.name.as_str()).collect();
    let dir_list = registry.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":");
    if names.is_empty() {
        checks.push(
            Check::new("engines", Verdict::Fail, format!("no engine library found (searched: {dir_list})"))
                .next("install the engines (packaging/install.sh) or point --engine-dir / SMCORE_ENGINE_PATH at them"),
        );
        return;
    }
    let mut check = Check::new("engines", Verdict::Ok, format!("{} from {dir_list}", names.join(", ")));
    if !registry.problems.is_empty() {
        let problems: Vec<String> = registry.problems.iter().map(ToString::to_string).collect();
        check = Check { verdict: Verdict::Warn, ..check }.next(format!("skipped: {}", problems.join("; ")));
    }
    checks.push(check);
    let list = q.engines.clone().or_else(|| config.and_then(|c| c.routing_engine.clone())).unwrap_or_else(|| crate::settings::DEFAULT_ENGINES.to_string());
    match crate::engines::chain::ChainSpec::parse(&list, &registry) {
        Ok(_) => checks.push(Check::new("chain", Verdict::Ok, format!("`{list}` loads"))),
        Err(e) => checks.push(Check::new("chain", Verdict::Fail, e.to_string()).next("name engines `smcore engines` lists")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_check_says_what_confines_engines() {
        let inline = Config { engine_isolation: Some(crate::engines::host::Mode::Inline), ..Config::default() };
        let check = sandbox_check(Some(&inline));
        assert_eq!(check.verdict, Verdict::Warn);
        assert!(check.detail.contains("unconfined"), "{check:?}");
        let check = sandbox_check(None);
        let (landlock, seccomp) = crate::engines::sandbox::support();
        assert_eq!(check.verdict == Verdict::Ok, landlock.is_some() && seccomp, "{check:?}");
        assert!(check.detail.contains("a process of their own"), "{check:?}");
    }
}
