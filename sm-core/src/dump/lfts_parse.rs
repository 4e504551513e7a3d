//! Reading LFTs back from `opensm-lfts.dump` or from `ibroute` output.
//!
//! The parser lives in the engine kit ([`smcore_kit::lfts_file`]) because
//! the `file` routing engine reads the same files and engines cannot depend
//! on the core; this module re-exports it under its old path. See the kit
//! module for the formats accepted and the errors given.

pub use smcore_kit::lfts_file::{
    parse_lfts, parse_lfts_detailed, parse_lfts_file, parse_lfts_file_detailed, LftEntry, LftPairs,
    LftParseError, SwitchLft,
};
