//! Finding and loading engine libraries.
//!
//! Every `*.so` file in the engine directories is opened through
//! abi_stable's library header, which checks that the file exports an smcore
//! root module built against a compatible `sm-abi` with identical type
//! layouts. Files that fail are reported (file and reason) and skipped; the
//! rest load. Libraries are never unloaded, so trait objects created from
//! them stay valid for the life of the process.

use std::path::{Path, PathBuf};

use sm_abi::abi_stable::library::{lib_header_from_path, LibraryError};
use sm_abi::abi_stable::std_types::RStr;
use sm_abi::{EngineBox, EngineLibraryRef, ABI_VERSION};
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
    pub fn create(&self, config: &str) -> Result<EngineBox, String> {
        let create = self.module.create();
        create(RStr::from_str(&self.name), RStr::from_str(config)).into_result().map_err(|e| e.reason.into_string())
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
    /// new file is loaded from a private copy (the dynamic loader would
    /// hand back the old build for the same path); if that fails, the
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
            match private_copy(&f).and_then(|copy| open_library(&copy)) {
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

    /// Load one library file into the registry.
    pub fn load_file(&mut self, path: &Path) {
        match open_library(path) {
            Ok(found) => self.add(path, found),
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

/// Open one library and list its engines.
pub fn open_library(path: &Path) -> Result<Vec<EngineEntry>, LoadProblem> {
    let problem = |reason: String| LoadProblem { path: path.to_path_buf(), reason };
    let header = lib_header_from_path(path).map_err(|e| problem(describe(e)))?;
    let module = header.init_root_module::<EngineLibraryRef>().map_err(|e| problem(describe(e)))?;
    let abi = module.abi_version();
    if abi != ABI_VERSION {
        return Err(problem(format!("built for smcore engine ABI {abi}, this smcore speaks ABI {ABI_VERSION}")));
    }
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
        })
        .collect())
}

/// The `*.so` files of `dirs`, each directory's sorted by name; unreadable
/// directories are reported.
fn library_files(dirs: &[PathBuf], problems: &mut Vec<LoadProblem>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
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
        out.extend(files);
    }
    out
}

/// Copies a library to a file of its own, so that it loads as a new
/// object: copies are never removed while the process runs, since the
/// engines loaded from them stay mapped.
fn private_copy(path: &Path) -> Result<PathBuf, LoadProblem> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let problem = |reason: String| LoadProblem { path: path.to_path_buf(), reason };
    let dir = std::env::temp_dir().join(format!("smcore-engines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| problem(format!("cannot stage a copy in {}: {e}", dir.display())))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "engine.so".into());
    let copy = dir.join(format!("{}-{name}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::copy(path, &copy).map_err(|e| problem(format!("cannot copy for loading: {e}")))?;
    Ok(copy)
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
pub fn search_path(cli_dirs: &[PathBuf], env: Option<&str>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cli_dirs.to_vec();
    if let Some(env) = env {
        dirs.extend(env.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)) {
        dirs.push(dir);
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let key = d.canonicalize().unwrap_or_else(|_| d.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    dirs
}
