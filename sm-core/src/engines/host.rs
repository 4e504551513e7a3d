//! Engines in a process of their own: a crash, an abort, an `exit`, an
//! endless loop or an allocation without end in an engine ends that
//! attempt, never the SM.
//!
//! [`route`] runs one attempt in a child process (`smcore engine-host`,
//! the SM's own binary): the request (engine, configuration, snapshot,
//! previous routing; [`super::wire`]) goes in a memory file the child
//! reads, the answer comes back in another one, never through a pipe. The
//! child limits itself before it loads the library (address space, CPU
//! time, no core file) and the SM kills it when the wall-clock limit
//! passes. Whatever happens to it is a [`HostFailure`] of its own kind,
//! which the chain treats as the engine's failure and falls through.
//!
//! With `engine_isolation = "inline"` engines run in the SM's process as
//! before (trusted builds, benchmarks).

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use sm_abi::{FabricSnapshot, PreviousRouting};
use thiserror::Error;

use super::loader::EngineEntry;
use super::wire::{self, Answer, Request, RequestParts};

/// Where engines run (config `engine_isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// In a child process per attempt (the default).
    #[default]
    Process,
    /// In the SM's own process.
    Inline,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "process" => Ok(Mode::Process),
            "inline" => Ok(Mode::Inline),
            other => Err(format!("`{other}`: engine_isolation is \"process\" or \"inline\"")),
        }
    }
}

/// How engines are run and held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Isolation {
    /// Process or inline.
    pub mode: Mode,
    /// Wall-clock limit of one attempt (`None`: sized from the fabric,
    /// [`default_timeout`]).
    pub timeout: Option<Duration>,
    /// Address-space limit of the engine host in MiB (`None`: half the
    /// machine's memory).
    pub memory_mib: Option<u64>,
}

impl Isolation {
    /// Engines in the SM's process.
    pub const INLINE: Isolation = Isolation { mode: Mode::Inline, timeout: None, memory_mib: None };
}

/// The wall-clock limit when none is configured: generous, and more for a
/// larger fabric (a minute, plus 20 ms per node).
pub fn default_timeout(fabric: &FabricSnapshot) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(20 * fabric.nodes.len() as u64)
}

/// The address-space limit when none is configured: half of MemTotal
/// (8 GiB when /proc/meminfo cannot be read).
pub fn default_memory_mib() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines().find_map(|l| l.strip_prefix("MemTotal:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()))
    });
    total_kib.map_or(8 * 1024, |k| (k / 1024 / 2).max(256))
}

/// What ended an attempt in the engine host, other than the engine's own
/// answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostFailure {
    /// The host could not be started.
    #[error("engine host not started: {0}")]
    Spawn(String),
    /// Killed by a signal (a crash, an abort, the CPU limit).
    #[error("crashed: signal {signal}{hint}")]
    Signal {
        /// Its name (SIGSEGV, SIGABRT, ...).
        signal: String,
        /// What the signal usually means here.
        hint: String,
    },
    /// Exited (the engine called `exit`) before answering.
    #[error("exited with status {0} before answering (the engine ended its process)")]
    Exited(i32),
    /// Still running when the wall-clock limit passed: killed.
    #[error("timed out after {0:?} (engine_timeout); killed")]
    TimedOut(Duration),
    /// An answer that does not parse.
    #[error("malformed answer: {0}")]
    Malformed(String),
}

