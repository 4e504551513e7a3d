//! The SM's pid file: what service managers of the init-script kind and
//! logrotate's `postrotate` find the running SM by.
//!
//! Written whole (a temporary file renamed over it) so a reader never sees
//! a half-written number, removed when the SM ends. A file naming another
//! live `smcore` is refused: two SMs started on one pid file are two SMs on
//! one port, which the admin did not mean.

use std::io;
use std::path::{Path, PathBuf};

/// Why the pid file was not written.
#[derive(Debug, thiserror::Error)]
pub enum PidFileError {
    /// Another smcore holds it.
    #[error("pid file {path}: smcore (pid {pid}) is running with it")]
    Running {
        /// The file.
        path: PathBuf,
        /// The other SM.
        pid: u32,
    },
    /// It cannot be written.
    #[error("pid file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// A written pid file, removed on drop.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    pid: u32,
}

/// Whether `pid` is a live process named smcore.
fn is_smcore(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "smcore")
}

impl PidFile {
    /// Writes this process's pid to `path`.
    pub fn create(path: &Path) -> Result<Self, PidFileError> {
        let pid = std::process::id();
        let err = |source| PidFileError::Io { path: path.to_path_buf(), source };
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(other) = text.trim().parse::<u32>() {
                if other != pid && is_smcore(other) {
                    return Err(PidFileError::Running { path: path.to_path_buf(), pid: other });
                }
            }
        }
        // Through a temporary of an unpredictable name: a link or file
        // planted in /run's neighbourhood is neither followed nor a way to
        // keep the SM from starting.
        sm_fs::replace_bytes(path, sm_fs::PUBLIC, format!("{pid}\n").as_bytes()).map_err(err)?;
        Ok(Self { path: path.to_path_buf(), pid })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Only our own: a successor may have written it meanwhile.
        if std::fs::read_to_string(&self.path).is_ok_and(|t| t.trim() == self.pid.to_string()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_is_written_and_removed_with_the_guard() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("smcore.pid");
        // A stale file of a process that is gone is replaced.
        std::fs::write(&path, "999999999\n").expect("seed");
        let guard = PidFile::create(&path).expect("create");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), format!("{}\n", std::process::id()));
        drop(guard);
        assert!(!path.exists());
    }

    #[test]
    fn planted_links_neither_stop_the_sm_nor_are_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").expect("seed");
        let path = dir.path().join("smcore.pid");
        std::os::unix::fs::symlink(&victim, &path).expect("link");
        // The temporary's name as a predictable one would have been.
        std::os::unix::fs::symlink(&victim, dir.path().join(format!("smcore.pid.{}.tmp", std::process::id()))).expect("link");
        let guard = PidFile::create(&path).expect("create");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious\n");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), format!("{}\n", std::process::id()));
        drop(guard);
    }

    #[test]
    fn a_file_in_a_missing_directory_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = PidFile::create(&dir.path().join("no/smcore.pid")).expect_err("no dir");
        assert!(e.to_string().contains("no/smcore.pid"), "{e}");
    }
}
