//! Congestion control agents (IBA vol 1 annex A10) on the embedded
//! fabric: every switch (on port 0) and every CA port answers the
//! CongestionControl class (0x21) on QP1 and keeps what an SM set, so
//! that a test reads back what the SM programmed.
//!
//! * Get of CongestionInfo, SwitchCongestionSetting (switches),
//!   CACongestionSetting and CongestionControlTable (CAs, the block in the
//!   AttributeModifier, [`CC_TABLE_BLOCKS`] blocks of 64 entries);
//!   Set of the last three. A Set applies what its Control_Map names (a
//!   switch: bit 0 Victim_Mask, 1 Credit_Mask, 2 Threshold and
//!   Packet_Size, 3 CS_Threshold and CS_ReturnDelay, 4 Marking_Rate; a
//!   CA: bit n the entry of SL n, Port_Control always); the answer is the
//!   attribute as now held.
//! * CC_Key: a MAD whose CC_Key is not the agent's is discarded with no
//!   answer and counted in CC_KeyViolations — every Set, and a Get when
//!   the key is protected ([`SimFabric::set_cc_key`]); as IBA A10.4.1
//!   lays it out for the CongestionKeyInfo protection bit.
//! * A switch attribute asked of a CA (or the reverse), another method or
//!   attribute: the usual MAD status codes.
//!
//! Not modelled: congestion itself (no FECN/BECN, no CCTI moving), the
//! CongestionLog, CongestionKeyInfo Sets, key leases, traps.

use sm_mad::cc::{
    self, attr, CaSetting, CaSettingRepr, Cct, CctRepr, Info, InfoRepr, SwitchSetting, SwitchSettingRepr,
    CA_ENTRIES, DATA_OFFSET,
};
use sm_mad::mad::{method, status, Header, MAD_LEN};

use super::SimFabric;

/// CongestionControlTable blocks a simulated CA has (ControlTableCap):
/// 128 entries, what OpenSM programs at most.
pub const CC_TABLE_BLOCKS: u8 = 2;

/// What one congestion control agent holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CcAgentState {
    /// CC_Key.
    pub key: u64,
    /// Whether a Get needs the key too (CongestionKeyInfo's
    /// CC_KeyProtectBit).
    pub key_protected: bool,
    /// CC_KeyViolations: MADs discarded for a wrong key.
    pub key_violations: u16,
    /// Sets applied.
    pub sets: u64,
    /// SwitchCongestionSetting (switches).
    pub switch: SwitchSettingRepr,
    /// CACongestionSetting (CAs).
    pub ca: CaSettingRepr,
    /// CongestionControlTable blocks (CAs).
    pub table: Vec<CctRepr>,
}

