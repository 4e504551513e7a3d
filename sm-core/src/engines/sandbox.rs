//! The engine host's sandbox, entered before the engine's library is
//! loaded (so its constructors already run inside it):
//!
//! * **Files** (Landlock): every file may be read (an engine reads the
//!   files its options name: a torus-2QoS.conf, an LFT dump, a GUID
//!   list), none written, created, removed or renamed except beneath the
//!   directories the request declares writable (the `dump_dir` the SM gives
//!   engines for their own dumps).
//! * **Network and processes** (seccomp, and Landlock's TCP and scope rules
//!   where the kernel has them): no socket of any family, no `execve`, no
//!   new process (threads are fine), no signal to another process, no
//!   `ptrace` or cross-process memory access, no io_uring (it would bypass
//!   both), no namespaces, mounts, BPF, kernel modules or keyrings, no
//!   terminal input injection. A refused call fails with `EPERM`
//!   (`clone3` with `ENOSYS`, so that the C library falls back to `clone`,
//!   which is checked); the engine sees an ordinary error.
//!
//! Descriptors the host inherited beyond its own (request, answer,
//! library, stdio) are closed first: an SM port or socket left open by
//! mistake cannot reach the engine.
//!
//! Each layer is applied where the kernel allows it; [`Status`] says what
//! was, and the host warns on stderr when a layer is missing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter, SeccompRule};

/// What the sandbox could apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Landlock: fully, partly (an older kernel: some rights not handled),
    /// or not at all (none, with the reason).
    pub landlock: Result<bool, String>,
    /// The seccomp filter, or why not.
    pub seccomp: Result<(), String>,
}

impl Status {
    /// Whether every layer is in force.
    pub fn complete(&self) -> bool {
        matches!(self.landlock, Ok(true)) && self.seccomp.is_ok()
    }

    /// One line for the host's warning.
    pub fn describe(&self) -> String {
        let landlock = match &self.landlock {
            Ok(true) => "landlock: enforced".to_string(),
            Ok(false) => "landlock: partly enforced (this kernel handles only some of its rights)".to_string(),
            Err(e) => format!("landlock: not enforced ({e})"),
        };
        let seccomp = match &self.seccomp {
            Ok(()) => "seccomp: enforced".to_string(),
            Err(e) => format!("seccomp: not enforced ({e})"),
        };
        format!("{landlock}; {seccomp}")
    }
}

/// The directories an engine may write beneath, from its configuration
/// text: its `dump_dir`, when it has one.
pub fn writable_dirs(config: &str) -> Vec<PathBuf> {
    let table: toml::Table = config.parse().unwrap_or_default();
    table.get("dump_dir").and_then(|v| v.as_str()).map(PathBuf::from).into_iter().collect()
}

/// Closes every descriptor above stderr but those in `keep`.
pub fn close_inherited(keep: &[i32]) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    // Collected first: the listing's own descriptor is among them.
    let fds: Vec<i32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    for fd in fds {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closing a descriptor nothing in this process holds an
            // owner of: the host opened none of them (they were inherited),
            // and the directory listing's own is closed already (EBADF).
            let _ = unsafe { libc::close(fd) };
        }
    }
}

/// What this kernel offers the sandbox, without entering it (for
/// `smcore doctor`): Landlock's ABI version (`None`: no Landlock), and
/// whether seccomp filters are there.
pub fn support() -> (Option<i64>, bool) {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // only returns the ABI version (or an error); it creates nothing.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    // The kernel shows a Seccomp line for every process when it has it.
    let seccomp = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:")));
    ((abi > 0).then_some(abi), seccomp)
}

/// Enters the sandbox for the calling thread and everything it starts.
pub fn enter(writable: &[PathBuf]) -> Status {
    Status { landlock: landlock(writable), seccomp: seccomp() }
}

fn landlock(writable: &[PathBuf]) -> Result<bool, String> {
    let abi = ABI::V6;
    let e = |e: landlock::RulesetError| e.to_string();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(e)?
        .scope(Scope::from_all(abi))
        .map_err(e)?
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(e)?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(true),
        RulesetStatus::PartiallyEnforced => Ok(false),
        RulesetStatus::NotEnforced => Err("this kernel has no Landlock".to_string()),
    }
}

fn seccomp() -> Result<(), String> {
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let pid = std::process::id() as u64;
    let always = |calls: &[i64]| calls.iter().map(|&c| (c, Vec::new())).collect::<Vec<_>>();
    let cond = |arg: u8, op: Op, value: u64| Cond::new(arg, Len::Qword, op, value).map_err(|e| e.to_string());
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = always(&[
        // Network, and anything else a socket would reach.
        libc::SYS_socket,
        // Other programs, other processes.
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_tkill,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_send_signal,
        libc::SYS_pidfd_getfd,
        // Ways around the file and call rules.
        libc::SYS_io_uring_setup,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_userfaultfd,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ])
    .into_iter()
    .collect();
    let rule = |conds: Vec<Cond>| SeccompRule::new(conds).map_err(|e| e.to_string());
    // A new process (a thread shares the process: CLONE_THREAD).
    denied.insert(libc::SYS_clone, vec![rule(vec![cond(0, Op::MaskedEq(libc::CLONE_THREAD as u64), 0)?])?]);
    // Signals to others: kill(pid) other than itself or its own group,
    // tgkill of another process.
    denied.insert(libc::SYS_kill, vec![rule(vec![cond(0, Op::Ne, pid)?, cond(0, Op::Ne, 0)?])?]);
    denied.insert(libc::SYS_tgkill, vec![rule(vec![cond(0, Op::Ne, pid)?])?]);
    // Typing into the terminal the SM was started from.
    denied.insert(libc::SYS_ioctl, vec![rule(vec![cond(1, Op::Eq, libc::TIOCSTI)?])?]);
    let install = |rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32| -> Result<(), String> {
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno as u32), arch).map_err(|e| e.to_string())?;
        let program: seccompiler::BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
        seccompiler::apply_filter(&program).map_err(|e| e.to_string())
    };
    install(denied, libc::EPERM)?;
    // clone3's flags are behind a pointer: refused as unknown, so the C
    // library uses clone, whose flags the rule above reads.
    install(always(&[libc::SYS_clone3]).into_iter().collect(), libc::ENOSYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dump_dir_is_the_only_writable_place() {
        assert_eq!(writable_dirs("lmc = 0\ndump_dir = \"/var/log/smcore\"\n"), vec![PathBuf::from("/var/log/smcore")]);
        assert!(writable_dirs("lmc = 0\n").is_empty());
        assert!(writable_dirs("not toml [").is_empty());
    }
}
