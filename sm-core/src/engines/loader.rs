//! Finding and loading engine libraries.
//!
//! Every `*.so` file in the engine directories is opened through
//! abi_stable's library header, which checks that the file exports an smcore
//! root module built against a compatible `sm-abi` with identical type
//! layouts. Files that fail are reported (file and reason) and skipped; the
//! rest load. Libraries are never unloaded, so trait objects created from
//! them stay valid for the life of the process.
//!
//! # Trust
//!
//! smcore runs as root, so loading a library is running its code as root.
//! As sudo and OpenSSH do for their own files, a library is only loaded
//! when nobody but root and smcore's own user could have put it there:
//!
//! - an engine directory must be an absolute path. Relative entries in
//!   `SMCORE_ENGINE_PATH` or the configuration's `engine_dirs` are refused
//!   (they would depend on whatever the working directory happens to be);
//!   a relative `--engine-dir` is what the operator typed, so
//!   [`search_path`] makes it absolute against the working directory once,
//!   at startup.
//! - the directory, resolved to its real path, must be owned by root or by
//!   our effective user and writable by neither group nor others; each of
//!   its parents up to `/` must be owned the same way and not writable by
//!   group or others unless it has the sticky bit (as `/tmp` does, where
//!   others cannot rename or remove what is ours). The resolved path is
//!   the one loaded from, so a symbolic link cannot be repointed between
//!   the check and the load.
//! - a library file must be a regular file (a symbolic link is followed
//!   only when its target's directory passes the same checks), owned by
//!   root or our effective user, and writable by neither group nor others.
//!
//! Whatever fails is reported as a [`LoadProblem`] naming the file or
//! directory and the reason. The directory of the running executable is
//! searched under the same rules, so a group- or world-writable one is
//! refused and reported, not searched.
//!
//! A hot-swapped build ([`Registry::rescan`]) is loaded from an anonymous
//! memory file (`memfd_create`), filled from the checked library opened
//! with `O_NOFOLLOW`: no file is ever staged at a path another user could
//! predict, plant or replace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sm_abi::abi_stable::abi_stability::abi_checking::{check_layout_compatibility_with_globals, CheckingGlobals};
use sm_abi::abi_stable::library::{lib_header_from_path, LibHeader, LibraryError, RootModule};
use sm_abi::abi_stable::sabi_types::VersionNumber;
use sm_abi::abi_stable::StableAbi;
use sm_abi::abi_stable::std_types::{RBoxError, RStr};
use sm_abi::{EngineBox, EngineError, EngineLibraryRef};
use thiserror::Error;

/// Why a library file was not loaded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{}: {reason}", path.display())]
pub struct LoadProblem {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
}

/// One engine found in a library.
#[derive(Clone)]
pub struct EngineEntry {
    /// Engine name (`--engines` spelling).
    pub name: String,
    /// Engine build version.
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// Whether the engine promises freedom from credit loops.
    pub deadlock_free: bool,
    /// The library file it comes from.
    pub library: PathBuf,
    /// That file as it was when loaded, to tell a new build on reload.
    identity: Option<FileIdentity>,
    module: EngineLibraryRef,
    /// The file of this build as it was loaded, open, so that an engine
    /// host loads exactly it (the path may hold another build by now, or
    /// a broken one the SM refused).
    image: Option<Arc<LibraryImage>>,
}

/// An open file holding a loaded library's build.
#[derive(Debug)]
pub struct LibraryImage {
    /// The file as opened and checked before loading, held open for `fd`;
    /// `None` for a private copy in memory, whose descriptor is never
    /// closed (see [`load_private_copy`]).
    _file: Option<std::fs::File>,
    fd: std::os::fd::RawFd,
}

impl LibraryImage {
    /// A descriptor of the file, without close-on-exec, for an engine host
    /// to inherit (closed when dropped).
    pub fn inheritable(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        // SAFETY: `fd` stays open as long as `self` (the file held here)
        // or for the whole process (a private copy's, never closed).
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        nix::unistd::dup(borrowed).map_err(std::io::Error::from)
    }
}

/// What tells one build of a library file from the next: a new build
/// installed over the old one changes at least one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileIdentity {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

impl std::fmt::Debug for EngineEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineEntry")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("library", &self.library)
            .finish()
    }
}

