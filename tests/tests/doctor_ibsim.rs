//! `smcore doctor` under ibsim (umad2sim): on a host of a fabric an smcore
//! SM already runs, the doctor finds the InfiniBand port, opens it,
//! registers the SM's agents and reads the running SM's SMInfo — without
//! writing to the fabric; the SM can start (it would stand by).

use std::time::Duration;

use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;

#[test]
fn the_doctor_finds_the_port_and_the_master_already_running() {
    let fabric = Generated::fat_tree("doctor-ibsim-", 2, 1, 2, 1).unwrap_or_else(|e| panic!("{e}"));
    let (sm, tmp, net, topo) = (&fabric.sm, fabric.dir(), &fabric.net, &fabric.topo);
    let sim = Ibsim::start(net).unwrap_or_else(|e| panic!("{e}"));
    let (dumps, report) = (tmp.join("dumps"), tmp.join("report.json"));
    let mut run = RunningSm::start(&sim, sm, &dumps, &report, &["--sweep-interval", "30", "--priority", "9", "--log", "warn"])
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));

    // Another host than the SM's.
    let host = topo.nodes.iter().filter(|n| !n.is_switch()).nth(2).expect("a host");
    let engines = sm.bin().parent().expect("bin dir").to_path_buf();
    let out = sim
        .client_command(sm.bin())
        .unwrap_or_else(|e| panic!("{e}"))
        .args(["doctor", "--json"])
        .env("SIM_HOST", &host.name)
        .env("SMCORE_ENGINE_PATH", &engines)
        .output()
        .expect("run smcore doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let check = |name: &str| {
        json["checks"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .map(|c| (c["verdict"].as_str().unwrap_or_default().to_string(), c["detail"].as_str().unwrap_or_default().to_string()))
            .unwrap_or_else(|| panic!("no check {name}: {text}"))
    };
    let (verdict, detail) = check("port");
    assert_eq!(verdict, "ok", "{detail}");
    assert!(detail.contains("InfiniBand, Active"), "{detail}");
    assert_eq!(check("agents").0, "ok", "{text}");
    let (verdict, detail) = check("other SM");
    assert_eq!(verdict, "warn");
    assert!(detail.contains("an SM runs this subnet") && detail.contains("priority 9") && detail.contains("Master"), "{detail}");
    assert_eq!(out.status.code(), Some(0), "the SM can start (it would stand by): {text}");
    assert_eq!(json["can_start"], true);
    run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
}
