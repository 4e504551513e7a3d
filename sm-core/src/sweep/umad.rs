//! [`SmpPort`] over the Linux user MAD interface (`/dev/infiniband/umadN`).
//!
//! Every libc call here goes to the plain `open`/`read`/`write`/`ioctl`/
//! `poll` symbols on purpose: ibsim's `libumad2sim.so` interposes exactly
//! those (not `open64`, which Rust's `std::fs` uses), and hands out fds of
//! 1024 and up that are not kernel fds, so only `poll()` can wait on them.
//! The same code therefore talks to a real HCA and, under `LD_PRELOAD`, to
//! ibsim.
//!
//! One SMP is outstanding at a time, as [`SmpPort`] asks; the windowed
//! transport of design.md will replace the waiting, not the wire format.
//! SubnTraps (trap 128 from a switch whose port changed state) arrive on
//! the LID-routed agent; they are repressed at once and queued for the SM
//! loop.

use std::collections::VecDeque;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::Mode;

use super::transport::{SmpPort, TransportError, TrapMad};
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
#[derive(Debug)]
pub struct UmadPort {
    device: UmadDevice,
    fd: UmadFd,
    /// Held open only so the port advertises IsSM (and ibsim marks us as
    /// the SM); never read.
    _issm: Option<UmadFd>,
    dr_agent: u32,
    lid_agent: u32,
    timeout: Duration,
    /// Traps that arrived and were not yet asked for.
    traps: VecDeque<TrapMad>,
}

fn io(what: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::Io(format!("{what}: {e}"))
}

impl UmadPort {
    /// Binds to `ca`/`port` (or the default choice, see [`choose`]) with a
    /// per-SMP answer timeout.
    pub fn open(ca: Option<&str>, port: Option<u8>, timeout: Duration) -> Result<Self, TransportError> {
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
        tracing::info!(ca = %device.ca, port = device.port, umad = device.index, "umad transport bound");
        Ok(Self { device, fd, _issm: issm, dr_agent, lid_agent, timeout, traps: VecDeque::new() })
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

    /// Reads the next MAD that arrives before `deadline`. Traps are queued
    /// for [`SmpPort::wait_trap`] and repressed here, whoever was waiting,
    /// so a trap never gets lost behind a sweep.
    fn read_mad(&mut self, deadline: Instant) -> Result<Option<Received>, TransportError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            // SAFETY: the descriptor outlives this borrow; `borrow_raw`
            // does not check it with the kernel.
            let fd = unsafe { BorrowedFd::borrow_raw(self.fd.0) };
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            match nix::poll::poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(io("umad poll", e)),
            }
            let mut rbuf = [0u8; HDR_LEN + MAD_LEN];
            // Plain libc read: umad2sim returns -EWOULDBLOCK as a value
            // (not -1 with errno) when its queue is empty, which nix would
            // misread as a huge length.
            // SAFETY: `rbuf` is valid for its length.
            let n = unsafe { libc::read(self.fd.0, rbuf.as_mut_ptr().cast(), rbuf.len()) };
            if n < 0 {
                let e = Errno::last();
                if n == -1 && !matches!(e, Errno::EINTR | Errno::EAGAIN) {
                    return Err(io("umad read", e));
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
            if status == 0 && mad[1] == CLASS_LID && mad[3] == method::TRAP {
                self.repress(slid, &mad);
                self.traps.push_back(TrapMad { slid, mad });
                continue;
            }
            return Ok(Some(Received { status, mad }));
        }
    }

    /// Tells the issuer its trap arrived, so it stops repeating it
    /// (IBA 13.4.9); a failure only means the trap will come again.
    fn repress(&mut self, slid: u16, trap: &[u8]) {
        let mut repress = trap.to_vec();
        repress[3] = method::TRAP_REPRESS;
        if let Err(e) = self.write_mad(slid, &repress, 0) {
            tracing::debug!(slid, "TrapRepress not sent: {e}");
        }
    }

    fn exchange(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if mad.len() < TID_OFFSET + 8 {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        }
        let mut tid = [0u8; 8];
        tid.copy_from_slice(&mad[TID_OFFSET..TID_OFFSET + 8]);
        let timeout_ms = u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        self.write_mad(dlid, mad, timeout_ms)?;
        // Margin over the kernel's own timeout so its ETIMEDOUT report is
        // what ends the wait on hardware.
        let deadline = Instant::now() + self.timeout + Duration::from_millis(50);
        while let Some(Received { status, mut mad }) = self.read_mad(deadline)? {
            // The kernel (and umad2sim) replace the TID's upper 32 bits
            // with the agent's, so only the lower half identifies ours.
            if mad[TID_OFFSET + 4..TID_OFFSET + 8] != tid[4..8] {
                tracing::debug!("umad read of another transaction ignored");
                continue;
            }
            if status != 0 {
                // The kernel hands back our own request with ETIMEDOUT.
                tracing::debug!(status, "umad send reported failure");
                return Ok(None);
            }
            if mad[3] & 0x80 == 0 {
                // A request that happens to share our TID, not the answer.
                continue;
            }
            mad[TID_OFFSET..TID_OFFSET + 8].copy_from_slice(&tid);
            return Ok(Some(mad));
        }
        Ok(None)
    }
}

/// One MAD read from the device.
struct Received {
    /// The `ib_user_mad` status: non-zero when the kernel returns our own
    /// request unanswered.
    status: u32,
    mad: Vec<u8>,
}

impl SmpPort for UmadPort {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.exchange(PERMISSIVE_LID, mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.exchange(dlid, mad)
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        if let Some(t) = self.traps.pop_front() {
            return Ok(Some(t));
        }
        let deadline = Instant::now() + timeout;
        while let Some(r) = self.read_mad(deadline)? {
            tracing::debug!(status = r.status, method = r.mad[3], "umad: MAD outside any transaction ignored");
            if let Some(t) = self.traps.pop_front() {
                return Ok(Some(t));
            }
        }
        Ok(self.traps.pop_front())
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
