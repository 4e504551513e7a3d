//! # sm-umad — [`SmpPort`] over the Linux user MAD interface (`/dev/infiniband/umadN`).
//!
//! Every libc call here goes to the plain `open`/`read`/`write`/`ioctl`/
//! `poll` symbols on purpose: ibsim's `libumad2sim.so` interposes exactly
//! those (not `open64`, which Rust's `std::fs` uses), and hands out fds of
//! 1024 and up that are not kernel fds, so only `poll()` can wait on them.
//! The same code therefore talks to a real HCA and, under `LD_PRELOAD`, to
//! ibsim.
//!
//! A dedicated poll thread reads; the sending side keeps a window of SMPs
//! in flight ([`SmpPort::exchange_many`]), matches answers by TID and waits
//! for them on a queue that costs no system call when answers are already
//! there ([`answers`]). SubnTraps (trap 128 from a switch whose port changed
//! state) arrive on the LID-routed agent; they are queued for the SM loop
//! (at most [`TRAP_QUEUE`]; more are dropped and counted, see
//! [`UmadPort::traps_dropped`]) and repressed when it takes them.
//!
//! The poll thread never stops while the port lives: a message longer
//! than its buffer (an SA request the kernel reassembled from RMPP
//! segments, which it refuses to truncate with `ENOSPC`) is read again
//! with a buffer of the size the kernel names, and transient errors are
//! retried with back-off. A descriptor that can never be read again
//! (closed, device gone) is reported as [`TransportError::Closed`] on
//! every later call, so the SM can exit and be restarted.

mod answers;
mod gather;
mod turn;

use std::collections::{HashMap, VecDeque};
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::Mode;

use sm_transport::port::{Outgoing, SmpPort, TransportError, TrapMad};
use sm_transport::window::{SmpWindow, WindowStats};
use answers::{Answer, Answers, Taken};
use gather::Gather;
use turn::{ReadTurn, Turn};
use sm_mad::mad::{class, method, Header, MAD_LEN};
use sm_mad::sa;
use sm_mad::smp::PERMISSIVE_LID;

/// `struct ib_user_mad_hdr_old`, the header without the P_Key index, which
/// the kernel uses unless `IB_USER_MAD_ENABLE_PKEY` is issued. umad2sim
/// takes its header size from libibumad's `umad_size()`, which is 56 until
/// libibumad's own `umad_open_port` enables P_Keys; we never call that, and
/// SMPs always go out on P_Key index 0, so the old header is the one size
/// both the kernel and umad2sim agree on.
const HDR_LEN: usize = 56;
const CLASS_DR: u8 = class::SUBN_DIRECTED;
const CLASS_LID: u8 = class::SUBN_LID;
const CLASS_SA: u8 = class::SUBN_ADM;
/// The kernel's `ib_umad` magic.
const IB_IOCTL_MAGIC: u8 = 0x1b;

/// `struct ib_user_mad_reg_req` (include/uapi/rdma/ib_user_mad.h): 27
/// bytes of fields, padded to 28 by the u32 alignment.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RegReq {
    id: u32,
    method_mask: [u32; 4],
    qpn: u8,
    mgmt_class: u8,
    mgmt_class_version: u8,
    oui: [u8; 3],
    rmpp_version: u8,
}

const _: () = assert!(std::mem::size_of::<RegReq>() == 28);

nix::ioctl_readwrite!(register_agent, IB_IOCTL_MAGIC, 1, RegReq);

/// Registers an agent on QP `qpn` (0 SMI, 1 GSI) for `mgmt_class`,
/// claiming the unsolicited `methods` (bit n = method n); answers reach an
/// agent by the TID the kernel stamps. `rmpp` 1 lets the kernel do RMPP.
fn register_on(fd: &UmadFd, qpn: u8, mgmt_class: u8, version: u8, methods: u128, rmpp: u8) -> Result<u32, TransportError> {
    let mask = [methods as u32, (methods >> 32) as u32, (methods >> 64) as u32, (methods >> 96) as u32];
    let mut req =
        RegReq { qpn, mgmt_class, mgmt_class_version: version, method_mask: mask, rmpp_version: rmpp, ..RegReq::default() };
    // SAFETY: `req` is the `ib_user_mad_reg_req` the ioctl number encodes.
    unsafe { register_agent(fd.0, &mut req) }
        .map_err(|e| io(&format!("IB_USER_MAD_REGISTER_AGENT class {mgmt_class:#x}"), e))?;
    Ok(req.id)
}

/// A umad device and port the SM can bind to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmadDevice {
    /// N of `/dev/infiniband/umadN`.
    pub index: u32,
    /// The HCA (`ibdev`), e.g. `mlx5_0`.
    pub ca: String,
    /// The HCA port this umad device serves.
    pub port: u8,
    /// PortInfo PortState as sysfs tells it (1 Down .. 4 Active), 0 when
    /// unreadable.
    pub state: u8,
    /// The port's GUID (the low half of GID 0), 0 when unreadable: what
    /// `ibstat -p` lists and OpenSM's `--guid` (and its `opensm@.service`
    /// instances) name a port by.
    pub port_guid: u64,
    /// The port's link layer (sysfs `link_layer`).
    pub link_layer: LinkLayer,
    /// Whether the port's CapabilityMask (sysfs `cap_mask`) says
    /// IsSMDisabled: the GSI half of a port that exposes its SMI and GSI
    /// on two devices of one port GUID (rdma-core's SMI/GSI pairs). No SM
    /// runs there; the SM's general MADs (SA, PMA) do.
    pub sm_disabled: bool,
}

/// PortInfo CapabilityMask IsSMDisabled (IBA 14.2.5.6).
pub const CAP_IS_SM_DISABLED: u32 = 0x0000_0400;

/// What a port carries, as sysfs `link_layer` says: an RDMA device in
/// Ethernet mode (RoCE) has umad devices too, and an SM must never bind
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkLayer {
    /// `InfiniBand`, or no `link_layer` file (kernels before it existed,
    /// and umad2sim, knew InfiniBand only; rdma-core reads it the same way).
    InfiniBand,
    /// `Ethernet`: RoCE.
    Ethernet,
    /// Anything else, as read.
    Other(String),
}

impl LinkLayer {
    fn parse(text: Option<&str>) -> Self {
        match text.map(str::trim) {
            None | Some("InfiniBand") => LinkLayer::InfiniBand,
            Some("Ethernet") => LinkLayer::Ethernet,
            Some(other) => LinkLayer::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkLayer::InfiniBand => f.write_str("InfiniBand"),
            LinkLayer::Ethernet => f.write_str("Ethernet (RoCE)"),
            LinkLayer::Other(s) => f.write_str(s),
        }
    }
}

/// Why no port was chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPort {
    /// No umad device at all.
    #[error("no umad device under {root}/class/infiniband_mad (no InfiniBand HCA, or ib_umad not loaded)")]
    NoDevice {
        /// The sysfs root read.
        root: String,
    },
    /// None matches the CA and port asked for.
    #[error("no umad device matches CA {ca:?} port {port:?}; devices: {have}")]
    NoMatch {
        /// The CA asked for.
        ca: Option<String>,
        /// The port asked for.
        port: Option<u8>,
        /// What there is.
        have: String,
    },
    /// The port asked for is not InfiniBand.
    #[error("{ca} port {port} is an {layer} port, not InfiniBand: a subnet manager binds InfiniBand ports only")]
    NotInfiniBand {
        /// The HCA.
        ca: String,
        /// Its port.
        port: u8,
        /// Its link layer.
        layer: LinkLayer,
    },
    /// Every port there is is on another link layer.
    #[error("no InfiniBand port: every umad device serves another link layer ({have})")]
    NoInfiniBand {
        /// What there is.
        have: String,
    },
    /// The port asked for says IsSMDisabled: the GSI half of an SMI/GSI
    /// pair.
    #[error("{ca} port {port} says IsSMDisabled (the GSI device of an SMI/GSI pair): the SM binds the pair's SMI device ({smi}) and sends its general MADs here")]
    SmDisabled {
        /// The HCA.
        ca: String,
        /// Its port.
        port: u8,
        /// The pair's SMI device, as `CA port N`.
        smi: String,
    },
}

/// The GSI device paired with `smi` (rdma-core's SMI/GSI pairs): another
/// umad device of the same port GUID whose port says IsSMDisabled. `None`
/// when the port has one device for both, as most do.
pub fn gsi_pair(devices: &[UmadDevice], smi: &UmadDevice) -> Option<UmadDevice> {
    if smi.port_guid == 0 || smi.sm_disabled {
        return None;
    }
    devices.iter().find(|d| d.index != smi.index && d.port_guid == smi.port_guid && d.sm_disabled).cloned()
}

/// Where sysfs is: `SMCORE_SYSFS_ROOT` (tests point it at a tree of their
/// own), else `/sys`.
pub fn sysfs_root() -> String {
    std::env::var("SMCORE_SYSFS_ROOT").ok().filter(|r| !r.is_empty()).unwrap_or_else(|| "/sys".to_string())
}

/// The port GUID in a sysfs GID (`fe80:0000:0000:0000:0002:c903:0000:0001`).
fn gid_port_guid(gid: &str) -> Option<u64> {
    let groups: Vec<&str> = gid.trim().split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    groups[4..].iter().try_fold(0u64, |acc, g| u16::from_str_radix(g, 16).ok().map(|v| acc << 16 | u64::from(v)))
}