impl EngineEntry {
    /// Construct the engine from its configuration text.
    pub fn create(&self, config: &str) -> Result<EngineBox, EngineError> {
        let create = self.module.create();
        create(RStr::from_str(&self.name), RStr::from_str(config)).into_result()
    }

    /// The build's file, open (`None` for a library opened by
    /// [`open_library`] alone, outside a [`Registry`]).
    pub fn image(&self) -> Option<&Arc<LibraryImage>> {
        self.image.as_ref()
    }

    /// Check the engine's configuration without routing, when its library
    /// can (sm-abi 1.1 and later); `None` for a library built against 1.0,
    /// whose configuration errors show when the engine is created.
    pub fn check_config(&self, config: &str) -> Option<Result<(), String>> {
        let check = self.module.check_config()?;
        Some(check(RStr::from_str(&self.name), RStr::from_str(config)).into_result().map_err(|e| e.reason.into_string()))
    }
}

/// All engines found, in search-path order.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// Loaded engines; the first library providing a name wins.
    pub engines: Vec<EngineEntry>,
    /// Files that were skipped, and later duplicates of an engine name.
    pub problems: Vec<LoadProblem>,
    /// Directories searched, in order.
    pub dirs: Vec<PathBuf>,
}

impl Registry {
    /// Scan the directories in order. A directory that does not exist is
    /// reported and skipped.
    pub fn scan(dirs: &[PathBuf]) -> Registry {
        let mut reg = Registry { dirs: dirs.to_vec(), ..Default::default() };
        for f in library_files(dirs, &mut reg.problems) {
            reg.load_file(&f);
        }
        reg
    }

    /// Scans the same directories again, for engine hot swap. A library
    /// whose file has not changed keeps its loaded engines. A changed or
    /// new file is loaded from a private copy in memory (the dynamic
    /// loader would hand back the old build for the same path; see
    /// [`load_private_copy`]); if that fails, the
    /// problem is reported and the engines the old build provided stay in
    /// service. Engines whose file is gone are dropped.
    pub fn rescan(&self) -> Registry {
        let mut reg = Registry { dirs: self.dirs.clone(), ..Default::default() };
        for f in library_files(&self.dirs, &mut reg.problems) {
            let old: Vec<EngineEntry> = self.engines.iter().filter(|e| e.library == f).cloned().collect();
            let now = identity(&f);
            if !old.is_empty() && old.iter().all(|e| e.identity.is_some() && e.identity == now) {
                reg.add(&f, old);
                continue;
            }
            match load_private_copy(&f) {
                Ok(mut found) => {
                    for e in &mut found {
                        e.library = f.clone();
                        e.identity = now;
                    }
                    for e in &found {
                        tracing::info!(engine = %e.name, version = %e.version, library = %f.display(), "engine build loaded");
                    }
                    reg.add(&f, found);
                }
                Err(mut problem) => {
                    problem.path = f.clone();
                    if !old.is_empty() {
                        let names: Vec<&str> = old.iter().map(|e| e.name.as_str()).collect();
                        tracing::warn!(library = %f.display(), reason = %problem.reason,
                            "new build refused; the loaded build of {} stays in service", names.join(", "));
                        problem.reason = format!("{} (the loaded build stays in service)", problem.reason);
                        reg.add(&f, old);
                    }
                    reg.problems.push(problem);
                }
            }
        }
        reg
    }

    /// Adds the engines of library `path`; a name already provided by an
    /// earlier library is reported and skipped.
    fn add(&mut self, path: &Path, found: Vec<EngineEntry>) {
        for e in found {
            if let Some(prev) = self.get(&e.name) {
                self.problems.push(LoadProblem {
                    path: path.to_path_buf(),
                    reason: format!("engine `{}` ignored: already provided by {}", e.name, prev.library.display()),
                });
            } else {
                self.engines.push(e);
            }
        }
    }

