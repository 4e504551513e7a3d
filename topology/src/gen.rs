//! Deterministic fabric generators: fat trees, tori and meshes, hypercubes,
//! random irregular fabrics, and fault injection.
//!
//! Conventions shared by all generators:
//!
//! * Hosts are single-port CAs and come first in node order, then the
//!   switches. ibsim attaches its clients to the first node of the file, so
//!   an SM started under ibsim without `SIM_HOST` runs on the first host,
//!   which is also [`crate::lids::snapshot`]'s `sm_node`.
//! * GUIDs come from [`TopologyBuilder`]: switch `i` has node GUID
//!   `0x0002c900_00000000 + i`, host `j` has `0x0002c901_00000000 + (j << 8)`
//!   and port GUID `node GUID + 1`, which is how ibsim numbers CA ports too.
//!   Node ids are the ibnetdiscover ids of those GUIDs (`S-...`, `H-...`),
//!   so ibnetdiscover run against ibsim names nodes as the generator did.
//! * Ports start at 1. Links run at 4x QDR. Descriptions say what a node
//!   is: `host-17`, `leaf-3`, `spine-0`, `sw-1-2-0` (torus coordinates).
//! * Links are in canonical order, so `parse(emit(g)) == g`.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::builder::TopologyBuilder;
use crate::error::TopologyError;
use crate::model::{TopoLink, Topology};

/// Upper bound on switches a generator builds; far beyond ibsim's reach,
/// it only stops a typo from exhausting memory.
pub const MAX_GENERATED_SWITCHES: usize = 1 << 20;

fn gen_err(msg: impl Into<String>) -> TopologyError {
    TopologyError::Generator(msg.into())
}

fn ports(n: usize, what: &str) -> Result<usize, TopologyError> {
    if n == 0 || n > 255 {
        Err(gen_err(format!("{what} would need {n} ports (1-255 possible)")))
    } else {
        Ok(n)
    }
}

/// Uniform index below `n`, drawn the same way on every platform.
fn pick<R: Rng>(rng: &mut R, n: usize) -> usize {
    rng.gen_range(0..n as u64) as usize
}

/// A k-ary n-tree (Petrini and Vanneschi): `n` levels of `k^(n-1)` switches
/// with `2k` ports each, ports `1..=k` down and `k+1..=2k` up. Switch
/// `<w, l>` (level `l` from the top, `w` an (n-1)-digit base-k word) has
/// its down port `j+1` linked to up port `k+1+w[l]` of `<w[l:=j], l+1>`.
/// Leaves carry `hosts_per_leaf` (at most `k`; `k` gives the classic
/// full-bisection tree) hosts on ports `1..`; the top level's up ports stay
/// empty. Node order: hosts, then levels from the leaves up. Leaves are
/// `leaf-i`, the top level `spine-i`, levels between `agg<d>-i` with `d`
/// the distance from the leaves.
pub fn kary_ntree(k: usize, n: usize, hosts_per_leaf: usize) -> Result<Topology, TopologyError> {
    if k == 0 || n == 0 {
        return Err(gen_err("a k-ary n-tree needs k >= 1 and n >= 1"));
    }
    if hosts_per_leaf > k {
        return Err(gen_err(format!(
            "a {k}-ary tree leaf has {k} down ports, not enough for {hosts_per_leaf} hosts"
        )));
    }
    let radix = ports(2 * k, "a k-ary n-tree switch")?;
    let per_level = u32::try_from(n - 1)
        .ok()
        .and_then(|e| k.checked_pow(e))
        .filter(|&c| c.saturating_mul(n) <= MAX_GENERATED_SWITCHES)
        .ok_or_else(|| gen_err(format!("a {k}-ary {n}-tree has too many switches")))?;

    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = (0..per_level * hosts_per_leaf)
        .map(|h| b.add_ca(format!("host-{h}"), 1))
        .collect::<Result<_, _>>()?;
    // level_nodes[l][w] = node index, l = 0 at the top.
    let mut level_nodes = vec![Vec::new(); n];
    for l in (0..n).rev() {
        let dist = n - 1 - l;
        let name = if dist == 0 {
            "leaf".to_string()
        } else if l == 0 {
            "spine".to_string()
        } else {
            format!("agg{dist}")
        };
        for w in 0..per_level {
            level_nodes[l].push(b.add_switch(format!("{name}-{w}"), radix)?);
        }
    }
    let k_pow = |i: usize| k.pow(i as u32);
    for l in 0..n - 1 {
        for w in 0..per_level {
            let digit = (w / k_pow(l)) % k;
            for j in 0..k {
                let lower = w - digit * k_pow(l) + j * k_pow(l);
                b.link(
                    (level_nodes[l][w], (j + 1) as u8),
                    (level_nodes[l + 1][lower], (k + 1 + digit) as u8),
                )?;
            }
        }
    }
    for (leaf_i, &leaf) in level_nodes[n - 1].iter().enumerate() {
        for j in 0..hosts_per_leaf {
            b.link((hosts[leaf_i * hosts_per_leaf + j], 1), (leaf, (j + 1) as u8))?;
        }
    }
    b.finish()
}

