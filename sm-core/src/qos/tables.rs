//! SL2VL and VLArb tables from the `qos_*` options, for ports the routing
//! engine gives none (OpenSM's osm_qos.c).
//!
//! With `qos` off nothing is added, as OpenSM writes no table then. With
//! it on, the tables are added to the accepted routing before it is
//! programmed, so [`crate::sweep::vl`] writes them (only what differs from what
//! the ports are known to hold) and the SA's SL2VL/VLArb records, built
//! from the routing, show them:
//!
//! * Every switch external port (`qos_swe_*`) and, when the switch has an
//!   enhanced port 0, port 0 (`qos_sw0_*`); every CA port (`qos_ca_*`) and
//!   router port (`qos_rtr_*`).
//! * SL2VL only where the port (port 0 for a switch) has
//!   IsSLMappingSupported, on a switch for every input port (0..=N) to
//!   every output port, and only if the engine gave the node no SL2VL at
//!   all: an engine's maps are what its deadlock freedom was verified
//!   with. Each VL is masked to the output port's OperationalVLs (VL15,
//!   drop, stays), as OpenSM does.
//! * VLArb where the engine gave the port none and the port has more than
//!   one data VL: the low and high tables cut to VLArbLowCap/HighCap
//!   entries, VLs masked as above.
//!
//! Unlike OpenSM, switch ports that are down are given tables too: the
//! SA answers SL2VL/VLArb records for every port it lists (osmtest asks
//! for all of them), and a record must be what the port holds. Tables a
//! port does not have (a switch's base port 0, a VLArb block beyond the
//! port's capacity) are added empty and never written: the SA answers
//! them as empty records, as OpenSM's SA does.

use sm_abi::{NodeKind, Sl2Vl, VlArb, VlWeight};
use sm_mad::port_info::capability;
use sm_mad::{PortInfoRepr, PortState};

use sm_model::Fabric;
use crate::engines::chain::ChainOutcome;
use super::{QosClass, QosSettings};

/// `chain` with the QoS tables of `settings` added to its routing (see
/// the module doc); unchanged when QoS is off (`None`) or nothing routed.
pub fn with_qos_tables(mut chain: ChainOutcome, fabric: &Fabric, settings: Option<&QosSettings>) -> ChainOutcome {
    let Some(settings) = settings else {
        return chain;
    };
    if let Some(routed) = chain.routed.as_mut() {
        let (sl2vl, vlarb) = qos_tables(fabric, &routed.routing.sl2vl, &routed.routing.vlarb, settings);
        routed.routing.sl2vl.extend(sl2vl);
        routed.routing.vlarb.extend(vlarb);
    }
    chain
}

/// The mask OpenSM applies to a VL for a port with `op_vls`
/// (PortInfo:OperationalVLs, 1 = VL0 .. 5 = VL0-14).
fn vl_mask(info: &PortInfoRepr) -> u8 {
    let op = info.operational_vls.clamp(1, 5);
    (1u8 << (op - 1)) - 1
}

fn masked_sl2vl(table: &[u8; 16], out: &PortInfoRepr) -> [u8; 16] {
    let mask = vl_mask(out);
    table.map(|vl| if vl == 15 { 15 } else { vl & mask })
}

fn masked_arb(table: &[(u8, u8)], cap: u8, out: &PortInfoRepr) -> Vec<VlWeight> {
    let mask = vl_mask(out);
    if cap == 0 {
        return Vec::new();
    }
    // Entries beyond the capacity are zero, as in OpenSM. A second block
    // that the port does not have (capacity up to 32) is not written
    // (`crate::sweep::vl`), and the SA shows it empty, as OpenSM's does.
    (0..crate::qos::VLARB_ENTRIES)
        .map(|i| match table.get(i) {
            Some(&(vl, weight)) if i < usize::from(cap) => VlWeight { vl: vl & mask, weight },
            _ => VlWeight { vl: 0, weight: 0 },
        })
        .collect()
}

