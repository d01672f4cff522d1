//! Parsing and formatting of the units every wanperf number carries.
//!
//! The conventions are the project contract: sizes in bytes take k/M/G as powers of 1024
//! (`256k` = 262144 B); rates take k/M/G as powers of 1000 in bits per second (`25M` =
//! 25 000 000 bit/s); durations take `ms`, `s` and `m` (a bare number is seconds).
//!
//! A leaf crate (only thiserror), so that every crate that reads a number with a unit — the
//! emulator's link options, the topology, mesh and study files — shares these rules without
//! pulling in the protocol's cryptography.

#![forbid(unsafe_code)]

use thiserror::Error;

/// A value that could not be read as the unit it stands for.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum UnitError {
    /// Nothing but whitespace.
    #[error("empty value")]
    Empty,
    /// Not a number followed by a known unit.
    #[error("`{value}` is not a {what} (examples: {examples})")]
    Malformed {
        /// The offending text.
        value: String,
        /// What kind of quantity was expected.
        what: &'static str,
        /// Accepted spellings.
        examples: &'static str,
    },
    /// A negative value where only positive ones make sense.
    #[error("`{0}` is negative")]
    Negative(String),
    /// Too large to represent.
    #[error("`{0}` is too large")]
    Overflow(String),
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+' || *c == 'e'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    // "1e3" is a number but "1M" is not an exponent; only keep 'e' if digits follow.
    let (num, rest) = s.split_at(end);
    (num, rest.trim())
}

fn parse_number(num: &str, orig: &str, what: &'static str, examples: &'static str) -> Result<f64, UnitError> {
    let v: f64 = num.parse().map_err(|_| UnitError::Malformed { value: orig.to_string(), what, examples })?;
    if !v.is_finite() {
        return Err(UnitError::Overflow(orig.to_string()));
    }
    if v < 0.0 {
        return Err(UnitError::Negative(orig.to_string()));
    }
    Ok(v)
}

/// Parses a size in bytes: `65536`, `64k`, `64K`, `64KiB`, `1.5M`, `2G`, `300kB` (k = 1024).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    const WHAT: &str = "size in bytes";
    const EX: &str = "65536, 64k, 1.5M, 2G";
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::Empty);
    }
    let (num, unit) = split_number(t);
    let v = parse_number(num, s, WHAT, EX)?;
    let mult: f64 = match unit {
        "" | "b" | "B" => 1.0,
        "k" | "K" | "kB" | "KB" | "KiB" | "kiB" => 1024.0,
        "m" | "M" | "MB" | "MiB" => 1024.0 * 1024.0,
        "g" | "G" | "GB" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "t" | "T" | "TB" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(UnitError::Malformed { value: s.to_string(), what: WHAT, examples: EX }),
    };
    let bytes = (v * mult).round();
    // `u64::MAX as f64 / 2.0` is 2^63 exactly, one more than `u64::MAX / 2`: that value itself
    // is too large too (found by fuzzing: "9223372036854775807" read as 2^63).
    if bytes >= u64::MAX as f64 / 2.0 {
        return Err(UnitError::Overflow(s.to_string()));
    }
    Ok(bytes as u64)
}

/// Parses a rate in bits per second: `100M`, `1.5G`, `25Mbit`, `800k`, `1000000` (k = 1000).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    const WHAT: &str = "rate in bit/s";
    const EX: &str = "1000000, 800k, 25M, 25Mbit, 1.5G";
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::Empty);
    }
    let (num, unit) = split_number(t);
    let v = parse_number(num, s, WHAT, EX)?;
    let unit = unit
        .strip_suffix("bit/s")
        .or_else(|| unit.strip_suffix("bps"))
        .or_else(|| unit.strip_suffix("bit"))
        .or_else(|| unit.strip_suffix("b"))
        .unwrap_or(unit);
    let mult = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        _ => return Err(UnitError::Malformed { value: s.to_string(), what: WHAT, examples: EX }),
    };
    let bps = (v * mult).round();
    if bps > 1e15 {
        return Err(UnitError::Overflow(s.to_string()));
    }
    Ok(bps as u64)
}

