//! Timestamps and their error estimates.
//!
//! STAMP carries 64-bit timestamps: NTP's (32 bits of seconds since 1900, 32 of binary
//! fraction) by default, or PTPv2's truncated form (32 bits of seconds since 1970, 32 of
//! nanoseconds) when the error estimate's Z flag says so (RFC 8762 §4.2.1). Here times are
//! nanoseconds since the Unix epoch on the host's real-time clock; PTP seconds are taken on
//! the same (UTC) scale, as the implementations that send them do.

use serde::{Deserialize, Serialize};

/// Seconds from 1900-01-01 (NTP's epoch) to 1970-01-01.
pub const NTP_UNIX_OFFSET_S: u64 = 2_208_988_800;

/// A timestamp's format on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// NTP 64-bit (the default; Z = 0).
    Ntp,
    /// PTPv2 truncated: seconds and nanoseconds (Z = 1).
    Ptp,
}

/// `unix_ns` (ns since 1970) as a 64-bit wire timestamp.
pub fn to_wire(unix_ns: u64, f: Format) -> u64 {
    let s = unix_ns / 1_000_000_000;
    let ns = unix_ns % 1_000_000_000;
    match f {
        Format::Ntp => {
            // NTP's era 0 ends in 2036; its seconds wrap then (RFC 5905 §6), and so do these.
            let secs = (s + NTP_UNIX_OFFSET_S) & 0xffff_ffff;
            let frac = ((ns << 32) + 500_000_000) / 1_000_000_000;
            (secs << 32) | frac.min(0xffff_ffff)
        }
        Format::Ptp => ((s & 0xffff_ffff) << 32) | ns,
    }
}

/// A wire timestamp as ns since 1970. NTP seconds below 2^31 are taken as era 1 (after
/// February 2036), so the conversion holds from 1968 to 2104. A PTP nanosecond field past
/// 10^9 is not a time: `None`.
pub fn from_wire(w: u64, f: Format) -> Option<u64> {
    let hi = w >> 32;
    let lo = w & 0xffff_ffff;
    match f {
        Format::Ntp => {
            let secs = if hi < 0x8000_0000 { hi + (1 << 32) } else { hi };
            let s = secs.checked_sub(NTP_UNIX_OFFSET_S)?;
            let ns = (lo * 1_000_000_000 + (1 << 31)) >> 32;
            Some(s * 1_000_000_000 + ns)
        }
        Format::Ptp => (lo < 1_000_000_000).then_some(hi * 1_000_000_000 + lo),
    }
}

/// The Error Estimate field (RFC 4656 §4.1.2, with STAMP's Z flag): whether the clock is
/// synchronized to UTC, the timestamp's format, and the error as multiplier × 2^(scale − 32)
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEstimate {
    /// S: the clock is synchronized to an external source.
    pub synchronized: bool,
    /// Z: the timestamps are PTPv2's (else NTP's).
    pub ptp: bool,
    /// 6-bit scale.
    pub scale: u8,
    /// Multiplier (0 is not allowed on the wire: it says "no estimate").
    pub multiplier: u8,
}

impl ErrorEstimate {
    /// Unsynchronized, NTP format, error unknown (the largest the field says: about 2^31 s
    /// × 255 is meaningless, so one second is stated instead, as OWAMP's tools do).
    pub const UNKNOWN: ErrorEstimate = ErrorEstimate { synchronized: false, ptp: false, scale: 32, multiplier: 1 };

    /// The field as 16 bits.
    pub fn to_bits(self) -> u16 {
        (u16::from(self.synchronized) << 15)
            | (u16::from(self.ptp) << 14)
            | (u16::from(self.scale & 0x3f) << 8)
            | u16::from(self.multiplier)
    }

    /// The field from 16 bits.
    pub fn from_bits(b: u16) -> ErrorEstimate {
        ErrorEstimate {
            synchronized: b & 0x8000 != 0,
            ptp: b & 0x4000 != 0,
            scale: ((b >> 8) & 0x3f) as u8,
            multiplier: (b & 0xff) as u8,
        }
    }