/// Runs one attempt of `entry` in an engine host.
pub fn route(
    entry: &EngineEntry,
    config: &str,
    fabric: &FabricSnapshot,
    previous: Option<&PreviousRouting>,
    isolation: &Isolation,
) -> Result<Answer, HostFailure> {
    let spawn = |e: &dyn std::fmt::Display| HostFailure::Spawn(e.to_string());
    let request = RequestParts { engine: &entry.name, library: &entry.library, config, fabric, previous };
    let mut request_file = memory_file("smcore-engine-request").map_err(|e| spawn(&e))?;
    let answer_file = memory_file("smcore-engine-answer").map_err(|e| spawn(&e))?;
    let timeout = isolation.timeout.unwrap_or_else(|| default_timeout(fabric));
    let memory = isolation.memory_mib.unwrap_or_else(default_memory_mib);
    let binary = host_binary().map_err(|e| spawn(&e))?;
    // The build in service, as the SM loaded it: its path may hold another
    // build by now (or a broken file the SM refused to load).
    let image = entry.image().map(|i| i.inheritable()).transpose().map_err(|e| spawn(&format!("the library's file: {e}")))?;
    // The host says "answered" on a pipe of its own, so that the SM reads
    // the answer while the host's memory is still being given back.
    let (ready_read, ready_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| spawn(&e))?;
    // A dup has no close-on-exec: the host's copy.
    let ready_child = nix::unistd::dup(&ready_write).map_err(|e| spawn(&e))?;
    let mut command = Command::new(&binary);
    command.arg("engine-host");
    if let Some(fd) = &image {
        command.arg("--library-fd").arg(fd.as_raw_fd().to_string());
    }
    for dir in super::sandbox::writable_dirs(config) {
        command.arg("--writable").arg(dir);
    }
    let mut child = command
        .arg("--request-fd")
        .arg(request_file.as_raw_fd().to_string())
        .arg("--answer-fd")
        .arg(answer_file.as_raw_fd().to_string())
        .arg("--ready-fd")
        .arg(ready_child.as_raw_fd().to_string())
        .arg("--memory-mib")
        .arg(memory.to_string())
        .arg("--cpu-seconds")
        .arg(timeout.as_secs().saturating_add(1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| spawn(&format!("{}: {e}", binary.display())))?;
    // The host has its own copies of these now: the pipe reads end of file
    // once the host (and whatever it started) is gone.
    drop((image, ready_child, ready_write));
    // The host starts, enters its sandbox and loads the library while the
    // request is written; one byte on its stdin says the request is there.
    let started = Instant::now();
    let sent = request_file.write_all(&wire::encode_request(&request)).and_then(|()| request_file.flush());
    let written = started.elapsed();
    if let Err(e) = sent {
        let _ = child.kill();
        let _ = child.wait();
        return Err(spawn(&format!("the request: {e}")));
    }
    // A host already gone (its library's constructor crashed) cannot take
    // the byte: the wait below says how it ended.
    if let Some(mut go) = child.stdin.take() {
        let _ = go.write_all(b"1");
    }
    // While the host routes.
    let pool = wire::lft_pool(fabric);
    let answered = wait_ready(&ready_read, timeout.saturating_sub(started.elapsed()));
    let host_ms = started.elapsed();
    let status = match answered {
        Ready::Answered => {
            // Its answer is sealed and complete; whatever the host still
            // does (its exit, or an engine thread that does not stop) is
            // of no use: it ends now, and the SM reads meanwhile.
            let _ = child.kill();
            None
        }
        // Gone (or closed the pipe and still running: it has until the
        // limit to end).
        Ready::Gone => match wait_until(&mut child, started + timeout).map_err(|e| spawn(&e))? {
            Some(status) => Some(status),
            None => return Err(HostFailure::TimedOut(timeout)),
        },
        Ready::TimedOut => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HostFailure::TimedOut(timeout));
        }
    };
    if let Some(status) = status {
        if let Some(signal) = status.signal() {
            let name = nix::sys::signal::Signal::try_from(signal).map_or_else(|_| format!("{signal}"), |s| s.as_str().to_string());
            let hint = match name.as_str() {
                "SIGSEGV" | "SIGBUS" => " (invalid memory access)",
                "SIGABRT" => " (abort; also what an allocation past the memory limit ends in)",
                "SIGXCPU" => " (its CPU time limit)",
                "SIGKILL" => " (killed: out of memory, or by an administrator)",
                "SIGSYS" => " (a system call the sandbox forbids)",
                _ => "",
            };
            return Err(HostFailure::Signal { signal: name, hint: hint.to_string() });
        }
        return Err(match status.code() {
            Some(HOST_ERROR) => HostFailure::Spawn(format!("the engine host could not serve the request (status {HOST_ERROR}; its reason is on stderr)")),
            code => HostFailure::Exited(code.unwrap_or(-1)),
        });
    }
    let decoded = Instant::now();
    let answer = read_sealed(&answer_file, fabric, pool);
    let decode_ms = decoded.elapsed();
    // Reaped once the SM has what it needs (it was killed above).
    let _ = child.wait();
    tracing::debug!(
        engine = %entry.name,
        request_ms = written.as_secs_f64() * 1e3,
        host_ms = host_ms.as_secs_f64() * 1e3,
        decode_ms = decode_ms.as_secs_f64() * 1e3,
        reaped_ms = decoded.elapsed().saturating_sub(decode_ms).as_secs_f64() * 1e3,
        "engine host"
    );
    answer
}

