//! [`SmpPort`] over the Linux user MAD interface (`/dev/infiniband/umadN`).
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
//! on tokio timers. SubnTraps (trap 128 from a switch whose port changed
//! state) arrive on the LID-routed agent; they are queued for the SM loop
//! and repressed when it takes them.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::Mode;

use super::transport::{Outgoing, SmpPort, TransportError, TrapMad};
use sm_mad::mad::method;
use sm_mad::smp::PERMISSIVE_LID;

/// `struct ib_user_mad_hdr_old`, the header without the P_Key index, which
/// the kernel uses unless `IB_USER_MAD_ENABLE_PKEY` is issued. umad2sim
/// takes its header size from libibumad's `umad_size()`, which is 56 until
/// libibumad's own `umad_open_port` enables P_Keys; we never call that, and
/// SMPs always go out on P_Key index 0, so the old header is the one size
/// both the kernel and umad2sim agree on.
const HDR_LEN: usize = 56;
/// Longest MAD the SMP classes carry.
const MAD_LEN: usize = 256;
/// Subnet management classes: directed route and LID routed.
const CLASS_DR: u8 = 0x81;
const CLASS_LID: u8 = 0x01;
/// The kernel's `ib_umad` magic.
const IB_IOCTL_MAGIC: u8 = 0x1b;
/// Where the MAD header keeps the transaction ID.
const TID_OFFSET: usize = 8;

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

/// The umad devices the system (or umad2sim) lists, in index order. Probes
/// indices rather than reading the directory: `readdir` is not among the
/// calls umad2sim interposes reliably for Rust, `open` is.
pub fn devices() -> Vec<UmadDevice> {
    let mut found = Vec::new();
    // Indices may have gaps (unplugged HCAs), so probe a fixed range.
    for index in 0..64u32 {
        let base = format!("/sys/class/infiniband_mad/umad{index}");
        let Some(ca) = read_sysfs(&format!("{base}/ibdev")) else { continue };
        let Some(port) = read_sysfs(&format!("{base}/port")).and_then(|p| p.parse::<u8>().ok()) else {
            continue;
        };
        // "4: ACTIVE"
        let state = read_sysfs(&format!("/sys/class/infiniband/{ca}/ports/{port}/state"))
            .and_then(|s| s.split(':').next().and_then(|n| n.trim().parse::<u8>().ok()))
            .unwrap_or(0);
        found.push(UmadDevice { index, ca, port, state });
    }
    found
}

/// Which device to bind: the one asked for, else the first Active port,
/// else the first port with a link (an SM's own port is only Init until the
/// SM brings it up), else the first device at all.
pub fn choose(devices: &[UmadDevice], ca: Option<&str>, port: Option<u8>) -> Option<UmadDevice> {
    let wanted: Vec<&UmadDevice> =
        devices.iter().filter(|d| ca.is_none_or(|c| d.ca == c) && port.is_none_or(|p| d.port == p)).collect();
    wanted
        .iter()
        .find(|d| d.state == 4)
        .or_else(|| wanted.iter().find(|d| d.state >= 2))
        .or_else(|| wanted.first())
        .map(|d| (*d).clone())
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
/// to tokio channels, responses on one, traps on the other, and the
/// sending side waits on those with tokio's timers. Only the sending side
/// writes, so the two threads never share a direction of the descriptor.
pub struct UmadPort {
    device: UmadDevice,
    /// Held open only so the port advertises IsSM (and ibsim marks us as
    /// the SM); never read.
    _issm: Option<UmadFd>,
    dr_agent: u32,
    lid_agent: u32,
    timeout: Duration,
    window: usize,
    runtime: tokio::runtime::Runtime,
    responses: tokio::sync::mpsc::UnboundedReceiver<Result<Received, TransportError>>,
    traps: tokio::sync::mpsc::UnboundedReceiver<TrapMad>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    // Last: closed only after the reader has been joined (see Drop).
    fd: UmadFd,
}

impl std::fmt::Debug for UmadPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UmadPort")
            .field("device", &self.device)
            .field("fd", &self.fd)
            .field("timeout", &self.timeout)
            .field("window", &self.window)
            .finish()
    }
}

