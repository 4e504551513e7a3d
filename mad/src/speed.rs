//! Lane speeds and link widths: the one place PortInfo's speed and width
//! fields become a generation (SDR … XDR), a lane count, a rate and the
//! name `iblinkinfo`/`ibnetdiscover` print (`4X NDR`).
//!
//! A speed is spread over three groups of PortInfo fields:
//! LinkSpeed* (SDR, DDR, QDR), LinkSpeedExt* (FDR, EDR, HDR, NDR; valid
//! with CapabilityMask IsExtendedSpeedsSupported) and LinkSpeedExt*2
//! (XDR, byte 56; valid with CapabilityMask2 IsExtendedSpeeds2Supported).
//! The active speed is the highest group that says one: LinkSpeedExtActive2
//! when non-zero, else LinkSpeedExtActive when non-zero, else
//! LinkSpeedActive (a port running an extended speed may still say QDR in
//! LinkSpeedActive).

use crate::port_info::{capability, capability2, link_speed, link_speed_ext, link_speed_ext2, link_width};
use crate::PortInfoRepr;

/// A lane speed generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaneSpeed {
    /// 2.5 Gb/s.
    Sdr,
    /// 5 Gb/s.
    Ddr,
    /// 10 Gb/s.
    Qdr,
    /// 14 Gb/s (14.0625 Gb/s signalling).
    Fdr,
    /// 25 Gb/s (25.78125).
    Edr,
    /// 50 Gb/s (53.125).
    Hdr,
    /// 100 Gb/s (106.25).
    Ndr,
    /// 200 Gb/s (212.5).
    Xdr,
}

impl LaneSpeed {
    /// Every generation, slowest first.
    pub const ALL: [LaneSpeed; 8] = [
        LaneSpeed::Sdr,
        LaneSpeed::Ddr,
        LaneSpeed::Qdr,
        LaneSpeed::Fdr,
        LaneSpeed::Edr,
        LaneSpeed::Hdr,
        LaneSpeed::Ndr,
        LaneSpeed::Xdr,
    ];

    /// The name infiniband-diags prints (`NDR`).
    pub const fn name(self) -> &'static str {
        match self {
            LaneSpeed::Sdr => "SDR",
            LaneSpeed::Ddr => "DDR",
            LaneSpeed::Qdr => "QDR",
            LaneSpeed::Fdr => "FDR",
            LaneSpeed::Edr => "EDR",
            LaneSpeed::Hdr => "HDR",
            LaneSpeed::Ndr => "NDR",
            LaneSpeed::Xdr => "XDR",
        }
    }

    /// The generation of a name, in any case.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Data rate of one lane in 0.1 Gb/s, as the IBA rate codes count it.
    pub const fn lane_rate(self) -> u32 {
        match self {
            LaneSpeed::Sdr => 25,
            LaneSpeed::Ddr => 50,
            LaneSpeed::Qdr => 100,
            LaneSpeed::Fdr => 140,
            LaneSpeed::Edr => 250,
            LaneSpeed::Hdr => 500,
            LaneSpeed::Ndr => 1000,
            LaneSpeed::Xdr => 2000,
        }
    }

    /// The lane speed in 2.5 Gb/s units, as topology files and the
    /// routing engines' snapshot count it (FDR rounds to 6).
    pub const fn units(self) -> u8 {
        match self {
            LaneSpeed::Sdr => 1,
            LaneSpeed::Ddr => 2,
            LaneSpeed::Qdr => 4,
            LaneSpeed::Fdr => 6,
            LaneSpeed::Edr => 10,
            LaneSpeed::Hdr => 20,
            LaneSpeed::Ndr => 40,
            LaneSpeed::Xdr => 80,
        }
    }

    /// The generation of a 2.5 Gb/s unit count, if it is one.
    pub fn from_units(units: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.units() == units)
    }

    /// The bit of this speed in its group of PortInfo fields.
    pub const fn bits(self) -> SpeedBits {
        match self {
            LaneSpeed::Sdr => SpeedBits { base: link_speed::SDR, ext: 0, ext2: 0 },
            LaneSpeed::Ddr => SpeedBits { base: link_speed::DDR, ext: 0, ext2: 0 },
            LaneSpeed::Qdr => SpeedBits { base: link_speed::QDR, ext: 0, ext2: 0 },
            LaneSpeed::Fdr => SpeedBits { base: 0, ext: link_speed_ext::FDR, ext2: 0 },
            LaneSpeed::Edr => SpeedBits { base: 0, ext: link_speed_ext::EDR, ext2: 0 },
            LaneSpeed::Hdr => SpeedBits { base: 0, ext: link_speed_ext::HDR, ext2: 0 },
            LaneSpeed::Ndr => SpeedBits { base: 0, ext: link_speed_ext::NDR, ext2: 0 },
            LaneSpeed::Xdr => SpeedBits { base: 0, ext: 0, ext2: link_speed_ext2::XDR },
        }
    }
}