/// A two-level fat tree: `leaves` leaf switches with `hosts_per_leaf` hosts
/// on ports `1..=hosts_per_leaf` and `uplinks_per_leaf` uplinks on the
/// ports after them, and `spines` spine switches. The oversubscription is
/// `hosts_per_leaf : uplinks_per_leaf`. Uplink `j` of leaf `l` goes to spine
/// `(l + j) % spines`: round-robin over the spines, so with as many uplinks
/// as spines every leaf reaches every spine once, with more a leaf has
/// parallel links to some spines, and with fewer consecutive leaves share
/// spines. Spines get as many ports as their busiest one needs, numbered in
/// leaf order. Node order: hosts, leaves, spines. Fails when the fabric
/// would not be connected (one uplink per leaf and several spines, or
/// spines no leaf reaches).
pub fn fat_tree_2level(
    leaves: usize,
    spines: usize,
    hosts_per_leaf: usize,
    uplinks_per_leaf: usize,
) -> Result<Topology, TopologyError> {
    if leaves == 0 || spines == 0 || uplinks_per_leaf == 0 {
        return Err(gen_err("a two-level fat tree needs leaves, spines and uplinks"));
    }
    let total_uplinks = leaves * uplinks_per_leaf;
    if total_uplinks < spines {
        return Err(gen_err(format!("{total_uplinks} uplinks cannot reach all {spines} spines")));
    }
    if leaves + spines > MAX_GENERATED_SWITCHES {
        return Err(gen_err("too many switches"));
    }
    let leaf_ports = ports(hosts_per_leaf + uplinks_per_leaf, "a leaf")?;
    // Spine s is reached by uplink j of leaf l when (l + j) % spines == s.
    let spine_load = |s: usize| {
        (0..leaves)
            .map(|l| (0..uplinks_per_leaf).filter(|j| (l + j) % spines == s).count())
            .sum::<usize>()
    };
    let busiest = (0..spines).map(spine_load).max().unwrap_or(0);
    let spine_ports = ports(busiest, "a spine")?;

    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = (0..leaves * hosts_per_leaf)
        .map(|h| b.add_ca(format!("host-{h}"), 1))
        .collect::<Result<_, _>>()?;
    let leaf_nodes: Vec<usize> = (0..leaves)
        .map(|l| b.add_switch(format!("leaf-{l}"), leaf_ports))
        .collect::<Result<_, _>>()?;
    let spine_nodes: Vec<usize> = (0..spines)
        .map(|s| b.add_switch(format!("spine-{s}"), spine_ports))
        .collect::<Result<_, _>>()?;
    let mut spine_next = vec![1u8; spines];
    for (l, &leaf) in leaf_nodes.iter().enumerate() {
        for j in 0..hosts_per_leaf {
            b.link((hosts[l * hosts_per_leaf + j], 1), (leaf, (j + 1) as u8))?;
        }
        for j in 0..uplinks_per_leaf {
            let s = (l + j) % spines;
            b.link((leaf, (hosts_per_leaf + 1 + j) as u8), (spine_nodes[s], spine_next[s]))?;
            spine_next[s] += 1;
        }
    }
    let t = b.finish()?;
    if !t.is_connected() {
        return Err(gen_err(format!(
            "{leaves} leaves with {uplinks_per_leaf} uplinks over {spines} spines do not form a \
             connected fabric"
        )));
    }
    Ok(t)
}

