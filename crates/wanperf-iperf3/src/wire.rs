//! Bytes on iperf3's wire: state bytes, cookies, JSON framing, UDP datagrams, stream ids.

use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// A cookie: 36 characters and a NUL, sent first on the control and every TCP data connection.
pub const COOKIE_LEN: usize = 37;
/// The characters iperf3 draws cookies from.
pub const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Largest parameter object a server accepts (iperf3's own limit).
pub const MAX_PARAMS_LEN: usize = 8 * 1024;
/// Largest result object we accept (a server's full JSON output may ride in it).
pub const MAX_RESULTS_LEN: usize = 64 << 20;
/// The datagram a client sends on each UDP flow so the server learns its address ("9876").
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer to it ("6789").
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// The answer of servers before 3.11 (987654321 in host order, little-endian).
pub const UDP_CONNECT_REPLY_LEGACY: [u8; 4] = 987_654_321u32.to_le_bytes();
/// Most parallel streams iperf3 allows.
pub const MAX_STREAMS: u32 = 128;

/// The state bytes of the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Server: streams are connected, the test starts.
    TestStart,
    /// Server: the test runs.
    TestRunning,
    /// Client: the test is over (time or bytes reached).
    TestEnd,
    /// Server: send your parameters.
    ParamExchange,
    /// Server: open the data connections.
    CreateStreams,
    /// Server: it is shutting down.
    ServerTerminate,
    /// Client: it gave up (Ctrl-C).
    ClientTerminate,
    /// Server: exchange results (client first).
    ExchangeResults,
    /// Server: done, show the results.
    DisplayResults,
    /// Client: goodbye.
    IperfDone,
    /// Server: another test is running (the "busy" answer).
    AccessDenied,
    /// Server: an error; two 32-bit big-endian numbers follow (iperf3's error code, errno).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    /// The state a byte names, if it is one both ends use.
    pub fn from_byte(b: u8) -> Option<State> {
        Some(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return None,
        })
    }
}

/// Why bytes from the peer make no sense.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    /// A JSON length of 0 or above the limit.
    #[error("the peer announced a JSON object of {len} bytes (at most {max} expected)")]
    JsonLength {
        /// Announced length.
        len: u32,
        /// Limit.
        max: usize,
    },
    /// The JSON did not parse or lacked a field.
    #[error("the peer sent JSON wanperf cannot read: {0}")]
    Json(String),
    /// A cookie with characters iperf3 never sends.
    #[error("not an iperf3 cookie")]
    Cookie,
}

/// A cookie from 36 random bytes.
pub fn make_cookie(random: &[u8; 36]) -> [u8; COOKIE_LEN] {
    let mut c = [0u8; COOKIE_LEN];
    for (o, r) in c.iter_mut().zip(random) {
        *o = COOKIE_CHARS[(*r & 31) as usize];
    }
    c
}

/// Whether 37 bytes look like a cookie: 36 printable ASCII characters, then NUL. (Servers
/// compare cookies byte for byte; this only tells an iperf3 client from a stranger.)
pub fn check_cookie(c: &[u8]) -> Result<(), WireError> {
    if c.len() == COOKIE_LEN && c[..36].iter().all(|b| b.is_ascii_graphic()) && c[36] == 0 {
        Ok(())
    } else {
        Err(WireError::Cookie)
    }
}

/// A JSON object as iperf3 frames it: a 32-bit big-endian length, then the text.
pub fn json_frame<T: Serialize>(value: &T) -> Vec<u8> {
    let text = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(&text);
    out
}

/// The length in a JSON frame's header, checked against `max`.
pub fn json_len(header: [u8; 4], max: usize) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(header);
    if len == 0 || len as usize > max {
        return Err(WireError::JsonLength { len, max });
    }
    Ok(len as usize)
}

/// Parses a JSON frame's body.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::Json(e.to_string()))
}

/// The two error numbers after a `ServerError` state byte: iperf3's code and the errno.
pub fn server_error_codes(b: [u8; 8]) -> (i32, i32) {
    (i32::from_be_bytes([b[0], b[1], b[2], b[3]]), i32::from_be_bytes([b[4], b[5], b[6], b[7]]))
}

/// The bytes a server sends for `ServerError` with iperf3 code `code`.
pub fn server_error_bytes(code: i32, errno: i32) -> [u8; 9] {
    let mut b = [0u8; 9];
    b[0] = State::ServerError.byte();
    b[1..5].copy_from_slice(&code.to_be_bytes());
    b[5..9].copy_from_slice(&errno.to_be_bytes());
    b
}

/// Whether a datagram answers the UDP connect message (current or legacy servers).
pub fn is_connect_reply(d: &[u8]) -> bool {
    d == UDP_CONNECT_REPLY || d == UDP_CONNECT_REPLY_LEGACY
}

/// The header iperf3 puts at the start of each UDP datagram: the sender's clock (seconds,
/// microseconds) and a packet count that starts at 1, 32 bits by default or 64 bits when
/// both ends agreed on `udp_counters_64bit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender clock, seconds.
    pub sec: u32,
    /// Sender clock, microseconds.
    pub usec: u32,
    /// Packet number, from 1.
    pub pcount: u64,
}

