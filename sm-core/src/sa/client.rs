//! The host's side of the SA: the queries a client sends to the SA's LID
//! on QP1, over any GSI agent ([`GmpAgent`]: a umad one, or a simulated
//! host's on the embedded fabric, which is how `smcore ctl saquery` asks
//! the running SM's SA from a host of `--fabric`).

use std::time::Duration;

use sm_mad::mad::method;
use sm_mad::sa::{self, attr};
use sm_mad::sa_path_record as pr;
use sm_transport::gmp::GmpAgent;

/// What the SA answered to a PathRecord Get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAnswer {
    /// The MAD status (0: the record follows; class-specific codes such
    /// as ERR_NO_RECORDS in the upper byte).
    pub status: u16,
    /// The record, when the status is 0.
    pub record: Option<pr::Repr>,
}

/// Why a query got no answer to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Nothing came back in time.
    #[error("no answer from the SA at LID {0}")]
    NoAnswer(u16),
    /// The agent could not send.
    #[error("{0}")]
    Transport(String),
    /// The answer was not an SA MAD or its record was short.
    #[error("malformed SA answer: {0}")]
    Malformed(String),
}

/// An SA request of `method` for `attribute` with `component_mask` and
/// the template `data`.
pub fn request(method: u8, attribute: u16, tid: u64, component_mask: u64, data: &[u8]) -> [u8; sm_mad::mad::MAD_LEN] {
    let mut m = [0u8; sm_mad::mad::MAD_LEN];
    let mut p = sa::Packet::new_unchecked(&mut m[..]);
    sa::Repr {
        method,
        transaction_id: tid,
        attribute_id: attribute,
        component_mask,
        ..Default::default()
    }
    .emit(&mut p);
    let n = data.len().min(p.data_mut().len());
    p.data_mut()[..n].copy_from_slice(&data[..n]);
    m
}

/// Asks the SA at `sa_lid` for the PathRecord from `slid` to `dlid`.
pub fn path_record(
    agent: &mut dyn GmpAgent,
    sa_lid: u16,
    slid: u16,
    dlid: u16,
    tid: u64,
    timeout: Duration,
) -> Result<PathAnswer, QueryError> {
    let mut template = [0u8; pr::LEN];
    pr::Repr { slid, dlid, ..Default::default() }.emit(&mut pr::Packet::new_unchecked(&mut template[..]));
    let mad = request(method::GET, attr::PATH_RECORD, tid, pr::component::SLID | pr::component::DLID, &template);
    let answer = agent
        .request(sa_lid, &mad, timeout)
        .map_err(|e| QueryError::Transport(e.to_string()))?
        .ok_or(QueryError::NoAnswer(sa_lid))?;
    let packet = sa::Packet::new_checked(&answer[..]).map_err(|e| QueryError::Malformed(e.to_string()))?;
    let status = packet.status();
    if status != 0 {
        return Ok(PathAnswer { status, record: None });
    }
    let record = pr::Packet::new_checked(packet.data())
        .and_then(|r| pr::Repr::parse(&r))
        .map_err(|e| QueryError::Malformed(e.to_string()))?;
    Ok(PathAnswer { status, record: Some(record) })
}