/// [`fat_tree_2level`] from a leaf radix and an oversubscription ratio
/// `hosts : uplinks` (e.g. `(2, 1)` for 2:1). The leaf's ports are split in
/// that ratio, hosts rounded down, so `(36, (2, 1))` gives 24 hosts and 12
/// uplinks per leaf.
pub fn fat_tree_2level_oversubscribed(
    leaves: usize,
    spines: usize,
    leaf_ports: usize,
    ratio: (usize, usize),
) -> Result<Topology, TopologyError> {
    let (h, u) = ratio;
    if h == 0 || u == 0 {
        return Err(gen_err("an oversubscription ratio needs two non-zero terms"));
    }
    let hosts = leaf_ports.saturating_mul(h) / (h + u);
    let uplinks = leaf_ports.saturating_sub(hosts);
    if hosts == 0 || uplinks == 0 {
        return Err(gen_err(format!("{leaf_ports} leaf ports cannot be split {h}:{u}")));
    }
    fat_tree_2level(leaves, spines, hosts, uplinks)
}

/// A direction in a torus or mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// +x
    XPlus = 0,
    /// -x
    XMinus = 1,
    /// +y
    YPlus = 2,
    /// -y
    YMinus = 3,
    /// +z
    ZPlus = 4,
    /// -z
    ZMinus = 5,
}

impl Direction {
    /// All six, in port order.
    pub const ALL: [Direction; 6] = [
        Direction::XPlus,
        Direction::XMinus,
        Direction::YPlus,
        Direction::YMinus,
        Direction::ZPlus,
        Direction::ZMinus,
    ];

    /// Dimension (0 = x, 1 = y, 2 = z).
    pub fn dim(self) -> usize {
        self as usize / 2
    }

    /// True for the + directions.
    pub fn positive(self) -> bool {
        (self as usize) & 1 == 0
    }

    /// The opposite direction.
    pub fn opposite(self) -> Direction {
        Direction::ALL[self as usize ^ 1]
    }

    /// The switch port the torus generator uses for this direction.
    pub fn port(self) -> u8 {
        self as u8 + 1
    }
}

/// One switch of a generated torus or mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorusSwitch {
    /// Node index in the topology.
    pub node: usize,
    /// Node GUID.
    pub guid: u64,
    /// Coordinates (x, y, z); z is 0 in a 2D torus.
    pub coord: [usize; 3],
    /// Port going in each direction (indexed by `Direction as usize`), or
    /// `None` where no link leaves in that direction (mesh border, radix 1,
    /// or a dimension the fabric does not have).
    pub ports: [Option<u8>; 6],
    /// Index in [`TorusLayout::switches`] of the neighbour in each direction.
    pub neighbors: [Option<usize>; 6],
}

/// Where everything is in a generated torus or mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorusLayout {
    /// Radix per dimension; 1 for dimensions the fabric does not have.
    pub dims: [usize; 3],
    /// Dimensions given to the generator (2 or 3).
    pub ndims: usize,
    /// Open (mesh) rather than looped (torus).
    pub mesh: bool,
    /// Hosts on each switch.
    pub hosts_per_switch: usize,
    /// First host port on every switch (host `j` of a switch is on
    /// `first_host_port + j`).
    pub first_host_port: u8,
    /// Switches, x varying fastest: index `x + X * (y + Y * z)`.
    pub switches: Vec<TorusSwitch>,
}

impl TorusLayout {
    /// Index in `switches` of the switch at `coord`.
    pub fn index(&self, coord: [usize; 3]) -> Option<usize> {
        let [x, y, z] = coord;
        let [dx, dy, dz] = self.dims;
        (x < dx && y < dy && z < dz).then_some(x + dx * (y + dy * z))
    }

    /// The switch at `coord`.
    pub fn at(&self, coord: [usize; 3]) -> Option<&TorusSwitch> {
        self.switches.get(self.index(coord)?)
    }

    /// The neighbour of switch `index` in direction `dir`.
    pub fn neighbor(&self, index: usize, dir: Direction) -> Option<&TorusSwitch> {
        let n = self.switches.get(index)?.neighbors[dir as usize]?;
        self.switches.get(n)
    }
}

