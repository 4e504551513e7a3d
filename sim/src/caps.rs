//! `--sim-caps`: the VLCap, MTUCap, speeds and widths the embedded
//! fabric's ports report,
//! given on the command line so an admin can try an engine against the
//! limits of the hardware they are about to buy (a switch with four data
//! VLs, HCAs with a 2048-byte MTU) without editing the topology file.
//!
//! The spelling is the one the admin knows from `ibportstate`/`ibstat`:
//! data VLs counted (1, 2, 4, 8, 15), the MTU in bytes, the generation
//! by name (`speed=SDR` … `speed=XDR`) and the width in lanes
//! (`width=1x|2x|4x|8x|12x`), e.g. `vls=4,mtu=2048` for every node or
//! `0x0002c90000000101:speed=NDR` for one. A node given a generation
//! supports every speed up to it, in the PortInfo fields that speed has
//! (XDR in LinkSpeedExt*2), and its links train to the fastest speed both
//! ends support; a width likewise.

use std::str::FromStr;

use sm_mad::speed::LaneSpeed;

use super::{PortCaps, SimOptions};

/// One `--sim-caps` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapsSpec {
    /// The node (by GUID) it is for; every node when absent.
    pub guid: Option<u64>,
    /// PortInfo.VLCap code (1 = VL0 … 5 = VL0-14), when given.
    pub vl_cap: Option<u8>,
    /// PortInfo.MTUCap code (1 = 256 … 5 = 4096), when given.
    pub mtu_cap: Option<u8>,
    /// The fastest generation supported, when given.
    pub speed: Option<LaneSpeed>,
    /// The widest width supported, in lanes, when given.
    pub width: Option<u8>,
}

/// Why a `--sim-caps` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapsSpecError {
    /// The node part is not a GUID.
    #[error("`{0}` is not a node GUID (write it as 0x followed by hex digits)")]
    BadGuid(String),
    /// A `key=value` pair with another key.
    #[error("unknown key `{0}` (expected vls=, mtu=, speed= or width=)")]
    UnknownKey(String),
    /// A VL count IBA has no VLCap for.
    #[error("vls={0}: a port has 1, 2, 4, 8 or 15 data VLs")]
    BadVls(String),
    /// An MTU IBA has no MTUCap for.
    #[error("mtu={0}: an IB MTU is 256, 512, 1024, 2048 or 4096 bytes")]
    BadMtu(String),
    /// A speed that is no InfiniBand generation.
    #[error("speed={0}: a generation is SDR, DDR, QDR, FDR, EDR, HDR, NDR or XDR")]
    BadSpeed(String),
    /// A width IBA does not define.
    #[error("width={0}: a width is 1x, 2x, 4x, 8x or 12x")]
    BadWidth(String),
    /// No key given.
    #[error("nothing to set: give vls=N, mtu=BYTES, speed=GENERATION and/or width=Nx")]
    Empty,
}

impl FromStr for CapsSpec {
    type Err = CapsSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (guid, pairs) = match text.split_once(':') {
            Some((node, rest)) => {
                let hex = node.trim().strip_prefix("0x").or_else(|| node.trim().strip_prefix("0X"));
                let guid = hex
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .ok_or_else(|| CapsSpecError::BadGuid(node.to_string()))?;
                (Some(guid), rest)
            }
            None => (None, text),
        };
        let mut spec = CapsSpec { guid, vl_cap: None, mtu_cap: None, speed: None, width: None };
        for pair in pairs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key.trim() {
                "vls" => {
                    let code = match value.trim() {
                        "1" => 1,
                        "2" => 2,
                        "4" => 3,
                        "8" => 4,
                        "15" => 5,
                        _ => return Err(CapsSpecError::BadVls(value.to_string())),
                    };
                    spec.vl_cap = Some(code);
                }
                "mtu" => {
                    let code = match value.trim() {
                        "256" => 1,
                        "512" => 2,
                        "1024" => 3,
                        "2048" => 4,
                        "4096" => 5,
                        _ => return Err(CapsSpecError::BadMtu(value.to_string())),
                    };
                    spec.mtu_cap = Some(code);
                }
                "speed" => {
                    let speed = LaneSpeed::from_name(value).ok_or_else(|| CapsSpecError::BadSpeed(value.to_string()))?;
                    spec.speed = Some(speed);
                }
                "width" => {
                    let lanes = match value.trim().to_ascii_lowercase().as_str() {
                        "1x" => 1,
                        "2x" => 2,
                        "4x" => 4,
                        "8x" => 8,
                        "12x" => 12,
                        _ => return Err(CapsSpecError::BadWidth(value.to_string())),
                    };
                    spec.width = Some(lanes);
                }
                other => return Err(CapsSpecError::UnknownKey(other.to_string())),
            }
        }
        if spec.vl_cap.is_none() && spec.mtu_cap.is_none() && spec.speed.is_none() && spec.width.is_none() {
            return Err(CapsSpecError::Empty);
        }
        Ok(spec)
    }
}

