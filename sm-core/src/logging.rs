//! Where the SM's log goes: stderr, a file, or syslog; text or JSON.
//!
//! An SM runs for years, so its log file must survive the site's log
//! handling: `SIGUSR1` (OpenSM's signal for it) makes the next record
//! reopen the file by name, so logrotate can move the file away and
//! signal, without `copytruncate` losing lines; and `log_max_size` keeps a
//! file that nobody rotates from filling the disk. OpenSM truncates its
//! file when it passes the limit; smcore moves it to `FILE.1` first, so
//! the record that explains a failure is not the one thrown away.
//!
//! Every event is handed to the destination as one write: a record is
//! never split across a rotation, and syslog gets one datagram per event.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Where the log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard error (the default; what a service manager's journal takes).
    Stderr,
    /// A file, appended to (or started afresh, see [`LogSettings::append`]).
    File(PathBuf),
    /// The syslog daemon's datagram socket (normally `/dev/log`).
    Syslog(PathBuf),
}

/// The syslog socket of a Linux system.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// How each record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One human-readable line per record.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(format!("log format `{other}`: expected text or json")),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Text => "text",
            Format::Json => "json",
        })
    }
}

/// Everything [`init`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// A tracing filter (`info`, `sm_core=debug,warn`).
    pub filter: String,
    /// Where records go.
    pub destination: Destination,
    /// A file passing this many bytes is moved to `FILE.1` and started
    /// afresh; 0 for no limit (OpenSM's `log_max_size`, in MB there).
    pub max_size: u64,
    /// Append to an existing file (OpenSM's `accum_log_file`, default
    /// TRUE) rather than start it empty.
    pub append: bool,
    /// Text or JSON.
    pub format: Format,
    /// Written with `": "` at the head of every record (OpenSM's
    /// `log_prefix`, which heads every message in its log file and in
    /// syslog); a JSON record gets it as a `"prefix"` field instead, so
    /// that every line stays one JSON object.
    pub prefix: Option<String>,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            filter: "warn".into(),
            destination: Destination::Stderr,
            max_size: 0,
            append: true,
            format: Format::Text,
            prefix: None,
        }
    }
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log file cannot be opened.
    #[error("log file {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The filter is not tracing's filter syntax.
    #[error("log filter `{filter}`: {message}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// The parser's complaint.
        message: String,
    },
    /// A global subscriber was installed already.
    #[error("logging was set up twice")]
    Twice,
}

/// The tracing filter for OpenSM's `log_flags` (`-D`): the bits OpenSM
/// users set mapped onto the nearest level. ERROR (0x01) is smcore's
/// warnings and errors; INFO (0x02) and VERBOSE (0x04) are info; DEBUG
/// (0x08) and ROUTING (0x40) are debug; FUNCS (0x10) and FRAMES (0x20),
/// OpenSM's function-entry and MAD dumps, are trace.
pub fn flags_filter(flags: u8) -> &'static str {
    if flags & 0x30 != 0 {
        "trace"
    } else if flags & 0x48 != 0 {
        "debug"
    } else if flags & 0x06 != 0 {
        "info"
    } else if flags & 0x01 != 0 {
        "warn"
    } else {
        "error"
    }
}

/// Asks the log file to be reopened by name before its next record: what
/// a `SIGUSR1` handler calls (it only stores to an atomic).
#[derive(Debug, Clone, Default)]
pub struct Reopen(Arc<AtomicBool>);

impl Reopen {
    /// Request a reopen.
    pub fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// The flag, for `signal_hook::flag::register`.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// A log file that reopens on request and moves itself aside at a size.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    max_size: u64,
    reopen: Reopen,
    state: Mutex<FileState>,
}

#[derive(Debug)]
struct FileState {
    file: File,
    written: u64,
}

/// Log files hold fabric layout and keys' absence; not for every user.
const LOG_MODE: u32 = 0o640;

