//! The one place where smcore's tests look for the programs they run
//! against (ibsim, infiniband-diags, ibutils, OpenSM, systemd, logrotate,
//! prometheus).
//!
//! A test whose tool is missing has checked nothing, so it must fail, not
//! skip; the failure names the Debian package to install (`.ci/run` and
//! `scripts/test.sh` install them all).

use std::fmt;
use std::path::{Path, PathBuf};

/// Where umad2sim's interposer library is installed (Debian ibsim-utils).
pub const UMAD2SIM_LIB: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// The Debian package of each program the tests run.
const PACKAGES: &[(&str, &str)] = &[
    ("ibsim", "ibsim-utils"),
    ("ibnetdiscover", "infiniband-diags"),
    ("smpquery", "infiniband-diags"),
    ("saquery", "infiniband-diags"),
    ("perfquery", "infiniband-diags"),
    ("ibroute", "infiniband-diags"),
    ("dump_fts", "infiniband-diags"),
    ("ibportstate", "infiniband-diags"),
    ("sminfo", "infiniband-diags"),
    ("ibsendtrap", "infiniband-diags"),
    ("ibdmchk", "ibutils"),
    ("opensm", "opensm"),
    ("osmtest", "opensm"),
    ("systemd-analyze", "systemd"),
    ("logrotate", "logrotate"),
    ("prometheus", "prometheus"),
    ("man", "man-db"),
    ("groff", "groff-base"),
];

/// A program or library a test needs and did not find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The program's name or the library's path.
    pub what: String,
    /// The Debian package that provides it, when known.
    pub package: Option<&'static str>,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.package {
            Some(p) => write!(f, "`{}` is needed by this test and is not installed: install the Debian package `{p}` (.ci/run and scripts/test.sh do)", self.what),
            None => write!(f, "`{}` is needed by this test and is not installed", self.what),
        }
    }
}

impl std::error::Error for Missing {}

/// The Debian package that provides `program`, if it is one the tests use.
pub fn package_of(program: &str) -> Option<&'static str> {
    PACKAGES.iter().find(|(p, _)| *p == program).map(|(_, pkg)| *pkg)
}

/// `program` found on PATH or in the system's sbin directories (a test
/// user's PATH often lacks /usr/sbin, where opensm and logrotate live).
/// A name with a slash is taken as a path.
pub fn find_tool(program: &str) -> Result<PathBuf, Missing> {
    let missing = || Missing { what: program.to_string(), package: package_of(program) };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if p.is_file() { Ok(p) } else { Err(missing()) };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(missing)
}

/// [`find_tool`], failing the test with the package to install.
#[track_caller]
pub fn require_tool(program: &str) -> PathBuf {
    find_tool(program).unwrap_or_else(|m| panic!("{m}"))
}

/// umad2sim's interposer library, or why not.
pub fn find_umad2sim() -> Result<PathBuf, Missing> {
    let lib = std::env::var_os("UMAD2SIM_LIB").map(PathBuf::from).unwrap_or_else(|| UMAD2SIM_LIB.into());
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(Missing { what: lib.display().to_string(), package: Some("ibsim-utils") })
    }
}

/// [`find_umad2sim`], failing the test with the package to install.
#[track_caller]
pub fn require_umad2sim() -> PathBuf {
    find_umad2sim().unwrap_or_else(|m| panic!("{m}"))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_named_with_its_package() {
        let m = find_tool("osmtest-that-is-not-there").unwrap_err();
        assert_eq!(m.package, None);
        let m = Missing { what: "ibdmchk".into(), package: package_of("ibdmchk") };
        assert!(m.to_string().contains("install the Debian package `ibutils`"), "{m}");
    }

    #[test]
    fn a_present_tool_is_found() {
        // `sh` is on every machine that runs these tests.
        assert!(find_tool("sh").unwrap().is_file());
        assert!(find_tool("/bin/sh").is_ok());
        assert!(find_tool("/nonexistent/sh").is_err());
    }

    #[test]
    #[should_panic(expected = "is needed by this test")]
    fn require_fails_the_test_instead_of_skipping_it() {
        require_tool("no-such-tool-anywhere");
    }
}