impl std::fmt::Display for LaneSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// LinkWidth bit of a lane count; 4x for anything IBA does not define.
pub fn width_bit(lanes: u8) -> u8 {
    match lanes {
        1 => link_width::W1X,
        2 => link_width::W2X,
        8 => link_width::W8X,
        12 => link_width::W12X,
        _ => link_width::W4X,
    }
}

/// The active speed fields (LinkSpeedActive, LinkSpeedExtActive,
/// LinkSpeedExtActive2) of a lane speed in 2.5 Gb/s units. An extended
/// speed reports QDR in LinkSpeedActive, which readers ignore when a
/// higher group says a speed; a unit count of no generation reads as the
/// next slower one (QDR at the least).
pub fn active_bits(units: u8) -> SpeedBits {
    let lane = LaneSpeed::ALL.into_iter().rev().find(|s| s.units() <= units).unwrap_or(LaneSpeed::Qdr);
    let bits = lane.bits();
    if bits.base == 0 {
        SpeedBits { base: link_speed::QDR, ..bits }
    } else {
        bits
    }
}

/// Speed masks of the three PortInfo groups (LinkSpeed*, LinkSpeedExt*,
/// LinkSpeedExt*2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpeedBits {
    /// LinkSpeed* bits (4 bits).
    pub base: u8,
    /// LinkSpeedExt* bits (4 bits).
    pub ext: u8,
    /// LinkSpeedExt*2 bits (2 bits).
    pub ext2: u8,
}

impl SpeedBits {
    /// The masks of every generation up to `top`.
    pub fn up_to(top: LaneSpeed) -> Self {
        LaneSpeed::ALL.into_iter().filter(|&s| s <= top).fold(Self::default(), |m, s| m | s.bits())
    }

    /// Whether `speed` is in the masks.
    pub const fn has(self, speed: LaneSpeed) -> bool {
        let b = speed.bits();
        self.base & b.base != 0 || self.ext & b.ext != 0 || self.ext2 & b.ext2 != 0
    }

    /// The fastest generation in the masks.
    pub fn fastest(self) -> Option<LaneSpeed> {
        LaneSpeed::ALL.into_iter().rev().find(|&s| self.has(s))
    }

    /// Generations in both.
    pub const fn common(self, other: Self) -> Self {
        Self { base: self.base & other.base, ext: self.ext & other.ext, ext2: self.ext2 & other.ext2 }
    }
}

impl std::ops::BitOr for SpeedBits {
    type Output = Self;
    fn bitor(self, o: Self) -> Self {
        Self { base: self.base | o.base, ext: self.ext | o.ext, ext2: self.ext2 | o.ext2 }
    }
}

/// Which speed groups of a port's PortInfo are valid, from its capability
/// masks (a switch says them on port 0: pass port 0's PortInfo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpeedCaps {
    /// CapabilityMask IsExtendedSpeedsSupported.
    pub ext: bool,
    /// CapabilityMask2 IsExtendedSpeeds2Supported (with
    /// IsCapabilityMask2Supported and IsExtendedSpeedsSupported, as
    /// infiniband-diags requires).
    pub ext2: bool,
}

impl SpeedCaps {
    /// The groups `holder` (the port itself, or a switch's port 0) says
    /// are valid.
    pub fn of(holder: &PortInfoRepr) -> Self {
        let ext = holder.capability_mask & capability::IS_EXTENDED_SPEEDS_SUPPORTED != 0;
        let mask2 = holder.capability_mask & capability::IS_CAPABILITY_MASK2_SUPPORTED != 0;
        let ext2 = ext && mask2 && holder.capability_mask2 & capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED != 0;
        Self { ext, ext2 }
    }

    /// Every group valid (a port whose masks are not at hand: its
    /// fields decide, as ports that predate a group leave it zero).
    pub const ALL: Self = Self { ext: true, ext2: true };

    fn keep(self, bits: SpeedBits) -> SpeedBits {
        SpeedBits {
            base: bits.base,
            ext: if self.ext { bits.ext } else { 0 },
            ext2: if self.ext2 { bits.ext2 } else { 0 },
        }
    }
}

/// The active lane speed of a port: the highest group that says one.
pub fn active(info: &PortInfoRepr, caps: SpeedCaps) -> Option<LaneSpeed> {
    let b = caps.keep(SpeedBits {
        base: info.link_speed_active,
        ext: info.link_speed_ext_active,
        ext2: info.link_speed_ext2_active,
    });
    if b.ext2 != 0 {
        SpeedBits { ext2: b.ext2, ..SpeedBits::default() }.fastest()
    } else if b.ext != 0 {
        SpeedBits { ext: b.ext, ..SpeedBits::default() }.fastest()
    } else {
        SpeedBits { base: b.base, ..SpeedBits::default() }.fastest()
    }
}

