//! The rate codes of PathRecord, MCMemberRecord and partitions.conf
//! (IBA 15.2.5.16 Table 205): a code per data rate, in no numeric order.

/// The IBA rate codes (PathRecord/MCMemberRecord Rate) with their data
/// rate in 0.1 Gb/s.
pub const RATES: &[(u8, u32)] = &[
    (2, 25),
    (5, 50),
    (3, 100),
    (11, 140),
    (6, 200),
    (15, 250),
    (19, 280),
    (4, 300),
    (7, 400),
    (20, 500),
    (12, 560),
    (8, 600),
    (9, 800),
    (16, 1000),
    (13, 1120),
    (10, 1200),
    (14, 1680),
    (17, 2000),
    (18, 3000),
    (21, 4000),
    (22, 6000),
    // NDR 8x and 12x, XDR 4x (rdma-core's libibmad names them).
    (23, 8000),
    (24, 12000),
];

/// The highest rate code not above `rate` (0.1 Gb/s), at least 2.5 Gb/s.
pub fn rate_code(rate: u32) -> u8 {
    // RATES is in rate order.
    RATES
        .iter()
        .rev()
        .find(|&&(_, r)| r <= rate)
        .map(|&(c, _)| c)
        .unwrap_or(2)
}

/// Data rate (0.1 Gb/s) of a rate code; 0 for a reserved code.
pub fn rate_of(code: u8) -> u32 {
    RATES
        .iter()
        .find(|&&(c, _)| c == code)
        .map_or(0, |&(_, r)| r)
}


/// A rate as an admin writes it — `800G`, `800Gb/s`, `100g` — as its rate
/// code; `None` when no code has exactly that rate.
pub fn code_of_name(name: &str) -> Option<u8> {
    let t = name.trim().to_ascii_lowercase();
    let number = t.strip_suffix("gb/s").or_else(|| t.strip_suffix("gbps")).or_else(|| t.strip_suffix('g'))?;
    let gbps: f64 = number.trim().parse().ok()?;
    let tenths = (gbps * 10.0).round();
    RATES.iter().find(|&&(_, r)| f64::from(r) == tenths).map(|&(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes() {
        assert_eq!(code_of_name("400G"), Some(21));
        assert_eq!(code_of_name("2.5g"), Some(2));
        assert_eq!(code_of_name("100Gb/s"), Some(16));
        assert_eq!(code_of_name("10G"), Some(3));
        assert_eq!(code_of_name("123G"), None);
        assert_eq!(code_of_name("7"), None);
        assert_eq!(rate_code(4000), 21);
        assert_eq!(rate_of(22), 6000);
    }
}