    /// Load one library file into the registry, if it and its directory
    /// pass the trust checks (see the module documentation).
    pub fn load_file(&mut self, path: &Path) {
        let checked = path
            .parent()
            .ok_or_else(|| format!("{} has no directory", path.display()))
            .and_then(|dir| trusted_dir(dir).map_err(|why| format!("engine directory refused: {why}")))
            .and_then(|_| open_trusted(path).map_err(|why| format!("refused: {why}")));
        let file = match checked {
            Ok(f) => f,
            Err(reason) => {
                self.problems.push(LoadProblem { path: path.to_path_buf(), reason });
                return;
            }
        };
        match open_library(path) {
            Ok(mut found) => {
                use std::os::fd::AsRawFd;
                let fd = file.as_raw_fd();
                let image = Arc::new(LibraryImage { _file: Some(file), fd });
                for e in &mut found {
                    e.image = Some(Arc::clone(&image));
                }
                self.add(path, found)
            }
            Err(p) => self.problems.push(p),
        }
    }

    /// Engine by name.
    pub fn get(&self, name: &str) -> Option<&EngineEntry> {
        self.engines.iter().find(|e| e.name == name)
    }

    /// Names of all loaded engines.
    pub fn names(&self) -> Vec<&str> {
        self.engines.iter().map(|e| e.name.as_str()).collect()
    }
}

/// Open one library and list its engines. No trust checks: those are
/// [`Registry`]'s, which is what loads engines for the SM.
pub fn open_library(path: &Path) -> Result<Vec<EngineEntry>, LoadProblem> {
    let problem = |reason: String| LoadProblem { path: path.to_path_buf(), reason };
    let header = lib_header_from_path(path).map_err(|e| problem(describe(e)))?;
    let module = root_module(header).map_err(|e| problem(describe(e)))?;
    let list = (module.engines())();
    if list.is_empty() {
        return Err(problem("library exports no engines".into()));
    }
    Ok(list
        .into_iter()
        .map(|d| EngineEntry {
            name: d.name.into_string(),
            version: d.version.into_string(),
            summary: d.summary.into_string(),
            deadlock_free: d.deadlock_free,
            library: path.to_path_buf(),
            identity: identity(path),
            module,
            image: None,
        })
        .collect())
}

/// The engine root module of a library whose header was read.
///
/// abi_stable checks a root module as if the library were built against
/// the same or a later minor version of sm-abi than the core: the library's
/// root module must have at least the core's fields. A library built
/// against an earlier minor lacks the fields later minors appended, which
/// is what `missing_field(option)` is for (the core sees `None` there), so
/// for such a library the check runs with the roles swapped: the library's
/// root module must be a prefix of the core's, and every type reachable
/// from it must match exactly, but for the other prefix types (the trait
/// objects' vtables, which a minor may extend too), which must be prefixes
/// of the core's as well. The version check (same major) is abi_stable's
/// either way.
///
/// The swapped check runs against checking state of its own: abi_stable
/// keeps every prefix type it has checked in a process-wide map, with the
/// interface side's fields as what later libraries must have, and an older
/// library's shorter vtable recorded there as the interface would refuse
/// every current library loaded after it. Nothing crosses between engine
/// libraries (each object goes to the core and is called through its own
/// vtable, whose fields it knows), so each older library answers only for
/// itself.
fn root_module(header: &'static LibHeader) -> Result<EngineLibraryRef, LibraryError> {
    let ours = VersionNumber::new(EngineLibraryRef::VERSION_STRINGS)?;
    let theirs = VersionNumber::new(header.version_strings())?;
    if theirs.major != ours.major || theirs.minor >= ours.minor {
        return header.init_root_module::<EngineLibraryRef>();
    }
    let Some(layout) = header.layout() else {
        // Built without its layout: nothing to check it against.
        return header.init_root_module::<EngineLibraryRef>();
    };
    check_layout_compatibility_with_globals(layout, <EngineLibraryRef as StableAbi>::LAYOUT, &CheckingGlobals::new())
        .map_err(|e| LibraryError::AbiInstability(RBoxError::from_fmt(&e)))?;
    // SAFETY: the layout was checked just above, as an older minor's.
    unsafe { header.init_root_module_with_unchecked_layout::<EngineLibraryRef>() }
}