/// The speeds a port supports.
pub fn supported(info: &PortInfoRepr, caps: SpeedCaps) -> SpeedBits {
    caps.keep(SpeedBits {
        base: info.link_speed_supported,
        ext: info.link_speed_ext_supported,
        ext2: info.link_speed_ext2_supported,
    })
}

/// The speeds a port may train to: supported and enabled (an enabled
/// group of 0, as a port never set may say, counts as all supported;
/// LinkSpeedExtEnabled 30 turns the extended speeds off).
pub fn usable(info: &PortInfoRepr, caps: SpeedCaps) -> SpeedBits {
    let sup = supported(info, caps);
    let pick = |s: u8, e: u8| if s & e == 0 { s } else { s & e };
    SpeedBits {
        base: pick(sup.base, info.link_speed_enabled),
        ext: match info.link_speed_ext_enabled {
            link_speed_ext::DISABLE => 0,
            e => pick(sup.ext, e),
        },
        ext2: pick(sup.ext2, info.link_speed_ext2_enabled),
    }
}

/// Lanes of LinkWidthActive (one bit), 0 for none.
pub const fn active_lanes(info: &PortInfoRepr) -> u8 {
    link_width::lanes(info.link_width_active)
}

/// The widest width in a LinkWidth mask, as lanes.
pub fn widest(mask: u8) -> u8 {
    (0..8).map(|b| link_width::lanes(mask & (1 << b))).max().unwrap_or(0)
}

/// The name infiniband-diags gives a width (`4X`), `?` for none.
pub fn width_name(lanes: u8) -> &'static str {
    match lanes {
        1 => "1X",
        2 => "2X",
        4 => "4X",
        8 => "8X",
        12 => "12X",
        _ => "?",
    }
}

/// A link's name as `iblinkinfo` users say it: `4X NDR`.
pub fn link_name(lanes: u8, speed: Option<LaneSpeed>) -> String {
    format!("{} {}", width_name(lanes), speed.map_or("?", LaneSpeed::name))
}

/// A link's data rate in 0.1 Gb/s (0 when either is unknown).
pub fn link_rate(lanes: u8, speed: Option<LaneSpeed>) -> u32 {
    speed.map_or(0, |s| u32::from(lanes) * s.lane_rate())
}

