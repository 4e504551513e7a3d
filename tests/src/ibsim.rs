//! A private `ibsim` per test.
//!
//! Each [`Ibsim`] listens on its own abstract socket name
//! (`IBSIM_SOCKNAME`), so tests run in parallel without seeing each other's
//! fabric. Its console (ibsim reads commands on stdin) stays on a pipe we
//! hold, so a test can inject faults while an SM runs: [`Ibsim::send`]
//! writes one command and returns what ibsim printed in answer.
//!
//! Readiness: ibsim prints `Network simulator ready.` and its first prompt
//! *before* it binds its sockets, so neither says a client could connect.
//! Console commands, however, are only read by the main select loop, which
//! starts after the sockets are bound; the answer to a first command is
//! therefore the readiness signal used here.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Where Debian's `ibsim-utils` installs the umad interposer.
pub use smcore_test_support::UMAD2SIM_LIB;

/// ibsim 0.10's default linear forwarding table capacity (`-L`): the highest
/// LID + 1 its switches accept.
pub const IBSIM_DEFAULT_LINEAR_CAP: usize = 30720;

/// How to start ibsim.
#[derive(Debug, Clone)]
pub struct IbsimOptions {
    /// More arguments, placed before the net file.
    pub extra_args: Vec<String>,
    /// How long parsing the net file and binding may take.
    pub ready_timeout: Duration,
    /// How long one console command may take to answer.
    pub command_timeout: Duration,
}

impl Default for IbsimOptions {
    fn default() -> Self {
        IbsimOptions {
            extra_args: Vec::new(),
            ready_timeout: Duration::from_secs(120),
            command_timeout: Duration::from_secs(30),
        }
    }
}

/// A client ibsim lists as attached (`Attached` console command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// Client slot (what `X <n>` takes).
    pub slot: u32,
    /// Process id of the client.
    pub pid: u32,
    /// The client registered as an SM.
    pub is_sm: bool,
}

/// A running ibsim; killed and reaped on drop.
pub struct Ibsim {
    child: Child,
    /// The console; held for the whole of a command so that concurrent
    /// senders do not interleave their answers.
    stdin: Mutex<Option<ChildStdin>>,
    stdout: Arc<Stream>,
    stderr: Arc<Stream>,
    sockname: String,
    net: PathBuf,
    limit_args: Vec<String>,
    command_timeout: Duration,
    /// Working directory of clients: umad2sim creates a fake sysfs tree
    /// `./sys-<pid>` there and removes it only on a clean exit.
    client_dir: tempfile::TempDir,
}

impl std::fmt::Debug for Ibsim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ibsim")
            .field("pid", &self.child.id())
            .field("sockname", &self.sockname)
            .field("net", &self.net)
            .field("limit_args", &self.limit_args)
            .finish()
    }
}

impl Ibsim {
    /// Start ibsim on `net` with default options and wait until clients
    /// can connect.
    pub fn start(net: impl AsRef<Path>) -> Result<Ibsim> {
        Ibsim::start_with(net, &IbsimOptions::default())
    }