impl UdpHeader {
    /// Header length.
    pub fn len(counters64: bool) -> usize {
        if counters64 {
            16
        } else {
            12
        }
    }

    /// Writes the header at the start of `buf` (which must hold [`UdpHeader::len`] bytes).
    pub fn write(&self, buf: &mut [u8], counters64: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters64 {
            buf[8..16].copy_from_slice(&self.pcount.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.pcount as u32).to_be_bytes());
        }
    }

    /// Reads a header; `None` for a datagram too short to carry one.
    pub fn read(buf: &[u8], counters64: bool) -> Option<UdpHeader> {
        if buf.len() < Self::len(counters64) {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let pcount = if counters64 { u64::from_be_bytes(buf[8..16].try_into().ok()?) } else { u64::from(u32_at(8)) };
        Some(UdpHeader { sec: u32_at(0), usec: u32_at(4), pcount })
    }

    /// The sender's clock in nanoseconds.
    pub fn send_ns(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec) * 1_000
    }

    /// A header for packet `pcount` sent at `ns` nanoseconds on the sender's clock.
    pub fn at(ns: u64, pcount: u64) -> UdpHeader {
        UdpHeader { sec: (ns / 1_000_000_000) as u32, usec: ((ns % 1_000_000_000) / 1_000) as u32, pcount }
    }
}

/// iperf3's id for the stream wanperf numbers `index` (0-based, in connection order).
/// iperf3 numbers its first stream 1 and the next ones 3, 4, 5, … (2 is never used), and
/// matches the peer's results by these ids.
pub fn stream_id(index: u32) -> i64 {
    if index == 0 {
        1
    } else {
        i64::from(index) + 2
    }
}

/// The wanperf index of iperf3 stream `id`.
pub fn stream_index(id: i64) -> Option<u32> {
    match id {
        1 => Some(0),
        3.. => u32::try_from(id - 2).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_unknown_bytes_are_refused() {
        for s in [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ] {
            assert_eq!(State::from_byte(s.byte()), Some(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::from_byte(b'S'), None, "an SSH banner is not a state");
        assert_eq!(State::from_byte(0), None);
    }

    #[test]
    fn cookies_use_the_base32_alphabet_and_end_in_nul() {
        let c = make_cookie(&[0xffu8; 36]);
        assert_eq!(&c[..36], &[b'7'; 36]);
        assert_eq!(c[36], 0);
        assert!(check_cookie(&c).is_ok());
        let mut bad = c;
        bad[36] = b'x';
        assert_eq!(check_cookie(&bad), Err(WireError::Cookie));
        assert_eq!(check_cookie(b"GET / HTTP/1.1\r\n"), Err(WireError::Cookie));
    }

    #[test]
    fn json_frames_carry_a_big_endian_length() {
        let f = json_frame(&serde_json::json!({"tcp": true}));
        assert_eq!(&f[..4], &[0, 0, 0, 12]);
        assert_eq!(&f[4..], br#"{"tcp":true}"#);
        assert_eq!(json_len([0, 0, 0, 12], 100), Ok(12));
        assert!(json_len([0, 0, 0, 0], 100).is_err());
        assert!(json_len([0, 1, 0, 0], MAX_PARAMS_LEN).is_err());
        assert!(parse_json::<serde_json::Value>(b"{not json").is_err());
    }

    #[test]
    fn udp_headers_in_both_counter_widths() {
        let h = UdpHeader::at(1_700_000_000_123_456_789, 5);
        assert_eq!((h.sec, h.usec), (1_700_000_000, 123_456));
        let mut b = [0u8; 16];
        h.write(&mut b, false);
        assert_eq!(&b[8..12], &[0, 0, 0, 5]);
        assert_eq!(UdpHeader::read(&b[..12], false), Some(h));
        h.write(&mut b, true);
        assert_eq!(&b[8..16], &[0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(UdpHeader::read(&b, true), Some(h));
        assert_eq!(UdpHeader::read(&b[..11], false), None);
        assert_eq!(h.send_ns(), 1_700_000_000_123_456_000);
    }

    #[test]
    fn connect_datagrams_and_error_codes() {
        assert!(is_connect_reply(b"6789"));
        assert!(is_connect_reply(&[0xb1, 0x68, 0xde, 0x3a]));
        assert!(!is_connect_reply(b"9876"));
        let b = server_error_bytes(142, 0);
        assert_eq!(b[0], 0xfe);
        assert_eq!(server_error_codes(b[1..9].try_into().unwrap()), (142, 0));
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<i64> = (0..4).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5]);
        for i in 0..300 {
            assert_eq!(stream_index(stream_id(i)), Some(i));
        }
        assert_eq!(stream_index(2), None);
        assert_eq!(stream_index(0), None);
        assert_eq!(stream_index(-1), None);
    }
}
