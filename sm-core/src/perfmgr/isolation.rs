//! `perfmgr_isolate_ports`: disabling a link whose errors go on, and
//! enabling it again later. OpenSM only logs; what is done here beyond
//! that must never cost more than the failing link does:
//!
//! - **A sustained error rate, not one event.** A port is isolated only
//!   after [`SUSTAINED_INTERVALS`] reads in a row above a threshold of
//!   [`super::ISOLATING_COUNTERS`]. One LinkDownedCounter step (what a
//!   reboot of the far end leaves) is one interval: it isolates nothing.
//! - **The SM keeps its fabric.** A link is disabled only if every node the
//!   SM reaches now stays reachable without it ([`keeps_sm_connected`]):
//!   never the SM's own cable, nor an uplink of its leaf without another,
//!   nor a host's only cable. Such a link is logged, not isolated.
//! - **Undone.** An isolated link is enabled again after a hold of
//!   [`FIRST_HOLD_INTERVALS`] intervals, doubled each time it fails again
//!   (up to [`MAX_HOLD_INTERVALS`]) and back to the first after as many
//!   clean intervals: a link repaired meanwhile (a cable reseated) comes
//!   back by itself, a link still failing is taken out again.
//!
//! The policy ([`Policy`]) runs in the performance manager's thread, on the
//! counters it reads; the SM applies its requests ([`apply`]) between
//! sweeps, on the fabric it last discovered, and sweeps again.

use std::collections::{BTreeMap, VecDeque};

use sm_mad::PhysState;
use tracing::{debug, warn};

use super::query::Target;
use sm_model::Fabric;
use sm_transport::port::SmpClient;
use sm_model::Escaped;

/// Reads in a row above an isolating threshold before a port is isolated.
pub const SUSTAINED_INTERVALS: u32 = 3;
/// Intervals an isolated link stays disabled the first time.
pub const FIRST_HOLD_INTERVALS: u32 = 10;
/// The longest hold, however often the link failed.
pub const MAX_HOLD_INTERVALS: u32 = 640;

/// What the SM is asked to do with a switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// PortPhysicalState Disabled: the link goes down and stays down.
    Disable,
    /// PortPhysicalState Polling: a port the policy disabled trains again.
    Enable,
}

/// One request of the policy: a switch end of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The switch's node GUID.
    pub switch_guid: u64,
    /// Its port.
    pub port: u8,
    /// What to do.
    pub action: Action,
}

/// Where a link stands with the policy.
#[derive(Debug, Clone, Default)]
struct Standing {
    /// Reads in a row above a threshold.
    strikes: u32,
    /// Reads in a row below every threshold.
    clean: u32,
    /// Intervals left before an isolated link is enabled again.
    isolated_for: Option<u32>,
    /// The hold the next isolation takes.
    hold: u32,
    /// Read this interval, and whether above a threshold.
    seen: Option<bool>,
}

/// The isolation policy's memory, by the switch end of each link.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    links: BTreeMap<(u64, u8), Standing>,
}

/// The switch end the policy knows a target's link by: the port itself on
/// a switch (the lower end of a link between two switches, so that both
/// ends' reads count once), the far end of a CA's cable.
fn link_key(t: &Target) -> Option<(u64, u8)> {
    let own = (t.node_guid, t.port);
    match (t.switch, t.peer) {
        (true, Some((peer, true))) => Some(own.min(peer)),
        (true, _) => Some(own),
        (false, Some((peer, true))) => Some(peer),
        (false, _) => None,
    }
}

impl Policy {
    /// Takes note of one read of `target`: `above` when a counter of
    /// [`super::ISOLATING_COUNTERS`] crossed its threshold in the interval.
    pub fn observe(&mut self, target: &Target, above: bool) {
        let Some(key) = link_key(target) else { return };
        let s = self.links.entry(key).or_insert_with(|| Standing {
            hold: FIRST_HOLD_INTERVALS,
            ..Standing::default()
        });
        s.seen = Some(s.seen.unwrap_or(false) || above);
    }

