//! Mesh analysis: does the switch graph look like an open or closed
//! cartesian mesh (a torus), and if so, which dimension is each link in?
//!
//! In a cartesian product of lines and rings every 4-cycle of switches is
//! either a face (two dimensions: its opposite sides run in the same
//! dimension) or a whole ring of four (which is itself the product of two
//! lines of two, and is treated so: a 4x4x4 torus is a 6-cube). Two links
//! of one switch in different dimensions always span a face; two links in
//! the same dimension never do. So joining the opposite sides of every
//! 4-cycle, and the links of a switch that no 4-cycle spans (parallel
//! links count once), groups the links exactly by dimension. The grouping is then
//! accepted only if it has the shape of a mesh: every switch has at most
//! two neighbours per group and at least one in every group, each group's
//! links form lines (paths or rings) all of one length and one kind, and
//! the product of those lengths is the number of switches. A random
//! fabric fails this almost surely (its groups merge into one, or its
//! lines differ), and so does a mesh with missing links; LASH then keeps
//! the port order.

use smcore_kit::graph::{Graph, Sw};

/// One dimension of a detected mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    /// Switches on each line of the dimension.
    pub size: usize,
    /// The lines are rings (torus dimension) rather than open paths.
    pub closed: bool,
}

/// A detected mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mesh {
    /// Dimensions, in the order ports are ranked by.
    pub dims: Vec<Dim>,
    /// Dimension of each link, per switch aligned with `graph.sw_adj[s]`.
    pub dim_of: Vec<Vec<u8>>,
}

impl Mesh {
    /// `4x4x4 torus`-style summary.
    pub fn describe(&self) -> String {
        let sizes: Vec<String> = self.dims.iter().map(|d| d.size.to_string()).collect();
        let closed = self.dims.iter().filter(|d| d.closed).count();
        let kind = if closed == self.dims.len() {
            "torus"
        } else if closed == 0 {
            "mesh"
        } else {
            "mesh with wrapped dimensions"
        };
        format!("{}-dimensional {} {kind}", self.dims.len(), sizes.join("x"))
    }
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        parent[x as usize] = parent[parent[x as usize] as usize];
        x = parent[x as usize];
    }
    x
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        // Lower id wins, so a group is named by its first link.
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        parent[hi as usize] = lo;
    }
}