/// A 2D or 3D torus (`mesh == false`) or mesh of switches with
/// `hosts_per_switch` hosts each.
///
/// Switch ports: `+x` on 1, `-x` on 2, `+y` on 3, `-y` on 4, then `+z` on
/// 5 and `-z` on 6 for a 3D fabric, hosts on the ports after those. Every
/// switch has the same port count; mesh border ports stay unlinked. Each
/// switch's `+d` port is cabled to the `-d` port of its neighbour, so a
/// ring of radix 2 in a torus gets two parallel links between its two
/// switches (`+x` of each to `-x` of the other): that is how such a ring
/// is cabled, and it is what torus-2QoS expects (it treats a radix-2 torus
/// dimension as a mesh dimension with parallel links). A radix-1 dimension
/// has no links. Node order: hosts, then switches x fastest. Returns the
/// fabric and its [`TorusLayout`]; [`torus_2qos_conf`] writes the matching
/// torus-2QoS.conf.
pub fn torus(
    dims: &[usize],
    hosts_per_switch: usize,
    mesh: bool,
) -> Result<(Topology, TorusLayout), TopologyError> {
    if !(2..=3).contains(&dims.len()) {
        return Err(gen_err(format!("a torus has 2 or 3 dimensions, not {}", dims.len())));
    }
    if dims.contains(&0) {
        return Err(gen_err("torus radices must be at least 1"));
    }
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&c| c <= MAX_GENERATED_SWITCHES)
        .ok_or_else(|| gen_err("too many torus switches"))?;
    let ndims = dims.len();
    let link_ports = 2 * ndims;
    let radix = ports(link_ports + hosts_per_switch, "a torus switch")?;
    let mut d3 = [1usize; 3];
    d3[..ndims].copy_from_slice(dims);

    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = (0..count * hosts_per_switch)
        .map(|h| b.add_ca(format!("host-{h}"), 1))
        .collect::<Result<_, _>>()?;
    let mut layout = TorusLayout {
        dims: d3,
        ndims,
        mesh,
        hosts_per_switch,
        first_host_port: (link_ports + 1) as u8,
        switches: Vec::with_capacity(count),
    };
    for i in 0..count {
        let coord = [i % d3[0], (i / d3[0]) % d3[1], i / (d3[0] * d3[1])];
        let desc = if ndims == 2 {
            format!("sw-{}-{}", coord[0], coord[1])
        } else {
            format!("sw-{}-{}-{}", coord[0], coord[1], coord[2])
        };
        let node = b.add_switch(desc, radix)?;
        let guid = b.nodes()[node].node_guid;
        layout.switches.push(TorusSwitch {
            node,
            guid,
            coord,
            ports: [None; 6],
            neighbors: [None; 6],
        });
    }
    for i in 0..count {
        let coord = layout.switches[i].coord;
        for d in 0..ndims {
            let r = d3[d];
            if r < 2 || (mesh && coord[d] + 1 == r) {
                continue;
            }
            let mut nc = coord;
            nc[d] = (coord[d] + 1) % r;
            let j = layout.index(nc).ok_or_else(|| gen_err("torus coordinate out of range"))?;
            let plus = Direction::ALL[2 * d];
            let minus = plus.opposite();
            b.link(
                (layout.switches[i].node, plus.port()),
                (layout.switches[j].node, minus.port()),
            )?;
            layout.switches[i].ports[plus as usize] = Some(plus.port());
            layout.switches[i].neighbors[plus as usize] = Some(j);
            layout.switches[j].ports[minus as usize] = Some(minus.port());
            layout.switches[j].neighbors[minus as usize] = Some(i);
        }
        for h in 0..hosts_per_switch {
            b.link(
                (hosts[i * hosts_per_switch + h], 1),
                (layout.switches[i].node, layout.first_host_port + h as u8),
            )?;
        }
    }
    Ok((b.finish()?, layout))
}

/// A torus-2QoS.conf (see torus-2QoS.conf(5)) for a fabric made by
/// [`torus`]: the `torus`/`mesh` line with the radices (a 2D fabric gets a
/// z radix of 1), and a seed of links from the switch at (0, 0, 0) in the
/// positive direction of every dimension of radix 2 or more, plus the
/// negative direction for radix-4 torus dimensions, which the topology
/// discovery of torus-2QoS needs to tell a ring of four from a face.
/// `portgroup_max_ports` is raised when a switch has more than 15 hosts
/// (the management port shares the host port group).
pub fn torus_2qos_conf(layout: &TorusLayout) -> String {
    let [x, y, z] = layout.dims;
    let kind = if layout.mesh { "mesh" } else { "torus" };
    let mut out = format!(
        "# torus-2QoS configuration for a generated {x}x{y}x{z} {kind} (sm-topology).\n\
         {kind} {x} {y} {z}\n"
    );
    if let Some(origin) = layout.at([0, 0, 0]) {
        for d in 0..3 {
            if layout.dims[d] < 2 {
                continue;
            }
            let axis = ['x', 'y', 'z'][d];
            let plus = Direction::ALL[2 * d];
            let mut dirs = vec![(plus, 'p')];
            if !layout.mesh && layout.dims[d] == 4 {
                dirs.push((plus.opposite(), 'm'));
            }
            for (dir, sign) in dirs {
                if let Some(n) = layout.neighbor(0, dir) {
                    out.push_str(&format!("{axis}{sign}_link {:#x} {:#x}\n", origin.guid, n.guid));
                }
            }
        }
    }
    if layout.hosts_per_switch + 1 > 16 {
        out.push_str(&format!("portgroup_max_ports {}\n", layout.hosts_per_switch + 1));
    }
    out
}

