//! Helpers shared by the file engine's tests.

use sm_abi::{FabricSnapshot, Lft, Routing, NO_ROUTE};

/// Min-hop tables from the kit (what the minhop engine returns; its
/// library cannot be linked beside this one, both export the ABI root).
pub fn minhop(f: &FabricSnapshot) -> Routing {
    Routing::single_vl(smcore_kit::balance::min_hop_lfts(f))
}

/// The same fabric with the LIDs handed out again, aligned blocks as
/// before, to the LID-holding ports in the order `arrange` leaves their
/// indices in.
pub fn relidded(f: &FabricSnapshot, arrange: impl FnOnce(&mut Vec<usize>)) -> FabricSnapshot {
    let mut g = f.clone();
    let mut holders: Vec<usize> = (0..g.ports.len()).filter(|&i| g.ports[i].lid != 0).collect();
    arrange(&mut holders);
    let (mut next, mut max) = (1u32, 0u32);
    for i in holders {
        let count = g.ports[i].lid_count();
        let lid = next.div_ceil(count) * count;
        g.ports[i].lid = lid as u16;
        next = lid + count;
        max = max.max(lid + count - 1);
    }
    g.max_lid = max as u16;
    g
}

/// (switch GUID, destination port GUID, LID offset) → output port.
pub fn guid_level(f: &FabricSnapshot, lfts: &[Lft]) -> Vec<(u64, u64, u32, u8)> {
    let mut v = Vec::new();
    for l in lfts {
        let sw = f.nodes[l.node as usize].guid;
        for p in f.ports.iter().filter(|p| p.lid != 0) {
            for off in 0..p.lid_count() {
                let port = l.ports.get(p.lid as usize + off as usize).copied().unwrap_or(NO_ROUTE);
                v.push((sw, p.guid, off, port));
            }
        }
    }
    v.sort();
    v
}