/// A rate in 0.1 Gb/s as Gb/s (`400`, `2.5`).
pub fn gbps(tenths: u32) -> String {
    if tenths % 10 == 0 {
        format!("{}", tenths / 10)
    } else {
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}

/// The active link of a port: `4X NDR (400 Gb/s)`.
pub fn describe_active(info: &PortInfoRepr, caps: SpeedCaps) -> String {
    let lanes = active_lanes(info);
    let speed = active(info, caps);
    format!("{} ({} Gb/s)", link_name(lanes, speed), gbps(link_rate(lanes, speed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PortInfoPacket;

    /// A PortInfo as a port sends it, built byte by byte from the offsets
    /// of IBA 1.7 (as rdma-core's libibmad reads them): CapabilityMask at
    /// byte 20, LinkWidthActive at 31, LinkSpeedActive in the high nibble
    /// of 35, LinkSpeedExt2 at byte 56 (bits 6-5 active, 4-3 supported,
    /// 2-0 enabled), CapabilityMask2 at 60, LinkSpeedExtActive and
    /// Supported in the nibbles of 62, LinkSpeedExtEnabled in the low five
    /// bits of 63.
    fn wire(width_active: u8, base_active: u8, ext_active: u8, byte56: u8, cap2: u16) -> PortInfoRepr {
        let mut b = [0u8; crate::port_info::LEN];
        b[20..24].copy_from_slice(&(capability::IS_EXTENDED_SPEEDS_SUPPORTED | capability::IS_CAPABILITY_MASK2_SUPPORTED).to_be_bytes());
        b[30] = link_width::W1X | link_width::W4X;
        b[31] = width_active;
        b[32] = 0x7 << 4 | 4; // SDR|DDR|QDR supported, Active
        b[33] = 5 << 4; // LinkUp
        b[35] = base_active << 4 | 0x7;
        b[56] = byte56;
        b[60..62].copy_from_slice(&cap2.to_be_bytes());
        b[62] = ext_active << 4 | 0xF;
        b[63] = 0x0F;
        PortInfoRepr::parse(&PortInfoPacket::new_checked(&b[..]).expect("length")).expect("valid PortInfo")
    }

    const XDR_CAPS: u16 = capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED | capability2::IS_LINK_SPEED_XDR_SUPPORTED;

    #[test]
    fn xdr_is_read_from_byte_56_when_capability_mask2_says_so() {
        // Active 1, Supported 1, Enabled 1: 0b0_01_01_001.
        let xdr = wire(link_width::W4X, link_speed::QDR, 0, 0x29, XDR_CAPS);
        assert_eq!((xdr.link_speed_ext2_active, xdr.link_speed_ext2_supported, xdr.link_speed_ext2_enabled), (1, 1, 1));
        let caps = SpeedCaps::of(&xdr);
        assert_eq!(caps, SpeedCaps { ext: true, ext2: true });
        assert_eq!(active(&xdr, caps), Some(LaneSpeed::Xdr));
        assert_eq!(describe_active(&xdr, caps), "4X XDR (800 Gb/s)");
        assert_eq!(supported(&xdr, caps).fastest(), Some(LaneSpeed::Xdr));
        // Without IsExtendedSpeeds2Supported byte 56 is not read.
        let old = SpeedCaps::of(&wire(link_width::W4X, link_speed::QDR, 0, 0x29, 0));
        assert_eq!(active(&xdr, old), Some(LaneSpeed::Qdr));
        assert_eq!(supported(&xdr, old).fastest(), Some(LaneSpeed::Ndr));
        // The bit above LinkSpeedExtActive2 is reserved and not read.
        let reserved = wire(link_width::W4X, link_speed::QDR, 8, 0x80, XDR_CAPS);
        assert_eq!((reserved.link_speed_ext2_active, reserved.link_speed_ext2_supported), (0, 0));
        assert_eq!(active(&reserved, caps), Some(LaneSpeed::Ndr));
    }

    #[test]
    fn the_highest_group_that_says_a_speed_wins() {
        let caps = SpeedCaps::ALL;
        let ndr = wire(link_width::W4X, link_speed::QDR, link_speed_ext::NDR, 0x09, XDR_CAPS);
        assert_eq!(active(&ndr, caps), Some(LaneSpeed::Ndr));
        assert_eq!(describe_active(&ndr, caps), "4X NDR (400 Gb/s)");
        let hdr = wire(link_width::W2X, link_speed::QDR, link_speed_ext::HDR, 0, 0);
        assert_eq!(describe_active(&hdr, caps), "2X HDR (100 Gb/s)");
        let sdr = wire(link_width::W1X, link_speed::SDR, 0, 0, 0);
        assert_eq!(describe_active(&sdr, caps), "1X SDR (2.5 Gb/s)");
        let fdr = wire(link_width::W12X, link_speed::QDR, link_speed_ext::FDR, 0, 0);
        assert_eq!(describe_active(&fdr, caps), "12X FDR (168 Gb/s)");
        let edr8 = wire(link_width::W8X, link_speed::QDR, link_speed_ext::EDR, 0, 0);
        assert_eq!(describe_active(&edr8, caps), "8X EDR (200 Gb/s)");
        // No extended speeds: the extended nibble is not read.
        let none = SpeedCaps { ext: false, ext2: false };
        assert_eq!(active(&ndr, none), Some(LaneSpeed::Qdr));
    }

    #[test]
    fn generations_round_trip_through_units_names_and_bits() {
        for s in LaneSpeed::ALL {
            assert_eq!(LaneSpeed::from_units(s.units()), Some(s));
            assert_eq!(LaneSpeed::from_name(&s.name().to_lowercase()), Some(s));
            assert_eq!(SpeedBits::up_to(s).fastest(), Some(s));
            assert!(SpeedBits::up_to(s).has(LaneSpeed::Sdr));
            assert_eq!(crate::rate::rate_of(crate::rate::rate_code(4 * s.lane_rate())), 4 * s.lane_rate());
        }
        assert_eq!(SpeedBits::up_to(LaneSpeed::Xdr), SpeedBits { base: 7, ext: 0xF, ext2: 1 });
        assert_eq!(SpeedBits::up_to(LaneSpeed::Xdr).common(SpeedBits::up_to(LaneSpeed::Ndr)).fastest(), Some(LaneSpeed::Ndr));
    }

    #[test]
    fn usable_honours_enabled_and_the_disable_value() {
        let mut p = wire(link_width::W4X, link_speed::QDR, link_speed_ext::NDR, 0x09, XDR_CAPS);
        p.link_speed_ext2_enabled = 0;
        assert_eq!(usable(&p, SpeedCaps::ALL).fastest(), Some(LaneSpeed::Xdr), "0 = as supported");
        p.link_speed_ext2_supported = 0;
        p.link_speed_ext_enabled = link_speed_ext::HDR;
        assert_eq!(usable(&p, SpeedCaps::ALL).fastest(), Some(LaneSpeed::Hdr));
        p.link_speed_ext_enabled = link_speed_ext::DISABLE;
        assert_eq!(usable(&p, SpeedCaps::ALL).fastest(), Some(LaneSpeed::Qdr));
    }
}