/// A `dim`-dimensional hypercube: `2^dim` switches, switch `i` linked to
/// switch `i ^ (1 << d)` through port `d + 1` on both sides, hosts on ports
/// `dim + 1...`. Switches are `cube-i`. Node order: hosts, then switches.
pub fn hypercube(dim: usize, hosts_per_switch: usize) -> Result<Topology, TopologyError> {
    if dim > 20 {
        return Err(gen_err(format!("a {dim}-dimensional hypercube has too many switches")));
    }
    let count = 1usize << dim;
    let radix = ports(dim + hosts_per_switch, "a hypercube switch")?;
    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = (0..count * hosts_per_switch)
        .map(|h| b.add_ca(format!("host-{h}"), 1))
        .collect::<Result<_, _>>()?;
    let sw: Vec<usize> =
        (0..count).map(|i| b.add_switch(format!("cube-{i}"), radix)).collect::<Result<_, _>>()?;
    for i in 0..count {
        for d in 0..dim {
            let j = i ^ (1 << d);
            if i < j {
                b.link((sw[i], (d + 1) as u8), (sw[j], (d + 1) as u8))?;
            }
        }
        for h in 0..hosts_per_switch {
            b.link((hosts[i * hosts_per_switch + h], 1), (sw[i], (dim + 1 + h) as u8))?;
        }
    }
    b.finish()
}

