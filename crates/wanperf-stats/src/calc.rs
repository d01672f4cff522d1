//! Path arithmetic engineers do by hand (seed 000: 100 ms of queue at 25 Mbit/s is about
//! 300 kB).

/// Bandwidth-delay product in bytes.
pub fn bdp_bytes(rate_bps: f64, rtt_s: f64) -> f64 {
    rate_bps * rtt_s / 8.0
}

/// Seconds a queue of `bytes` takes to drain at `rate_bps`.
pub fn queue_delay_s(bytes: f64, rate_bps: f64) -> f64 {
    bytes * 8.0 / rate_bps
}

/// Bytes of queue that hold `delay_s` at `rate_bps`.
pub fn queue_bytes(delay_s: f64, rate_bps: f64) -> f64 {
    delay_s * rate_bps / 8.0
}

/// Packets of `mss` bytes in `bytes`.
pub fn packets(bytes: f64, mss: f64) -> f64 {
    bytes / mss
}

/// The highest TCP rate a window allows on a path: window / RTT, in bit/s.
pub fn window_rate_bps(window_bytes: f64, rtt_s: f64) -> f64 {
    window_bytes * 8.0 / rtt_s
}

/// The Mathis et al. bound on steady-state TCP (Reno) throughput in bit/s:
/// MSS/RTT × C/√p with C = √(3/2).
pub fn mathis_bps(mss_bytes: f64, rtt_s: f64, loss: f64) -> f64 {
    (mss_bytes * 8.0 / rtt_s) * (1.5f64).sqrt() / loss.sqrt()
}

/// A value of `wanperf calc` that cannot be used; the message names the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(
    /// What is wrong, with the flag's name.
    pub String,
);

/// A parsed value of `flag` that must be above zero.
fn above_zero(flag: &str, v: Result<u64, wanperf_units::UnitError>) -> Result<f64, BadValue> {
    match v {
        Err(e) => Err(BadValue(format!("{flag}: {e}"))),
        Ok(0) => Err(BadValue(format!("{flag} must be above zero"))),
        Ok(n) => Ok(n as f64),
    }
}

/// A bottleneck rate as users write it (`--rate 25M`), in bit/s; above zero.
pub fn rate_flag(s: &str) -> Result<f64, BadValue> {
    above_zero("--rate", wanperf_units::parse_rate(s))
}

/// A segment size (`--mss`), 1 to 65535 bytes.
pub fn check_mss(m: f64) -> Result<f64, BadValue> {
    if !(1.0..=65_535.0).contains(&m) {
        return Err(BadValue("--mss must be 1–65535 bytes".into()));
    }
    Ok(m)
}

/// A queue size (`--queue`): bytes (300kB) or packets of `mss` bytes (2100p), in bytes; above
/// zero.
pub fn parse_queue(q: &str, mss: f64) -> Result<f64, BadValue> {
    let b = match q.strip_suffix('p') {
        Some(n) => n.trim().parse::<f64>().map_err(|_| BadValue(format!("--queue: bad packet count `{q}`")))? * mss,
        None => wanperf_units::parse_size(q).map_err(|e| BadValue(format!("--queue: {e}")))? as f64,
    };
    if b <= 0.0 {
        return Err(BadValue("--queue must be above zero".into()));
    }
    Ok(b)
}

/// A TCP window (`--window 64k`), in bytes; above zero.
pub fn window_flag(s: &str) -> Result<f64, BadValue> {
    above_zero("--window", wanperf_units::parse_size(s))
}

/// A loss probability (`--loss`): 0.001 or 0.1%, strictly between 0 and 1.
pub fn parse_loss(s: &str) -> Result<f64, BadValue> {
    let p = match s.strip_suffix('%') {
        Some(pc) => pc.trim().parse::<f64>().map(|x| x / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| BadValue(format!("--loss: `{s}` is not a probability (e.g. 0.001 or 0.1%)")))?;
    if !(p > 0.0 && p < 1.0) {
        return Err(BadValue("--loss must be between 0 and 1 (exclusive)".into()));
    }
    Ok(p)
}

/// Bytes in decimal units as the seeds wrote them, with the binary figure beside.
fn bytes(b: f64) -> String {
    let dec = if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    };
    if b >= 1024.0 {
        format!("{dec} ({})", wanperf_units::fmt_bytes(b as u64))
    } else {
        dec
    }
}

fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1000.0)
}

/// `calc bdp`'s sentence.
pub fn explain_bdp(rate_bps: f64, rtt_s: f64, mss: f64) -> String {
    let b = bdp_bytes(rate_bps, rtt_s);
    format!(
        "BDP at {} × {}: {} ≈ {:.0} packets of {mss:.0} B; a window (and socket buffer) of at least this keeps the path full",
        wanperf_units::fmt_rate(rate_bps),
        ms(rtt_s),
        bytes(b),
        packets(b, mss)
    )
}

