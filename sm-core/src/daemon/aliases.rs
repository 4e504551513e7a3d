//! Alias GUIDs on the ports: the tables hosts set through the SA
//! (GUIDInfoRecord Set/Delete, [`crate::sa::alias`]) written to each
//! port's GUIDInfo with SubnSet, block by block, as OpenSM does. A block
//! is written when it differs from what the port was last seen to hold;
//! after a heavy sweep every table is written again (a port that came
//! back, or a host that rebooted, has lost its aliases).

use std::collections::HashMap;
use std::sync::Mutex;

use sm_mad::guid_info::{self, GUIDS};
use sm_mad::mad::attr;
use sm_mad::smp::DATA_LEN;
use sm_model::Fabric;
use sm_transport::{SmpClient, SmpOp};
use tracing::{info, warn};

use crate::sa::alias::AliasGuids;

/// What the ports hold, as far as the SM knows (port GUID → blocks).
#[derive(Debug, Default)]
pub struct HeldAliases {
    blocks: HashMap<u64, Vec<[u64; GUIDS]>>,
    /// The table generation last programmed in full.
    pub programmed: Option<u64>,
}

impl HeldAliases {
    /// Forgets what the ports hold: everything is written again.
    pub fn forget(&mut self) {
        self.blocks.clear();
        self.programmed = None;
    }
}

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Programmed {
    /// Blocks written and read back as asked.
    pub written: usize,
    /// Blocks already held.
    pub unchanged: usize,
    /// Blocks whose Set failed or did not take (tried again next pass).
    pub failed: usize,
}

/// Writes every alias table of `aliases` to its port in `fabric`.
pub fn program(client: &mut SmpClient<'_>, fabric: &Fabric, aliases: &Mutex<AliasGuids>, held: &mut HeldAliases) -> Programmed {
    let (tables, generation) = {
        let a = aliases.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let tables: HashMap<u64, Vec<u64>> = a.tables().map(|(port, t)| (port, t.to_vec())).collect();
        (tables, a.generation())
    };
    let mut done = Programmed::default();
    let mut ops = Vec::new();
    let mut writes = Vec::new();
    for node in &fabric.nodes {
        for (p, port) in node.ports.iter().enumerate() {
            let Some(table) = tables.get(&port.guid) else { continue };
            // A CA port is reached by its own path; a switch's table is
            // port 0's.
            let path = if node.is_switch() {
                if p != 0 {
                    continue;
                }
                node.path.clone()
            } else {
                match &port.path {
                    Some(path) => path.clone(),
                    None => continue,
                }
            };
            for (b, chunk) in table.chunks(GUIDS).enumerate() {
                let mut want = [0u64; GUIDS];
                want[..chunk.len()].copy_from_slice(chunk);
                if held.blocks.get(&port.guid).and_then(|h| h.get(b)) == Some(&want) {
                    done.unchanged += 1;
                    continue;
                }
                let mut data = [0u8; DATA_LEN];
                guid_info::Repr { guids: want }.emit(&mut guid_info::Packet::new_unchecked(&mut data[..guid_info::LEN]));
                ops.push(SmpOp::set(attr::GUID_INFO, b as u32, &path, data));
                writes.push((port.guid, b, want));
            }
        }
    }
    for ((guid, b, want), answer) in writes.into_iter().zip(client.run_many(&ops)) {
        let now = answer.ok().and_then(|d| guid_info::Repr::parse(&guid_info::Packet::new_checked(&d[..guid_info::LEN]).ok()?).ok());
        // Index 0 of block 0 is the port's own GUID, which the port keeps
        // whatever the Set said.
        let took = now.is_some_and(|n| n.guids[usize::from(b == 0)..] == want[usize::from(b == 0)..]);
        let blocks = held.blocks.entry(guid).or_default();
        if blocks.len() <= b {
            blocks.resize(b + 1, [u64::MAX; GUIDS]);
        }
        if took {
            done.written += 1;
            blocks[b] = want;
        } else {
            warn!(port = format_args!("{guid:#018x}"), block = b, "GUIDInfo Set did not take effect; tried again");
            done.failed += 1;
            blocks[b] = [u64::MAX; GUIDS];
        }
    }
    if done.failed == 0 {
        held.programmed = Some(generation);
    }
    if done.written + done.failed > 0 {
        info!(written = done.written, unchanged = done.unchanged, failed = done.failed, "alias GUIDs programmed");
    }
    done
}
