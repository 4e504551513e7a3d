//! Shared helpers for sm-core integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// Directory of the smcore binary under test; the workspace's engine cdylibs
/// are built there too (`cargo build --workspace`).
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_smcore")).parent().expect("bin dir").to_path_buf()
}

/// Build the deliberately broken engines (a separate workspace, so they never
/// sit beside the real binary) and return the directory holding them.
pub fn fixtures_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let ws = workspace();
        let target = ws.join("target").join("fixtures");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--manifest-path"])
            .arg(ws.join("tests/fixtures/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("run cargo for fixtures");
        assert!(status.success(), "building test engine fixtures failed");
        target.join("debug")
    })
    .clone()
}

/// A small two-level fabric: 2 leaves with 2 hosts each, joined by two
/// parallel links.
pub const SMALL_NET: &str = r#"
Switch 4 "sw1"
[1] "h1"[1]
[2] "h2"[1]
[3] "sw2"[3]
[4] "sw2"[4]

Switch 4 "sw2"
[1] "h3"[1]
[2] "h4"[1]

Hca 1 "h1"
Hca 1 "h2"
Hca 1 "h3"
Hca 1 "h4"
"#;

/// Write `text` to `dir/name`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write test file");
    p
}

/// Run smcore with arguments; returns (status code, stdout, stderr).
pub fn smcore(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore")).args(args).output().expect("run smcore");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Where `smcore --fabric` puts the SM: the first CA with a cable, on its
/// first cabled port.
pub fn sm_location(topo: &sm_topology::Topology) -> (usize, u8) {
    let links = topo.port_links();
    topo.nodes
        .iter()
        .enumerate()
        .find_map(|(i, n)| {
            (n.kind == sm_abi::NodeKind::Ca)
                .then(|| (1..=n.num_ports).find(|&p| links[i][usize::from(p)].is_some()))
                .flatten()
                .map(|p| (i, p))
        })
        .expect("a CA with a cable")
}

/// Two spines, four leaves with one uplink to each spine, two hosts per
/// leaf (any single spine or uplink can fail and every host stays
/// reachable): the fabric, the SM's CA and port, the spines.
#[allow(dead_code)]
pub fn two_spine_tree() -> (sm_topology::Topology, (usize, u8), Vec<usize>) {
    let topo = sm_topology::gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let sm = sm_location(&topo);
    let spines: Vec<usize> =
        topo.nodes.iter().enumerate().filter(|(_, n)| n.desc.contains("spine")).map(|(i, _)| i).collect();
    assert_eq!(spines.len(), 2);
    (topo, sm, spines)
}

/// An IPv4-style multicast GID ending in `n`.
pub fn mc_mgid(n: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xFF;
    g[1] = 0x12;
    g[2] = 0x40;
    g[3] = 0x1B;
    g[15] = n;
    g
}

/// Group parameters as IPoIB asks for them, on SL `sl`.
pub fn mc_params(n: u8, sl: u8) -> sm_core::mcast::McGroupParams {
    sm_core::mcast::McGroupParams {
        mgid: mc_mgid(n),
        qkey: 0x0B1B,
        pkey: 0xFFFF,
        mtu: 4,
        rate: 3,
        packet_life: 18,
        sl,
        flow_label: 0,
        hop_limit: 0,
        tclass: 0,
        scope: 2,
    }
}

/// A full member, the port of `guid` itself.
pub fn mc_member(guid: u64) -> sm_core::mcast::McMember {
    let mut port_gid = [0u8; 16];
    port_gid[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    port_gid[8..].copy_from_slice(&guid.to_be_bytes());
    sm_core::mcast::McMember { port_gid, port_guid: guid, join_state: sm_core::mcast::groups::join_state::FULL, proxy: false }
}


/// Polls `done` every 50 ms for up to a minute; fails when `child` exits
/// first or the minute passes.
pub fn wait_for(child: &mut std::process::Child, what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        assert!(child.try_wait().expect("wait").is_none(), "smcore exited waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Sends `signal` to `child`.
pub fn signal(child: &std::process::Child, signal: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill({}, {signal}) failed", child.id());
}

/// How often `needle` occurs in the file at `path` (0 when unreadable).
pub fn count(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path).map(|t| t.matches(needle).count()).unwrap_or(0)
}

/// `smcore --fabric fat-tree-64.net ARGS` as a running SM with the
/// workspace's engines and no SMCORE_LOG from the caller's environment;
/// stdout discarded, stderr piped (read it at the end with
/// `wait_with_output`).
pub fn spawn_sm<I, S>(args: I) -> std::process::Child
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .args(args)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .env_remove("SMCORE_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn smcore")
}

/// One minhop sweep of [`SMALL_NET`] on the embedded fabric, the SM where
/// `smcore --fabric` puts it; it must route.
pub fn small_sweep() -> sm_core::pipeline::OnceOutcome {
    use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
    use sm_core::pipeline::OnceOptions;
    let topo = sm_topology::parse_str(SMALL_NET, "small").expect("topology");
    let (node, port) = sm_location(&topo);
    let mut sim = sm_core::sim::SimFabric::from_topology(&topo, node, port).expect("sim");
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let config = sm_core::config::Config::default();
    let out = sm_core::pipeline::once(&mut sm_core::sim::SimPort::new(&mut sim), &options, &registry, &config, &mut g2l, &mut held).expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

/// `smcore ctl --socket SOCKET COMMAND...`: whether it succeeded, and its
/// stdout then stderr.
pub fn ctl(socket: &Path, command: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(command)
        .output()
        .expect("run smcore ctl");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The embedded fabric behind a port that shows `note` every SMP on its
/// way there.
pub struct Spy<'a, F> {
    pub inner: sm_core::sim::SimPort<'a>,
    pub note: F,
}

impl<F: FnMut(&[u8])> sm_core::sweep::SmpPort for Spy<'_, F> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, sm_core::sweep::TransportError> {
        (self.note)(mad);
        self.inner.send(mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, sm_core::sweep::TransportError> {
        (self.note)(mad);
        self.inner.send_to(dlid, mad)
    }
}