/// Reads a small sysfs file through libc `open` (see the module
/// documentation for why not `std::fs`).
fn read_sysfs(path: &str) -> Option<String> {
    let fd = fcntl::open(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
    let mut buf = [0u8; 256];
    let mut len = 0;
    while len < buf.len() {
        match nix::unistd::read(&fd, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n.min(buf.len() - len),
            Err(Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
    Some(String::from_utf8_lossy(&buf[..len]).trim().to_string())
}

/// The umad devices the system (or umad2sim) lists under [`sysfs_root`],
/// in index order.
pub fn devices() -> Vec<UmadDevice> {
    devices_in(&sysfs_root())
}

/// The umad devices listed under sysfs root `root`, in index order. Probes
/// indices rather than reading the directory: `readdir` is not among the
/// calls umad2sim interposes reliably for Rust, `open` is.
pub fn devices_in(root: &str) -> Vec<UmadDevice> {
    let mut found = Vec::new();
    // Indices may have gaps (unplugged HCAs), so probe a fixed range.
    for index in 0..64u32 {
        let base = format!("{root}/class/infiniband_mad/umad{index}");
        let Some(ca) = read_sysfs(&format!("{base}/ibdev")) else { continue };
        let Some(port) = read_sysfs(&format!("{base}/port")).and_then(|p| p.parse::<u8>().ok()) else {
            continue;
        };
        let ports = format!("{root}/class/infiniband/{ca}/ports/{port}");
        // "4: ACTIVE"
        let state = read_sysfs(&format!("{ports}/state"))
            .and_then(|s| s.split(':').next().and_then(|n| n.trim().parse::<u8>().ok()))
            .unwrap_or(0);
        let port_guid = read_sysfs(&format!("{ports}/gids/0")).and_then(|g| gid_port_guid(&g)).unwrap_or(0);
        let link_layer = LinkLayer::parse(read_sysfs(&format!("{ports}/link_layer")).as_deref());
        let cap_mask = read_sysfs(&format!("{ports}/cap_mask"))
            .and_then(|v| u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        let sm_disabled = cap_mask & CAP_IS_SM_DISABLED != 0;
        found.push(UmadDevice { index, ca, port, state, port_guid, link_layer, sm_disabled });
    }
    found
}

/// The LID of `d`'s port and the LID of the SM that configured it, as
/// sysfs under `root` tells them (`None` when unreadable).
pub fn port_lids_in(root: &str, d: &UmadDevice) -> (Option<u16>, Option<u16>) {
    let base = format!("{root}/class/infiniband/{}/ports/{}", d.ca, d.port);
    let read = |name: &str| {
        read_sysfs(&format!("{base}/{name}")).and_then(|v| {
            let v = v.trim();
            u16::from_str_radix(v.strip_prefix("0x").unwrap_or(v), 16).ok()
        })
    };
    (read("lid"), read("sm_lid"))
}

/// Which device to bind, of `devices` (read under sysfs root `root`, for
/// the messages): InfiniBand ports only; of those the one asked for, else
/// the first Active port, else the first port with a link (an SM's own port
/// is only Init until the SM brings it up), else the first. A port asked for
/// by name that is not InfiniBand is refused, not passed over.
pub fn choose(devices: &[UmadDevice], ca: Option<&str>, port: Option<u8>, root: &str) -> Result<UmadDevice, NoPort> {
    let list = |ds: &[&UmadDevice]| {
        ds.iter().map(|d| format!("umad{} {} port {} {}", d.index, d.ca, d.port, d.link_layer)).collect::<Vec<_>>().join(", ")
    };
    if devices.is_empty() {
        return Err(NoPort::NoDevice { root: root.to_string() });
    }
    let wanted: Vec<&UmadDevice> =
        devices.iter().filter(|d| ca.is_none_or(|c| d.ca == c) && port.is_none_or(|p| d.port == p)).collect();
    if wanted.is_empty() {
        let all: Vec<&UmadDevice> = devices.iter().collect();
        return Err(NoPort::NoMatch { ca: ca.map(str::to_string), port, have: list(&all) });
    }
    let ib: Vec<&UmadDevice> = wanted.iter().copied().filter(|d| d.link_layer == LinkLayer::InfiniBand).collect();
    let named = ca.is_some() || port.is_some();
    if ib.is_empty() {
        return Err(match wanted.as_slice() {
            [only] if named => {
                NoPort::NotInfiniBand { ca: only.ca.clone(), port: only.port, layer: only.link_layer.clone() }
            }
            _ => NoPort::NoInfiniBand { have: list(&wanted) },
        });
    }
    // The GSI half of an SMI/GSI pair carries no SMPs: the SM binds the
    // SMI device of the pair (and its general MADs go to the GSI one,
    // [`gsi_pair`]).
    let smi: Vec<&UmadDevice> = ib.iter().copied().filter(|d| !d.sm_disabled).collect();
    if smi.is_empty() {
        return Err(match ib.as_slice() {
            [only] if named => NoPort::SmDisabled {
                ca: only.ca.clone(),
                port: only.port,
                smi: devices
                    .iter()
                    .find(|d| d.port_guid == only.port_guid && d.port_guid != 0 && !d.sm_disabled)
                    .map(|d| format!("{} port {}", d.ca, d.port))
                    .unwrap_or_else(|| "none found".into()),
            },
            _ => NoPort::NoInfiniBand { have: format!("{} (every InfiniBand port says IsSMDisabled)", list(&ib)) },
        });
    }
    let ib = smi;
    Ok(ib
        .iter()
        .find(|d| d.state == 4)
        .or_else(|| ib.iter().find(|d| d.state >= 2))
        .or_else(|| ib.first())
        .map(|d| (*d).clone())
        .expect("not empty"))
}

/// The device serving the port of GUID `guid` (of an SMI/GSI pair, the
/// SMI device: the one an SM binds).
pub fn find_guid(devices: &[UmadDevice], guid: u64) -> Option<UmadDevice> {
    let of_guid = || devices.iter().filter(|d| d.port_guid == guid && guid != 0);
    of_guid().find(|d| !d.sm_disabled).or_else(|| of_guid().next()).cloned()
}

/// A umad or issm descriptor. Not an `OwnedFd`: umad2sim's descriptors
/// are not kernel fds, and std's debug check that an owned fd is still open
/// (`fcntl(F_GETFD)`, not interposed) would abort the process on drop.
#[derive(Debug)]
struct UmadFd(RawFd);

impl UmadFd {
    fn open(path: &str, flags: OFlag) -> nix::Result<Self> {
        fcntl::open(path, flags | OFlag::O_CLOEXEC, Mode::empty()).map(|fd| Self(fd.into_raw_fd()))
    }
}

impl Drop for UmadFd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed only here.
        unsafe { libc::close(self.0) };
    }
}

/// An SM port on a umad device, with one agent per SMP class.
///
/// Reading is done by a dedicated poll thread (umad2sim's descriptors can
/// only be waited on with `poll()`, not epoll): it hands every MAD it reads
/// to queues: answers on one ([`answers::Answers`]), traps on a tokio
/// channel, requests of SA clients and other SMs on their own. Only the sending side
/// writes, so the two threads never share a direction of the descriptor.
pub struct UmadPort {
    device: UmadDevice,
    /// Held open only so the port advertises IsSM (and ibsim marks us as
    /// the SM); never read.
    _issm: Option<UmadFd>,
    /// The descriptor and agents; shared with [`MadSender`]s so the SA and
    /// SMInfo responders can answer while a sweep runs.
    writer: Arc<Writer>,
    sa_requests: Option<std::sync::mpsc::Receiver<IncomingMad>>,
    smp_requests: Option<std::sync::mpsc::Receiver<IncomingMad>>,
    timeout: Duration,
    window: SmpWindow,
    runtime: tokio::runtime::Runtime,
    responses: Arc<Answers>,
    /// Answers taken from `responses` and not yet matched.
    taken: VecDeque<Answer>,
    /// Whether the sweep reads the descriptor itself ([`turn`]).
    turn: Arc<ReadTurn>,
    /// The descriptor, as the sweep reads it during its turn.
    src: FdSource,
    /// Where the sweep puts the traps and requests it reads.
    sinks: Sinks,
    read_buf: Vec<u8>,
    /// The answers' pace, for pauses that let them gather ([`gather`]).
    gather: Gather,
    last_drop_warning: Option<Instant>,
    traps: tokio::sync::mpsc::Receiver<TrapMad>,
    /// Traps the poll thread dropped because the queue was full.
    trap_drops: Arc<AtomicU64>,
    /// Why the poll thread declared the transport dead, if it did.
    fault: Arc<OnceLock<String>>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// The device general MADs (SA, PMA) use: the GSI device of an
    /// SMI/GSI pair, else `device` itself.
    gsi_device: UmadDevice,
    /// The GSI device's poll thread, when there is one.
    gsi_reader: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for UmadPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UmadPort")
            .field("device", &self.device)
            .field("fd", &self.writer.fd)
            .field("timeout", &self.timeout)
            .field("window", &self.window.size())
            .finish()
    }
}

impl Drop for UmadPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.responses.close_reader();
        self.turn.wake();
        if let Some(reader) = self.reader.take() {
            // It wakes from poll() within READER_SLICE.
            let _ = reader.join();
        }
        if let Some(reader) = self.gsi_reader.take() {
            let _ = reader.join();
        }
    }
}

