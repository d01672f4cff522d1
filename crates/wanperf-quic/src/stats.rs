//! The QUIC library's path statistics as plain numbers: what TCP_INFO is to TCP.

/// One connection's congestion state and counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathSnapshot {
    /// Smoothed RTT, µs.
    pub rtt_us: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// The path's current maximum UDP payload, bytes (QUIC's packet size).
    pub mtu: u32,
    /// Packets sent over the connection's life.
    pub sent_packets: u64,
    /// Packets declared lost (their frames are sent again in new packets).
    pub lost_packets: u64,
    /// Bytes in the packets declared lost.
    pub lost_bytes: u64,
    /// Times the congestion controller cut its window.
    pub congestion_events: u64,
    /// UDP datagrams sent and received (with GSO, one send call carries several).
    pub udp_datagrams: (u64, u64),
}

impl PathSnapshot {
    /// From quinn's statistics.
    pub fn of(s: &quinn::ConnectionStats) -> PathSnapshot {
        PathSnapshot {
            rtt_us: s.path.rtt.as_micros() as u64,
            cwnd_bytes: s.path.cwnd,
            mtu: u32::from(s.path.current_mtu),
            sent_packets: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            udp_datagrams: (s.udp_tx.datagrams, s.udp_rx.datagrams),
        }
    }

    /// The congestion window in packets of the path's size (at least 1 when there is one).
    pub fn cwnd_packets(&self) -> u32 {
        if self.mtu == 0 {
            return 0;
        }
        (self.cwnd_bytes.div_ceil(u64::from(self.mtu))).min(u64::from(u32::MAX)) as u32
    }

    /// The rate quinn's pacer allows: the window per RTT with a quarter more headroom
    /// (quinn's pacer spreads 5/4 of the window over each RTT), bit/s.
    pub fn pacing_bps(&self) -> Option<u64> {
        (self.rtt_us > 0).then(|| self.cwnd_bytes.saturating_mul(8_000_000) / self.rtt_us * 5 / 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_in_packets_and_the_pacing_rate_follow_from_the_bytes_and_the_rtt() {
        let s = PathSnapshot { rtt_us: 10_000, cwnd_bytes: 125_000, mtu: 1200, ..Default::default() };
        assert_eq!(s.cwnd_packets(), 105, "125 000 B in 1200 B packets, the last one partly");
        // 125 kB per 10 ms is 100 Mbit/s; the pacer allows a quarter more.
        assert_eq!(s.pacing_bps(), Some(125_000_000));
        assert_eq!(PathSnapshot::default().pacing_bps(), None, "no RTT yet, no rate");
        assert_eq!(PathSnapshot::default().cwnd_packets(), 0);
    }
}
