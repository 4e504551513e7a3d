//! OpenSM's unicast manager options as minhop reads them: `port_shifting`,
//! `scatter_ports`, `guid_routing_order_no_scatter`, `hop_weights_file`,
//! `port_search_ordering_file` change which ports carry which LIDs in the
//! way OpenSM's `osm_switch_recommend_path` does.

use sm_abi::{FabricSnapshot, RoutingEngine};
use smcore_minhop::MinHop;

/// Switch `a` with four parallel links (ports 1-4) to switch `b`, which
/// has eight hosts `h1`..`h8` on ports 5-12.
fn parallel() -> FabricSnapshot {
    let mut text = String::from("Switch 4 \"a\"\n");
    for p in 1..=4 {
        text.push_str(&format!("[{p}] \"b\"[{p}]\n"));
    }
    text.push_str("\nSwitch 12 \"b\"\n");
    for h in 1..=8 {
        text.push_str(&format!("[{}] \"h{h}\"[1]\n", h + 4));
    }
    for h in 1..=8 {
        text.push_str(&format!("\nHca 1 \"h{h}\"\n"));
    }
    let topo = sm_topology::parse_str(&text, "parallel").unwrap();
    sm_topology::lids::snapshot(&topo, 0).unwrap()
}

fn node(f: &FabricSnapshot, name: &str) -> usize {
    f.nodes.iter().position(|n| n.description.as_str() == name).unwrap()
}

fn port_of<'a>(f: &'a FabricSnapshot, name: &str) -> &'a sm_abi::Port {
    &f.ports[f.nodes[node(f, name)].first_port as usize + 1]
}

/// Switch `sw`'s output port towards each of `hosts`.
fn ports_to(f: &FabricSnapshot, config: &str, sw: &str, hosts: &[&str]) -> Vec<u8> {
    let engine = MinHop::from_config(config).unwrap_or_else(|e| panic!("{e}"));
    let routing = engine.route(f).unwrap_or_else(|e| panic!("{e}"));
    let lft = routing.lfts.iter().find(|l| l.node as usize == node(f, sw)).unwrap();
    hosts.iter().map(|h| lft.ports[port_of(f, h).lid as usize]).collect()
}

const HOSTS: [&str; 8] = ["h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8"];

