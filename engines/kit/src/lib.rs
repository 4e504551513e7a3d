//! Engine kit.