/// The SL2VL and VLArb entries QoS adds to an engine's `sl2vl` and `vlarb`.
pub fn qos_tables(fabric: &Fabric, sl2vl: &[Sl2Vl], vlarb: &[VlArb], q: &QosSettings) -> (Vec<Sl2Vl>, Vec<VlArb>) {
    let mut maps = Vec::new();
    let mut arbs = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        let index = i as u32;
        let engine_maps = sl2vl.iter().any(|e| e.node == index);
        let engine_arb = |port: u8| vlarb.iter().any(|a| a.node == index && a.port == port);
        let mut arb = |port: u8, class: &QosClass, info: &PortInfoRepr| {
            // No VLArb with one data VL (VLCap 1), as OpenSM.
            if info.vl_cap <= 1 || engine_arb(port) {
                return;
            }
            let low = masked_arb(&class.vlarb_low, info.vl_arbitration_low_cap, info);
            let high = masked_arb(&class.vlarb_high, info.vl_arbitration_high_cap, info);
            if low.is_empty() && high.is_empty() {
                return;
            }
            arbs.push(VlArb { node: index, port, high_limit: class.high_limit, high: high.into(), low: low.into() });
        };
        match node.kind {
            NodeKind::Switch => {
                let Some(p0) = node.ports.first().and_then(|p| p.info.as_ref()) else { continue };
                let enhanced = node.switch_info.as_ref().is_some_and(|s| s.enhanced_port0);
                for (out, port) in node.ports.iter().enumerate().skip(1) {
                    if let Some(info) = &port.info {
                        arb(out as u8, &q.swe, info);
                    }
                }
                if enhanced {
                    arb(0, &q.sw0, p0);
                } else if !engine_arb(0) {
                    // Base port 0 has no VLArb table: empty blocks, which
                    // `crate::sweep::vl` does not write and the SA shows empty.
                    let empty = vec![VlWeight { vl: 0, weight: 0 }; crate::qos::VLARB_ENTRIES];
                    arbs.push(VlArb { node: index, port: 0, high_limit: 0, high: empty.clone().into(), low: empty.into() });
                }
                if engine_maps || p0.capability_mask & capability::IS_SL_MAPPING_SUPPORTED == 0 {
                    continue;
                }
                if !enhanced {
                    // Nor a map: likewise an empty one, not written.
                    maps.push(Sl2Vl { node: index, in_port: 0, out_port: 0, vl: [0; 16] });
                }
                let first_out = if enhanced { 0 } else { 1 };
                for (out, port) in node.ports.iter().enumerate().skip(first_out) {
                    let Some(info) = &port.info else { continue };
                    for input in 0..node.ports.len() {
                        // Port 0's own map (traffic the switch's management
                        // port sends to itself) is sw0's.
                        let class = if out == 0 && input == 0 { &q.sw0 } else { &q.swe };
                        maps.push(Sl2Vl {
                            node: index,
                            in_port: input as u8,
                            out_port: out as u8,
                            vl: masked_sl2vl(&class.sl2vl, info),
                        });
                    }
                }
            }
            NodeKind::Ca | NodeKind::Router => {
                let class = if node.kind == NodeKind::Router { &q.rtr } else { &q.ca };
                for (p, port) in node.ports.iter().enumerate().skip(1) {
                    let Some(info) = &port.info else { continue };
                    // A CA port without a link cannot be reached to be set.
                    if info.port_state == PortState::Down || port.path.is_none() {
                        continue;
                    }
                    arb(p as u8, class, info);
                    if !engine_maps && info.capability_mask & capability::IS_SL_MAPPING_SUPPORTED != 0 {
                        maps.push(Sl2Vl { node: index, in_port: 0, out_port: p as u8, vl: masked_sl2vl(&class.sl2vl, info) });
                    }
                }
            }
            _ => {}
        }
    }
    (maps, arbs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_follow_operational_vls() {
        let mut info = PortInfoRepr { operational_vls: 1, ..PortInfoRepr::default() };
        let t = crate::qos::parse_sl2vl(crate::qos::DEFAULT_SL2VL).unwrap();
        assert_eq!(masked_sl2vl(&t, &info), [0; 16]);
        info.operational_vls = 3;
        assert_eq!(masked_sl2vl(&t, &info), [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
        info.operational_vls = 4;
        let arb = masked_arb(&[(9, 4), (1, 2)], 1, &info);
        assert_eq!(arb.len(), 64);
        assert_eq!((arb[0].vl, arb[0].weight), (1, 4));
        assert_eq!(arb[1].weight, 0, "beyond the capacity");
        assert_eq!(masked_arb(&[(1, 1); 64], 40, &info)[39].weight, 1);
        assert!(masked_arb(&[(1, 1)], 0, &info).is_empty());
    }
}