/// How often the reader looks at its stop flag.
const READER_SLICE_MS: u16 = 50;
/// Requests queued for a responder before further ones are dropped (the
/// requester retries, as it would on a lossy fabric).
const REQUEST_QUEUE: usize = 1024;
/// Traps queued for the SM loop before further ones are dropped and
/// counted: a storm must not grow the SM's memory, and a switch repeats a
/// trap until it is repressed.
pub const TRAP_QUEUE: usize = 256;
/// The read buffer for one MAD behind its header; grown for a longer one.
const READ_BUF: usize = HDR_LEN + MAD_LEN;
/// The longest message the reader takes: a transfer the kernel reassembled
/// from RMPP segments (it already holds it whole). The kernel keeps a
/// message that does not fit at the head of the queue, so one claiming
/// more is a transport the SM can no longer read: it is reported as dead.
const MAX_READ: usize = 16 << 20;
/// The longest pause between reads after repeated transient errors.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// At most one warning this often for a repeating condition.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Where what is read from the device goes. The poll thread holds one;
/// the sweep holds a clone for the messages it reads itself.
#[derive(Clone)]
struct Sinks {
    responses: Arc<Answers>,
    traps: tokio::sync::mpsc::Sender<TrapMad>,
    sa_requests: std::sync::mpsc::SyncSender<IncomingMad>,
    smp_requests: std::sync::mpsc::SyncSender<IncomingMad>,
    /// Traps dropped because the queue was full.
    trap_drops: Arc<AtomicU64>,
    /// Why the transport died, once it has.
    fault: Arc<OnceLock<String>>,
}

/// The SM side of [`Sinks`]: what the poll thread's messages arrive on.
struct Taps {
    responses: Arc<Answers>,
    traps: tokio::sync::mpsc::Receiver<TrapMad>,
    sa_requests: std::sync::mpsc::Receiver<IncomingMad>,
    smp_requests: std::sync::mpsc::Receiver<IncomingMad>,
    trap_drops: Arc<AtomicU64>,
    fault: Arc<OnceLock<String>>,
}

impl Sinks {
    /// The poll thread's ends and the SM's, connected: traps queue up to
    /// [`TRAP_QUEUE`], SA and SMP requests up to `request_queue`.
    fn channel(request_queue: usize) -> (Sinks, Taps) {
        let responses = Arc::new(Answers::default());
        let (trap_tx, traps) = tokio::sync::mpsc::channel(TRAP_QUEUE);
        let (sa_tx, sa_requests) = std::sync::mpsc::sync_channel(request_queue);
        let (smp_tx, smp_requests) = std::sync::mpsc::sync_channel(request_queue);
        let (trap_drops, fault) = (Arc::new(AtomicU64::new(0)), Arc::new(OnceLock::new()));
        let sinks = Sinks {
            responses: Arc::clone(&responses),
            traps: trap_tx,
            sa_requests: sa_tx,
            smp_requests: smp_tx,
            trap_drops: Arc::clone(&trap_drops),
            fault: Arc::clone(&fault),
        };
        (sinks, Taps { responses, traps, sa_requests, smp_requests, trap_drops, fault })
    }
}

/// The device as the poll thread uses it: wait, then read one message. A
/// trait so that the reader's handling of long messages and errors can be
/// exercised without a device.
trait MadSource {
    /// Waits up to `ms` for a message: `Ok(true)` when one can be read.
    fn wait(&mut self, ms: u16) -> Result<bool, Errno>;
    /// Reads one message into `buf`. As `ib_umad` does, a message longer
    /// than `buf` fails with `ENOSPC`, leaves its header (whose length
    /// field gives the size needed) in `buf` and stays queued.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno>;
}

/// A umad (or umad2sim) descriptor.
struct FdSource(RawFd);

impl MadSource for FdSource {
    fn wait(&mut self, ms: u16) -> Result<bool, Errno> {
        // SAFETY: the descriptor outlives this thread (UmadPort joins it
        // before its writer can close it); `borrow_raw` does not check it.
        let bfd = unsafe { BorrowedFd::borrow_raw(self.0) };
        let mut fds = [PollFd::new(bfd, PollFlags::POLLIN)];
        if nix::poll::poll(&mut fds, PollTimeout::from(ms))? == 0 {
            return Ok(false);
        }
        if fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLNVAL)) {
            return Err(Errno::EBADF);
        }
        // POLLERR and POLLHUP too: the read says what happened.
        Ok(true)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        // Plain libc read: umad2sim returns -EWOULDBLOCK as a value (not -1
        // with errno) when its queue is empty, which nix would misread as
        // a huge length.
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            -1 => Err(Errno::last()),
            n if n < 0 => Err(Errno::EAGAIN),
            n => Ok(usize::try_from(n).unwrap_or(0)),
        }
    }
}

/// Errors after which the descriptor will never give a MAD again: closed
/// or invalid, the device unplugged (`ENODEV`, `ENXIO`) or its agents gone
/// (`EIO`), or a read the kernel will refuse forever (`EINVAL`, `EFAULT`).
fn fatal(e: Errno) -> bool {
    matches!(e, Errno::EBADF | Errno::ENODEV | Errno::ENXIO | Errno::EIO | Errno::EINVAL | Errno::EFAULT)
}

/// What one read step gave.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A whole message of this many bytes is at the start of the buffer.
    Read(usize),
    /// Nothing to read after all.
    Nothing,
    /// An error worth retrying after a pause.
    Failed(Errno),
    /// The transport is gone, for this reason.
    Dead(String),
}

/// Reads one whole message into `buf`, growing it as the kernel asks
/// (`ENOSPC` with the size in the header) up to [`MAX_READ`].
fn read_step(src: &mut impl MadSource, buf: &mut Vec<u8>) -> Step {
    loop {
        match src.read(buf) {
            Ok(0) => return Step::Failed(Errno::ENODATA),
            Ok(n) => return Step::Read(n.min(buf.len())),
            Err(Errno::ENOSPC) => {
                // `ib_user_mad_hdr.length`: header plus the whole message.
                let need = buf
                    .get(16..20)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(0, |b| u32::from_ne_bytes(b) as usize);
                if need <= buf.len() {
                    // A length that would not help: retry later rather
                    // than spin.
                    return Step::Failed(Errno::ENOSPC);
                }
                if need > MAX_READ {
                    return Step::Dead(format!(
                        "a {need}-byte message is queued on the umad device, over the {MAX_READ}-byte limit; nothing behind it can be read"
                    ));
                }
                tracing::debug!(need, "long umad message (RMPP): reading it with a larger buffer");
                buf.resize(need, 0);
            }
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => return Step::Nothing,
            Err(e) if fatal(e) => return Step::Dead(format!("umad read: {e}")),
            Err(e) => return Step::Failed(e),
        }
    }
}

/// Waits up to `ms` for a message and reads it into `buf` (grown for a
/// long one and shrunk back after it); `None` when nothing came. Both the
/// poll thread and the sweep during its turn read this way.
fn poll_step(src: &mut impl MadSource, buf: &mut Vec<u8>, ms: u16) -> Option<Step> {
    if buf.len() > READ_BUF {
        buf.truncate(READ_BUF);
        buf.shrink_to_fit();
    }
    match src.wait(ms) {
        Ok(false) | Err(Errno::EINTR) => None,
        Ok(true) => Some(read_step(src, buf)),
        Err(e) if fatal(e) => Some(Step::Dead(format!("umad poll: {e}"))),
        Err(e) => Some(Step::Failed(e)),
    }
}

/// The poll thread: answers to our requests go to `responses`, traps to
/// `traps`, requests from SA clients and from other SMs to their queues.
/// It runs until told to stop or until the port that owns it is gone;
/// transient errors are logged and retried with back-off. Only a
/// transport that can never be read again ends it early: the reason is
/// kept in `fault` and sent as [`TransportError::Closed`], so the sweep
/// side (and through it the SM) sees a fatal transport error.
fn reader_loop(src: impl MadSource, stop: Arc<AtomicBool>, sinks: Sinks, turn: Arc<ReadTurn>) {
    let answers = Arc::clone(&sinks.responses);
    read_until_stopped(src, &stop, sinks, &turn);
    // A sweep waiting for answers learns that none will come.
    answers.close_writer();
}

fn read_until_stopped(mut src: impl MadSource, stop: &AtomicBool, sinks: Sinks, turn: &ReadTurn) {
    let mut reader = Reader { sinks, failures: 0, last_warning: None, last_drop_warning: None };
    let mut buf = vec![0u8; READ_BUF];
    while !stop.load(Ordering::Relaxed) {
        if !turn.poller_may_read(stop) {
            continue;
        }
        let Some(step) = poll_step(&mut src, &mut buf, READER_SLICE_MS) else { continue };
        match step {
            Step::Read(n) => {
                reader.failures = 0;
                if !reader.deliver(&buf[..n]) {
                    return;
                }
            }
            Step::Nothing => {}
            Step::Failed(e) => reader.back_off(e, stop),
            Step::Dead(reason) => {
                reader.die(reason);
                return;
            }
        }
    }
}

/// The poll thread's state between reads.
struct Reader {
    sinks: Sinks,
    /// Transient errors in a row.
    failures: u32,
    last_warning: Option<Instant>,
    last_drop_warning: Option<Instant>,
}

/// Whether a warning last given at `last` may be given again now.
fn warn_due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|t| now.duration_since(t) < WARN_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