    /// Ends an interval: the requests it calls for. Links neither read nor
    /// isolated are forgotten (they left the fabric).
    pub fn tick(&mut self) -> Vec<Request> {
        let mut out = Vec::new();
        self.links.retain(|&(switch_guid, port), s| {
            let seen = s.seen.take();
            if let Some(left) = s.isolated_for {
                if left <= 1 {
                    s.isolated_for = None;
                    s.strikes = 0;
                    s.clean = 0;
                    out.push(Request {
                        switch_guid,
                        port,
                        action: Action::Enable,
                    });
                } else {
                    s.isolated_for = Some(left - 1);
                }
                return true;
            }
            match seen {
                None => return false,
                Some(true) => {
                    s.strikes += 1;
                    s.clean = 0;
                    if s.strikes >= SUSTAINED_INTERVALS {
                        s.strikes = 0;
                        s.isolated_for = Some(s.hold);
                        s.hold = (s.hold * 2).min(MAX_HOLD_INTERVALS);
                        out.push(Request {
                            switch_guid,
                            port,
                            action: Action::Disable,
                        });
                    }
                }
                Some(false) => {
                    s.strikes = 0;
                    s.clean += 1;
                    if s.clean >= FIRST_HOLD_INTERVALS {
                        s.hold = FIRST_HOLD_INTERVALS;
                    }
                }
            }
            true
        });
        out
    }
}

/// Whether every node the SM reaches in `fabric` (from node 0) is still
/// reached with the links at `cut` (node index, port: either end) gone.
pub fn keeps_sm_connected(fabric: &Fabric, cut: &[(usize, u8)]) -> bool {
    reached(fabric, cut) == reached(fabric, &[])
}

fn reached(fabric: &Fabric, cut: &[(usize, u8)]) -> usize {
    let mut seen = vec![false; fabric.nodes.len()];
    let mut queue = VecDeque::new();
    if fabric.nodes.is_empty() {
        return 0;
    }
    seen[0] = true;
    queue.push_back(0usize);
    let mut count = 1;
    while let Some(n) = queue.pop_front() {
        for (p, port) in fabric.nodes[n].ports.iter().enumerate() {
            let Some((far, far_port)) = port.peer else {
                continue;
            };
            if cut.contains(&(n, p as u8)) || cut.contains(&(far, far_port)) {
                continue;
            }
            if far < seen.len() && !seen[far] {
                seen[far] = true;
                count += 1;
                queue.push_back(far);
            }
        }
    }
    count
}

