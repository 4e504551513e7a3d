//! Files the SM writes into directories a local user may also write to
//! (a dump directory under /tmp, the log's directory, /run).
//!
//! A file is replaced whole: its new text goes into a temporary of an
//! unpredictable name beside it, created with `O_CREAT|O_EXCL` (which
//! never opens a link or a file that is already there), given its mode,
//! synced, and renamed over the file (a rename replaces a link planted at
//! the name, it does not follow it). The SM running as root therefore
//! never writes through a link another user planted.
//!
//! A directory the SM both writes and reads back from (the dump
//! directory, which holds guid2lid and guid2mkey) must be trusted: owned
//! by root or the SM's own user and writable by no one else. A world- or
//! group-writable directory is refused even with the sticky bit, which
//! keeps others from replacing the SM's files but not from planting a
//! guid2lid before the SM first writes one.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of a file any local user may read (dumps, reports, the pid file).
pub const PUBLIC: u32 = 0o644;
/// Mode of a file only the SM's user reads (guid2mkey, the M_Keys).
pub const PRIVATE: u32 = 0o600;

/// Replaces `path` with what `fill` writes, through a temporary beside
/// it (see the module comment); `mode` is the new file's. The directory
/// is synced after the rename, so after a crash the file is the old text
/// or the new one.
pub fn replace(path: &Path, mode: u32, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let dir = parent(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // O_CREAT|O_EXCL, mode 0600, a random name: dropped (and removed)
    // on any error below.
    let tmp = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(&dir)?;
    let mut w = BufWriter::with_capacity(1 << 16, tmp);
    fill(&mut w)?;
    let tmp = w.into_inner().map_err(|e| e.into_error())?;
    // The umask does not narrow it: fchmod on the file the SM created.
    tmp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    fs::File::open(&dir)?.sync_all()
}

/// [`replace`] with bytes.
pub fn replace_bytes(path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
    replace(path, mode, |w| w.write_all(bytes))
}

/// The directory `path` is in (`.` for a bare name).
pub fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Why a directory is not trusted.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedDir {
    /// It cannot be examined.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A link owned by another user.
    #[error("{}: a symbolic link owned by uid {owner}, not root or this SM's user (uid {euid}): refused", path.display())]
    ForeignLink {
        /// The link.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The SM's user.
        euid: u32,
    },
    /// Not a directory.
    #[error("{}: not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// Owned by another user.
    #[error("{}: owned by uid {owner}, not root or this SM's user (uid {euid}): refused (another user could plant files the SM reads or overwrites)", path.display())]
    ForeignOwner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The SM's user.
        euid: u32,
    },
    /// Writable by its group or by anyone.
    #[error("{}: writable by {whom} (mode {mode:04o}): refused (another user could plant files the SM reads or overwrites); make it 0755 or 0700", path.display())]
    Writable {
        /// The directory.
        path: PathBuf,
        /// "its group" or "any user".
        whom: &'static str,
        /// Its permission bits.
        mode: u32,
    },
}

/// Checks that `dir` (which exists) is owned by root or the SM's user and
/// writable by no one else; a link to it must itself be owned by root or
/// the SM's user.
pub fn check_trusted_dir(dir: &Path) -> Result<(), UntrustedDir> {
    let euid = nix::unistd::geteuid().as_raw();
    let io_err = |source| UntrustedDir::Io { path: dir.to_path_buf(), source };
    let link = fs::symlink_metadata(dir).map_err(io_err)?;
    if link.file_type().is_symlink() && link.uid() != 0 && link.uid() != euid {
        return Err(UntrustedDir::ForeignLink { path: dir.to_path_buf(), owner: link.uid(), euid });
    }
    let meta = fs::metadata(dir).map_err(io_err)?;
    if !meta.is_dir() {
        return Err(UntrustedDir::NotADirectory { path: dir.to_path_buf() });
    }
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(UntrustedDir::ForeignOwner { path: dir.to_path_buf(), owner: meta.uid(), euid });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(UntrustedDir::Writable { path: dir.to_path_buf(), whom: "any user", mode });
    }
    if mode & 0o020 != 0 && meta.gid() != 0 {
        return Err(UntrustedDir::Writable { path: dir.to_path_buf(), whom: "its group", mode });
    }
    Ok(())
}

/// Creates `dir` (and its parents) if missing, mode 0755, then checks it
/// with [`check_trusted_dir`].
pub fn trusted_dir(dir: &Path) -> Result<(), UntrustedDir> {
    use std::os::unix::fs::DirBuilderExt;
    if fs::symlink_metadata(dir).is_err() {
        fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(|source| UntrustedDir::Io { path: dir.to_path_buf(), source })?;
    }
    check_trusted_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        let path = dir.path().join("opensm-lfts.dump");
        symlink(&victim, &path).unwrap();
        // Every name a predictable temporary could have had, planted too.
        symlink(&victim, dir.path().join(".opensm-lfts.dump.tmp")).unwrap();
        replace_bytes(&path, PUBLIC, b"dump\n").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&path).unwrap(), "dump\n");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
        // Nothing left behind but the planted link.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn a_private_file_gets_0600_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guid2mkey");
        replace_bytes(&path, PRIVATE, b"0x1 0x2\n").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opensm-subnet.lst");
        fs::write(&path, "old\n").unwrap();
        let e = replace(&path, PUBLIC, |_| Err(io::Error::other("half"))).unwrap_err();
        assert_eq!(e.to_string(), "half");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn world_writable_directories_are_refused_even_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("dumps");
        trusted_dir(&d).expect("made 0755");
        assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o755);
        // Group-writable counts when the group is not root's.
        std::os::unix::fs::chown(&d, None, Some(65534)).unwrap();
        for mode in [0o777, 0o1777, 0o775] {
            fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
            let e = check_trusted_dir(&d).expect_err("writable by others");
            assert!(e.to_string().contains("refused"), "{e}");
        }
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
        check_trusted_dir(&d).expect("private");
    }

    #[test]
    fn a_directory_or_link_another_user_planted_is_refused() {
        // As root (the SM in service): a dump directory under /tmp made
        // first by another user, or a link of theirs to a root directory.
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("smcore-dumps");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = trusted_dir(&theirs).expect_err("another user's");
        assert!(matches!(e, UntrustedDir::ForeignOwner { owner: 65534, .. }), "{e}");
        let link = dir.path().join("smcore-link");
        symlink("/etc", &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = trusted_dir(&link).expect_err("another user's link");
        assert!(matches!(e, UntrustedDir::ForeignLink { owner: 65534, .. }), "{e}");
    }

    #[test]
    fn tmp_itself_is_not_a_dump_directory() {
        // The sticky, world-writable /tmp the README's example sits in.
        let e = check_trusted_dir(Path::new("/tmp")).expect_err("/tmp");
        assert!(e.to_string().contains("any user"), "{e}");
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, "").unwrap();
        assert!(matches!(check_trusted_dir(&f), Err(UntrustedDir::NotADirectory { .. })));
    }
}
