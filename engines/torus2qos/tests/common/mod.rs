//! Shared helpers: generated tori with failures, path tracing by coordinates.
#![allow(dead_code)]

use sm_abi::{FabricSnapshot, Routing, RoutingEngine, NONE, NO_ROUTE};
use sm_topology::{gen, lids, Topology};
use smcore_kit::verify::{verify, Verification, VerifyOptions};
use smcore_torus2qos::config::TorusConf;
use smcore_torus2qos::Torus2Qos;

/// A generated torus and its layout.
pub struct Fab {
    pub topo: Topology,
    pub layout: gen::TorusLayout,
    /// Add a second seed in the middle of the torus to the configuration.
    pub backup_seed: bool,
}

impl Fab {
    pub fn torus(dims: &[usize], hosts: usize) -> Fab {
        let (topo, layout) = gen::torus(dims, hosts, false).unwrap();
        Fab {
            topo,
            layout,
            backup_seed: false,
        }
    }

    pub fn mesh(dims: &[usize], hosts: usize) -> Fab {
        let (topo, layout) = gen::torus(dims, hosts, true).unwrap();
        Fab {
            topo,
            layout,
            backup_seed: false,
        }
    }

    pub fn node(&self, c: [usize; 3]) -> usize {
        self.layout.at(c).unwrap().node
    }

    /// Remove every cable between the switches at `a` and `b`.
    pub fn fail_link(&mut self, a: [usize; 3], b: [usize; 3]) {
        let (na, nb) = (self.node(a), self.node(b));
        let before = self.topo.links.len();
        self.topo
            .links
            .retain(|l| !((l.a.0 == na && l.b.0 == nb) || (l.a.0 == nb && l.b.0 == na)));
        assert!(self.topo.links.len() < before, "no link {a:?}-{b:?}");
    }

    /// Remove one cable by switch and port.
    pub fn fail_port(&mut self, a: [usize; 3], port: u8) {
        let na = self.node(a);
        self.topo
            .links
            .retain(|l| !(l.a == (na, port) || l.b == (na, port)));
    }

    /// A failed switch: all its cables gone (it drops out of the fabric).
    pub fn fail_switch(&mut self, c: [usize; 3]) {
        let n = self.node(c);
        self.topo.links.retain(|l| !l.touches(n));
    }

    /// All inter-switch cables of the topology, as (node, port) pairs.
    pub fn cables(&self) -> Vec<((usize, u8), (usize, u8))> {
        self.topo
            .links
            .iter()
            .filter(|l| self.topo.nodes[l.a.0].is_switch() && self.topo.nodes[l.b.0].is_switch())
            .map(|l| (l.a, l.b))
            .collect()
    }

    /// Failures picked by numbers (a property test's draws): the switch
    /// `s % switches` for each `s` of `switches`, then, of the cables
    /// left, the cable `p % cables` for each `p` of `links`.
    pub fn fail_picked(&mut self, switches: &[u32], links: &[u32]) {
        let n = self.layout.switches.len();
        for s in switches {
            let c = self.layout.switches[*s as usize % n].coord;
            self.fail_switch(c);
        }
        let cables = self.cables();
        for p in links {
            let (a, b) = cables[*p as usize % cables.len()];
            self.topo.links.retain(|l| !(l.a == a && l.b == b));
        }
    }

    pub fn conf(&self) -> TorusConf {
        let mut text = gen::torus_2qos_conf(&self.layout);
        if self.backup_seed {
            text.push_str(&backup_seed(&self.layout));
        }
        TorusConf::parse(&text, "gen.conf").unwrap()
    }

    pub fn snapshot(&self) -> FabricSnapshot {
        lids::snapshot(&self.topo, 0).unwrap()
    }

    pub fn engine(&self) -> Torus2Qos {
        Torus2Qos::with_conf(self.conf())
    }

    pub fn route(&self) -> (FabricSnapshot, Result<Routing, sm_abi::EngineError>) {
        let f = self.snapshot();
        let r = self.engine().route(&f);
        (f, r)
    }

    /// LID of the first host on the switch at `c`.
    pub fn host_lid(&self, f: &FabricSnapshot, c: [usize; 3]) -> u16 {
        let n = self.node(c) as u32;
        let p = f.port_of(n, self.layout.first_host_port).unwrap();
        f.ports[p.peer as usize].lid
    }

    /// Coordinates of a switch node.
    pub fn coord_of(&self, node: u32) -> [usize; 3] {
        self.layout
            .switches
            .iter()
            .find(|s| s.node == node as usize)
            .unwrap()
            .coord
    }