/// The host's exit status once it ends, or `None` (killed) when it is
/// still running at `deadline`.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> std::io::Result<Option<std::process::ExitStatus>> {
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// How the wait for the host's answer ended.
enum Ready {
    /// It wrote the byte: its answer is sealed.
    Answered,
    /// The pipe closed without it: the host is gone (or going).
    Gone,
    /// Neither within the limit.
    TimedOut,
}

fn wait_ready(pipe: &std::os::fd::OwnedFd, limit: Duration) -> Ready {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ready::TimedOut;
        }
        let wait = PollTimeout::try_from(left.as_millis().min(60_000) as i32 + 1).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(std::os::fd::AsFd::as_fd(pipe), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return Ready::Gone,
        }
        let mut byte = [0u8; 1];
        return match nix::unistd::read(pipe, &mut byte) {
            Ok(1) => Ready::Answered,
            Err(nix::errno::Errno::EINTR) => continue,
            _ => Ready::Gone,
        };
    }
}

/// The seals the host puts on its answer before it says so: nothing can
/// change, grow or shrink it after the SM has begun to read.
const ANSWER_SEALS: nix::fcntl::SealFlag = nix::fcntl::SealFlag::F_SEAL_WRITE
    .union(nix::fcntl::SealFlag::F_SEAL_SHRINK)
    .union(nix::fcntl::SealFlag::F_SEAL_GROW)
    .union(nix::fcntl::SealFlag::F_SEAL_SEAL);

/// Decodes the answer in `file` once it is sealed.
fn read_sealed(file: &std::fs::File, fabric: &FabricSnapshot, pool: Vec<Vec<u8>>) -> Result<Answer, HostFailure> {
    let malformed = |m: String| HostFailure::Malformed(m);
    let seals = nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GET_SEALS).map_err(|e| malformed(format!("answer seals: {e}")))?;
    if !nix::fcntl::SealFlag::from_bits_truncate(seals).contains(ANSWER_SEALS) {
        return Err(malformed("an answer said ready but not sealed (it could still change)".into()));
    }
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let size = usize::try_from(size).map_err(|_| malformed(format!("an answer of {size} bytes")))?;
    if size == 0 {
        return Err(malformed("an empty answer".into()));
    }
    match Mapped::new(file, size) {
        Ok(map) => wire::decode_answer_into(map.bytes(), fabric, pool),
        // No mapping (an unusual kernel): read it instead.
        Err(_) => {
            let mut bytes = Vec::with_capacity(size);
            let mut f = file;
            f.seek(SeekFrom::Start(0)).map_err(|e| malformed(e.to_string()))?;
            f.read_to_end(&mut bytes).map_err(|e| malformed(e.to_string()))?;
            wire::decode_answer(&bytes, fabric)
        }
    }
    .map_err(|e| malformed(e.to_string()))
}