    /// Start ibsim on `net` and wait until clients can connect. The
    /// `-N/-S/-P/-L` limits are sized from the file.
    pub fn start_with(net: impl AsRef<Path>, opts: &IbsimOptions) -> Result<Ibsim> {
        let net = net.as_ref().to_path_buf();
        let topo = sm_topology::parse_file(&net)
            .map_err(|e| Error::Failed(format!("cannot size ibsim for {}: {e}", net.display())))?;
        let limit_args = limit_args(&topo);
        drop(topo);

        let sockname = unique_sockname();
        let mut cmd = Command::new(smcore_test_support::find_tool("ibsim")?);
        crate::proc::die_with_parent(&mut cmd);
        let mut child = cmd
            .arg("-s")
            .args(&limit_args)
            .args(&opts.extra_args)
            .arg(&net)
            .env("IBSIM_SOCKNAME", &sockname)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io("starting ibsim (Debian package ibsim-utils)", e))?;
        let stdout = Stream::follow(child.stdout.take());
        let stderr = Stream::follow(child.stderr.take());
        let stdin = Mutex::new(child.stdin.take());
        let client_dir = tempfile::Builder::new()
            .prefix("ibsim-clients-")
            .tempdir()
            .map_err(|e| Error::io("creating a working directory for ibsim clients", e))?;
        let mut sim = Ibsim {
            child,
            stdin,
            stdout,
            stderr,
            sockname,
            net,
            limit_args,
            command_timeout: opts.command_timeout,
            client_dir,
        };
        sim.wait_ready(opts.ready_timeout)?;
        Ok(sim)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        {
            let state = self.stdout.wait_until(deadline, |s| !s.prompts.is_empty())?;
            if state.prompts.is_empty() {
                drop(state);
                return Err(self.startup_failure(timeout));
            }
        }
        // Only the select loop reads the console, and it runs once the
        // sockets are bound: an answer here means clients can connect.
        match self.send_until("Attached", deadline) {
            Ok(_) => Ok(()),
            Err(_) => Err(self.startup_failure(timeout)),
        }
    }

    fn startup_failure(&mut self, timeout: Duration) -> Error {
        let exited = self.child.try_wait().ok().flatten();
        let what = match exited {
            Some(status) => format!("exited with {status}"),
            None => format!("was not ready within {:.0} s", timeout.as_secs_f64()),
        };
        Error::Failed(format!(
            "ibsim on {} {what}\nstdout:\n{}\nstderr:\n{}",
            self.net.display(),
            tail(&self.stdout.text(), 2000),
            tail(&self.stderr.text(), 2000)
        ))
    }

    /// Send one console command (e.g. `Unlink "S-0002c90000000000"[5]`) and
    /// return what ibsim printed in answer, up to its next prompt.
    pub fn send(&self, cmd: &str) -> Result<String> {
        let deadline = Instant::now() + self.command_timeout;
        self.send_until(cmd, deadline)
    }

    fn send_until(&self, cmd: &str, deadline: Instant) -> Result<String> {
        if cmd.contains('\n') {
            return Err(Error::Failed(format!("one command per call, got {cmd:?}")));
        }
        // ibsim reads each console line into a 128-byte buffer; longer
        // lines would be split into two commands.
        if cmd.len() > 126 {
            return Err(Error::Failed(format!("ibsim console lines are limited to 126 bytes: {cmd:?}")));
        }
        let mut console = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        let stdin = console.as_mut().ok_or_else(|| Error::Failed("ibsim console is closed".into()))?;
        let before = self.stdout.lock().prompts.len();
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .and_then(|_| stdin.flush())
            .map_err(|e| Error::io(format!("writing {cmd:?} to the ibsim console"), e))?;
        let state = self.stdout.wait_until(deadline, |s| s.prompts.len() > before)?;
        if state.prompts.len() <= before {
            return Err(Error::Failed(format!(
                "ibsim did not answer {cmd:?}{}",
                if state.eof { " (it exited)" } else { " in time" }
            )));
        }
        let start = if before == 0 { 0 } else { state.prompts[before - 1].1 };
        let end = state.prompts[before].0;
        Ok(state.text.get(start..end).unwrap_or_default().to_string())
    }

    /// Clients ibsim has attached.
    pub fn attached(&self) -> Result<Vec<Client>> {
        let text = self.send("Attached")?;
        Ok(text.lines().filter_map(parse_client).collect())
    }

    /// Force-disconnect clients whose process is gone. A client killed
    /// without a clean exit keeps its slot (and, for an SM, blocks the next
    /// SM on that node) until this runs.
    pub fn disconnect_stale(&self) -> Result<usize> {
        let mut n = 0;
        for c in self.attached()? {
            if !Path::new(&format!("/proc/{}", c.pid)).exists() {
                self.send(&format!("X {}", c.slot))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Environment for a client program (OpenSM, infiniband-diags, smcore)
    /// to talk to this simulator through umad2sim.
    pub fn umad_env(&self) -> Vec<(OsString, OsString)> {
        vec![("LD_PRELOAD".into(), UMAD2SIM_LIB.into()), ("IBSIM_SOCKNAME".into(), self.sockname.clone().into())]
    }

    /// A command with [`Ibsim::umad_env`] applied, after checking that the
    /// interposer library is installed. It runs in a scratch directory
    /// owned by this simulator (see [`Ibsim::client_dir`]), so give it
    /// absolute paths.
    pub fn client_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Result<Command> {
        smcore_test_support::find_umad2sim().map_err(Error::from)?;
        let program = program.as_ref();
        // Found first, so that a missing tool names its package.
        let path = match program.to_str() {
            Some(name) => smcore_test_support::find_tool(name)?,
            None => program.into(),
        };
        let mut cmd = Command::new(path);
        crate::proc::die_with_parent(&mut cmd);
        cmd.envs(self.umad_env()).current_dir(self.client_dir.path());
        Ok(cmd)
    }

    /// Working directory of [`Ibsim::client_command`]s, deleted with the
    /// simulator. umad2sim leaves a `sys-<pid>` directory behind there for
    /// every client that did not exit cleanly.
    pub fn client_dir(&self) -> &Path {
        self.client_dir.path()
    }

    /// The socket name clients must use.
    pub fn sockname(&self) -> &str {
        &self.sockname
    }

    /// The net file it simulates.
    pub fn net(&self) -> &Path {
        &self.net
    }

    /// The capacity options it was started with.
    pub fn limit_args(&self) -> &[String] {
        &self.limit_args
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything ibsim printed on stdout so far.
    pub fn stdout_text(&self) -> String {
        self.stdout.text()
    }

    /// Everything ibsim printed on stderr so far (warnings, client attach
    /// messages).
    pub fn stderr_text(&self) -> String {
        self.stderr.text()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `-N/-S/-P/-L` options for a fabric: only those above ibsim's defaults.
pub fn limit_args(topo: &sm_topology::Topology) -> Vec<String> {
    let mut args = sm_topology::emit::IbsimLimits::of(topo).args();
    // An SM gives every switch one LID and every end port one (LMC 0); the
    // LFT must hold the highest of them.
    let lids: usize = topo.nodes.iter().map(|n| if n.is_switch() { 1 } else { n.num_ports as usize }).sum();
    if lids + 1 > IBSIM_DEFAULT_LINEAR_CAP {
        // Whole 64-entry LFT blocks, as switches report them.
        let cap = (lids + 1).div_ceil(64) * 64;
        args.push("-L".into());
        args.push(cap.to_string());
    }
    args
}

fn unique_sockname() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("smcore-t{}-{}-{nanos:x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn parse_client(line: &str) -> Option<Client> {
    // "Client 0: pid 1234 connected at "node" port 0x..., lid 1, qp 0 SM"
    let rest = line.trim().strip_prefix("Client ")?;
    let (slot, rest) = rest.split_once(':')?;
    let rest = rest.trim().strip_prefix("pid ")?;
    let pid = rest.split_whitespace().next()?;
    Some(Client { slot: slot.trim().parse().ok()?, pid: pid.parse().ok()?, is_sm: line.trim_end().ends_with(" SM") })
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Output of one pipe, collected by a thread, with the console prompts
/// found in it.
struct Stream {
    state: Mutex<StreamState>,
    changed: Condvar,
}

#[derive(Default)]
struct StreamState {
    text: String,
    /// Byte ranges of every prompt, in order.
    prompts: Vec<(usize, usize)>,
    scanned: usize,
    eof: bool,
}

impl Stream {
    fn follow<R: Read + Send + 'static>(pipe: Option<R>) -> Arc<Stream> {
        let stream = Arc::new(Stream { state: Mutex::new(StreamState::default()), changed: Condvar::new() });
        let Some(mut pipe) = pipe else {
            stream.lock().eof = true;
            return stream;
        };
        let s = Arc::clone(&stream);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                let n = pipe.read(&mut buf).unwrap_or(0);
                let mut state = s.lock();
                if n == 0 {
                    state.eof = true;
                    s.changed.notify_all();
                    return;
                }
                state.text.push_str(&String::from_utf8_lossy(&buf[..n]));
                state.scan_prompts();
                s.changed.notify_all();
            }
        });
        stream
    }

    fn lock(&self) -> MutexGuard<'_, StreamState> {
        // A panicking reader thread leaves the text as it was; keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn text(&self) -> String {
        self.lock().text.clone()
    }

    /// Wait until `done` holds, the pipe closes or the deadline passes.
    fn wait_until(
        &self,
        deadline: Instant,
        done: impl Fn(&StreamState) -> bool,
    ) -> Result<MutexGuard<'_, StreamState>> {
        let mut state = self.lock();
        loop {
            if done(&state) || state.eof {
                return Ok(state);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(state);
            }
            state =
                self.changed.wait_timeout(state, deadline - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

impl StreamState {
    fn scan_prompts(&mut self) {
        const PROMPTS: [&str; 2] = ["sim> ", "sim (inactive)> "];
        loop {
            let rest = &self.text[self.scanned..];
            let found = PROMPTS.iter().filter_map(|p| rest.find(p).map(|i| (i, p.len()))).min_by_key(|&(i, _)| i);
            match found {
                Some((i, len)) => {
                    let start = self.scanned + i;
                    self.prompts.push((start, start + len));
                    self.scanned = start + len;
                }
                None => {
                    // Keep a possible partial prompt at the end for the
                    // next chunk.
                    let mut keep = self.text.len().saturating_sub(PROMPTS[1].len() - 1).max(self.scanned);
                    while !self.text.is_char_boundary(keep) {
                        keep += 1;
                    }
                    self.scanned = keep;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_split_across_chunks() {
        let mut s = StreamState::default();
        for chunk in [
            "Network simulator ready.\nsi",
            "m> ",
            "Client 0: pid 5 connected at \"h\" port 0x1, lid 1, qp 0 SM\nsim",
            "> ",
        ] {
            s.text.push_str(chunk);
            s.scan_prompts();
        }
        assert_eq!(s.prompts.len(), 2);
        let answer = &s.text[s.prompts[0].1..s.prompts[1].0];
        let c = parse_client(answer.lines().next().unwrap_or_default());
        assert_eq!(c, Some(Client { slot: 0, pid: 5, is_sm: true }));
    }

    #[test]
    fn client_without_sm_flag() {
        let c = parse_client("Client 3: pid 77 connected at \"H-1\" port 0x2c90100000001, lid 0, qp 0 ");
        assert_eq!(c, Some(Client { slot: 3, pid: 77, is_sm: false }));
        assert_eq!(parse_client("sim> "), None);
    }
}
