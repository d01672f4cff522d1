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
}