impl SimOptions {
    /// Applies `spec` over what is set already: a per-node spec starts from
    /// the fabric-wide caps in force when it is applied, so give the
    /// fabric-wide one first.
    pub fn apply_caps(&mut self, spec: &CapsSpec) {
        match spec.guid {
            None => {
                self.vl_cap = spec.vl_cap.unwrap_or(self.vl_cap);
                self.mtu_cap = spec.mtu_cap.unwrap_or(self.mtu_cap);
                self.link_speed = spec.speed.or(self.link_speed);
                self.link_width = spec.width.or(self.link_width);
            }
            Some(guid) => {
                let now = self.caps_of(guid);
                self.node_caps.insert(
                    guid,
                    PortCaps {
                        vl_cap: spec.vl_cap.unwrap_or(now.vl_cap),
                        mtu_cap: spec.mtu_cap.unwrap_or(now.mtu_cap),
                        speed: spec.speed.or(now.speed),
                        width: spec.width.or(now.width),
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_wide_and_per_node_specs_parse_in_the_admins_units() {
        let all: CapsSpec = "vls=4,mtu=2048".parse().expect("valid");
        assert_eq!(all, CapsSpec { guid: None, vl_cap: Some(3), mtu_cap: Some(4), speed: None, width: None });
        let one: CapsSpec = "0x0002c90000000101:vls=1".parse().expect("valid");
        assert_eq!(one, CapsSpec { guid: Some(0x0002_c900_0000_0101), vl_cap: Some(1), mtu_cap: None, speed: None, width: None });
        let xdr: CapsSpec = "0x10:speed=XDR,width=4x".parse().expect("valid");
        assert_eq!((xdr.speed, xdr.width), (Some(LaneSpeed::Xdr), Some(4)));
        let hdr: CapsSpec = "speed=hdr,width=12X".parse().expect("valid");
        assert_eq!((hdr.guid, hdr.speed, hdr.width), (None, Some(LaneSpeed::Hdr), Some(12)));
    }

    #[test]
    fn values_iba_has_no_code_for_are_refused_with_the_reason() {
        assert_eq!("vls=3".parse::<CapsSpec>(), Err(CapsSpecError::BadVls("3".into())));
        assert_eq!("mtu=1500".parse::<CapsSpec>(), Err(CapsSpecError::BadMtu("1500".into())));
        assert_eq!("speed=10".parse::<CapsSpec>(), Err(CapsSpecError::BadSpeed("10".into())));
        assert_eq!("speed=FDR10".parse::<CapsSpec>(), Err(CapsSpecError::BadSpeed("FDR10".into())));
        assert_eq!("width=3x".parse::<CapsSpec>(), Err(CapsSpecError::BadWidth("3x".into())));
        assert_eq!("rate=10".parse::<CapsSpec>(), Err(CapsSpecError::UnknownKey("rate".into())));
        assert_eq!("node7:vls=1".parse::<CapsSpec>(), Err(CapsSpecError::BadGuid("node7".into())));
        assert_eq!("".parse::<CapsSpec>(), Err(CapsSpecError::Empty));
    }

    #[test]
    fn a_node_spec_keeps_the_fabric_wide_value_it_does_not_name() {
        let mut options = SimOptions::default();
        options.apply_caps(&"vls=8,mtu=4096".parse().expect("valid"));
        options.apply_caps(&"0x10:mtu=1024".parse().expect("valid"));
        options.apply_caps(&"0x12:speed=XDR".parse().expect("valid"));
        assert_eq!(options.caps_of(0x12).speed, Some(LaneSpeed::Xdr));
        assert_eq!(options.caps_of(0x12).mtu_cap, 5);
        assert_eq!(options.caps_of(0x10), PortCaps { vl_cap: 4, mtu_cap: 3, speed: None, width: None });
        assert_eq!(options.caps_of(0x11), PortCaps { vl_cap: 4, mtu_cap: 5, speed: None, width: None });
    }
}
