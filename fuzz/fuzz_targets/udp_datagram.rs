//! A sequence of UDP datagrams into the receiver's accounting: headers parse or are
//! rejected, and the counters stay consistent whatever the sequence numbers do.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_proto::data::{UdpHeader, UDP_FIN_SEQ, UDP_HEADER_LEN};
use wanperf_proto::udp::UdpRecvStats;

fuzz_target!(|data: &[u8]| {
    let mut st = UdpRecvStats::new();
    let mut fresh = 0u64;
    for (i, chunk) in data.chunks(UDP_HEADER_LEN).enumerate() {
        let Ok(h) = UdpHeader::read(chunk) else { continue };
        if h.seq == UDP_FIN_SEQ {
            st.on_fin(h.send_ns);
        } else if st.on_packet(h.seq % (1 << 20), h.send_ns, i as u64 * 1000) {
            fresh += 1;
        }
    }
    let c = st.counters();
    assert_eq!(c.packets, fresh);
    assert_eq!(c.lost, st.expected().saturating_sub(c.packets));
    assert!(c.jitter_ms.is_finite() && c.jitter_ms >= 0.0);
});