impl Reader {
    /// Pauses after a transient error, longer each time in a row (up to
    /// [`MAX_BACKOFF`]), waking for `stop`.
    fn back_off(&mut self, e: Errno, stop: &AtomicBool) {
        self.failures = self.failures.saturating_add(1);
        if warn_due(&mut self.last_warning) {
            tracing::warn!(error = %e, in_a_row = self.failures, "umad read failed; retrying");
        }
        let pause = Duration::from_millis(10u64 << self.failures.min(7)).min(MAX_BACKOFF);
        let until = Instant::now() + pause;
        while !stop.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(u64::from(READER_SLICE_MS))));
        }
    }

    fn die(&self, reason: String) {
        tracing::error!("umad transport dead: {reason}");
        let _ = self.sinks.fault.set(reason.clone());
        let _ = self.sinks.responses.push(Err(TransportError::Closed(reason)));
    }

    /// Hands one message (header and MAD) to its queue; false once the
    /// port that reads them is gone.
    fn deliver(&mut self, msg: &[u8]) -> bool {
        let sinks = &self.sinks;
        let delivered = match sinks.sort(msg, &mut self.last_drop_warning) {
            Sorted::Answer(answer) => sinks.responses.push(Ok(answer)),
            Sorted::Queued(taken) => taken,
        };
        delivered || !(sinks.responses.is_closed() && sinks.traps.is_closed())
    }
}

/// A message read from the device, sorted.
enum Sorted {
    /// An answer to one of our requests (or the kernel handing one back
    /// unanswered): for the sweep.
    Answer(Received),
    /// A trap or a request, queued for the SM loop or its responder (or
    /// dropped and counted); false when its queue is gone.
    Queued(bool),
}

impl Sinks {
    /// Sorts one message (header and MAD): traps and requests go to their
    /// queues, answers are returned.
    fn sort(&self, msg: &[u8], last_drop_warning: &mut Option<Instant>) -> Sorted {
        let n = msg.len();
        if n < HDR_LEN + 24 {
            tracing::debug!(len = n, "short umad read ignored");
            return Sorted::Queued(true);
        }
        let status = u32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
        let sqpn = u32::from_be_bytes([msg[20], msg[21], msg[22], msg[23]]) & 0x00FF_FFFF;
        let slid = u16::from_be_bytes([msg[28], msg[29]]);
        let header = Header::new_unchecked(&msg[HDR_LEN..]);
        let (class, m) = (header.mgmt_class(), header.method());
        // One MAD of each message is kept: the SA answers from the first
        // MAD of a request (its header and record), so the rest of a
        // reassembled RMPP transfer (up to MAX_READ) is not queued, and
        // a full request queue holds REQUEST_QUEUE MADs, not gigabytes.
        let body = &msg[HDR_LEN..];
        let mut mad = body[..body.len().min(MAD_LEN)].to_vec();
        if mad.len() < MAD_LEN {
            mad.resize(MAD_LEN, 0);
        }
        let is_request = status == 0 && m & 0x80 == 0;
        if is_request && class == CLASS_LID && m == method::TRAP {
            Sorted::Queued(match self.traps.try_send(TrapMad { slid, mad }) {
                Ok(()) => true,
                Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                    let dropped = self.trap_drops.fetch_add(1, Ordering::Relaxed) + 1;
                    if warn_due(last_drop_warning) {
                        tracing::warn!(slid, dropped, "trap queue full ({TRAP_QUEUE}): trap dropped");
                    }
                    true
                }
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
            })
        } else if is_request && class == CLASS_SA {
            Sorted::Queued(offer(&self.sa_requests, IncomingMad { slid, sqpn, mad }, "SA"))
        } else if is_request && (class == CLASS_LID || class == CLASS_DR) && (m == method::GET || m == method::SET) {
            Sorted::Queued(offer(&self.smp_requests, IncomingMad { slid, sqpn, mad }, "SMP"))
        } else {
            Sorted::Answer(Received { status, mad })
        }
    }
}

/// Queues a request for its responder. A full or unwatched queue drops
/// it: nobody answers, and the requester times out as on a lossy link.
fn offer(queue: &std::sync::mpsc::SyncSender<IncomingMad>, request: IncomingMad, what: &str) -> bool {
    let slid = request.slid;
    if queue.try_send(request).is_err() {
        tracing::debug!(slid, "{what} request dropped: no responder, or its queue is full");
    }
    true
}

pub use sm_transport::gmp::IncomingMad;
use sm_transport::gmp::{GmpAgent, GmpSender};

/// The descriptor and the agents registered on it. Every write goes
/// through [`Writer::write`], under one lock, so the sweep and the
/// responders never interleave partial writes.
#[derive(Debug)]
struct Writer {
    fd: UmadFd,
    dr_agent: u32,
    lid_agent: u32,
    sa_agent: u32,
    /// The GSI device of an SMI/GSI pair, when the port has one: the SA
    /// agent is registered there and its MADs go out by it.
    gsi_fd: Option<UmadFd>,
    lock: std::sync::Mutex<()>,
}

/// The QKey every GSI MAD carries (IBA 13.5.1.3).
const GSI_QKEY: u32 = 0x8001_0000;

impl Writer {
    /// Writes one MAD (of any length: the SA agent's kernel RMPP segments
    /// a long one) to `dlid`/`dqpn`. `timeout_ms` 0 sends without waiting
    /// for an answer; otherwise the kernel keeps the request on its wait
    /// list that long, since a zero timeout would make it drop the answer
    /// as unsolicited.
    fn write(&self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        let Ok(header) = Header::new_checked(mad) else {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        };
        let class = header.mgmt_class();
        let (agent, qkey) = match class {
            CLASS_DR => (self.dr_agent, 0),
            CLASS_LID => (self.lid_agent, 0),
            CLASS_SA => (self.sa_agent, GSI_QKEY),
            c => return Err(TransportError::Unsendable(format!("management class {c:#x} has no agent here"))),
        };
        if class != CLASS_SA && mad.len() > MAD_LEN {
            return Err(TransportError::Unsendable(format!("SMP of {} bytes", mad.len())));
        }
        // An RMPP transfer is sized by the write: padding would reach the
        // client as empty records. Anything else is one whole MAD.
        let rmpp_active = class == CLASS_SA
            && sa::Packet::new_checked(mad).is_ok_and(|p| p.rmpp_flags() & sa::rmpp::FLAG_ACTIVE != 0);
        let len = if rmpp_active { mad.len() } else { mad.len().max(MAD_LEN) };
        let _guard = self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fd = match (&self.gsi_fd, class) {
            (Some(gsi), CLASS_SA) => gsi.0,
            _ => self.fd.0,
        };
        write_umad(fd, agent, Address { dlid, dqpn, qkey }, mad, len, timeout_ms)
    }
}

/// Where a MAD goes: LRH DLID, destination QP and its QKey.
#[derive(Debug, Clone, Copy)]
struct Address {
    dlid: u16,
    dqpn: u32,
    qkey: u32,
}

/// Writes `mad` (zero-padded to `len` bytes) behind an `ib_user_mad`
/// header for `agent` to `to`. `timeout_ms` 0 sends without waiting for
/// an answer; otherwise the kernel keeps the request on its wait list that
/// long.
fn write_umad(fd: RawFd, agent: u32, to: Address, mad: &[u8], len: usize, timeout_ms: u32) -> Result<(), TransportError> {
    let mut buf = vec![0u8; HDR_LEN + len];
    let total = u32::try_from(buf.len()).map_err(|_| TransportError::Unsendable("MAD too long".into()))?;
    buf[0..4].copy_from_slice(&agent.to_ne_bytes());
    buf[8..12].copy_from_slice(&timeout_ms.to_ne_bytes());
    buf[16..20].copy_from_slice(&total.to_ne_bytes());
    // Address fields are big-endian, as the kernel takes them.
    buf[20..24].copy_from_slice(&to.dqpn.to_be_bytes());
    buf[24..28].copy_from_slice(&to.qkey.to_be_bytes());
    buf[28..30].copy_from_slice(&to.dlid.to_be_bytes());
    let copied = mad.len().min(len);
    buf[HDR_LEN..HDR_LEN + copied].copy_from_slice(&mad[..copied]);
    loop {
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(());
        }
        match Errno::last() {
            Errno::EINTR => continue,
            e => return Err(io("umad write", e)),
        }
    }
}

/// Sends MADs from threads other than the sweep's: the answers of the SA
/// and SMInfo responders, and SA Reports. Cheap to clone; keeps the
/// device open while it lives.
#[derive(Debug, Clone)]
pub struct MadSender {
    writer: Arc<Writer>,
}

impl MadSender {
    /// Sends `mad`, the answer the responder built, back to the requester
    /// of `to`: SA answers on the GSI agent to its LID and QP, LID-routed
    /// SMPs to its LID, directed-route SMPs with the permissive LID (the
    /// return path is in the MAD). An SA answer longer than one MAD carries
    /// an RMPP header the caller set; a real kernel segments it, umad2sim
    /// passes its first 256 bytes.
    pub fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), TransportError> {
        match Header::new_checked(mad).map(|h| h.mgmt_class()) {
            Ok(CLASS_DR) => self.writer.write(PERMISSIVE_LID, 0, mad, 0),
            Ok(CLASS_LID) => self.writer.write(to.slid, 0, mad, 0),
            _ => self.writer.write(to.slid, to.sqpn, mad, 0),
        }
    }

    /// Sends an unsolicited GSI MAD (an SA Report) to `dlid`/`dqpn`.
    /// `timeout_ms` > 0 keeps it on the kernel's wait list for the answer.
    pub fn send_gsi(&self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        self.writer.write(dlid, dqpn, mad, timeout_ms)
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::Io(format!("{what}: {e}"))
}