/// Applies `requests` to `fabric` (as last discovered) through `client`:
/// a Disable only when the SM keeps every node it reaches
/// ([`keeps_sm_connected`], counting the links this batch disables), an
/// Enable only for a port found Disabled. Returns whether a port was Set,
/// after which the fabric must be swept again.
pub fn apply(fabric: &Fabric, requests: &[Request], client: &mut SmpClient<'_>) -> bool {
    let mut ops = Vec::new();
    let mut what = Vec::new();
    let mut cut: Vec<(usize, u8)> = Vec::new();
    for r in requests {
        let Some(sw) = fabric.find(r.switch_guid) else {
            continue;
        };
        let node = &fabric.nodes[sw];
        let Some(slot) = node
            .ports
            .get(usize::from(r.port))
            .filter(|_| node.is_switch() && r.port != 0)
        else {
            continue;
        };
        let Some(mut want) = slot.info else { continue };
        let desc = Escaped(&node.description);
        match r.action {
            Action::Disable => {
                if slot.peer.is_none() {
                    continue;
                }
                cut.push((sw, r.port));
                if !keeps_sm_connected(fabric, &cut) {
                    cut.pop();
                    warn!(
                        guid = format_args!("{:#018x}", r.switch_guid),
                        port = r.port,
                        "failing link not isolated: without it the SM would lose part of the fabric (\"{desc}\" port {})",
                        r.port
                    );
                    continue;
                }
                want.port_physical_state = PhysState::Disabled;
            }
            Action::Enable => {
                if want.port_physical_state != PhysState::Disabled {
                    debug!(
                        guid = format_args!("{:#018x}", r.switch_guid),
                        port = r.port,
                        "isolation over; port not disabled"
                    );
                    continue;
                }
                want.port_physical_state = PhysState::Polling;
            }
        }
        ops.push(sm_sweep::port_info::physical_state(want, want.port_physical_state, r.port, &node.path));
        what.push((r, node.description.as_str()));
    }
    if ops.is_empty() {
        return false;
    }
    let mut changed = false;
    for ((r, desc), answer) in what.into_iter().zip(client.run_many(&ops)) {
        let (guid, port, desc) = (
            format_args!("{:#018x}", r.switch_guid),
            r.port,
            Escaped(desc),
        );
        match (answer, r.action) {
            (Ok(_), Action::Disable) => {
                changed = true;
                warn!(guid = %guid, port, "port isolated: \"{desc}\" port {port} disabled for its link's sustained errors");
            }
            (Ok(_), Action::Enable) => {
                changed = true;
                warn!(guid = %guid, port, "port isolation over: \"{desc}\" port {port} enabled again");
            }
            (Err(e), Action::Disable) => warn!(guid = %guid, port, "port not isolated: {e}"),
            (Err(e), Action::Enable) => {
                warn!(guid = %guid, port, "isolated port not enabled again: {e}")
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_port(guid: u64, leaf: u64, leaf_port: u8) -> Target {
        Target {
            lid: 9,
            port: 1,
            node_guid: guid,
            node_desc: String::new(),
            switch: false,
            peer: Some(((leaf, leaf_port), true)),
        }
    }

    #[test]
    fn one_event_isolates_nothing_a_sustained_rate_does_and_it_is_undone() {
        let mut policy = Policy::default();
        let t = host_port(0x10, 0x20, 3);
        // A reboot: one interval above, then quiet.
        policy.observe(&t, true);
        assert!(policy.tick().is_empty());
        for _ in 0..20 {
            policy.observe(&t, false);
            assert!(policy.tick().is_empty());
        }
        // Two bad intervals, a good one, two bad: never three in a row.
        for above in [true, true, false, true, true, false] {
            policy.observe(&t, above);
            assert!(policy.tick().is_empty());
        }
        // Three in a row: the leaf's end of the cable is disabled.
        let mut got = Vec::new();
        for _ in 0..SUSTAINED_INTERVALS {
            policy.observe(&t, true);
            got.extend(policy.tick());
        }
        assert_eq!(
            got,
            [Request {
                switch_guid: 0x20,
                port: 3,
                action: Action::Disable
            }]
        );
        // Disabled, the host is no longer read; after the hold it is
        // enabled again.
        let mut ticks = 0;
        let enabled = loop {
            ticks += 1;
            let r = policy.tick();
            if !r.is_empty() {
                break r;
            }
            assert!(ticks < 1000);
        };
        assert_eq!(ticks, FIRST_HOLD_INTERVALS);
        assert_eq!(
            enabled,
            [Request {
                switch_guid: 0x20,
                port: 3,
                action: Action::Enable
            }]
        );
        // Failing again: out again, for twice as long.
        let mut got = Vec::new();
        for _ in 0..SUSTAINED_INTERVALS {
            policy.observe(&t, true);
            got.extend(policy.tick());
        }
        assert_eq!(got.len(), 1);
        let mut ticks = 0;
        while policy.tick().is_empty() {
            ticks += 1;
        }
        assert_eq!(ticks + 1, 2 * FIRST_HOLD_INTERVALS);
        // A link no longer read and not isolated is forgotten.
        assert!(policy.tick().is_empty());
        assert!(policy.links.is_empty());
    }

    #[test]
    fn both_ends_of_a_switch_link_count_once() {
        let mut policy = Policy::default();
        let a = Target {
            lid: 1,
            port: 5,
            node_guid: 0x1,
            node_desc: String::new(),
            switch: true,
            peer: Some(((0x2, 7), true)),
        };
        let b = Target {
            lid: 2,
            port: 7,
            node_guid: 0x2,
            node_desc: String::new(),
            switch: true,
            peer: Some(((0x1, 5), true)),
        };
        let mut got = Vec::new();
        for above in [(true, false), (false, true), (true, true)] {
            policy.observe(&a, above.0);
            policy.observe(&b, above.1);
            got.extend(policy.tick());
        }
        assert_eq!(
            got,
            [Request {
                switch_guid: 0x1,
                port: 5,
                action: Action::Disable
            }]
        );
    }
}