/// The `*.so` files of `dirs`, each directory's sorted by name, under
/// each directory's real path. Directories and files that fail the trust
/// checks (see the module documentation) or cannot be read are reported.
fn library_files(dirs: &[PathBuf], problems: &mut Vec<LoadProblem>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in dirs {
        let real = match trusted_dir(dir) {
            Ok(real) => real,
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), "engine directory refused: {reason}");
                problems.push(LoadProblem { path: dir.clone(), reason: format!("engine directory refused: {reason}") });
                continue;
            }
        };
        let entries = match std::fs::read_dir(&real) {
            Ok(e) => e,
            Err(e) => {
                problems.push(LoadProblem { path: dir.clone(), reason: format!("cannot read engine directory: {e}") });
                continue;
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "so"))
            .collect();
        files.sort();
        for f in files {
            match open_trusted(&f) {
                Ok(_) => out.push(f),
                Err(reason) => {
                    tracing::warn!(library = %f.display(), "engine library refused: {reason}");
                    problems.push(LoadProblem { path: f, reason: format!("refused: {reason}") });
                }
            }
        }
    }
    out
}

/// Our effective user: besides root, the only owner we trust.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why `m` (the metadata of `path`) may not be trusted: owned by someone
/// other than root or us, or writable by group or others (unless
/// `sticky_ok` and the sticky bit is set).
fn untrusted(path: &Path, m: &std::fs::Metadata, sticky_ok: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (uid, mode) = (m.uid(), m.mode());
    if uid != 0 && uid != euid() {
        return Some(format!("{} is owned by uid {uid}, neither root nor smcore's user (uid {})", path.display(), euid()));
    }
    if mode & 0o022 != 0 && !(sticky_ok && mode & libc::S_ISVTX != 0) {
        let who = if mode & 0o002 != 0 { "others" } else { "its group" };
        return Some(format!("{} is writable by {who} (mode {:04o})", path.display(), mode & 0o7777));
    }
    None
}

/// The real path of engine directory `dir` if it may be trusted: absolute,
/// a directory owned by root or us and writable by nobody else, with every
/// parent owned the same way and writable by nobody else unless sticky.
fn trusted_dir(dir: &Path) -> Result<PathBuf, String> {
    if !dir.is_absolute() {
        return Err(format!(
            "{} is a relative path; engine directories must be absolute (the working directory is not trusted)",
            dir.display()
        ));
    }
    let real = dir.canonicalize().map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
    let m = std::fs::symlink_metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    if !m.is_dir() {
        return Err(format!("{} is not a directory", real.display()));
    }
    if let Some(why) = untrusted(&real, &m, false) {
        return Err(why);
    }
    for parent in real.ancestors().skip(1) {
        let m = std::fs::symlink_metadata(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        if let Some(why) = untrusted(parent, &m, true) {
            return Err(format!("its parent {why}"));
        }
    }
    Ok(real)
}

/// Opens library `path` for reading if it may be trusted: a regular file
/// owned by root or us and writable by nobody else, checked on the open
/// descriptor. A symbolic link is followed only to a target whose
/// directory passes [`trusted_dir`]; the target is then opened by its real
/// path with `O_NOFOLLOW`, so nothing is followed that was not checked.
fn open_trusted(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let lm = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let real = if lm.file_type().is_symlink() {
        let real = path.canonicalize().map_err(|e| format!("cannot resolve the link {}: {e}", path.display()))?;
        let parent = real.parent().ok_or_else(|| format!("{} has no directory", real.display()))?;
        trusted_dir(parent).map_err(|why| format!("the link {} leads to {}: {why}", path.display(), real.display()))?;
        real
    } else {
        path.to_path_buf()
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|e| format!("cannot open {}: {e}", real.display()))?;
    let m = file.metadata().map_err(|e| format!("{}: {e}", real.display()))?;
    if !m.file_type().is_file() {
        return Err(format!("{} is not a regular file", real.display()));
    }
    if let Some(why) = untrusted(&real, &m, false) {
        return Err(why);
    }
    Ok(file)
}

/// Loads a changed library as a new object, through a copy of its own:
/// the checked file (see [`open_trusted`]) is copied into an anonymous
/// memory file and dlopened as `/proc/self/fd/N`. Nothing is staged on a
/// file system, so no other user can plant or swap the copy. The memory
/// file stays open for the life of the process: the library stays mapped
/// (libraries are never unloaded), and the dynamic loader knows a loaded
/// object by its name, so a later `/proc/self/fd/N` must never reuse N.
fn load_private_copy(path: &Path) -> Result<Vec<EngineEntry>, LoadProblem> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let problem = |reason: String| LoadProblem { path: path.to_path_buf(), reason };
    let mut source = open_trusted(path).map_err(|why| problem(format!("refused: {why}")))?;
    let name = std::ffi::CString::new(format!(
        "smcore-engine:{}",
        path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ))
    .unwrap_or_else(|_| c"smcore-engine".to_owned());
    let fd = memfd_exec(&name).map_err(|e| problem(format!("cannot create a memory file for loading: {e}")))?;
    // SAFETY: `fd` was just created and belongs to nobody else.
    let mut copy = unsafe { std::fs::File::from_raw_fd(fd) };
    std::io::copy(&mut source, &mut copy).map_err(|e| problem(format!("cannot copy for loading: {e}")))?;
    // Never closed: see above.
    let fd = copy.into_raw_fd();
    let image = Arc::new(LibraryImage { _file: None, fd });
    let mut found = open_library(Path::new(&format!("/proc/self/fd/{fd}")))?;
    for e in &mut found {
        e.image = Some(Arc::clone(&image));
    }
    Ok(found)
}