impl UmadPort {
    /// Binds to `ca`/`port` (or the default choice, see [`choose`]) with a
    /// per-SMP answer timeout.
    pub fn open(ca: Option<&str>, port: Option<u8>, timeout: Duration, window: usize) -> Result<Self, TransportError> {
        Self::open_as(ca, port, timeout, window, Role::Sm)
    }

    /// Binds as an observer (`smcore shadow`, `smcore check`): the agents
    /// claim no unsolicited method, so no other SM's SMInfo request, no
    /// trap and no SA request is delivered here, and issm is not opened,
    /// so the port never advertises IsSM and takes no part in the
    /// election. Wrap it in [`sm_transport::ReadOnly`] to send Gets only.
    pub fn open_observer(ca: Option<&str>, port: Option<u8>, timeout: Duration, window: usize) -> Result<Self, TransportError> {
        Self::open_as(ca, port, timeout, window, Role::Observer)
    }

    fn open_as(ca: Option<&str>, port: Option<u8>, timeout: Duration, window: usize, role: Role) -> Result<Self, TransportError> {
        let root = sysfs_root();
        let all = devices_in(&root);
        let device = choose(&all, ca, port, &root).map_err(|e| TransportError::Closed(e.to_string()))?;
        let path = format!("/dev/infiniband/umad{}", device.index);
        // Non-blocking: the sweep and the poll thread may both be woken
        // for one message, and the one that does not get it must not
        // block in read().
        let fd = UmadFd::open(&path, OFlag::O_RDWR | OFlag::O_NONBLOCK).map_err(|e| io(&path, e))?;
        let sm = role == Role::Sm;
        let get_set = if sm { (1 << method::GET) | (1 << method::SET) } else { 0 };
        // Get/Set are claimed so that another SM's SMInfo requests reach
        // us (the HCA answers every other attribute itself).
        let dr_agent = Self::register(&fd, CLASS_DR, 1, get_set, 0)?;
        // The LID-routed agent also claims SubnTrap, so that the traps
        // switches send to the SM's LID reach us.
        let traps = if sm { 1 << method::TRAP } else { 0 };
        let lid_agent = Self::register(&fd, CLASS_LID, 1, get_set | traps, 0)?;
        // The SA on QP1, with kernel RMPP for long GetTable answers.
        let sa_methods = (1 << method::GET)
            | (1 << method::SET)
            | (1 << method::GET_TABLE)
            | (1 << method::GET_TRACE_TABLE)
            | (1 << method::GET_MULTI)
            | (1 << method::DELETE);
        // A port whose SMI and GSI are two devices (rdma-core's SMI/GSI
        // pairs): the SA agent goes on the GSI one.
        let gsi = if sm { gsi_pair(&all, &device) } else { None };
        let gsi_fd = match &gsi {
            Some(g) => {
                let path = format!("/dev/infiniband/umad{}", g.index);
                Some(UmadFd::open(&path, OFlag::O_RDWR | OFlag::O_NONBLOCK).map_err(|e| io(&path, e))?)
            }
            None => None,
        };
        let sa_agent = Self::register_gsi(gsi_fd.as_ref().unwrap_or(&fd), CLASS_SA, 2, if sm { sa_methods } else { 0 }, 1)?;
        // Non-blocking: another SM holding issm must not hang us.
        let issm_path = format!("/dev/infiniband/issm{}", device.index);
        let issm = if !sm {
            None
        } else {
            match UmadFd::open(&issm_path, OFlag::O_RDWR | OFlag::O_NONBLOCK) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    tracing::warn!("{issm_path}: {e}; the port will not advertise IsSM");
                    None
                }
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| io("tokio runtime", e))?;
        let (sinks, taps) = Sinks::channel(REQUEST_QUEUE);
        let Taps { responses, traps, sa_requests, smp_requests, trap_drops, fault } = taps;
        let stop = Arc::new(AtomicBool::new(false));
        let raw = fd.0;
        let turn = Arc::new(ReadTurn::default());
        let sweep_sinks = sinks.clone();
        let reader = std::thread::Builder::new()
            .name("umad-poll".into())
            .spawn({
                let (stop, turn) = (Arc::clone(&stop), Arc::clone(&turn));
                move || reader_loop(FdSource(raw), stop, sinks, turn)
            })
            .map_err(|e| io("umad poll thread", e))?;
        // The GSI device's requests and answers, read by a thread of
        // its own into the same queues.
        let gsi_reader = match &gsi_fd {
            Some(g) => {
                let (stop, raw, sinks) = (Arc::clone(&stop), g.0, sweep_sinks.clone());
                let own_turn = Arc::new(ReadTurn::default());
                Some(
                    std::thread::Builder::new()
                        .name("umad-gsi-poll".into())
                        .spawn(move || read_until_stopped(FdSource(raw), &stop, sinks, &own_turn))
                        .map_err(|e| io("umad GSI poll thread", e))?,
                )
            }
            None => None,
        };
        if let Some(g) = &gsi {
            tracing::info!(ca = %g.ca, port = g.port, umad = g.index, "SA agent on the GSI device of the port's SMI/GSI pair");
        }
        tracing::info!(ca = %device.ca, port = device.port, umad = device.index, window, observer = !sm, "umad transport bound");
        Ok(Self {
            gsi_device: gsi.unwrap_or_else(|| device.clone()),
            gsi_reader,
            device,
            _issm: issm,
            writer: Arc::new(Writer { fd, dr_agent, lid_agent, sa_agent, gsi_fd, lock: std::sync::Mutex::new(()) }),
            sa_requests: Some(sa_requests),
            smp_requests: Some(smp_requests),
            timeout,
            window: SmpWindow::new(window),
            runtime,
            responses,
            taken: VecDeque::new(),
            turn,
            src: FdSource(raw),
            sinks: sweep_sinks,
            read_buf: vec![0u8; READ_BUF],
            gather: Gather::default(),
            last_drop_warning: None,
            traps,
            trap_drops,
            fault,
            stop,
            reader: Some(reader),
        })
    }

    /// How many traps were dropped so far because the SM loop did not take
    /// them as fast as they came (the queue holds [`TRAP_QUEUE`]).
    pub fn traps_dropped(&self) -> u64 {
        self.trap_drops.load(Ordering::Relaxed)
    }

    /// The counter behind [`UmadPort::traps_dropped`], to read after the
    /// port has been lent out as a `dyn SmpPort`.
    pub fn trap_drop_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.trap_drops)
    }

    /// Why the transport was declared dead, if it was. Every call on the
    /// port then fails with [`TransportError::Closed`].
    pub fn fault(&self) -> Option<&str> {
        self.fault.get().map(String::as_str)
    }

    /// The error for a poll thread that is gone.
    fn stopped(&self) -> TransportError {
        TransportError::Closed(self.fault.get().cloned().unwrap_or_else(|| "the umad poll thread stopped".into()))
    }

    /// A [`MadSender`] for responder threads.
    pub fn sender(&self) -> MadSender {
        MadSender { writer: Arc::clone(&self.writer) }
    }

    /// The queue of SA requests (class 0x03, any request method), once.
    /// Until it is taken, requests are dropped unanswered.
    pub fn take_sa_requests(&mut self) -> Option<std::sync::mpsc::Receiver<IncomingMad>> {
        self.sa_requests.take()
    }

    /// The queue of SubnGet/SubnSet requests from other SMs (SMInfo), once.
    pub fn take_smp_requests(&mut self) -> Option<std::sync::mpsc::Receiver<IncomingMad>> {
        self.smp_requests.take()
    }

    fn register(fd: &UmadFd, mgmt_class: u8, version: u8, methods: u128, rmpp: u8) -> Result<u32, TransportError> {
        register_on(fd, 0, mgmt_class, version, methods, rmpp)
    }

    fn register_gsi(fd: &UmadFd, mgmt_class: u8, version: u8, methods: u128, rmpp: u8) -> Result<u32, TransportError> {
        register_on(fd, 1, mgmt_class, version, methods, rmpp)
    }

    /// The device and port bound.
    pub fn device(&self) -> &UmadDevice {
        &self.device
    }

    /// The device the SM's general MADs use (the SA here, the performance
    /// manager's own agent): the GSI device of an SMI/GSI pair, else
    /// [`Self::device`].
    pub fn gsi_device(&self) -> &UmadDevice {
        &self.gsi_device
    }

    /// Writes one SMP to `dlid` (see [`Writer::write`]).
    fn write_mad(&mut self, dlid: u16, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        if mad.len() > MAD_LEN {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        }
        self.writer.write(dlid, 0, mad, timeout_ms)
    }

    /// The next answer before `deadline`, read by the sweep itself (it
    /// holds the turn, see [`turn`]) or queued by the poll thread before it
    /// stepped aside; `outstanding` SMPs are out.
    fn next_response(&mut self, deadline: Instant, outstanding: usize) -> Result<Option<Received>, TransportError> {
        let answer = self.wait_response(deadline, outstanding)?;
        if answer.is_some() {
            self.gather.answered(Instant::now());
        }
        Ok(answer)
    }

    fn wait_response(&mut self, deadline: Instant, outstanding: usize) -> Result<Option<Received>, TransportError> {
        let mut paused = false;
        loop {
            if let Some(answer) = self.taken.pop_front() {
                return answer.map(Some);
            }
            let now = Instant::now();
            match self.responses.take(&mut self.taken, now) {
                Taken::Some => continue,
                Taken::Closed => return Err(self.stopped()),
                Taken::Timeout => {}
            }
            if now >= deadline {
                return Ok(None);
            }
            let parked = self.turn.poller_parked();
            if parked {
                // What arrived is read without waiting; when nothing has,
                // answers are let gather once before waiting in poll().
                match read_step(&mut self.src, &mut self.read_buf) {
                    Step::Nothing => {
                        if let Some(pause) = self.gather.pause(outstanding).filter(|_| !paused) {
                            paused = true;
                            std::thread::sleep(pause.min(deadline - now));
                            continue;
                        }
                    }
                    step => {
                        paused = false;
                        match self.took(step)? {
                            Some(answer) => return Ok(Some(answer)),
                            None => continue,
                        }
                    }
                }
            }
            // Until the poll thread is out of poll(), it may take the
            // answer: look at its queue every millisecond.
            let left = deadline - now;
            let slice = if parked { left } else { left.min(Duration::from_millis(1)) };
            let ms = u16::try_from(slice.as_millis().max(1)).unwrap_or(u16::MAX);
            let Some(step) = poll_step(&mut self.src, &mut self.read_buf, ms) else { continue };
            if let Some(answer) = self.took(step)? {
                return Ok(Some(answer));
            }
        }
    }

    /// What the sweep's own read gave: an answer to us, or nothing for the
    /// sweep (a trap or a request, queued where the poll thread puts them).
    fn took(&mut self, step: Step) -> Result<Option<Received>, TransportError> {
        match step {
            Step::Read(n) => {
                if let Sorted::Answer(answer) = self.sinks.sort(&self.read_buf[..n], &mut self.last_drop_warning) {
                    return Ok(Some(answer));
                }
            }
            Step::Nothing => {}
            Step::Failed(e) => {
                // The poll thread backs off and warns; the sweep just
                // waits a little (its deadline bounds the wait).
                tracing::debug!(error = %e, "umad read failed in the sweep; retrying");
                std::thread::sleep(Duration::from_millis(1));
            }
            Step::Dead(reason) => {
                tracing::error!("umad transport dead: {reason}");
                let _ = self.fault.set(reason);
                return Err(self.stopped());
            }
        }
        Ok(None)
    }

    /// Tells the issuer its trap arrived, so it stops repeating it
    /// (IBA 13.4.9); a failure only means the trap will come again.
    fn repress(&mut self, trap: &TrapMad) {
        let mut repress = trap.mad.clone();
        repress[3] = method::TRAP_REPRESS;
        if let Err(e) = self.write_mad(trap.slid, &repress, 0) {
            tracing::debug!(slid = trap.slid, "TrapRepress not sent: {e}");
        }
    }

    /// The SMP sent as `seq` got no answer: the window backs off.
    fn lost(&mut self, seq: u64) {
        if self.window.timed_out(seq) {
            tracing::debug!(window = self.window.size(), "SMP timed out: window halved");
        }
    }

    /// Sends `batch` with at most the window's size of SMPs in flight
    /// ([`SmpWindow`]: it grows while answers come and halves on a
    /// timeout), each waited for `timeout`; answers in batch order.
    fn exchange_window(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        let timeout_ms = u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        // Margin over the kernel's own timeout so its ETIMEDOUT report is
        // what ends the wait on hardware.
        let wait = self.timeout + Duration::from_millis(50);
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; batch.len()];
        // Lower 32 TID bits (the kernel owns the upper half) → (index,
        // full TID, deadline, window sequence number).
        let mut in_flight: HashMap<u32, (usize, u64, Instant, u64)> = HashMap::new();
        let turn = Arc::clone(&self.turn);
        let _turn = Turn::take(&turn);
        let mut next = 0;
        loop {
            while in_flight.len() < self.window.size() && next < batch.len() {
                let o = &batch[next];
                let Ok(header) = Header::new_checked(&o.mad[..]) else {
                    return Err(TransportError::Unsendable(format!("MAD of {} bytes", o.mad.len())));
                };
                let tid = header.transaction_id();
                self.write_mad(o.dlid, &o.mad, timeout_ms)?;
                // The kernel owns the upper half of the TID of what we send.
                let low = tid as u32;
                in_flight.insert(low, (next, tid, Instant::now() + wait, self.window.sent()));
                next += 1;
            }
            let Some(earliest) = in_flight.values().map(|v| v.2).min() else { break };
            match self.next_response(earliest, in_flight.len())? {
                Some(Received { status, mut mad }) => {
                    let answer = Header::new_unchecked(&mad[..]);
                    let low = answer.transaction_id() as u32;
                    let is_response = answer.is_response();
                    let Some(&(index, tid, _, seq)) = in_flight.get(&low) else {
                        tracing::debug!("umad read of another transaction ignored");
                        continue;
                    };
                    if status != 0 {
                        // The kernel hands back our own request with
                        // ETIMEDOUT: no answer.
                        tracing::debug!(status, "umad send reported failure");
                        in_flight.remove(&low);
                        self.lost(seq);
                        continue;
                    }
                    if !is_response {
                        // A request that happens to share our TID.
                        continue;
                    }
                    in_flight.remove(&low);
                    self.window.answered();
                    Header::new_unchecked(&mut mad[..]).set_transaction_id(tid);
                    answers[index] = Some(mad);
                }
                None => {
                    let now = Instant::now();
                    let mut lost = Vec::new();
                    in_flight.retain(|_, v| {
                        let keep = v.2 > now;
                        if !keep {
                            lost.push(v.3);
                        }
                        keep
                    });
                    for seq in lost {
                        self.lost(seq);
                    }
                }
            }
        }
        Ok(answers)
    }
}