/// Analyse the switch graph. `Err` says why it is not a mesh.
pub fn analyse(graph: &Graph) -> Result<Mesh, String> {
    let n = graph.switch_count();
    if n < 2 {
        return Err("fewer than two switches".into());
    }
    // Link ids (one per neighbouring switch pair), aligned with sw_adj.
    let mut link: Vec<Vec<u32>> = graph
        .sw_adj
        .iter()
        .map(|a| vec![u32::MAX; a.len()])
        .collect();
    let mut links = 0u32;
    for s in 0..n {
        for i in 0..graph.sw_adj[s].len() {
            let t = graph.sw_adj[s][i] as usize;
            if s < t {
                let j = graph.sw_adj[t]
                    .iter()
                    .position(|&x| x as usize == s)
                    .ok_or("asymmetric adjacency")?;
                link[s][i] = links;
                link[t][j] = links;
                links += 1;
            }
        }
    }
    if links == 0 {
        return Err("no inter-switch links".into());
    }
    let mut parent: Vec<u32> = (0..links).collect();
    // Position of each neighbour of u, to find the link u–t quickly.
    let mut pos = vec![u32::MAX; n];
    for s in 0..n {
        let adj = &graph.sw_adj[s];
        for i in 0..adj.len() {
            let u = adj[i] as usize;
            for (k, &t) in graph.sw_adj[u].iter().enumerate() {
                pos[t as usize] = k as u32;
            }
            for j in 0..adj.len() {
                if j == i {
                    continue;
                }
                let w = adj[j] as usize;
                let mut square = false;
                for (m, &t) in graph.sw_adj[w].iter().enumerate() {
                    let t = t as usize;
                    if t == s || t == u || pos[t] == u32::MAX {
                        continue;
                    }
                    // Square s–u–t–w: s–u is opposite w–t.
                    square = true;
                    union(&mut parent, link[s][i], link[w][m]);
                }
                if !square && i < j {
                    // Two links of a switch that no square joins continue
                    // each other along one line.
                    union(&mut parent, link[s][i], link[s][j]);
                }
            }
            for &t in &graph.sw_adj[u] {
                pos[t as usize] = u32::MAX;
            }
        }
    }
    // Dense dimension numbers in order of each group's first link.
    let mut dim_id = vec![u32::MAX; links as usize];
    let mut dims = 0u32;
    for l in 0..links {
        let r = find(&mut parent, l) as usize;
        if dim_id[r] == u32::MAX {
            dim_id[r] = dims;
            dims += 1;
        }
    }
    if dims as usize > 8 {
        return Err(format!(
            "{dims} link groups, more than the 8 dimensions considered"
        ));
    }
    let dim_of: Vec<Vec<u8>> = link
        .iter()
        .map(|ls| {
            ls.iter()
                .map(|&l| dim_id[find(&mut parent, l) as usize] as u8)
                .collect()
        })
        .collect();
    // Per switch and dimension: its neighbours in that dimension.
    let d = dims as usize;
    let mut nb: Vec<[u32; 2]> = vec![[u32::MAX; 2]; n * d];
    for s in 0..n {
        for (i, &t) in graph.sw_adj[s].iter().enumerate() {
            let slot = &mut nb[s * d + dim_of[s][i] as usize];
            if slot[0] == u32::MAX {
                slot[0] = t;
            } else if slot[1] == u32::MAX {
                slot[1] = t;
            } else {
                return Err(format!(
                    "a switch has more than two neighbours in link group {}",
                    dim_of[s][i]
                ));
            }
        }
    }
    let mut out = Vec::with_capacity(d);
    let mut seen = vec![false; n];
    for k in 0..d {
        let mut shape: Option<Dim> = None;
        seen.fill(false);
        for s in 0..n {
            if nb[s * d + k][0] == u32::MAX {
                return Err(format!("a switch has no link in group {k}"));
            }
            if seen[s] {
                continue;
            }
            // Walk the line through s: find an end (or come back round).
            let mut start = s as Sw;
            let mut prev = u32::MAX;
            let mut cur = s as Sw;
            let mut closed = false;
            loop {
                let [a, b] = nb[cur as usize * d + k];
                let next = if a != prev { a } else { b };
                if next == u32::MAX || (b == u32::MAX && prev != u32::MAX) {
                    start = cur;
                    break;
                }
                prev = cur;
                cur = next;
                if cur == s as Sw {
                    closed = true;
                    break;
                }
            }
            let mut size = 0usize;
            let mut prev = u32::MAX;
            let mut cur = start;
            loop {
                if seen[cur as usize] {
                    break;
                }
                seen[cur as usize] = true;
                size += 1;
                let [a, b] = nb[cur as usize * d + k];
                let next = if a != prev { a } else { b };
                if next == u32::MAX || next == prev {
                    break;
                }
                prev = cur;
                cur = next;
            }
            let this = Dim {
                size,
                closed: closed && size > 2,
            };
            match shape {
                None => shape = Some(this),
                Some(sh) if sh == this => {}
                Some(sh) => {
                    return Err(format!(
                        "link group {k} has lines of {} and {} switches{}",
                        sh.size,
                        this.size,
                        if sh.closed != this.closed {
                            " (rings and paths)"
                        } else {
                            ""
                        }
                    ))
                }
            }
        }
        out.push(shape.ok_or("empty link group")?);
    }
    let product = out
        .iter()
        .try_fold(1usize, |acc, dm| acc.checked_mul(dm.size))
        .unwrap_or(usize::MAX);
    if product != n {
        return Err(format!(
            "line lengths multiply to {product}, not the {n} switches"
        ));
    }
    Ok(Mesh { dims: out, dim_of })
}