impl Drop for UmadPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            // It wakes from poll() within READER_SLICE.
            let _ = reader.join();
        }
    }
}

/// How often the reader looks at its stop flag.
const READER_SLICE_MS: i32 = 50;

/// The poll thread: every MAD read goes to `responses`, except traps,
/// which go to `traps`. Ends when told to, when both receivers are gone,
/// or on an error it reports.
fn reader_loop(
    fd: RawFd,
    stop: Arc<AtomicBool>,
    responses: tokio::sync::mpsc::UnboundedSender<Result<Received, TransportError>>,
    traps: tokio::sync::mpsc::UnboundedSender<TrapMad>,
) {
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: the descriptor outlives this thread (UmadPort joins it
        // before closing); `borrow_raw` does not check it with the kernel.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut fds = [PollFd::new(bfd, PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, PollTimeout::from(READER_SLICE_MS as u16)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => {
                let _ = responses.send(Err(io("umad poll", e)));
                return;
            }
        }
        let mut rbuf = [0u8; HDR_LEN + MAD_LEN];
        // Plain libc read: umad2sim returns -EWOULDBLOCK as a value (not -1
        // with errno) when its queue is empty, which nix would misread as
        // a huge length.
        // SAFETY: `rbuf` is valid for its length.
        let n = unsafe { libc::read(fd, rbuf.as_mut_ptr().cast(), rbuf.len()) };
        if n < 0 {
            let e = Errno::last();
            if n == -1 && !matches!(e, Errno::EINTR | Errno::EAGAIN) {
                let _ = responses.send(Err(io("umad read", e)));
                return;
            }
            continue;
        }
        let n = usize::try_from(n).unwrap_or(0).min(rbuf.len());
        if n < HDR_LEN + 24 {
            tracing::debug!(len = n, "short umad read ignored");
            continue;
        }
        let status = u32::from_ne_bytes([rbuf[4], rbuf[5], rbuf[6], rbuf[7]]);
        let slid = u16::from_be_bytes([rbuf[28], rbuf[29]]);
        let mut mad = vec![0u8; MAD_LEN];
        mad[..n - HDR_LEN].copy_from_slice(&rbuf[HDR_LEN..n]);
        let delivered = if status == 0 && mad[1] == CLASS_LID && mad[3] == method::TRAP {
            traps.send(TrapMad { slid, mad }).is_ok()
        } else {
            responses.send(Ok(Received { status, mad })).is_ok()
        };
        if !delivered && responses.is_closed() && traps.is_closed() {
            return;
        }
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::Io(format!("{what}: {e}"))
}

