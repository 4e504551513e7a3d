//! A routing's path-SL oracle shared beyond the routing: the unicast cache
//! keeps it for later sweeps, the SA answers PathRecords from it. The
//! engine's oracle is a trait object that cannot be cloned, so it moves
//! into an `Arc` and the routing gets a delegate answering through it.

use std::sync::Arc;

use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{path_sl_box, PathSl, PathSlBox, Routing, UniformSl};

/// Answers through the shared oracle.
struct SharedSl(Arc<PathSlBox>);

impl PathSl for SharedSl {
    fn uniform(&self) -> ROption<u8> {
        self.0.uniform()
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.0.path_sl(slid, dlid)
    }
}

/// An oracle answering through `shared`.
pub fn delegate(shared: &Arc<PathSlBox>) -> PathSlBox {
    path_sl_box(SharedSl(Arc::clone(shared)))
}

/// Moves `routing`'s oracle into a shared handle and leaves a delegate to
/// it in its place; the routing answers the same SLs as before.
pub fn share_path_sl(routing: &mut Routing) -> Arc<PathSlBox> {
    let original = std::mem::replace(&mut routing.path_sl, path_sl_box(UniformSl(0)));
    let shared = Arc::new(original);
    routing.path_sl = delegate(&shared);
    shared
}
