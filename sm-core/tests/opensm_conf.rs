//! `--config` takes OpenSM's own opensm.conf: the file `opensm -c` writes
//! loads, its honoured keys land where the TOML keys do, the rest are
//! reported, and unknown keys or bad values name file and line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use sm_core::config::{opensm, Config};

/// Have the installed OpenSM write its full default configuration to
/// `dir/opensm.conf` (`-F /dev/null`: defaults, whatever /etc/opensm holds).
fn opensm_written_conf(dir: &Path) -> PathBuf {
    let path = dir.join("opensm.conf");
    let mut child = Command::new("opensm")
        .args(["-F", "/dev/null", "-c"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `opensm -c` (the opensm package is needed for this test): {e}"));
    // `opensm -c` writes the file and exits; the limit only keeps a
    // misbehaving opensm from hanging the test.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                child.kill().ok();
                child.wait().ok();
                panic!("`opensm -c {}` did not exit", path.display());
            }
        }
    };
    assert!(status.success(), "`opensm -c` failed: {status}");
    path
}

#[test]
fn the_file_opensm_writes_loads_with_its_values() {
    let tmp = tempfile::tempdir().unwrap();
    let path = opensm_written_conf(tmp.path());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(opensm::is_opensm_format(&text), "not recognised as opensm.conf:\n{text}");
    // Every key it holds is one of ours: the table is OpenSM's whole table.
    let keys: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(keys.len() > 100, "opensm -c wrote only {} keys", keys.len());
    for k in &keys {
        assert!(opensm::key(k).is_some(), "{k} from opensm -c is missing from the key table");
    }

    let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.routing_engine, None, "(null) is unset");
    assert_eq!(c.sm_key, Some(1));
    assert_eq!(c.m_key, Some(0));
    assert!(!c.m_key_config().enabled());
    assert_eq!(c.lmc, 0);
    assert_eq!(c.sweep_interval, Some(10.0));
    assert_eq!(c.max_wire_smps, Some(4));
    assert_eq!(c.transaction_timeout, Some(200));
    assert_eq!(c.transaction_retries, Some(3));
    assert_eq!(c.sm_priority, Some(0));
    assert_eq!(c.sminfo_polling_timeout, Some(10_000));
    assert_eq!(c.polling_retry_number, Some(4));
    assert!(!c.use_ucast_cache);
    // Engine options arrive as the engines read them from smcore.toml.
    assert_eq!(c.options.get("max_reverse_hops").and_then(|v| v.as_integer()), Some(0));
    assert_eq!(c.options.get("nue_max_num_vls").and_then(|v| v.as_integer()), Some(1));
    assert_eq!(c.options.get("do_mesh_analysis").and_then(|v| v.as_bool()), Some(false));
    assert_eq!(c.options.get("torus_config").and_then(|v| v.as_str()), Some("/etc/opensm/torus-2QoS.conf"));
    assert!(!c.options.contains_key("root_guid_file"), "(null) is unset");
    let toml: toml::Table = toml::from_str(&c.engine_text("lash")).unwrap();
    assert_eq!(toml.get("lash_start_vl").and_then(|v| v.as_integer()), Some(0));

    // The keys it does not use are listed, each once, and only those.
    // Congestion control as OpenSM writes it: off, its keys honoured.
    assert!(!c.not_supported.iter().any(|k| k == "congestion_control" || k.starts_with("cc_")), "{:?}", c.not_supported);
    assert!(!c.congestion_control);
    assert_eq!((c.cc_key, c.cc_max_outstanding_mads, c.cc_cct.as_deref()), (Some(0), Some(500), None));
    // The performance manager and logging keys as OpenSM writes them.
    assert!(!c.not_supported.iter().any(|k| k == "perfmgr" || k == "log_file"), "{:?}", c.not_supported);
    assert!(!c.perfmgr);
    assert_eq!(c.perfmgr_sweep_time_s, Some(180));
    assert_eq!(c.log_flags, Some(0x03));
    assert_eq!(c.log_file.as_deref(), Some(std::path::Path::new("/var/log/opensm.log")));
    // QoS keys as OpenSM writes them: off, every value unset.
    assert!(!c.not_supported.iter().any(|k| k.starts_with("qos")), "{:?}", c.not_supported);
    assert!(!c.qos);
    assert_eq!((c.qos_max_vls, c.qos_high_limit, c.qos_ca_sl2vl.as_deref()), (Some(0), None, None));
    let q = c.qos_settings().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(q.swe.sl2vl, sm_core::qos::parse_sl2vl(sm_core::qos::DEFAULT_SL2VL).unwrap());
    // The keys honoured since, as OpenSM writes them: its defaults.
    for key in ["packet_life_time", "sm_sl", "no_clients_rereg", "reassign_lids"] {
        assert!(!c.not_supported.iter().any(|k| k == key), "{key}: {:?}", c.not_supported);
    }
    assert_eq!((c.packet_life_time, c.sm_sl), (Some(0x12), Some(0)));
    assert!(!c.no_clients_rereg && !c.reassign_lids);
    assert_eq!(c.subnet_prefix, Some(0xfe80_0000_0000_0000));
    // The link manager's keys arrive as OpenSM writes them.
    assert!(!c.not_supported.iter().any(|k| k == "max_op_vls"));
    assert_eq!(c.max_op_vls, Some(5));
    assert_eq!(c.head_of_queue_lifetime, Some(0x12));
    assert_eq!(c.leaf_head_of_queue_lifetime, Some(0x10));
    assert_eq!(c.subnet_timeout, Some(18));
    assert!(!c.not_supported.iter().any(|k| k == "sm_key" || k == "routing_engine"));
    // The unicast manager's and the engines' keys as OpenSM writes them
    // reach the engines; the logging, dump and perfmgr keys the SM.
    assert_eq!(c.options.get("port_shifting").and_then(|v| v.as_bool()), Some(false));
    assert_eq!(c.options.get("scatter_ports").and_then(|v| v.as_integer()), Some(0));
    assert_eq!(c.options.get("guid_routing_order_no_scatter").and_then(|v| v.as_bool()), Some(false));
    assert_eq!(c.options.get("quasi_ftree_indexing").and_then(|v| v.as_bool()), Some(false));
    assert_eq!((c.node_name_map.as_ref(), c.log_prefix.as_ref()), (None, None), "(null) is unset");
    assert_eq!(c.dump_files_dir.as_deref(), Some(std::path::Path::new("/var/log/")));
    assert_eq!(c.perfmgr_rm_nodes, Some(true));
    for key in ["node_name_map_name", "port_shifting", "hop_weights_file", "log_prefix", "perfmgr_rm_nodes", "perfmgr_redir", "console"] {
        assert!(!c.not_supported.iter().any(|k| k == key), "{key}: {:?}", c.not_supported);
    }
    // The SA database's keys, as OpenSM writes them: no file, no dump,
    // files synced, subscriptions kept.
    for key in ["sa_db_file", "sa_db_dump", "fsync_high_avail_files", "drop_event_subscriptions", "mcgroup_join_validation",
        "ipoib_mcgroup_creation_validation"] {
        assert!(!c.not_supported.iter().any(|k| k == key), "{key}: {:?}", c.not_supported);
    }
    assert_eq!((c.sa_db_file.as_deref(), c.sa_db_dump), (None, false));
    assert_eq!((c.fsync_high_avail_files, c.drop_event_subscriptions), (Some(true), false));
    assert_eq!((c.mcgroup_join_validation, c.ipoib_mcgroup_creation_validation), (Some(true), Some(true)));
    // The SM-side keys honoured since, at OpenSM's defaults.
    assert_eq!((c.local_phy_errors_threshold, c.overrun_errors_threshold), (Some(8), Some(8)));
    assert_eq!((c.force_heavy_sweep, c.sweep_on_trap, c.sm_inactive, c.ignore_other_sm), (false, Some(true), false, false));
    let mut sorted = c.not_supported.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), c.not_supported.len());
    let honoured =
        keys.iter().filter(|k| !matches!(opensm::key(k).map(|e| e.support), Some(opensm::Support::NotSupported(_))));
    assert_eq!(honoured.count() + c.not_supported.len(), keys.len());
}