/// What a [`UmadPort`] is bound as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The SM: SMInfo requests, traps and SA requests are delivered, issm
    /// is held.
    Sm,
    /// A port that only asks ([`UmadPort::open_observer`]).
    Observer,
}

/// A plain GSI client for tools and tests (an SA load generator, a host
/// joining a multicast group): one agent on QP1 for one management class,
/// one request at a time, answers matched by TID.
#[derive(Debug)]
pub struct GsiClient {
    device: UmadDevice,
    fd: UmadFd,
    agent: u32,
}

impl GsiClient {
    /// Binds `ca`/`port` (or the default choice) and registers an agent for
    /// `mgmt_class`/`class_version`, claiming the unsolicited `methods`
    /// (bit n = method n; e.g. Report to receive SA Reports).
    pub fn open(
        ca: Option<&str>,
        port: Option<u8>,
        mgmt_class: u8,
        class_version: u8,
        methods: u128,
    ) -> Result<Self, TransportError> {
        let root = sysfs_root();
        let device = choose(&devices_in(&root), ca, port, &root).map_err(|e| TransportError::Closed(e.to_string()))?;
        let path = format!("/dev/infiniband/umad{}", device.index);
        let fd = UmadFd::open(&path, OFlag::O_RDWR).map_err(|e| io(&path, e))?;
        let agent = register_on(&fd, 1, mgmt_class, class_version, methods, 0)?;
        Ok(Self { device, fd, agent })
    }

    /// The device bound.
    pub fn device(&self) -> &UmadDevice {
        &self.device
    }

    /// The port's LID and its SM's LID, as sysfs (or umad2sim) reports them.
    pub fn lids(&self) -> (Option<u16>, Option<u16>) {
        port_lids_in(&sysfs_root(), &self.device)
    }

    /// Sends `mad` to `dlid` QP1 and waits up to `timeout` for the answer
    /// with the same TID (lower 32 bits: the kernel owns the upper half).
    pub fn request(&mut self, dlid: u16, mad: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>, TransportError> {
        GmpAgent::request(self, dlid, mad, timeout)
    }

    /// Sends one MAD; `timeout_ms` 0 waits for no answer, otherwise the
    /// kernel keeps the request on its wait list that long.
    pub fn send(&mut self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        write_umad(self.fd.0, self.agent, Address { dlid, dqpn, qkey: GSI_QKEY }, mad, MAD_LEN, timeout_ms)
    }

    /// The next MAD read before `deadline` (an answer or an unsolicited
    /// request such as a Report), with the sender's LID; `None` on timeout.
    /// The kernel's own "no answer" notices are skipped.
    pub fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, TransportError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // SAFETY: the descriptor is open while `self` lives.
            let bfd = unsafe { BorrowedFd::borrow_raw(self.fd.0) };
            let mut fds = [PollFd::new(bfd, PollFlags::POLLIN)];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX).max(1);
            match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(io("umad poll", e)),
            }
            let mut rbuf = [0u8; HDR_LEN + MAD_LEN];
            // SAFETY: `rbuf` is valid for its length (libc read: see reader_loop).
            let n = unsafe { libc::read(self.fd.0, rbuf.as_mut_ptr().cast(), rbuf.len()) };
            let Ok(n) = usize::try_from(n) else { continue };
            let n = n.min(rbuf.len());
            if n < HDR_LEN + 24 {
                continue;
            }
            let status = u32::from_ne_bytes([rbuf[4], rbuf[5], rbuf[6], rbuf[7]]);
            if status != 0 {
                continue;
            }
            let slid = u16::from_be_bytes([rbuf[28], rbuf[29]]);
            let mut mad = vec![0u8; MAD_LEN];
            mad[..n - HDR_LEN].copy_from_slice(&rbuf[HDR_LEN..n]);
            return Ok(Some((slid, mad)));
        }
    }
}

