//! A UDP datagram on the ping port: a probe request as the server's echo responder reads it,
//! or a reply as the client's prober reads it (both go through `Probe::read`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_proto::probe::{Probe, PROBE_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Some(p) = Probe::read(data) else { return };
    assert!(data.len() >= PROBE_HEADER_LEN);
    // Whatever reads must write and read back to the same probe.
    let mut b = [0u8; PROBE_HEADER_LEN];
    p.write(&mut b);
    assert_eq!(Probe::read(&b), Some(p));
    // The server answers a request in place, in the datagram's own buffer (padding kept).
    if !p.reply {
        let mut echo = data.to_vec();
        let reply = Probe { reply: true, server_rx_ns: 1, server_tx_ns: 2, ..p };
        reply.write(&mut echo);
        assert_eq!(echo.len(), data.len());
        assert_eq!(echo[PROBE_HEADER_LEN..], data[PROBE_HEADER_LEN..]);
        // The client takes it as the reply to the same probe number.
        let r = Probe::read(&echo).unwrap();
        assert!(r.reply && r.seq == p.seq && r.client_tx_ns == p.client_tx_ns);
    }
});