    /// The timestamps' format.
    pub fn format(self) -> Format {
        if self.ptp {
            Format::Ptp
        } else {
            Format::Ntp
        }
    }

    /// The error, seconds; `None` when the multiplier is 0 (a malformed field).
    pub fn seconds(self) -> Option<f64> {
        (self.multiplier != 0).then(|| f64::from(self.multiplier) * 2f64.powi(i32::from(self.scale) - 32))
    }

    /// The smallest field that states at least `seconds` (rounded up, never down: an error
    /// estimate must not promise more than the clock keeps).
    pub fn of(seconds: f64, synchronized: bool, f: Format) -> ErrorEstimate {
        let ptp = f == Format::Ptp;
        let s = if seconds.is_finite() && seconds > 0.0 { seconds } else { 2f64.powi(-32) };
        for scale in 0u8..64 {
            let m = (s / 2f64.powi(i32::from(scale) - 32)).ceil();
            if m <= 255.0 {
                return ErrorEstimate { synchronized, ptp, scale, multiplier: (m as u8).max(1) };
            }
        }
        ErrorEstimate { synchronized, ptp, scale: 63, multiplier: 255 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntp_round_trips_to_the_nanosecond_within_its_resolution() {
        for ns in [0u64, 1, 999_999_999, 1_764_355_200_123_456_789, 2_085_978_495_999_999_999] {
            let back = from_wire(to_wire(ns, Format::Ntp), Format::Ntp).unwrap();
            assert!(back.abs_diff(ns) <= 1, "{ns} → {back}");
        }
        // 1970-01-01 is NTP second 2 208 988 800 with a zero fraction.
        assert_eq!(to_wire(0, Format::Ntp), NTP_UNIX_OFFSET_S << 32);
        // Half a second is a fraction of 2^31.
        assert_eq!(to_wire(500_000_000, Format::Ntp) & 0xffff_ffff, 1 << 31);
    }

    #[test]
    fn ntp_era_one_follows_era_zero() {
        // 2036-02-07 06:28:16 UTC: NTP seconds wrap to 0.
        let wrap_unix_s = (1u64 << 32) - NTP_UNIX_OFFSET_S;
        let w = to_wire(wrap_unix_s * 1_000_000_000 + 5, Format::Ntp);
        assert_eq!(w >> 32, 0);
        assert_eq!(from_wire(w, Format::Ntp), Some(wrap_unix_s * 1_000_000_000 + 5));
    }

    #[test]
    fn ptp_is_seconds_and_nanoseconds() {
        let w = to_wire(1_764_355_200_123_456_789, Format::Ptp);
        assert_eq!(w >> 32, 1_764_355_200);
        assert_eq!(w & 0xffff_ffff, 123_456_789);
        assert_eq!(from_wire(w, Format::Ptp), Some(1_764_355_200_123_456_789));
        assert_eq!(from_wire((5 << 32) | 1_000_000_000, Format::Ptp), None);
    }

    #[test]
    fn error_estimates_round_up_and_round_trip() {
        for s in [1e-9, 1e-6, 3.3e-5, 1e-3, 0.25, 1.0, 100.0] {
            let e = ErrorEstimate::of(s, true, Format::Ntp);
            let back = e.seconds().unwrap();
            assert!(back >= s && back <= s * 1.01 + 2f64.powi(-32), "{s}: {back}");
            assert_eq!(ErrorEstimate::from_bits(e.to_bits()), e);
        }
        // RFC 4656's example field: S=1, scale 0x20 … is multiplier × 2^0 s.
        let e = ErrorEstimate::from_bits(0x8000 | (32 << 8) | 3);
        assert!(e.synchronized && !e.ptp);
        assert_eq!(e.seconds(), Some(3.0));
        assert_eq!(ErrorEstimate::from_bits(0x4000).format(), Format::Ptp);
        assert_eq!(ErrorEstimate::from_bits(0).seconds(), None);
        assert_eq!(ErrorEstimate::UNKNOWN.seconds(), Some(1.0));
    }
}