/// `calc queue`'s sentence: `delay_s` of queue at `rate_bps` is `queue_bytes`.
pub fn explain_queue(delay_s: f64, rate_bps: f64, queue_bytes: f64, mss: f64) -> String {
    format!(
        "{} of queue at {} ≈ {} ≈ {:.0} packets of {mss:.0} B",
        ms(delay_s),
        wanperf_units::fmt_rate(rate_bps),
        bytes(queue_bytes),
        packets(queue_bytes, mss)
    )
}

/// `calc window`'s sentence.
pub fn explain_window(window_bytes: f64, rtt_s: f64) -> String {
    let r = window_rate_bps(window_bytes, rtt_s);
    format!("a {} window at {} RTT allows at most {}", bytes(window_bytes), ms(rtt_s), wanperf_units::fmt_rate(r))
}

/// `calc mathis`'s sentence.
pub fn explain_mathis(mss: f64, rtt_s: f64, loss: f64) -> String {
    format!(
        "Mathis bound for MSS {mss:.0} B, RTT {}, loss {:.4} %: {} per stream",
        ms(rtt_s),
        loss * 100.0,
        wanperf_units::fmt_rate(mathis_bps(mss, rtt_s, loss))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_arithmetic() {
        let q = queue_bytes(0.1, 25e6);
        assert!((q - 312_500.0).abs() < 1e-6);
        // 312 500 B is 214 packets of 1460 B.
        assert!((packets(q, 1460.0) - 214.041).abs() < 0.001);
        assert!((queue_delay_s(300_000.0, 25e6) - 0.096).abs() < 1e-12);
        assert!((bdp_bytes(622e6, 0.067) - 5_209_250.0).abs() < 1e-3);
        assert!((window_rate_bps(65_536.0, 0.166) - 3_158_361.4).abs() < 1.0);
        // 1460 B, 100 ms, 1e-4 loss: 1460·8/0.1 × 1.2247/0.01 ≈ 14.3 Mbit/s.
        assert!((mathis_bps(1460.0, 0.1, 1e-4) - 14_305_369.0).abs() < 1_000.0);
    }

    #[test]
    fn the_sentences_state_the_numbers_with_their_units() {
        // Seed 000: 100 ms of queue at 25 Mbit/s is about 300 kB.
        let q = explain_queue(0.1, 25e6, queue_bytes(0.1, 25e6), 1460.0);
        assert_eq!(q, "100.0 ms of queue at 25.0 Mbit/s ≈ 312.5 kB (305 KiB) ≈ 214 packets of 1460 B");
        let w = explain_window(65536.0, 0.166);
        assert_eq!(w, "a 65.5 kB (64.0 KiB) window at 166.0 ms RTT allows at most 3.16 Mbit/s");
        assert!(explain_bdp(1e9, 0.17, 1448.0).contains("21.25 MB"));
        assert!(explain_mathis(1448.0, 0.1, 0.001).contains("loss 0.1000 %"));
    }

    #[test]
    fn flag_values_are_read_and_checked() {
        assert_eq!(rate_flag("25M"), Ok(25e6));
        assert_eq!(rate_flag("0"), Err(BadValue("--rate must be above zero".into())));
        assert!(rate_flag("fast").unwrap_err().0.starts_with("--rate: "));
        assert_eq!(check_mss(1460.0), Ok(1460.0));
        assert_eq!(check_mss(0.5).unwrap_err().to_string(), "--mss must be 1–65535 bytes");
        assert_eq!(parse_queue("2100p", 1460.0), Ok(2100.0 * 1460.0));
        assert_eq!(parse_queue("300k", 1460.0), Ok(307_200.0));
        assert_eq!(parse_queue("xp", 1460.0).unwrap_err().0, "--queue: bad packet count `xp`");
        assert_eq!(parse_queue("0p", 1460.0).unwrap_err().0, "--queue must be above zero");
        assert_eq!(window_flag("64k"), Ok(65_536.0));
        assert_eq!(window_flag("0").unwrap_err().0, "--window must be above zero");
        assert_eq!(parse_loss("0.001"), Ok(0.001));
        assert!((parse_loss("0.1%").unwrap() - 0.001).abs() < 1e-15);
        assert_eq!(parse_loss("1").unwrap_err().0, "--loss must be between 0 and 1 (exclusive)");
        assert_eq!(parse_loss("a lot").unwrap_err().0, "--loss: `a lot` is not a probability (e.g. 0.001 or 0.1%)");
    }
}