/// Opens the log without following a link at its name (`O_NOFOLLOW`;
/// `O_NONBLOCK` so a FIFO planted there cannot hold the SM), then refuses
/// anything but a regular file of one name (or a device) owned by root or
/// the SM's user. Only then is it truncated (`append` false): a file planted by
/// another user, or a link to one the SM must not touch, is never cut.
fn open_log(path: &Path, append: bool) -> io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let mut options = OpenOptions::new();
    options.create(true).mode(LOG_MODE).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    if append {
        options.append(true);
    } else {
        options.write(true);
    }
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::new(e.kind(), format!("{e}: a symbolic link, not followed"))
        } else {
            e
        }
    })?;
    let meta = file.metadata()?;
    let euid = nix::unistd::geteuid().as_raw();
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    // A device (/dev/null, a console) only root can make; a FIFO or
    // anything else another user can.
    if !(meta.file_type().is_file() || std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type())) {
        return refuse("not a regular file or a device: refused".into());
    }
    if meta.nlink() != 1 {
        return refuse(format!("{} names for one file (a hard link): refused", meta.nlink()));
    }
    if meta.uid() != 0 && meta.uid() != euid {
        return refuse(format!("owned by uid {}, not root or this SM's user (uid {euid}): refused", meta.uid()));
    }
    if !append && meta.is_file() {
        file.set_len(0)?;
    }
    Ok(file)
}

impl LogFile {
    /// Opens `path` (creating it 0640).
    pub fn open(path: &Path, append: bool, max_size: u64, reopen: Reopen) -> Result<Self, LogError> {
        let file = open_log(path, append).map_err(|source| LogError::Open { path: path.to_path_buf(), source })?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Self { path: path.to_path_buf(), max_size, reopen, state: Mutex::new(FileState { file, written }) })
    }

    /// Writes one record, reopening or rotating first when due.
    pub fn write_record(&self, record: &[u8]) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if self.reopen.take() {
            state.file = open_log(&self.path, true)?;
            state.written = state.file.metadata().map(|m| m.len()).unwrap_or(0);
        }
        let len = record.len() as u64;
        if self.max_size > 0 && state.written > 0 && state.written + len > self.max_size {
            let mut aside = self.path.clone().into_os_string();
            aside.push(".1");
            std::fs::rename(&self.path, &aside)?;
            state.file = open_log(&self.path, false)?;
            state.written = 0;
        }
        state.file.write_all(record)?;
        state.written += len;
        Ok(())
    }
}

/// Sends records to a syslog daemon's datagram socket, RFC 3164 style
/// (the daemon stamps the time), facility `daemon`.
#[derive(Debug)]
pub struct Syslog {
    socket_path: PathBuf,
    socket: Mutex<Option<UnixDatagram>>,
    pid: u32,
}

impl Syslog {
    /// A sender to `socket_path`; nothing is connected until a record is
    /// sent, so a syslog daemon started later is still found.
    pub fn new(socket_path: &Path) -> Self {
        Self { socket_path: socket_path.to_path_buf(), socket: Mutex::new(None), pid: std::process::id() }
    }

    fn severity(level: Level) -> u8 {
        match level {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            _ => 7,
        }
    }

    /// Sends one record at `level`. A daemon that is gone or restarted is
    /// reconnected once; if it still cannot take the record, the record is
    /// dropped: the SM never waits on its log.
    pub fn send(&self, level: Level, record: &[u8]) -> io::Result<()> {
        const DAEMON: u8 = 3;
        let text = String::from_utf8_lossy(record);
        let message = format!("<{}>smcore[{}]: {}", DAEMON * 8 + Self::severity(level), self.pid, text.trim_end());
        let mut socket = self.socket.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..2 {
            if socket.is_none() {
                let s = UnixDatagram::unbound()?;
                s.set_nonblocking(true)?;
                if s.connect(&self.socket_path).is_err() {
                    continue;
                }
                *socket = Some(s);
            }
            if let Some(s) = socket.as_ref() {
                if s.send(message.as_bytes()).is_ok() {
                    return Ok(());
                }
            }
            *socket = None;
        }
        Err(io::Error::new(io::ErrorKind::NotConnected, format!("syslog socket {}", self.socket_path.display())))
    }
}

/// The destination records are written to, as tracing's writer factory.
#[derive(Debug, Clone)]
pub enum Sink {
    /// Standard error.
    Stderr,
    /// A [`LogFile`].
    File(Arc<LogFile>),
    /// A [`Syslog`] sender.
    Syslog(Arc<Syslog>),
}

/// One record being formatted; handed to the sink whole when dropped.
pub struct Record {
    sink: Sink,
    level: Level,
    buffer: Vec<u8>,
    /// A JSON member (`"prefix":"..",`) to put after the record's `{`.
    member: Option<Arc<[u8]>>,
}

/// A [`Sink`] whose records start with a prefix (OpenSM's `log_prefix`).
#[derive(Debug, Clone)]
pub struct Prefixed {
    /// Where the records go.
    pub sink: Sink,
    /// `PREFIX: ` as text, or the `"prefix":"PREFIX",` JSON member.
    head: Arc<[u8]>,
}