/// A connected random fabric: `switches` switches of `ports_per_switch`
/// ports, the first `ports_per_switch - hosts_per_switch` for switch links
/// and the rest for hosts. A random spanning tree (each switch in random
/// order attached to a random earlier one with a free port) makes it
/// connected, then `extra_links` links join random pairs of distinct
/// switches with free ports; parallel links happen. Ports are taken lowest
/// first. The same arguments and seed always give the same fabric
/// (ChaCha8). Switches are `sw-i`. Node order: hosts, then switches.
pub fn random_irregular(
    switches: usize,
    ports_per_switch: usize,
    hosts_per_switch: usize,
    extra_links: usize,
    seed: u64,
) -> Result<Topology, TopologyError> {
    if switches == 0 || switches > MAX_GENERATED_SWITCHES {
        return Err(gen_err(format!("cannot build a fabric of {switches} switches")));
    }
    let radix = ports(ports_per_switch, "a random fabric switch")?;
    if hosts_per_switch > radix {
        return Err(gen_err(format!(
            "{hosts_per_switch} hosts do not fit on a {radix}-port switch"
        )));
    }
    let fabric_ports = radix - hosts_per_switch;
    let needed = match switches {
        1 => 0,
        2 => 1,
        _ => 2,
    };
    if fabric_ports < needed {
        return Err(gen_err(format!(
            "{switches} switches with {fabric_ports} switch ports each cannot form a connected fabric"
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = (0..switches * hosts_per_switch)
        .map(|h| b.add_ca(format!("host-{h}"), 1))
        .collect::<Result<_, _>>()?;
    let sw: Vec<usize> =
        (0..switches).map(|i| b.add_switch(format!("sw-{i}"), radix)).collect::<Result<_, _>>()?;
    let last = fabric_ports as u8;
    let mut free = vec![fabric_ports; switches];
    let connect = |b: &mut TopologyBuilder, free: &mut [usize], x: usize, y: usize| {
        let px = b.free_port_in(sw[x], 1..=last).ok_or_else(|| gen_err("no free port"))?;
        let py = b.free_port_in(sw[y], 1..=last).ok_or_else(|| gen_err("no free port"))?;
        b.link((sw[x], px), (sw[y], py))?;
        free[x] -= 1;
        free[y] -= 1;
        Ok::<(), TopologyError>(())
    };

    let mut order: Vec<usize> = (0..switches).collect();
    order.shuffle(&mut rng);
    for i in 1..switches {
        let candidates: Vec<usize> = order[..i].iter().copied().filter(|&s| free[s] > 0).collect();
        if candidates.is_empty() {
            return Err(gen_err("ran out of ports building the spanning tree"));
        }
        let parent = candidates[pick(&mut rng, candidates.len())];
        connect(&mut b, &mut free, order[i], parent)?;
    }
    for done in 0..extra_links {
        let open: Vec<usize> = (0..switches).filter(|&s| free[s] > 0).collect();
        if open.len() < 2 {
            return Err(gen_err(format!(
                "only {done} of {extra_links} extra links fit on {switches} switches"
            )));
        }
        let x = pick(&mut rng, open.len());
        let mut y = pick(&mut rng, open.len() - 1);
        if y >= x {
            y += 1;
        }
        connect(&mut b, &mut free, open[x], open[y])?;
    }
    for (i, &s) in sw.iter().enumerate() {
        for h in 0..hosts_per_switch {
            b.link((hosts[i * hosts_per_switch + h], 1), (s, (fabric_ports + 1 + h) as u8))?;
        }
    }
    b.finish()
}

/// What [`with_faults`] removed, by node id and port (indices change when
/// switches go).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultReport {
    /// Ids of the removed switches.
    pub removed_switches: Vec<String>,
    /// Inter-switch links removed on purpose, as `((id, port), (id, port))`.
    pub removed_links: Vec<((String, u8), (String, u8))>,
    /// Links that went away with a removed switch (to hosts or switches).
    pub detached_links: usize,
}

/// A copy of `topo` with `switches_to_remove` random switches and then
/// `links_to_remove` random switch-to-switch links taken out, for fault
/// tests. A removed switch disappears with all its cables; its hosts stay
/// in the topology, disconnected (ibsim cannot reach them, and
/// [`crate::lids::snapshot`] gives them no LIDs), so tests see the hosts a
/// switch failure strands. Nothing keeps the fabric connected: check with
/// [`Topology::connected_components`] and try another seed if a test
/// needs it. Deterministic for a given seed.
pub fn with_faults(
    topo: &Topology,
    links_to_remove: usize,
    switches_to_remove: usize,
    seed: u64,
) -> Result<(Topology, FaultReport), TopologyError> {
    topo.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut report = FaultReport::default();

    let mut switches: Vec<usize> = topo.switches().collect();
    if switches_to_remove > switches.len() {
        return Err(gen_err(format!(
            "cannot remove {switches_to_remove} of {} switches",
            switches.len()
        )));
    }
    switches.shuffle(&mut rng);
    let mut gone = vec![false; topo.nodes.len()];
    for &s in &switches[..switches_to_remove] {
        gone[s] = true;
    }
    let mut new_index = vec![usize::MAX; topo.nodes.len()];
    let mut out = Topology::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        if gone[i] {
            report.removed_switches.push(n.name.clone());
        } else {
            new_index[i] = out.nodes.len();
            out.nodes.push(n.clone());
        }
    }
    for l in &topo.links {
        if gone[l.a.0] || gone[l.b.0] {
            report.detached_links += 1;
        } else {
            out.links.push(TopoLink {
                a: (new_index[l.a.0], l.a.1),
                b: (new_index[l.b.0], l.b.1),
                ..*l
            });
        }
    }
    out.canonicalize();

    let mut inter: Vec<usize> = out
        .links
        .iter()
        .enumerate()
        .filter(|(_, l)| out.nodes[l.a.0].is_switch() && out.nodes[l.b.0].is_switch())
        .map(|(i, _)| i)
        .collect();
    if links_to_remove > inter.len() {
        return Err(gen_err(format!(
            "cannot remove {links_to_remove} of {} switch-to-switch links",
            inter.len()
        )));
    }
    inter.shuffle(&mut rng);
    let mut drop = vec![false; out.links.len()];
    for &li in &inter[..links_to_remove] {
        drop[li] = true;
        let l = &out.links[li];
        report
            .removed_links
            .push(((out.nodes[l.a.0].name.clone(), l.a.1), (out.nodes[l.b.0].name.clone(), l.b.1)));
    }
    report.removed_links.sort();
    let mut keep = drop.iter().map(|d| !d);
    out.links.retain(|_| keep.next().unwrap_or(true));
    Ok((out, report))
}

/// Free-function form of [`Topology::connected_components`].
pub use crate::model::connected_components;