#[test]
fn toml_still_reads_as_toml() {
    let c = Config::load(&workspace().join("config/smcore.toml")).unwrap();
    assert_eq!(c.routing_engine.as_deref(), Some("minhop-balanced"));
    assert!(c.not_supported.is_empty());
}

fn load_error(text: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(tmp.path(), "opensm.conf", text);
    let e = Config::load(&path).expect_err("must be refused").to_string();
    let name = path.display().to_string();
    assert!(e.starts_with(&name), "{e}");
    e[name.len()..].to_string()
}

#[test]
fn an_unknown_key_names_file_and_line() {
    let e = load_error("# site\nsm_key 0x1\n\nsm_priorty 3\n");
    assert!(e.starts_with(":4: ") && e.contains("sm_priorty"), "{e}");
}

#[test]
fn bad_values_name_file_and_line() {
    for (text, line, what) in [
        ("sm_key 0x1\nsm_priority 99\n", 2, "sm_priority 99"),
        ("lmc 9\n", 1, "lmc 9"),
        ("# c\nsweep_interval 10\nsweep_interval abc\n", 3, "sweep_interval abc"),
        ("sweep_interval 0\n", 1, "sweep_interval 0"),
        ("use_ucast_cache yes\n", 1, "TRUE or FALSE"),
        ("m_key_protection_level 4\n", 1, "m_key_protection_level"),
        ("lmc 1\nrouting_engine\t \n", 2, "no value"),
        ("qos TRUE\nqos_ca_sl2vl 0,1,2\n", 2, "3 VLs"),
        ("qos_vlarb_low 0:4,15:1\n", 1, "VL `15`"),
        ("qos_swe_high_limit 256\n", 1, "qos_swe_high_limit"),
    ] {
        let e = load_error(text);
        assert!(e.starts_with(&format!(":{line}: ")) && e.contains(what), "{text:?}: {e}");
    }
}