impl GmpAgent for GsiClient {
    fn send(&mut self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        GsiClient::send(self, dlid, dqpn, mad, timeout_ms)
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, TransportError> {
        GsiClient::receive(self, deadline)
    }
}

impl GmpSender for MadSender {
    fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), TransportError> {
        MadSender::reply(self, to, mad)
    }

    fn send_gsi(&self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        MadSender::send_gsi(self, dlid, dqpn, mad, timeout_ms)
    }
}

/// One MAD read from the device.
#[derive(Debug)]
struct Received {
    /// The `ib_user_mad` status: non-zero when the kernel returns our own
    /// request unanswered.
    status: u32,
    mad: Vec<u8>,
}

impl SmpPort for UmadPort {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.send_to(PERMISSIVE_LID, mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let mut answers = self.exchange_window(&[Outgoing { dlid, mad: mad.to_vec() }])?;
        Ok(answers.pop().flatten())
    }

    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        self.exchange_window(batch)
    }

    fn window_stats(&self) -> Option<WindowStats> {
        Some(self.window.stats())
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let traps = &mut self.traps;
        let got = self.runtime.block_on(async { tokio::time::timeout(timeout, traps.recv()).await });
        match got {
            Ok(Some(trap)) => {
                self.repress(&trap);
                Ok(Some(trap))
            }
            Ok(None) => Err(self.stopped()),
            Err(_elapsed) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(index: u32, ca: &str, port: u8, state: u8) -> UmadDevice {
        UmadDevice {
            index,
            ca: ca.into(),
            port,
            state,
            port_guid: 0x100 + u64::from(index),
            link_layer: LinkLayer::InfiniBand,
            sm_disabled: false,
        }
    }

    #[test]
    fn a_port_is_found_by_the_guid_in_its_gid() {
        assert_eq!(gid_port_guid("fe80:0000:0000:0000:0002:c903:0000:0001"), Some(0x0002_c903_0000_0001));
        assert_eq!(gid_port_guid("0000:0000:0000:0000:0002:c901:0000:0001\n"), Some(0x0002_c901_0000_0001));
        assert_eq!(gid_port_guid("fe80::1"), None);
        assert_eq!(gid_port_guid("fe80:0000:0000:0000:0002:c903:0000:zzzz"), None);
        let all = [dev(0, "a", 1, 1), dev(1, "a", 2, 2)];
        assert_eq!(find_guid(&all, 0x101).map(|d| d.port), Some(2));
        assert_eq!(find_guid(&all, 0x999), None);
        assert_eq!(find_guid(&[UmadDevice { port_guid: 0, ..dev(0, "a", 1, 1) }], 0), None);
    }

    #[test]
    fn choice_prefers_active_then_linked_then_first() {
        let all = [dev(0, "a", 1, 1), dev(1, "a", 2, 2), dev(2, "b", 1, 4)];
        let pick = |ds: &[UmadDevice], ca, port| choose(ds, ca, port, "/sys").map(|d| d.index);
        assert_eq!(pick(&all, None, None), Ok(2));
        assert_eq!(pick(&all[..2], None, None), Ok(1));
        assert_eq!(pick(&all[..1], None, None), Ok(0));
        assert_eq!(pick(&all, Some("a"), Some(1)), Ok(0));
        assert!(matches!(pick(&all, Some("c"), None), Err(NoPort::NoMatch { .. })));
    }

    /// A sysfs tree of umad devices: (HCA, port, state, link layer or
    /// none) per umad index.
    fn fake_sysfs(ports: &[(&str, u8, &str, Option<&str>)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp dir");
        for (i, (ca, port, state, layer)) in ports.iter().enumerate() {
            let umad = root.path().join(format!("class/infiniband_mad/umad{i}"));
            std::fs::create_dir_all(&umad).expect("mkdir");
            std::fs::write(umad.join("ibdev"), format!("{ca}\n")).expect("write");
            std::fs::write(umad.join("port"), format!("{port}\n")).expect("write");
            let p = root.path().join(format!("class/infiniband/{ca}/ports/{port}"));
            std::fs::create_dir_all(p.join("gids")).expect("mkdir");
            std::fs::write(p.join("state"), format!("{state}\n")).expect("write");
            std::fs::write(p.join("gids/0"), format!("fe80:0000:0000:0000:0002:c903:0000:{:04x}\n", i + 1)).expect("write");
            if let Some(l) = layer {
                std::fs::write(p.join("link_layer"), format!("{l}\n")).expect("write");
            }
        }
        root
    }

    #[test]
    fn of_an_smi_gsi_pair_the_sm_binds_the_smi_device_and_sends_general_mads_by_the_gsi_one() {
        // Two devices of one port GUID (a planarized port): the second's
        // CapabilityMask says IsSMDisabled, as rdma-core tells the pair.
        let root = tempfile::tempdir().expect("temp dir");
        for (i, (ca, cap)) in [("mlx5_gsi", "0xa651ec48"), ("mlx5_smi", "0xa651e848"), ("mlx5_9", "0xa651e848")].iter().enumerate() {
            let umad = root.path().join(format!("class/infiniband_mad/umad{i}"));
            std::fs::create_dir_all(&umad).expect("mkdir");
            std::fs::write(umad.join("ibdev"), format!("{ca}\n")).expect("write");
            std::fs::write(umad.join("port"), "1\n").expect("write");
            let p = root.path().join(format!("class/infiniband/{ca}/ports/1"));
            std::fs::create_dir_all(p.join("gids")).expect("mkdir");
            std::fs::write(p.join("state"), "4: ACTIVE\n").expect("write");
            let guid = if i < 2 { 0x77 } else { 0x99 };
            std::fs::write(p.join("gids/0"), format!("fe80:0000:0000:0000:0002:c903:0000:{guid:04x}\n")).expect("write");
            std::fs::write(p.join("cap_mask"), format!("{cap}\n")).expect("write");
        }
        let r = root.path().to_str().expect("utf-8");
        let all = devices_in(r);
        assert_eq!(all.iter().map(|d| d.sm_disabled).collect::<Vec<_>>(), [true, false, false]);
        // Active and first, the GSI half is still passed over.
        let smi = choose(&all, None, None, r).expect("a port");
        assert_eq!(smi.ca, "mlx5_smi");
        assert_eq!(gsi_pair(&all, &smi).map(|d| d.ca), Some("mlx5_gsi".to_string()));
        // A port without a pair sends everything itself.
        assert_eq!(gsi_pair(&all, &all[2]), None);
        // By GUID, the pair's SMI device.
        assert_eq!(find_guid(&all, 0x0002_c903_0000_0077).map(|d| d.ca), Some("mlx5_smi".to_string()));
        // Named, the GSI half is refused, naming the SMI device.
        let e = choose(&all, Some("mlx5_gsi"), None, r).expect_err("SM disabled");
        assert!(e.to_string().contains("IsSMDisabled") && e.to_string().contains("mlx5_smi port 1"), "{e}");
    }

    fn choose_in(root: &tempfile::TempDir, ca: Option<&str>, port: Option<u8>) -> Result<(String, u8), NoPort> {
        let root = root.path().to_str().expect("utf-8 path");
        choose(&devices_in(root), ca, port, root).map(|d| (d.ca, d.port))
    }

    #[test]
    fn a_roce_port_beside_an_infiniband_hca_is_never_chosen() {
        // The RoCE device comes first and is Active; the IB port is only
        // Init (its SM has not brought it up yet).
        let root = fake_sysfs(&[("mlx5_0", 1, "4: ACTIVE", Some("Ethernet")), ("mlx5_1", 1, "2: INIT", Some("InfiniBand"))]);
        let all = devices_in(root.path().to_str().expect("utf-8"));
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].link_layer, LinkLayer::Ethernet);
        assert_eq!(all[1].port_guid, 0x0002_c903_0000_0002);
        assert_eq!(choose_in(&root, None, None), Ok(("mlx5_1".to_string(), 1)));
        // Named, it is refused with the reason.
        let refused = choose_in(&root, Some("mlx5_0"), None).expect_err("a RoCE port");
        assert!(matches!(refused, NoPort::NotInfiniBand { .. }), "{refused:?}");
        assert!(refused.to_string().contains("mlx5_0 port 1 is an Ethernet (RoCE) port, not InfiniBand"), "{refused}");
    }

    #[test]
    fn of_two_infiniband_hcas_the_active_port_is_chosen_and_a_missing_link_layer_is_infiniband() {
        let root = fake_sysfs(&[("mlx4_0", 1, "1: DOWN", None), ("mlx5_0", 1, "4: ACTIVE", Some("InfiniBand"))]);
        assert_eq!(choose_in(&root, None, None), Ok(("mlx5_0".to_string(), 1)));
        assert_eq!(choose_in(&root, Some("mlx4_0"), Some(1)), Ok(("mlx4_0".to_string(), 1)));
        assert!(matches!(choose_in(&root, Some("mlx4_0"), Some(2)), Err(NoPort::NoMatch { .. })));
    }

    #[test]
    fn none_active_takes_the_linked_port_then_the_first() {
        let root = fake_sysfs(&[("a", 1, "1: DOWN", None), ("a", 2, "2: INIT", None)]);
        assert_eq!(choose_in(&root, None, None), Ok(("a".to_string(), 2)));
        let root = fake_sysfs(&[("a", 1, "1: DOWN", None), ("b", 1, "1: DOWN", None)]);
        assert_eq!(choose_in(&root, None, None), Ok(("a".to_string(), 1)));
    }

    #[test]
    fn no_device_and_only_roce_say_why() {
        let root = fake_sysfs(&[]);
        let e = choose_in(&root, None, None).expect_err("nothing");
        assert!(matches!(e, NoPort::NoDevice { .. }) && e.to_string().contains("no umad device"), "{e}");
        let root = fake_sysfs(&[("mlx5_0", 1, "4: ACTIVE", Some("Ethernet")), ("mlx5_0", 2, "4: ACTIVE", Some("Ethernet"))]);
        let e = choose_in(&root, None, None).expect_err("only RoCE");
        assert!(matches!(e, NoPort::NoInfiniBand { .. }) && e.to_string().contains("no InfiniBand port"), "{e}");
    }

    /// A stand-in for the umad device that behaves as `ib_umad_read` does:
    /// a message longer than the buffer fails with `ENOSPC`, leaves its
    /// header (with the length needed) in the buffer and stays queued.
    #[derive(Clone, Default)]
    struct FakeDevice(Arc<std::sync::Mutex<std::collections::VecDeque<Queued>>>);

    /// What the fake device gives next: a message or an error.
    type Queued = Result<Vec<u8>, Errno>;

    impl FakeDevice {
        fn push(&self, item: Result<Vec<u8>, Errno>) {
            self.0.lock().unwrap().push_back(item);
        }
        fn is_empty(&self) -> bool {
            self.0.lock().unwrap().is_empty()
        }
    }

    impl MadSource for FakeDevice {
        fn wait(&mut self, ms: u16) -> Result<bool, Errno> {
            if self.is_empty() {
                std::thread::sleep(Duration::from_millis(u64::from(ms.min(5))));
                return Ok(false);
            }
            Ok(true)
        }
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
            let mut queue = self.0.lock().unwrap();
            match queue.front() {
                None => Err(Errno::EAGAIN),
                Some(Err(_)) => Err(queue.pop_front().unwrap().unwrap_err()),
                Some(Ok(msg)) if msg.len() > buf.len() => {
                    buf[..HDR_LEN].copy_from_slice(&msg[..HDR_LEN]);
                    Err(Errno::ENOSPC)
                }
                Some(Ok(_)) => {
                    let msg = queue.pop_front().unwrap().unwrap();
                    buf[..msg.len()].copy_from_slice(&msg);
                    Ok(msg.len())
                }
            }
        }
    }

    /// A received message: the umad header, then a MAD of `body` bytes of
    /// `class`/`method` from `slid`, its last byte `mark`.
    fn message(class: u8, m: u8, slid: u16, body: usize, mark: u8) -> Vec<u8> {
        let mut msg = vec![0u8; HDR_LEN + body];
        let total = u32::try_from(msg.len()).unwrap();
        msg[16..20].copy_from_slice(&total.to_ne_bytes());
        msg[20..24].copy_from_slice(&1u32.to_be_bytes());
        msg[28..30].copy_from_slice(&slid.to_be_bytes());
        msg[HDR_LEN..HDR_LEN + 4].copy_from_slice(&[1, class, 2, m]);
        *msg.last_mut().unwrap() = mark;
        msg
    }

    struct Harness {
        device: FakeDevice,
        stop: Arc<AtomicBool>,
        thread: std::thread::JoinHandle<()>,
        responses: Arc<Answers>,
        traps: tokio::sync::mpsc::Receiver<TrapMad>,
        sa: std::sync::mpsc::Receiver<IncomingMad>,
        trap_drops: Arc<AtomicU64>,
        fault: Arc<OnceLock<String>>,
    }

    fn start(device: FakeDevice) -> Harness {
        let (sinks, taps) = Sinks::channel(16);
        let Taps { responses, traps, sa_requests: sa, trap_drops, fault, .. } = taps;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (device, stop) = (device.clone(), Arc::clone(&stop));
            move || reader_loop(device, stop, sinks, Arc::new(ReadTurn::default()))
        });
        Harness { device, stop, thread, responses, traps, sa, trap_drops, fault }
    }

    const LIVENESS: Duration = Duration::from_secs(20);

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + LIVENESS;
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_reassembled_rmpp_request_and_transient_errors_do_not_stop_the_reader() {
        let device = FakeDevice::default();
        // An SA request four times longer than one MAD, as the kernel
        // hands over a multi-segment RMPP transfer.
        device.push(Ok(message(CLASS_SA, method::GET, 7, 1024, 0xA5)));
        device.push(Err(Errno::ENOMEM));
        device.push(Err(Errno::EAGAIN));
        device.push(Ok(message(CLASS_LID, method::TRAP, 9, MAD_LEN, 0)));
        let mut h = start(device);

        let long = h.sa.recv_timeout(LIVENESS).expect("the long SA request is delivered");
        // Its first MAD only: what the SA reads, all that is held queued.
        assert_eq!((long.slid, long.mad.len()), (7, MAD_LEN));
        assert_eq!(&long.mad[..4], &[1, CLASS_SA, 2, method::GET]);
        let trap = h.traps.blocking_recv().expect("the trap behind it is delivered");
        assert_eq!(trap.slid, 9);
        assert_eq!(trap.mad.len(), MAD_LEN);

        // Still reading: a later request gets through too.
        h.device.push(Ok(message(CLASS_SA, method::GET, 8, MAD_LEN, 1)));
        let next = h.sa.recv_timeout(LIVENESS).expect("the reader still runs");
        assert_eq!((next.slid, next.mad.len()), (8, MAD_LEN));
        assert!(!h.thread.is_finished());
        assert!(h.responses.try_take().is_none(), "no error reported for transient failures");
        assert!(h.fault.get().is_none());

        h.stop.store(true, Ordering::Relaxed);
        h.thread.join().expect("reader ends when told");
    }

    #[test]
    fn a_dead_descriptor_is_reported_as_a_closed_transport() {
        let device = FakeDevice::default();
        device.push(Ok(message(CLASS_SA, method::GET, 7, MAD_LEN, 0)));
        device.push(Err(Errno::ENODEV));
        let h = start(device);
        assert!(h.sa.recv_timeout(LIVENESS).is_ok());
        let mut taken = VecDeque::new();
        assert!(matches!(h.responses.take(&mut taken, Instant::now() + LIVENESS), Taken::Some));
        match taken.pop_front() {
            Some(Err(TransportError::Closed(reason))) => assert!(reason.contains("umad read"), "{reason}"),
            other => panic!("expected a closed transport, got {other:?}"),
        }
        h.thread.join().expect("reader ends");
        assert!(h.fault.get().is_some_and(|f| f.contains("umad read")));
        // Every later wait sees the end as well.
        assert!(matches!(h.responses.take(&mut taken, Instant::now() + LIVENESS), Taken::Closed));
    }

    #[test]
    fn the_trap_queue_is_bounded_and_drops_are_counted() {
        let device = FakeDevice::default();
        let extra = 44;
        for i in 0..TRAP_QUEUE + extra {
            device.push(Ok(message(CLASS_LID, method::TRAP, u16::try_from(i + 1).unwrap(), MAD_LEN, 0)));
        }
        let mut h = start(device);
        wait_until("the reader to drain the device", || h.device.is_empty());
        wait_until("the drops to be counted", || h.trap_drops.load(Ordering::Relaxed) == extra as u64);
        let mut queued = 0;
        while h.traps.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, TRAP_QUEUE);
        assert!(!h.thread.is_finished());
        // Room again: the next trap is taken.
        h.device.push(Ok(message(CLASS_LID, method::TRAP, 4000, MAD_LEN, 0)));
        assert_eq!(h.traps.blocking_recv().map(|t| t.slid), Some(4000));
        h.stop.store(true, Ordering::Relaxed);
        h.thread.join().expect("reader ends when told");
    }

    #[test]
    fn read_step_grows_within_its_limit_only() {
        let mut buf = vec![0u8; READ_BUF];
        let device = FakeDevice::default();
        let mut too_long = message(CLASS_SA, method::GET, 7, MAD_LEN, 0);
        too_long[16..20].copy_from_slice(&u32::try_from(MAX_READ + 1).unwrap().to_ne_bytes());
        too_long.resize(READ_BUF + 1, 0);
        device.push(Ok(too_long));
        assert!(matches!(read_step(&mut device.clone(), &mut buf), Step::Dead(_)));

        // A header that names no larger size: retried later, not spun on.
        let device = FakeDevice::default();
        let mut lying = message(CLASS_SA, method::GET, 7, MAD_LEN, 0);
        lying[16..20].copy_from_slice(&100u32.to_ne_bytes());
        lying.resize(READ_BUF + 1, 0);
        device.push(Ok(lying));
        let mut buf = vec![0u8; READ_BUF];
        assert_eq!(read_step(&mut device.clone(), &mut buf), Step::Failed(Errno::ENOSPC));
    }

    #[test]
    fn reg_req_ioctl_number_matches_the_kernel() {
        // _IOWR(0x1b, 1, 28 bytes) as libibumad computes it.
        assert_eq!(nix::request_code_readwrite!(IB_IOCTL_MAGIC, 1, std::mem::size_of::<RegReq>()), 0xc01c_1b01);
    }
}