impl SimFabric {
    /// The congestion control agent at `at` (a switch's port 0, a CA
    /// port) answers `request`; `None`: discarded (a wrong CC_Key).
    pub(super) fn cc_agent(&mut self, at: (usize, u8), request: &[u8]) -> Option<Vec<u8>> {
        let mut answer = vec![0u8; MAD_LEN];
        let n = request.len().min(MAD_LEN);
        answer[..n].copy_from_slice(&request[..n]);
        let switch = self.nodes[at.0].is_switch();
        // A switch has one agent, on port 0, whichever port the MAD came in by.
        let at = if switch { (at.0, 0) } else { at };
        let header = cc::Packet::new_checked(&answer[..]).ok()?;
        let (m, attribute, modifier, key) = (header.method(), header.attribute_id(), header.attribute_modifier(), header.cc_key());
        let version = header.class_version();
        let agent = self.gsi.cc.entry(at).or_insert_with(|| CcAgentState {
            table: vec![CctRepr::default(); usize::from(CC_TABLE_BLOCKS)],
            ..CcAgentState::default()
        });
        if key != agent.key && (m != method::GET || agent.key_protected) {
            agent.key_violations = agent.key_violations.saturating_add(1);
            return None;
        }
        let data = &mut answer[DATA_OFFSET..];
        let set = m == method::SET;
        let status = match (m, attribute) {
            _ if version != cc::CLASS_VERSION => status::BAD_VERSION,
            (method::GET, attr::CONGESTION_INFO) => {
                data.fill(0);
                let cap = if switch { 0 } else { CC_TABLE_BLOCKS };
                InfoRepr { congestion_info: 0, control_table_cap: cap }.emit(&mut Info::new_unchecked(&mut data[..]));
                0
            }
            (method::GET | method::SET, attr::SWITCH_CONGESTION_SETTING) if switch => {
                if set {
                    let new = SwitchSettingRepr::parse(&SwitchSetting::new_unchecked(&data[..])).ok()?;
                    apply_switch(&mut agent.switch, &new);
                    agent.sets += 1;
                }
                data.fill(0);
                agent.switch.emit(&mut SwitchSetting::new_unchecked(&mut data[..]));
                0
            }
            (method::GET | method::SET, attr::CA_CONGESTION_SETTING) if !switch => {
                if set {
                    let new = CaSettingRepr::parse(&CaSetting::new_unchecked(&data[..])).ok()?;
                    apply_ca(&mut agent.ca, &new);
                    agent.sets += 1;
                }
                data.fill(0);
                agent.ca.emit(&mut CaSetting::new_unchecked(&mut data[..]));
                0
            }
            (method::GET | method::SET, attr::CONGESTION_CONTROL_TABLE) if !switch => {
                match usize::try_from(modifier).ok().filter(|&b| b < agent.table.len()) {
                    None => status::INVALID_ATTR_VALUE,
                    Some(block) => {
                        if set {
                            agent.table[block] = CctRepr::parse(&Cct::new_unchecked(&data[..])).ok()?;
                            agent.sets += 1;
                        }
                        data.fill(0);
                        agent.table[block].emit(&mut Cct::new_unchecked(&mut data[..]));
                        0
                    }
                }
            }
            (method::GET | method::SET, _) => status::UNSUPPORTED_METHOD_ATTR,
            _ => status::UNSUPPORTED_METHOD,
        };
        let mut h = Header::new_unchecked(&mut answer[..]);
        h.set_method(method::GET_RESP);
        h.set_status(status);
        Some(answer)
    }

    /// Sets the CC_Key of the agent at `node`'s `port` (a switch: port 0),
    /// as an SM with another key would have; `protected`: Gets need it
    /// too.
    pub fn set_cc_key(&mut self, node: usize, port: u8, key: u64, protected: bool) {
        let agent = self.gsi.cc.entry((node, port)).or_insert_with(|| CcAgentState {
            table: vec![CctRepr::default(); usize::from(CC_TABLE_BLOCKS)],
            ..CcAgentState::default()
        });
        agent.key = key;
        agent.key_protected = protected;
    }

    /// Drops what `node`'s agents hold: the node powered up again.
    pub(super) fn forget_cc(&mut self, node: usize) {
        self.gsi.cc.retain(|&(n, _), _| n != node);
    }

    /// What the congestion control agent at `node`'s `port` (a switch:
    /// port 0) holds; `None` before any CC MAD reached it (it holds the
    /// power-up zeros).
    pub fn cc_state(&self, node: usize, port: u8) -> Option<&CcAgentState> {
        self.gsi.cc.get(&(node, port))
    }
}

/// A SwitchCongestionSetting Set: the fields its Control_Map names.
fn apply_switch(held: &mut SwitchSettingRepr, new: &SwitchSettingRepr) {
    let map = new.control_map;
    held.control_map = map;
    if map & 1 != 0 {
        held.victim_mask = new.victim_mask;
    }
    if map & 2 != 0 {
        held.credit_mask = new.credit_mask;
    }
    if map & 4 != 0 {
        held.threshold = new.threshold;
        held.packet_size = new.packet_size;
    }
    if map & 8 != 0 {
        held.cs_threshold = new.cs_threshold;
        held.cs_return_delay = new.cs_return_delay;
    }
    if map & 16 != 0 {
        held.marking_rate = new.marking_rate;
    }
}

/// A CACongestionSetting Set: Port_Control, and the SLs its Control_Map
/// names.
fn apply_ca(held: &mut CaSettingRepr, new: &CaSettingRepr) {
    held.port_control = new.port_control;
    held.control_map = new.control_map;
    for sl in 0..CA_ENTRIES {
        if new.control_map & (1 << sl) != 0 {
            held.entries[sl] = new.entries[sl];
        }
    }
}