impl Prefixed {
    /// Records to `sink`, each headed by `prefix` (a JSON record gets a
    /// `"prefix"` member first).
    pub fn new(sink: Sink, prefix: &str, format: Format) -> Prefixed {
        let head = match format {
            Format::Text => format!("{prefix}: "),
            Format::Json => format!("\"prefix\":{},", serde_json::Value::String(prefix.to_string())),
        };
        Prefixed { sink, head: head.into_bytes().into() }
    }

    fn record(&self, level: Level) -> Record {
        let json = self.head.first() == Some(&b'"');
        let mut buffer = Vec::with_capacity(256);
        if !json {
            buffer.extend_from_slice(&self.head);
        }
        Record { sink: self.sink.clone(), level, buffer, member: json.then(|| Arc::clone(&self.head)) }
    }
}

impl<'a> MakeWriter<'a> for Prefixed {
    type Writer = Record;

    fn make_writer(&'a self) -> Record {
        self.record(Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Record {
        self.record(*meta.level())
    }
}

impl Write for Record {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(member) = self.member.take() {
            if let Some(at) = self.buffer.iter().position(|&b| b == b'{') {
                self.buffer.splice(at + 1..at + 1, member.iter().copied());
            }
        }
        if self.buffer.is_empty() {
            return;
        }
        // A log that cannot be written must not take the SM down; stderr
        // is the last place left to say so.
        let result = match &self.sink {
            Sink::Stderr => io::stderr().lock().write_all(&self.buffer),
            Sink::File(f) => f.write_record(&self.buffer),
            Sink::Syslog(s) => s.send(self.level, &self.buffer),
        };
        if let Err(e) = result {
            let _ = writeln!(io::stderr(), "smcore: cannot write the log: {e}");
            let _ = io::stderr().write_all(&self.buffer);
        }
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = Record;

    fn make_writer(&'a self) -> Record {
        Record { sink: self.clone(), level: Level::INFO, buffer: Vec::new(), member: None }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Record {
        Record { sink: self.clone(), level: *meta.level(), buffer: Vec::new(), member: None }
    }
}

impl Sink {
    /// Opens the destination `settings` name.
    pub fn open(settings: &LogSettings, reopen: &Reopen) -> Result<Self, LogError> {
        Ok(match &settings.destination {
            Destination::Stderr => Sink::Stderr,
            Destination::File(path) => {
                Sink::File(Arc::new(LogFile::open(path, settings.append, settings.max_size, reopen.clone())?))
            }
            Destination::Syslog(socket) => Sink::Syslog(Arc::new(Syslog::new(socket))),
        })
    }
}

/// Swaps the installed subscriber's filter (the console's `loglevel`).
type SwapFilter = Box<dyn Fn(tracing_subscriber::EnvFilter) -> Result<(), String> + Send + Sync>;

/// The running filter and how to change it.
struct FilterControl {
    swap: SwapFilter,
    current: Mutex<String>,
}

/// The log filter of the subscriber [`init`] installed: what the control
/// socket's `loglevel` reads and changes. Clones steer the same filter.
#[derive(Clone)]
pub struct LogFilter(Arc<FilterControl>);

impl std::fmt::Debug for LogFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LogFilter").field(&self.current()).finish()
    }
}

/// What [`init`] hands back: the log's reopen flag (SIGUSR1) and its
/// filter.
#[derive(Debug, Clone)]
pub struct Logging {
    /// Asks the log file to be reopened.
    pub reopen: Reopen,
    /// The filter in force.
    pub filter: LogFilter,
}

impl LogFilter {
    /// The log filter in force.
    pub fn current(&self) -> String {
        self.0.current.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the log filter of the running process; returns the one it
    /// replaced. A filter that does not parse is refused and the old one
    /// stays.
    pub fn set(&self, filter: &str) -> Result<String, LogError> {
        let parsed = parse_strict(filter)?;
        let mut current = self.0.current.lock().unwrap_or_else(PoisonError::into_inner);
        (self.0.swap)(parsed).map_err(|message| LogError::Filter { filter: filter.to_string(), message })?;
        Ok(std::mem::replace(&mut *current, filter.to_string()))
    }
}

/// [`parse_filter`], refusing what is most likely a typo: an admin
/// changing the level of a running SM means a level.
fn parse_strict(filter: &str) -> Result<tracing_subscriber::EnvFilter, LogError> {
    // EnvFilter takes an unknown word as a target name (`verbose` would
    // silence everything): a directive without `=` must be a level.
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let is_level = directive.parse::<tracing_subscriber::filter::LevelFilter>().is_ok();
        if !is_level && !directive.contains('=') && !directive.contains('[') {
            return Err(LogError::Filter {
                filter: filter.to_string(),
                message: format!("`{directive}` is not a level (off, error, warn, info, debug, trace) nor target=level"),
            });
        }
    }
    parse_filter(filter)
}

fn parse_filter(filter: &str) -> Result<tracing_subscriber::EnvFilter, LogError> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| LogError::Filter { filter: filter.to_string(), message: e.to_string() })
}

