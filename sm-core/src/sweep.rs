//! The small core — discovery, LID assignment, table programming — is the
//! crate sm-sweep; here it keeps its old path, with the umad transport
//! beside it (a peer of the embedded fabric behind the same traits).

pub use sm_sweep::*;
pub use sm_umad as umad;
pub use sm_umad::{GsiClient, IncomingMad, MadSender, UmadDevice, UmadPort};
