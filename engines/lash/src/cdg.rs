//! One layer's channel dependency graph: the kit's incrementally acyclic
//! [`smcore_kit::cdg::Cdg`] plus the number of paths lash placed in it.
//!
//! Channels are the directed inter-switch links (an output port of a
//! switch). A path adds the dependencies between the consecutive channels
//! it uses; the layer stays deadlock free as long as this graph is
//! acyclic, and a path that would close a cycle goes in not at all.

use std::ops::{Deref, DerefMut};

/// A layer's dependency graph over `n` channels.
#[derive(Debug, Clone)]
pub struct Cdg {
    graph: smcore_kit::cdg::Cdg,
    /// Paths in this layer (counted by the caller's units).
    pub paths: usize,
}

impl Cdg {
    /// An empty layer over `n` channels.
    pub fn new(n: usize) -> Cdg {
        Cdg {
            graph: smcore_kit::cdg::Cdg::new(n),
            paths: 0,
        }
    }
}

impl Deref for Cdg {
    type Target = smcore_kit::cdg::Cdg;

    fn deref(&self) -> &Self::Target {
        &self.graph
    }
}

impl DerefMut for Cdg {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.graph
    }
}