fn scratch(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("smcore-minhop-{name}-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn port_shifting_starts_the_scan_at_the_average_load() {
    let f = parallel();
    assert_eq!(ports_to(&f, "", "a", &HOSTS), [1, 2, 3, 4, 1, 2, 3, 4], "plain: round robin from port 1");
    // OpenSM: the scan over the candidates starts at index (routes on them
    // / 4): 0 for the first four LIDs, then 1 (routes 4..7), so the fifth
    // LID takes port 2 (all equal, first from index 1), the sixth port 3
    // (ports 1 and 3 have 1, port 3 comes first from index 1), then 4, 1.
    assert_eq!(ports_to(&f, "port_shifting = true", "a", &HOSTS), [1, 2, 3, 4, 2, 3, 4, 1]);
}

#[test]
fn scatter_ports_draws_among_the_least_loaded_ports_from_its_seed() {
    let f = parallel();
    let plain = ports_to(&f, "", "a", &HOSTS);
    let mut seen = Vec::new();
    for seed in 1..=4 {
        let config = format!("scatter_ports = {seed}");
        let ports = ports_to(&f, &config, "a", &HOSTS);
        assert_eq!(ports, ports_to(&f, &config, "a", &HOSTS), "the same seed gives the same tables");
        // Every draw is among the least loaded: each port ends with two.
        for p in 1..=4u8 {
            assert_eq!(ports.iter().filter(|&&x| x == p).count(), 2, "seed {seed}: {ports:?}");
        }
        seen.push(ports);
    }
    assert!(seen.iter().any(|s| *s != plain), "no seed scattered: {seen:?}");
    assert!(seen.windows(2).any(|w| w[0] != w[1]), "seeds give different tables: {seen:?}");
}

#[test]
fn the_guid_routing_order_can_be_kept_out_of_the_scatter() {
    let f = parallel();
    let first: Vec<&str> = HOSTS[..4].to_vec();
    let order = scratch("order", &first.iter().map(|h| format!("0x{:x}\n", port_of(&f, h).guid)).collect::<String>());
    // A seed under which the ordered hosts are not simply 1, 2, 3, 4.
    let seed = (1..=64)
        .find(|s| {
            let c = format!("scatter_ports = {s}\nguid_routing_order_file = {:?}", order.display().to_string());
            ports_to(&f, &c, "a", &first) != [1, 2, 3, 4]
        })
        .expect("some seed scatters the first four hosts");
    let config = format!(
        "scatter_ports = {seed}\nguid_routing_order_file = {:?}\nguid_routing_order_no_scatter = true",
        order.display().to_string()
    );
    let ports = ports_to(&f, &config, "a", &HOSTS);
    std::fs::remove_file(&order).ok();
    assert_eq!(ports[..4], [1, 2, 3, 4], "the ordered ports take OpenSM's plain choice");
    for p in 1..=4u8 {
        assert_eq!(ports.iter().filter(|&&x| x == p).count(), 2, "{ports:?}");
    }
}

#[test]
fn a_port_search_ordering_file_changes_the_scan_order() {
    let f = parallel();
    let a = f.nodes[node(&f, "a")].guid;
    let file = scratch("order", &format!("# a's ports, last first\n0x{a:x} 4 3\n"));
    let config = format!("port_search_ordering_file = {:?}", file.display().to_string());
    let ports = ports_to(&f, &config, "a", &HOSTS);
    std::fs::remove_file(&file).ok();
    // Named ports first (4, 3), then the rest in port order (1, 2).
    assert_eq!(ports, [4, 3, 1, 2, 4, 3, 1, 2]);
}

/// A triangle: `a` reaches `b` directly on port 1 or through `c` on port
/// 2; the hosts hang off `b`.
fn triangle() -> FabricSnapshot {
    let text = "Switch 3 \"a\"\n[1] \"b\"[1]\n[2] \"c\"[1]\n\nSwitch 4 \"b\"\n[2] \"c\"[2]\n[3] \"h1\"[1]\n[4] \"h2\"[1]\n\n\
                Switch 2 \"c\"\n\nHca 1 \"h1\"\n\nHca 1 \"h2\"\n";
    let topo = sm_topology::parse_str(text, "triangle").unwrap();
    sm_topology::lids::snapshot(&topo, 0).unwrap()
}

#[test]
fn a_heavy_hop_weight_turns_routes_away_from_a_port() {
    let f = triangle();
    assert_eq!(ports_to(&f, "", "a", &["h1", "h2"]), [1, 1], "the direct link is the least-hop one");
    let a = f.nodes[node(&f, "a")].guid;
    let file = scratch("weights", &format!("0x{a:x} 1 3\n0x{a:x} 2 0\n0xdead 1 1\n"));
    let config = format!("hop_weights_file = {:?}", file.display().to_string());
    let engine = MinHop::from_config(&config).unwrap();
    let routing = engine.route(&f).unwrap();
    std::fs::remove_file(&file).ok();
    let lft = routing.lfts.iter().find(|l| l.node as usize == node(&f, "a")).unwrap();
    // Port 1 weighs 3, the way round through c 2: both hosts go by port 2.
    for h in ["h1", "h2"] {
        assert_eq!(lft.ports[port_of(&f, h).lid as usize], 2, "{h}");
    }
    // The bad lines are reported with file and line.
    let diags: Vec<String> = routing.diagnostics.iter().map(|d| d.message.to_string()).collect();
    assert!(diags.iter().any(|d| d.contains(":2: bad hop weight")), "{diags:?}");
    assert!(diags.iter().any(|d| d.contains(":3: switch 0x000000000000dead not in the fabric")), "{diags:?}");
}

#[test]
fn port_profile_switch_nodes_counts_routes_to_switches_in_a_ports_load() {
    // Switch `a`'s four parallel links to `b`: eight host LIDs and b's own
    // LID. OpenSM's default leaves the route to b out of the counts, so
    // the hosts go round from port 1 whatever port b's LID took; with
    // port_profile_switch_nodes b's route is counted and the host after
    // it avoids its port.
    let f = parallel();
    let lid_b = f.ports[f.nodes[node(&f, "b")].first_port as usize].lid;
    let route = |config: &str| {
        let engine = MinHop::from_config(config).unwrap_or_else(|e| panic!("{e}"));
        let routing = engine.route(&f).unwrap_or_else(|e| panic!("{e}"));
        let lft = routing.lfts.iter().find(|l| l.node as usize == node(&f, "a")).unwrap().ports.to_vec();
        lft
    };
    let counts = |lft: &[u8]| {
        let mut c = [0u32; 5];
        for h in HOSTS {
            c[lft[port_of(&f, h).lid as usize] as usize] += 1;
        }
        c[lft[lid_b as usize] as usize] += 1;
        c
    };
    // b's LID routed first (OpenSM routes switch LIDs after the end ports
    // otherwise, when they can no longer change where the hosts go).
    let order = scratch("order", &format!("0x{:016x}\n", f.ports[f.nodes[node(&f, "b")].first_port as usize].guid));
    let plain = route(&format!("guid_routing_order_file = {:?}", order.display().to_string()));
    let profiled = route(&format!("guid_routing_order_file = {:?}\nport_profile_switch_nodes = true", order.display().to_string()));
    // Nine routes over four ports: counted together they differ by at most
    // one; without the switch's route counted, b's port carries one more
    // than the hosts alone would give it.
    let c = counts(&profiled);
    assert!(c[1..].iter().max().unwrap() - c[1..].iter().min().unwrap() <= 1, "{c:?}");
    assert_ne!(plain, profiled, "the switch's route changes where the hosts go");
}