impl UmadPort {
    /// Binds to `ca`/`port` (or the default choice, see [`choose`]) with a
    /// per-SMP answer timeout.
    pub fn open(ca: Option<&str>, port: Option<u8>, timeout: Duration, window: usize) -> Result<Self, TransportError> {
        let all = devices();
        let Some(device) = choose(&all, ca, port) else {
            return Err(TransportError::Closed(if all.is_empty() {
                "no umad device (is ib_umad loaded?)".to_string()
            } else {
                format!("no umad device matches CA {ca:?} port {port:?}")
            }));
        };
        let path = format!("/dev/infiniband/umad{}", device.index);
        let fd = UmadFd::open(&path, OFlag::O_RDWR).map_err(|e| io(&path, e))?;
        let dr_agent = Self::register(&fd, CLASS_DR, 0)?;
        // The LID-routed agent also claims SubnTrap, so that the traps
        // switches send to the SM's LID reach us.
        let lid_agent = Self::register(&fd, CLASS_LID, 1 << method::TRAP)?;
        // Non-blocking: another SM holding issm must not hang us.
        let issm_path = format!("/dev/infiniband/issm{}", device.index);
        let issm = match UmadFd::open(&issm_path, OFlag::O_RDWR | OFlag::O_NONBLOCK) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!("{issm_path}: {e}; the port will not advertise IsSM");
                None
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| io("tokio runtime", e))?;
        let (response_tx, responses) = tokio::sync::mpsc::unbounded_channel();
        let (trap_tx, traps) = tokio::sync::mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let raw = fd.0;
        let reader = std::thread::Builder::new()
            .name("umad-poll".into())
            .spawn({
                let stop = Arc::clone(&stop);
                move || reader_loop(raw, stop, response_tx, trap_tx)
            })
            .map_err(|e| io("umad poll thread", e))?;
        tracing::info!(ca = %device.ca, port = device.port, umad = device.index, window, "umad transport bound");
        Ok(Self {
            device,
            _issm: issm,
            dr_agent,
            lid_agent,
            timeout,
            window: window.max(1),
            runtime,
            responses,
            traps,
            stop,
            reader: Some(reader),
            fd,
        })
    }

    fn register(fd: &UmadFd, mgmt_class: u8, methods: u32) -> Result<u32, TransportError> {
        // Responses reach an agent by the TID the kernel stamps; only
        // unsolicited methods need claiming.
        let mut req = RegReq { mgmt_class, mgmt_class_version: 1, method_mask: [methods, 0, 0, 0], ..RegReq::default() };
        // SAFETY: `req` is the `ib_user_mad_reg_req` the ioctl number encodes.
        unsafe { register_agent(fd.0, &mut req) }
            .map_err(|e| io(&format!("IB_USER_MAD_REGISTER_AGENT class {mgmt_class:#x}"), e))?;
        Ok(req.id)
    }

    /// The device and port bound.
    pub fn device(&self) -> &UmadDevice {
        &self.device
    }

    /// Writes one MAD to `dlid`. `timeout_ms` 0 sends without waiting for
    /// an answer (a TrapRepress); otherwise the kernel keeps the request on
    /// its wait list that long, since a zero timeout would make it drop the
    /// answer as unsolicited.
    fn write_mad(&mut self, dlid: u16, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        if mad.len() < 24 || mad.len() > MAD_LEN {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        }
        let agent = match mad[1] {
            CLASS_DR => self.dr_agent,
            CLASS_LID => self.lid_agent,
            c => return Err(TransportError::Unsendable(format!("management class {c:#x} is not an SMP"))),
        };
        let mut buf = [0u8; HDR_LEN + MAD_LEN];
        buf[0..4].copy_from_slice(&agent.to_ne_bytes());
        buf[8..12].copy_from_slice(&timeout_ms.to_ne_bytes());
        buf[16..20].copy_from_slice(&((HDR_LEN + MAD_LEN) as u32).to_ne_bytes());
        // qpn 0 (SMI) and qkey 0 are already zero; the LID is big-endian.
        buf[28..30].copy_from_slice(&dlid.to_be_bytes());
        buf[HDR_LEN..HDR_LEN + mad.len()].copy_from_slice(mad);
        loop {
            // SAFETY: `buf` is valid for its length.
            let n = unsafe { libc::write(self.fd.0, buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(());
            }
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(io("umad write", e)),
            }
        }
    }

    /// The next MAD the poll thread read, if one comes before `deadline`.
    fn next_response(&mut self, deadline: Instant) -> Result<Option<Received>, TransportError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let responses = &mut self.responses;
        match self.runtime.block_on(async { tokio::time::timeout(left, responses.recv()).await }) {
            Ok(Some(r)) => r.map(Some),
            Ok(None) => Err(TransportError::Closed("the umad poll thread stopped".into())),
            Err(_elapsed) => Ok(None),
        }
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

    /// Sends `batch` with at most `window` SMPs in flight, each waited for
    /// `timeout`; answers in batch order.
    fn exchange_window(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        let timeout_ms = u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        // Margin over the kernel's own timeout so its ETIMEDOUT report is
        // what ends the wait on hardware.
        let wait = self.timeout + Duration::from_millis(50);
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; batch.len()];
        // Lower 32 TID bits (the kernel owns the upper half) → (index,
        // full TID, deadline).
        let mut in_flight: HashMap<[u8; 4], (usize, [u8; 8], Instant)> = HashMap::new();
        let mut next = 0;
        loop {
            while in_flight.len() < self.window && next < batch.len() {
                let o = &batch[next];
                if o.mad.len() < TID_OFFSET + 8 {
                    return Err(TransportError::Unsendable(format!("MAD of {} bytes", o.mad.len())));
                }
                self.write_mad(o.dlid, &o.mad, timeout_ms)?;
                let mut tid = [0u8; 8];
                tid.copy_from_slice(&o.mad[TID_OFFSET..TID_OFFSET + 8]);
                let low = [tid[4], tid[5], tid[6], tid[7]];
                in_flight.insert(low, (next, tid, Instant::now() + wait));
                next += 1;
            }
            let Some(earliest) = in_flight.values().map(|v| v.2).min() else { break };
            match self.next_response(earliest)? {
                Some(Received { status, mut mad }) => {
                    let low = [mad[TID_OFFSET + 4], mad[TID_OFFSET + 5], mad[TID_OFFSET + 6], mad[TID_OFFSET + 7]];
                    let Some(&(index, tid, _)) = in_flight.get(&low) else {
                        tracing::debug!("umad read of another transaction ignored");
                        continue;
                    };
                    if status != 0 {
                        // The kernel hands back our own request with
                        // ETIMEDOUT: no answer.
                        tracing::debug!(status, "umad send reported failure");
                        in_flight.remove(&low);
                        continue;
                    }
                    if mad[3] & 0x80 == 0 {
                        // A request that happens to share our TID.
                        continue;
                    }
                    in_flight.remove(&low);
                    mad[TID_OFFSET..TID_OFFSET + 8].copy_from_slice(&tid);
                    answers[index] = Some(mad);
                }
                None => {
                    let now = Instant::now();
                    in_flight.retain(|_, v| v.2 > now);
                }
            }
        }
        Ok(answers)
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

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let traps = &mut self.traps;
        let got = self.runtime.block_on(async { tokio::time::timeout(timeout, traps.recv()).await });
        match got {
            Ok(Some(trap)) => {
                self.repress(&trap);
                Ok(Some(trap))
            }
            Ok(None) => Err(TransportError::Closed("the umad poll thread stopped".into())),
            Err(_elapsed) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(index: u32, ca: &str, port: u8, state: u8) -> UmadDevice {
        UmadDevice { index, ca: ca.into(), port, state }
    }

    #[test]
    fn choice_prefers_active_then_linked_then_first() {
        let all = [dev(0, "a", 1, 1), dev(1, "a", 2, 2), dev(2, "b", 1, 4)];
        assert_eq!(choose(&all, None, None).map(|d| d.index), Some(2));
        assert_eq!(choose(&all[..2], None, None).map(|d| d.index), Some(1));
        assert_eq!(choose(&all[..1], None, None).map(|d| d.index), Some(0));
        assert_eq!(choose(&all, Some("a"), Some(1)).map(|d| d.index), Some(0));
        assert_eq!(choose(&all, Some("c"), None), None);
    }

    #[test]
    fn reg_req_ioctl_number_matches_the_kernel() {
        // _IOWR(0x1b, 1, 28 bytes) as libibumad computes it.
        assert_eq!(nix::request_code_readwrite!(IB_IOCTL_MAGIC, 1, std::mem::size_of::<RegReq>()), 0xc01c_1b01);
    }
}
