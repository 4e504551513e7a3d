//! Values of OpenSM's congestion control keys (`cc_*`), read as OpenSM
//! reads them and checked against their fields' widths, for both file
//! formats; the congestion control manager (`cc`) builds its MADs from
//! them.

use sm_mad::cc::{ShiftMultiplier, CA_ENTRIES, PORT_MASK_LEN};

/// CongestionControlTable entries OpenSM programs at most (`cc_cct`).
pub const CCT_MAX_ENTRIES: usize = 128;

/// A 256-bit port mask as OpenSM reads `cc_sw_cong_setting_victim_mask`:
/// hex digits, `0x` optional, right-aligned (the last digit is ports
/// 0-3), stored big-endian.
pub fn parse_port_mask(v: &str) -> Result<[u8; PORT_MASK_LEN], String> {
    let digits = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    if digits.is_empty() {
        return Err("no hex digits: give a mask such as 0x6".into());
    }
    if let Some(c) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!("`{c}` is not a hex digit"));
    }
    if digits.len() > PORT_MASK_LEN * 2 {
        return Err(format!("{} hex digits: a port mask has 256 bits (at most 64 digits)", digits.len()));
    }
    let mut mask = [0u8; PORT_MASK_LEN];
    for (i, d) in digits.bytes().rev().enumerate() {
        let nibble = (d as char).to_digit(16).unwrap_or(0) as u8;
        mask[PORT_MASK_LEN - 1 - i / 2] |= nibble << (4 * (i % 2));
    }
    Ok(mask)
}

/// A C number (decimal, `0x` hex, leading-`0` octal) up to `max`.
fn c_number(v: &str, max: u64) -> Result<u64, String> {
    let v = v.trim();
    let n = smcore_kit::config::parse_guid(v).ok_or_else(|| format!("`{v}` is not a number"))?;
    if n > max {
        return Err(format!("{n} out of range: at most {max}"));
    }
    Ok(n)
}

/// `SHIFT:MULTIPLIER`, as OpenSM reads a CCT entry and
/// `cc_sw_cong_setting_credit_starvation_return_delay`: a 2-bit shift and
/// a 14-bit multiplier.
pub fn parse_shift_multiplier(v: &str) -> Result<ShiftMultiplier, String> {
    let (shift, multiplier) = v.split_once(':').ok_or_else(|| format!("`{v}`: expected SHIFT:MULTIPLIER"))?;
    let shift = c_number(shift, 3).map_err(|e| format!("shift {e} (2 bits)"))? as u8;
    let multiplier = c_number(multiplier, 0x3FFF).map_err(|e| format!("multiplier {e} (14 bits)"))? as u16;
    Ok(ShiftMultiplier { shift, multiplier })
}

/// `cc_cct`: a comma list of `SHIFT:MULTIPLIER` entries, at most
/// [`CCT_MAX_ENTRIES`]; `(null)` for none.
pub fn parse_cct(v: &str) -> Result<Vec<ShiftMultiplier>, String> {
    if v == "(null)" || v.is_empty() {
        return Ok(Vec::new());
    }
    let entries = v
        .split(',')
        .enumerate()
        .map(|(i, e)| parse_shift_multiplier(e.trim()).map_err(|m| format!("entry {i}: {m}")))
        .collect::<Result<Vec<_>, _>>()?;
    if entries.len() > CCT_MAX_ENTRIES {
        return Err(format!("{} entries: at most {CCT_MAX_ENTRIES}", entries.len()));
    }
    Ok(entries)
}

/// `SL VALUE`, as OpenSM reads the `cc_ca_cong_setting_*` keys: SL < 16
/// and a value up to `max`.
pub fn parse_sl_value(v: &str, max: u64) -> Result<(usize, u64), String> {
    let mut words = v.split_whitespace();
    let (Some(sl), Some(value), None) = (words.next(), words.next(), words.next()) else {
        return Err("expected SL VALUE".into());
    };
    let sl = c_number(sl, CA_ENTRIES as u64 - 1).map_err(|e| format!("SL {e}"))? as usize;
    Ok((sl, c_number(value, max)?))
}

/// Sets entry `sl` of a per-SL list, growing it with zeros.
pub fn set_sl<T: Copy + Default>(list: &mut Vec<T>, sl: usize, value: T) {
    if list.len() <= sl {
        list.resize(sl + 1, T::default());
    }
    list[sl] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_read_as_opensm_reads_them() {
        let m = parse_port_mask("0x6").expect("mask");
        assert_eq!(m[31], 6);
        assert!(m[..31].iter().all(|&b| b == 0));
        let m = parse_port_mask("1ff").expect("mask");
        assert_eq!((m[30], m[31]), (1, 0xff));
        let full = "f".repeat(64);
        assert_eq!(parse_port_mask(&full).expect("mask"), [0xff; 32]);
        assert!(parse_port_mask(&"f".repeat(65)).is_err());
        assert!(parse_port_mask("0xg1").expect_err("bad digit").contains("`g`"));
        assert!(parse_port_mask("0x").is_err());
    }

    #[test]
    fn sl_values() {
        assert_eq!(parse_sl_value("3 0x10", 255), Ok((3, 16)));
        assert!(parse_sl_value("16 1", 255).expect_err("SL").contains("SL"));
        assert!(parse_sl_value("1", 255).is_err());
        assert!(parse_sl_value("1 256", 255).is_err());
        let mut v: Vec<u8> = Vec::new();
        set_sl(&mut v, 2, 9);
        assert_eq!(v, [0, 0, 9]);
    }
}