/// Installs the process's log subscriber (tracing's global one). In the
/// returned [`Logging`], `reopen` is what `SIGUSR1` should trigger and
/// `filter` changes the filter later ([`LogFilter::set`]).
pub fn init(settings: &LogSettings) -> Result<Logging, LogError> {
    let filter = parse_filter(&settings.filter)?;
    let reopen = Reopen::default();
    let sink = Sink::open(settings, &reopen)?;
    use std::io::IsTerminal;
    let ansi = matches!(sink, Sink::Stderr) && io::stderr().is_terminal() && settings.prefix.is_none();
    let writer = match &settings.prefix {
        Some(prefix) => Prefixed::new(sink, prefix, settings.format),
        None => Prefixed { sink, head: Arc::from(&b""[..]) },
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi).with_target(false);
    // Each format is its own subscriber type, and so is its reload handle.
    macro_rules! install {
        ($builder:expr) => {{
            let builder = $builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.try_init().map_err(|_| LogError::Twice)?;
            let swap: SwapFilter = Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()));
            swap
        }};
    }
    let swap = match (settings.format, &settings.destination) {
        (Format::Json, _) => install!(builder.json()),
        // The syslog daemon stamps each record with its own time.
        (Format::Text, Destination::Syslog(_)) => install!(builder.without_time()),
        (Format::Text, _) => install!(builder),
    };
    let filter = LogFilter(Arc::new(FilterControl { swap, current: Mutex::new(settings.filter.clone()) }));
    Ok(Logging { reopen, filter })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_change_refuses_words_that_are_not_levels() {
        assert!(parse_strict("debug").is_ok());
        assert!(parse_strict("sm_core::sweep=trace,info").is_ok());
        assert!(matches!(parse_strict("verbose"), Err(LogError::Filter { .. })));
        assert!(matches!(parse_strict("sm_core=loud"), Err(LogError::Filter { .. })));
    }

    #[test]
    fn log_prefix_heads_every_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("smcore.log");
        let file = Arc::new(LogFile::open(&path, true, 0, Reopen::default()).expect("open"));
        let text = Prefixed::new(Sink::File(Arc::clone(&file)), "fabric-a", Format::Text);
        {
            let mut r = text.make_writer();
            r.write_all(b"Nov 29 06:00:00 INFO sweep done\n").expect("write");
        }
        let json = Prefixed::new(Sink::File(file), "fabric-a", Format::Json);
        {
            let mut r = json.make_writer();
            r.write_all(b"{\"level\":\"INFO\"}\n").expect("write");
        }
        let logged = std::fs::read_to_string(&path).expect("log");
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines[0], "fabric-a: Nov 29 06:00:00 INFO sweep done");
        let v: serde_json::Value = serde_json::from_str(lines[1]).expect("one JSON object");
        assert_eq!((v["prefix"].as_str(), v["level"].as_str()), (Some("fabric-a"), Some("INFO")));
    }

    #[test]
    fn opensm_debug_flags_map_to_the_nearest_level() {
        assert_eq!(flags_filter(0x00), "error");
        assert_eq!(flags_filter(0x01), "warn");
        assert_eq!(flags_filter(0x03), "info");
        assert_eq!(flags_filter(0x43), "debug");
        assert_eq!(flags_filter(0x0f), "debug");
        assert_eq!(flags_filter(0xff), "trace");
    }

    #[test]
    fn a_reopen_request_writes_to_a_new_file_after_the_old_was_moved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("smcore.log");
        let reopen = Reopen::default();
        let log = LogFile::open(&path, true, 0, reopen.clone()).expect("open");
        log.write_record(b"first\n").expect("write");
        let moved = dir.path().join("smcore.log.old");
        std::fs::rename(&path, &moved).expect("rename");
        // Without a request the file handle follows the moved file.
        log.write_record(b"second\n").expect("write");
        reopen.request();
        log.write_record(b"third\n").expect("write");
        assert_eq!(std::fs::read_to_string(&moved).expect("old"), "first\nsecond\n");
        assert_eq!(std::fs::read_to_string(&path).expect("new"), "third\n");
    }

    #[test]
    fn a_file_past_its_limit_moves_aside_and_no_record_is_split() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("smcore.log");
        let log = LogFile::open(&path, true, 20, Reopen::default()).expect("open");
        for i in 0..5 {
            log.write_record(format!("record {i:02}\n").as_bytes()).expect("write");
        }
        // 10-byte records, 20-byte limit: two per file, the newest in FILE.
        assert_eq!(std::fs::read_to_string(&path).expect("new"), "record 04\n");
        let aside = dir.path().join("smcore.log.1");
        assert_eq!(std::fs::read_to_string(&aside).expect("aside"), "record 02\nrecord 03\n");
    }

    #[test]
    fn an_existing_file_is_appended_to_or_started_afresh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("smcore.log");
        std::fs::write(&path, "before\n").expect("seed");
        LogFile::open(&path, true, 0, Reopen::default()).expect("open").write_record(b"after\n").expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "before\nafter\n");
        LogFile::open(&path, false, 0, Reopen::default()).expect("open").write_record(b"only\n").expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "only\n");
    }

    #[test]
    fn a_planted_link_is_not_followed_nor_its_target_truncated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("shadow");
        std::fs::write(&victim, "precious\n").expect("seed");
        let path = dir.path().join("smcore.log");
        std::os::unix::fs::symlink(&victim, &path).expect("link");
        for append in [false, true] {
            let e = LogFile::open(&path, append, 0, Reopen::default()).expect_err("a link");
            assert!(e.to_string().contains("smcore.log") && e.to_string().contains("link"), "{e}");
            assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious\n", "append {append}");
        }
        // Planted after the SM opened it: the reopen (SIGUSR1) refuses it too.
        std::fs::remove_file(&path).expect("unlink");
        let reopen = Reopen::default();
        let log = LogFile::open(&path, true, 0, reopen.clone()).expect("open");
        std::fs::remove_file(&path).expect("unlink");
        std::os::unix::fs::symlink(&victim, &path).expect("link");
        reopen.request();
        assert!(log.write_record(b"x\n").is_err());
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious\n");
    }

    #[test]
    fn a_hard_link_or_another_users_file_is_refused_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("shadow");
        std::fs::write(&victim, "precious\n").expect("seed");
        let path = dir.path().join("smcore.log");
        std::fs::hard_link(&victim, &path).expect("link");
        let e = LogFile::open(&path, false, 0, Reopen::default()).expect_err("hard link");
        assert!(e.to_string().contains("hard link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious\n");
        std::fs::remove_file(&path).expect("unlink");
        // A FIFO another user planted, with a reader of theirs on it.
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o666)).expect("mkfifo");
        let reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).expect("reader");
        let e = LogFile::open(&path, true, 0, Reopen::default()).expect_err("a FIFO");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        drop(reader);
        std::fs::remove_file(&path).expect("unlink");
        // A device is used as before.
        LogFile::open(Path::new("/dev/null"), false, 0, Reopen::default()).expect("/dev/null").write_record(b"x\n").expect("write");
        // Another user's file, where the SM runs as root (as in service).
        if nix::unistd::geteuid().is_root() {
            std::fs::write(&path, "theirs\n").expect("seed");
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
            let e = LogFile::open(&path, false, 0, Reopen::default()).expect_err("theirs");
            assert!(e.to_string().contains("uid 65534"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).expect("read"), "theirs\n");
        }
    }

    #[test]
    fn syslog_gets_one_datagram_per_record_with_its_priority() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("log");
        let daemon = UnixDatagram::bind(&socket).expect("bind");
        let syslog = Syslog::new(&socket);
        syslog.send(Level::WARN, b"a port flaps\n").expect("send");
        syslog.send(Level::INFO, b"sweep done\n").expect("send");
        let mut buf = [0u8; 256];
        let n = daemon.recv(&mut buf).expect("recv");
        let first = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert_eq!(first, format!("<28>smcore[{}]: a port flaps", std::process::id()));
        let n = daemon.recv(&mut buf).expect("recv");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("<30>smcore["));
    }

    #[test]
    fn a_syslog_daemon_that_is_not_there_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().expect("tempdir");
        let syslog = Syslog::new(&dir.path().join("no-such-socket"));
        assert!(syslog.send(Level::ERROR, b"x").is_err());
    }
}