/// `memfd_create` for a file the loader may map executable: `MFD_EXEC`
/// where the kernel knows it (Linux 6.3+, needed when
/// `vm.memfd_noexec` is 1), plain otherwise.
fn memfd_exec(name: &std::ffi::CStr) -> std::io::Result<std::os::fd::RawFd> {
    const MFD_EXEC: libc::c_uint = 0x0010;
    // SAFETY: `name` is a valid C string; the flags are plain bits.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | MFD_EXEC) };
    if fd >= 0 {
        return Ok(fd);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(e);
    }
    // SAFETY: as above.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd >= 0 {
        Ok(fd)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One line for each way a library can be rejected.
fn describe(e: LibraryError) -> String {
    match e {
        LibraryError::OpenError { err, .. } => format!("not a loadable library: {err}"),
        LibraryError::GetSymbolError { .. } => "not an smcore engine (no abi_stable root module exported)".to_string(),
        LibraryError::ParseVersionError(e) => format!("unreadable engine ABI version: {e}"),
        LibraryError::IncompatibleVersionNumber { library_name, expected_version, actual_version } => format!(
            "incompatible engine ABI: library `{library_name}` was built with sm-abi {actual_version}, this smcore needs a version compatible with {expected_version}"
        ),
        LibraryError::AbiInstability(e) => {
            let text = e.to_string();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            format!("incompatible engine ABI: type layouts differ from this smcore's sm-abi ({first})")
        }
        LibraryError::InvalidAbiHeader(h) => format!("not an smcore engine: unsupported abi_stable header {h:?}"),
        LibraryError::InvalidCAbi { expected, found } => {
            format!("incompatible engine ABI: C ABI of the root module differs (expected {expected}, found {found})")
        }
        LibraryError::RootModule { err, module_name, version } => {
            format!("engine library `{module_name}` {version} failed to initialise: {err}")
        }
        other => format!("cannot load: {other}"),
    }
}

/// Engine directories in search order: `--engine-dir` flags, then
/// `SMCORE_ENGINE_PATH` (colon separated), then the directory of the running
/// executable. Earlier directories win when two provide the same engine.
/// A relative `--engine-dir` is made absolute against the working
/// directory, now; a relative `SMCORE_ENGINE_PATH` entry is kept as given,
/// for [`Registry::scan`] to refuse and report.
pub fn search_path(cli_dirs: &[PathBuf], env: Option<&str>) -> Vec<PathBuf> {
    search_path_with_config(cli_dirs, &[], env)
}

/// [`search_path`] with the configuration's `engine_dirs` between the
/// `--engine-dir` flags and `SMCORE_ENGINE_PATH`. Relative configured
/// directories are kept as given, for [`Registry::scan`] to refuse and
/// report: the configuration is not where the working directory comes
/// from.
pub fn search_path_with_config(cli_dirs: &[PathBuf], config_dirs: &[PathBuf], env: Option<&str>) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().ok();
    let mut dirs: Vec<PathBuf> = cli_dirs
        .iter()
        .map(|d| match &cwd {
            Some(cwd) if d.is_relative() => cwd.join(d),
            _ => d.clone(),
        })
        .collect();
    dirs.extend(config_dirs.iter().cloned());
    if let Some(env) = env {
        dirs.extend(env.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)) {
        dirs.push(dir);
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        // A relative entry is never resolved, not even to compare it.
        let key = if d.is_absolute() { d.canonicalize().unwrap_or_else(|_| d.clone()) } else { d.clone() };
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    dirs
}