/// The answer's memory file mapped read-only, so that the routing is
/// decoded straight from the pages the host wrote.
struct Mapped {
    addr: std::ptr::NonNull<std::ffi::c_void>,
    len: usize,
}

impl Mapped {
    fn new(file: &std::fs::File, len: usize) -> nix::Result<Mapped> {
        let size = std::num::NonZeroUsize::new(len).ok_or(nix::errno::Errno::EINVAL)?;
        // SAFETY: a private read-only mapping of a memory file only this
        // process still holds (the host has exited, and nothing else was
        // given the file), of exactly its length: nobody writes or
        // truncates it while the mapping lives, and the slice handed out
        // never outlives `self`, which unmaps it.
        let addr = unsafe {
            nix::sys::mman::mmap(None, size, nix::sys::mman::ProtFlags::PROT_READ, nix::sys::mman::MapFlags::MAP_PRIVATE | nix::sys::mman::MapFlags::MAP_POPULATE, file, 0)?
        };
        Ok(Mapped { addr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` readable bytes for as long as `self`.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr().cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        let _ = unsafe { nix::sys::mman::munmap(self.addr, self.len) };
    }
}

/// A file in memory (memfd), inherited by the engine host.
fn memory_file(name: &str) -> std::io::Result<std::fs::File> {
    // No MFD_CLOEXEC: the engine host inherits it.
    let fd = nix::sys::memfd::memfd_create(name, nix::sys::memfd::MFdFlags::MFD_ALLOW_SEALING).map_err(std::io::Error::from)?;
    Ok(std::fs::File::from(fd))
}

/// The binary that serves `engine-host`: `SMCORE_ENGINE_HOST` when set,
/// the running `smcore` itself, else an `smcore` beside the running
/// executable or one directory up (a test binary in `target/*/deps`).
pub fn host_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SMCORE_ENGINE_HOST") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("the running executable: {e}"))?;
    if exe.file_name().is_some_and(|n| n == "smcore") {
        return Ok(exe);
    }
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    for candidate in [dir.join("smcore"), dir.join("../smcore")] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(format!("no smcore binary beside {} to host engines (set SMCORE_ENGINE_HOST)", exe.display()))
}

/// The engine host's exit status when it could not read the request or
/// write the answer (told apart from an engine's own `exit`).
const HOST_ERROR: i32 = 125;

/// The descriptors an engine host is given.
#[derive(Debug, Clone, Copy)]
pub struct HostFds<'a> {
    /// The request's memory file.
    pub request: i32,
    /// The answer's memory file.
    pub answer: i32,
    /// The library as the SM loaded it.
    pub library: Option<i32>,
    /// The pipe to say "answered" on.
    pub ready: Option<i32>,
    /// Where the engine may write (its dump_dir).
    pub writable: &'a [PathBuf],
}

/// The engine host's side (`smcore engine-host`): limits itself, reads
/// the request, enters the sandbox ([`super::sandbox`]), loads the
/// library, routes, writes the answer, seals it and says so. Exit status
/// 0 once the answer is written, [`HOST_ERROR`] when it cannot be.
pub fn serve(fds: HostFds<'_>, memory_mib: u64, cpu_seconds: u64) -> ExitCode {
    use nix::sys::resource::{setrlimit, Resource};
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("smcore engine-host: {what}: {e}");
        ExitCode::from(HOST_ERROR as u8)
    };
    let limits = [
        (Resource::RLIMIT_AS, memory_mib.saturating_mul(1024 * 1024)),
        (Resource::RLIMIT_CPU, cpu_seconds),
        (Resource::RLIMIT_CORE, 0),
    ];
    for (resource, limit) in limits {
        if let Err(e) = setrlimit(resource, limit, limit) {
            return fail(&format!("{resource:?}"), &e);
        }
    }
    let own: Vec<i32> = [Some(fds.request), Some(fds.answer), fds.library, fds.ready].into_iter().flatten().collect();
    super::sandbox::close_inherited(&own);
    // Opened for writing before the sandbox, which allows no such open.
    let out = match std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", fds.answer)) {
        Ok(f) => f,
        Err(e) => return fail("answer", &e),
    };
    let sandbox = super::sandbox::enter(fds.writable);
    if !sandbox.complete() {
        eprintln!("smcore engine-host: sandbox: {}", sandbox.describe());
    }
    // The library's constructors run inside the sandbox, while the SM
    // writes the request.
    let loaded = fds.library.map(|fd| super::loader::open_library(Path::new(&format!("/proc/self/fd/{fd}"))));
    let mut go = [0u8; 1];
    if !matches!(std::io::stdin().read(&mut go), Ok(1)) {
        // The SM gave up on this attempt before sending it.
        return ExitCode::from(HOST_ERROR as u8);
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(format!("/proc/self/fd/{}", fds.request)).and_then(|mut f| {
        bytes.reserve(f.metadata().map_or(0, |m| m.len() as usize));
        f.read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return fail("request", &e);
    }
    let request = match wire::decode_request(&bytes) {
        Ok(r) => r,
        Err(e) => return fail("request", &e),
    };
    drop(bytes);
    // The answer's pages, allocated while the engine routes: writing it
    // is then a copy. Room for one LFT per switch; cut to size after.
    let lids = u64::from(request.fabric.max_lid) + 1;
    let switches = request.fabric.nodes.iter().filter(|n| n.kind == sm_abi::NodeKind::Switch).count() as u64;
    let room = switches * (lids + 16) + (1 << 20);
    let prepared = std::thread::scope(|scope| {
        let prepare = scope.spawn(|| nix::fcntl::fallocate(&out, nix::fcntl::FallocateFlags::empty(), 0, room as i64));
        let answer = answer_of(&request, loaded);
        (answer, prepare.join())
    });
    let answer = prepared.0;
    let written = wire::write_answer(std::io::BufWriter::with_capacity(1 << 20, &out), &answer, request.fabric.max_lid)
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .and_then(|mut f| {
            use std::io::Seek;
            let end = f.stream_position()?;
            f.set_len(end)
        })
        .and_then(|()| nix::fcntl::fcntl(&out, nix::fcntl::FcntlArg::F_ADD_SEALS(ANSWER_SEALS)).map(drop).map_err(std::io::Error::from));
    if let Err(e) = written {
        return fail("answer", &e);
    }
    if let Some(ready) = fds.ready {
        // SAFETY: the pipe's write end this process was given; written
        // once, never closed here (the process ends next).
        let pipe = unsafe { std::os::fd::BorrowedFd::borrow_raw(ready) };
        let _ = nix::unistd::write(pipe, b"1");
    }
    // At once: the routing and the engine need not be taken apart piece
    // by piece when the process ends anyway.
    std::process::exit(0)
}

fn answer_of(request: &Request, loaded: Option<Result<Vec<EngineEntry>, super::loader::LoadProblem>>) -> Answer {
    let entries = match loaded.unwrap_or_else(|| super::loader::open_library(&request.library)) {
        Ok(e) => e,
        Err(p) => return Answer::Create(sm_abi::EngineError::new(format!("library not loaded in the engine host: {p}"))),
    };
    let Some(entry) = entries.iter().find(|e| e.name == request.engine) else {
        return Answer::Create(sm_abi::EngineError::new(format!(
            "{} no longer provides engine {}",
            request.library.display(),
            request.engine
        )));
    };
    let engine = match entry.create(&request.config) {
        Ok(e) => e,
        Err(e) => return Answer::Create(e),
    };
    let result = match &request.previous {
        Some(previous) => engine.reroute(&request.fabric, previous),
        None => engine.route(&request.fabric),
    };
    match result.into_result() {
        Ok(routing) => Answer::Routed(routing),
        Err(e) => Answer::Error(e),
    }
}