    /// Switch coordinates a packet from the switch at `from` to `dlid`
    /// visits, with (node, in port, out port) for each switch.
    pub fn trace(
        &self,
        f: &FabricSnapshot,
        r: &Routing,
        from: [usize; 3],
        dlid: u16,
    ) -> Vec<([usize; 3], u8, u8)> {
        let mut node = self.node(from) as u32;
        let mut in_port = self.layout.first_host_port;
        let mut out = Vec::new();
        for _ in 0..64 {
            let lft = r.lfts.iter().find(|l| l.node == node).unwrap();
            let port = lft.ports[dlid as usize];
            assert_ne!(port, NO_ROUTE, "no route at {:?}", self.coord_of(node));
            out.push((self.coord_of(node), in_port, port));
            let p = f.port_of(node, port).unwrap();
            assert_ne!(p.peer, NONE);
            let peer = &f.ports[p.peer as usize];
            if f.nodes[peer.node as usize].kind != sm_abi::NodeKind::Switch {
                return out;
            }
            node = peer.node;
            in_port = peer.num;
        }
        panic!("path too long");
    }

    pub fn coords(
        &self,
        f: &FabricSnapshot,
        r: &Routing,
        from: [usize; 3],
        to: [usize; 3],
    ) -> Vec<[usize; 3]> {
        let d = self.host_lid(f, to);
        self.trace(f, r, from, d)
            .into_iter()
            .map(|(c, _, _)| c)
            .collect()
    }
}

/// VL at switch `node` for traffic in on `in_port`, out on `out_port`, on `sl`.
pub fn vl_at(r: &Routing, node: u32, in_port: u8, out_port: u8, sl: u8) -> u8 {
    let e = r
        .sl2vl
        .iter()
        .find(|e| e.node == node && e.in_port == in_port && e.out_port == out_port)
        .unwrap();
    e.vl[sl as usize]
}

/// Full verification with credit loops; panics with the reason on failure.
pub fn assert_ok(name: &str, f: &FabricSnapshot, r: &Routing) -> Verification {
    let v = verify(f, r, &VerifyOptions::default());
    assert!(v.ok(), "{name}: {}", v.failure().unwrap_or_default());
    assert!(v.pairs > 0, "{name}: nothing checked");
    assert_table_is_the_oracle(name, f, r);
    v
}

/// The SL table the oracle gives (the verifier and the SM read it in place
/// of the oracle) answers what the oracle answers, for every pair of LIDs
/// (a fabric with a dateline must give one).
pub fn assert_table_is_the_oracle(name: &str, f: &FabricSnapshot, r: &Routing) {
    assert!(r.path_sl.sl_table().is_some() || r.path_sl.uniform().is_some(), "{name}: SLs that vary and no table");
    assert_eq!(smcore_kit::conformance::table_disagrees(f, r), None, "{name}");
}

/// Path SLs of all end-port pairs.
pub fn all_sls(f: &FabricSnapshot, r: &Routing) -> Vec<(u64, u64, u8)> {
    let ends: Vec<(u64, u16)> = f
        .end_ports()
        .map(|p| (f.ports[p as usize].guid, f.ports[p as usize].lid))
        .collect();
    let mut v = Vec::new();
    for &(ga, la) in &ends {
        for &(gb, lb) in &ends {
            if la != lb {
                v.push((ga, gb, r.path_sl.path_sl(la, lb)));
            }
        }
    }
    v
}

impl Fab {
    /// Path SLs of the end-port pairs that cables still join (through any
    /// switches): pairs cut apart have no path whose SL could matter.
    pub fn connected_sls(&self, f: &FabricSnapshot, r: &Routing) -> Vec<(u64, u64, u8)> {
        let mut group_of_node = std::collections::HashMap::new();
        for (g, nodes) in self.topo.connected_components().iter().enumerate() {
            for &n in nodes {
                group_of_node.insert(self.topo.nodes[n].node_guid, g);
            }
        }
        let group: std::collections::HashMap<u64, usize> = f
            .end_ports()
            .map(|p| {
                let port = &f.ports[p as usize];
                (port.guid, group_of_node[&f.nodes[port.node as usize].guid])
            })
            .collect();
        all_sls(f, r).into_iter().filter(|(a, b, _)| group.get(a) == group.get(b)).collect()
    }
}

/// A `next_seed` block anchored at the middle switch, with datelines that
/// put the origin where the first seed has it.
pub fn backup_seed(l: &gen::TorusLayout) -> String {
    let mid = [l.dims[0] / 2, l.dims[1] / 2, l.dims[2] / 2];
    let origin = l.at(mid).unwrap();
    let mut s = String::from("next_seed\n");
    for d in 0..3 {
        if l.dims[d] < 2 {
            continue;
        }
        let axis = ['x', 'y', 'z'][d];
        for (sign, delta) in [('p', 1), ('m', l.dims[d] - 1)] {
            if sign == 'm' && l.dims[d] != 4 {
                continue;
            }
            let mut c = mid;
            c[d] = (mid[d] + delta) % l.dims[d];
            s.push_str(&format!(
                "{axis}{sign}_link {:#x} {:#x}\n",
                origin.guid,
                l.at(c).unwrap().guid
            ));
        }
        if !l.mesh {
            s.push_str(&format!("{axis}_dateline -{}\n", mid[d]));
        }
    }
    s
}
