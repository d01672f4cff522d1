//! iperf3's error codes (sent after a `ServerError` state byte) as one line each.
//!
//! Only the codes a server sends before or during a test are named; the wording is
//! wanperf's. Unknown codes are reported by number.

/// iperf3 code: the server is busy (also sent as the `AccessDenied` state).
pub const ACCESS_DENIED: i32 = 121;
/// iperf3 code: the test's authorization failed.
pub const AUTH_TEST: i32 = 142;
/// iperf3 code: test longer than the server allows.
pub const DURATION: i32 = 5;
/// iperf3 code: too many streams.
pub const NUM_STREAMS: i32 = 6;
/// iperf3 code: total rate above the server's limit.
pub const TOTAL_RATE: i32 = 27;
/// iperf3 code: the client's duration exceeds the server's maximum.
pub const MAX_DURATION_EXCEEDED: i32 = 37;
/// iperf3 code: the parameters could not be received or were invalid.
pub const RECV_PARAMS: i32 = 114;
/// iperf3 code: the server ended a test that ran past its maximum duration.
pub const DURATION_EXPIRED: i32 = 160;

/// The line for iperf3 error `code` (and the errno the server sent with it, if any).
pub fn server_error_text(code: i32, errno: i32) -> String {
    let what = match code {
        DURATION => "the test is longer than the server allows".to_string(),
        NUM_STREAMS => "more parallel streams than the server allows".to_string(),
        7 | 20 => "the block length (-l) is invalid for the server".to_string(),
        8 => "the window (-w) is larger than the server allows".to_string(),
        10 => "the MSS is invalid for the server".to_string(),
        12 => "the server refused the --omit value".to_string(),
        TOTAL_RATE => "the total rate asked for is above the server's limit".to_string(),
        MAX_DURATION_EXCEEDED => "the test is longer than the server's maximum duration".to_string(),
        RECV_PARAMS => "the server could not read the test's parameters".to_string(),
        119 => "the server says the client terminated the test".to_string(),
        120 => "the server terminated".to_string(),
        ACCESS_DENIED => "the iperf3 server is busy running another test; try again later".to_string(),
        134 => "the server cannot use the congestion control asked for (--cc)".to_string(),
        AUTH_TEST => "the iperf3 server refused the test: authentication failed (it needs a user, password and \
                      its RSA public key, and they must match its credentials file)"
            .to_string(),
        143 => "the server cannot bind to its device".to_string(),
        144 => "the server received nothing for too long".to_string(),
        DURATION_EXPIRED => "the server ended the test: it ran past the server's maximum duration".to_string(),
        200..=208 => format!("the server could not set up a data stream (iperf3 error {code})"),
        _ => format!("iperf3 server error {code}"),
    };
    if errno > 0 {
        format!("{what} (server errno {errno})")
    } else {
        what
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_codes_read_as_one_line() {
        assert!(server_error_text(ACCESS_DENIED, 0).contains("busy"));
        assert!(server_error_text(AUTH_TEST, 0).contains("authentication failed"));
        assert_eq!(server_error_text(999, 0), "iperf3 server error 999");
        assert!(server_error_text(5, 22).ends_with("(server errno 22)"));
        assert!(!server_error_text(AUTH_TEST, 0).contains('\n'));
    }
}