/// Parses a duration: `10` (seconds), `2.5s`, `250ms`, `2m`, `100us`. Returns seconds.
pub fn parse_duration(s: &str) -> Result<f64, UnitError> {
    const WHAT: &str = "duration";
    const EX: &str = "10, 2.5s, 250ms, 2m";
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::Empty);
    }
    let (num, unit) = split_number(t);
    let v = parse_number(num, s, WHAT, EX)?;
    let mult = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(UnitError::Malformed { value: s.to_string(), what: WHAT, examples: EX }),
    };
    let secs = v * mult;
    if secs > 1e9 {
        return Err(UnitError::Overflow(s.to_string()));
    }
    Ok(secs)
}

/// Parses a duration that may be negative (`-1.5ms`: a clock offset), seconds.
pub fn parse_signed_duration(s: &str) -> Result<f64, UnitError> {
    match s.trim().strip_prefix('-') {
        Some(rest) => parse_duration(rest).map(|d| -d),
        None => parse_duration(s),
    }
}

/// Formats bytes with binary prefixes: `1.50 MiB`, `512 B`.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", UNITS[i])
    } else if v >= 10.0 {
        format!("{v:.1} {}", UNITS[i])
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Formats a rate with decimal prefixes: `9.41 Gbit/s`, `812 kbit/s`.
pub fn fmt_rate(bps: f64) -> String {
    const UNITS: [&str; 5] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
    let mut v = bps.max(0.0);
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[i])
    } else if v >= 10.0 {
        format!("{v:.1} {}", UNITS[i])
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Formats microseconds as `412 µs` or `166.2 ms`.
pub fn fmt_usecs(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 100_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_durations() {
        assert_eq!(parse_signed_duration("-1.5ms").unwrap(), -0.0015);
        assert_eq!(parse_signed_duration("0").unwrap(), 0.0);
        assert!(parse_signed_duration("--1ms").is_err() && parse_signed_duration("-").is_err());
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("256k").unwrap(), 262_144);
        assert_eq!(parse_size("64K").unwrap(), 65_536);
        assert_eq!(parse_size("300kB").unwrap(), 307_200);
        assert_eq!(parse_size("1.5M").unwrap(), 1_572_864);
        assert_eq!(parse_size("2G").unwrap(), 2 * 1024 * 1024 * 1024);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(matches!(parse_size("12q"), Err(UnitError::Malformed { .. })));
        assert!(matches!(parse_size("-5k"), Err(UnitError::Negative(_))));
        assert_eq!(parse_size(" "), Err(UnitError::Empty));
        assert!(parse_size("k").is_err());
    }

    #[test]
    fn sizes_stay_at_most_half_of_u64() {
        // fuzz/corpus/units/crash-size-2pow63: i64::MAX as text rounds to 2^63 as an f64.
        for s in ["9223372036854775807", "+0009223372036854775807", "8388608T", "8388608TiB"] {
            assert!(parse_size(s).is_err(), "{s}");
        }
        assert_eq!(parse_size("4611686018427387904").unwrap(), 1 << 62);
        assert!(parse_size("9223372036854774784").unwrap() <= u64::MAX / 2);
    }

    #[test]
    fn rates_are_decimal_bits() {
        assert_eq!(parse_rate("25M").unwrap(), 25_000_000);
        assert_eq!(parse_rate("25Mbit").unwrap(), 25_000_000);
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("800k").unwrap(), 800_000);
        assert_eq!(parse_rate("10Mbps").unwrap(), 10_000_000);
        assert_eq!(parse_rate("0").unwrap(), 0);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("1e30").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), 10.0);
        assert_eq!(parse_duration("250ms").unwrap(), 0.25);
        assert_eq!(parse_duration("2m").unwrap(), 120.0);
        assert!(matches!(parse_duration("-1"), Err(UnitError::Negative(_))));
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("inf").is_err());
        assert!(parse_duration("NaN").is_err());
    }

    #[test]
    fn formatting_carries_units() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(1_572_864), "1.50 MiB");
        assert_eq!(fmt_rate(9.41e9), "9.41 Gbit/s");
        assert_eq!(fmt_rate(812_000.0), "812 kbit/s");
        assert_eq!(fmt_usecs(412.0), "412 µs");
        assert_eq!(fmt_usecs(166_200.0), "166.2 ms");
    }
}