#[test]
fn smcore_runs_one_sweep_with_the_file_opensm_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = opensm_written_conf(tmp.path());
    // As a site has it: the log where the admin looks for it.
    let log = tmp.path().join("opensm.log");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("\nlog_file /var/log/opensm.log\n"), "opensm -c writes log_file:\n{text}");
    std::fs::write(&conf, text.replace("\nlog_file /var/log/opensm.log\n", &format!("\nlog_file {}\n", log.display())))
        .unwrap();
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let dumps = tmp.path().join("dumps");
    let (code, out, err) = smcore(&[
        "--config",
        conf.to_str().unwrap(),
        "--fabric",
        net.to_str().unwrap(),
        "--once",
        "--dump-dir",
        dumps.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // log_file is honoured: the log is in the file, stderr stays quiet.
    let logged = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("no log at {}: {e}\n{err}", log.display()));
    assert!(!err.contains("not supported by smcore"), "{err}");
    let warnings: Vec<&str> = logged.lines().filter(|l| l.contains("not supported by smcore")).collect();
    assert_eq!(warnings.len(), 1, "one warning line listing the keys:\n{logged}");
    let unsupported = Config::load(&conf).unwrap().not_supported;
    assert!(warnings[0].contains(&unsupported[0]) && warnings[0].contains(conf.to_str().unwrap()), "{}", warnings[0]);
    // The SM routed: minhop (routing_engine is (null)) wrote its tables.
    let lfts =
        std::fs::read_to_string(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("no LFT dump: {e}\n{err}"));
    assert!(lfts.contains("Unicast lids"), "{lfts}");
}

#[test]
fn a_toml_name_is_always_toml() {
    let tmp = tempfile::tempdir().unwrap();
    // OpenSM-looking text in a .toml file gets TOML's error, not OpenSM's
    // reading; the same text under another name is opensm.conf.
    let toml = write(tmp.path(), "smcore.toml", "lmc 1\n");
    let e = Config::load(&toml).expect_err("not TOML").to_string();
    assert!(e.starts_with(&format!("{}:1:", toml.display())), "{e}");
    let conf = write(tmp.path(), "site.conf", "lmc 1\n");
    assert_eq!(Config::load(&conf).unwrap().lmc, 1);
}

proptest::proptest! {
    /// Any opensm.conf text is a configuration or an error naming the file
    /// and a line within the text; an accepted file's values are in range.
    #[test]
    fn opensm_text_never_panics(lines in proptest::collection::vec(proptest::prop_oneof![
        "(lmc|sweep_interval|sm_key|sm_priority|m_key_protection_level|routing_engine|max_wire_smps|use_ucast_cache|qos|nue_max_num_vls) [-0-9a-fxA-Z()\"' #]{0,14}",
        "[a-z_]{1,12}[ \t]+[ -~]{0,20}",
        "[ -~\u{e9}\u{3000}]{0,40}",
    ], 1..12)) {
        let text = lines.join("\n");
        let nlines = text.lines().count();
        match opensm::parse(&text, Path::new("fuzz.conf")) {
            Ok(c) => {
                proptest::prop_assert!(c.lmc <= 7);
                proptest::prop_assert!(c.sm_priority.unwrap_or(0) <= 15);
                proptest::prop_assert!(c.sweep_interval.unwrap_or(1.0) >= 1.0);
            }
            Err(e) => {
                let msg = e.to_string();
                let line: usize = msg
                    .strip_prefix("fuzz.conf:")
                    .and_then(|r| r.split(':').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                proptest::prop_assert!(line >= 1 && line <= nlines, "{}", msg);
            }
        }
    }
}

#[test]
fn exit_on_fatal_false_starts_without_a_guid2lid_file_it_cannot_read() {
    // As OpenSM: a damaged guid2lid stops the SM (exit_on_fatal TRUE,
    // the default); with FALSE the SM logs it and numbers the fabric
    // afresh.
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("guid2lid");
    std::fs::write(&bad, "0x0002c90000000001 not-a-lid\n").unwrap();
    let topo = workspace().join("config/topologies/fat-tree-64.net");
    let run = |conf: &str| {
        let conf_path = tmp.path().join("opensm.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
            .arg("--config")
            .arg(&conf_path)
            .arg("--fabric")
            .arg(&topo)
            .arg("--once")
            .arg("--guid2lid")
            .arg(&bad)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout))
    };
    let (code, said) = run("sm_priority 1\n");
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("guid2lid"), "{said}");
    let (code, said) = run("sm_priority 1\nexit_on_fatal FALSE\n");
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("exit_on_fatal FALSE"), "{said}");
}
