//! A hostile client on a control connection of a server with authorized keys: the bytes are
//! the client's control stream, fed frame by frame to `ServerSession` in virtual time.
//!
//! Layout: byte 0 is the mode, the rest is the client's byte stream (control frames). Mode
//! bit 0 set: a genuine `Request` + `Auth` pair (signed by the listed key over this
//! connection's nonce) goes first, so the fuzzer explores the admitted states; clear: the
//! fuzzer is on its own and must never get a test admitted. Bit 1: the I/O layer attaches
//! every data connection once the test is prepared; bit 2: it also attaches stream
//! `mode >> 3` (a bad or duplicate one). Each frame's two reserved header bytes (ignored by
//! the decoder) are the milliseconds that pass before it arrives (big endian).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use wanperf_proto::auth::{nonce_hex, AuthorizedKeys, PrivateKey, NONCE_LEN};
use wanperf_proto::frame::{encode, FrameDecoder, MAX_PAYLOAD};
use wanperf_proto::msg::{HostCapture, Msg, SideInterval, SideReport, TestSpec};
use wanperf_proto::server::{Limits, ServerAction, ServerSession, Timeouts};

/// This connection's challenge nonce.
const NONCE: [u8; NONCE_LEN] = [9; NONCE_LEN];
/// `wanperf_engine::server::PRE_ADMISSION_MAX_FRAME`: frames stay small until admission.
const PRE_ADMISSION_MAX_FRAME: usize = 64 * 1024;
/// Messages fed per input at most.
const MAX_MSGS: usize = 1000;

struct Fixed {
    base: Instant,
    keys: Arc<AuthorizedKeys>,
    spec: TestSpec,
    /// Encoded frames: the genuine request and its proof.
    genuine: Vec<u8>,
}

fn fixed() -> &'static Fixed {
    static FIXED: OnceLock<Fixed> = OnceLock::new();
    FIXED.get_or_init(|| {
        let key = PrivateKey::from_seed([7; 32], "fuzz");
        let keys = AuthorizedKeys::parse(&key.public().to_line()).unwrap();
        let spec = TestSpec::tcp(1, 1.0);
        let spec_json = serde_json::to_string(&spec).unwrap();
        let mut genuine = encode(&Msg::Request { software: "fuzz".into(), spec: spec.clone() });
        genuine.extend(encode(&Msg::Auth {
            key: key.public().to_line(),
            spec: spec_json.clone(),
            signature: key.sign(&NONCE, &spec_json),
        }));
        Fixed { base: Instant::now(), keys: Arc::new(keys), spec, genuine }
    })
}

struct Run {
    genuine: bool,
    attach: bool,
    extra_stream: Option<u32>,
    prepared: u32,
    challenges: u32,
}

impl Run {
    /// Takes what the session asks for and does what a well-behaved I/O layer would.
    fn drain(&mut self, s: &mut ServerSession, dec: &mut FrameDecoder, now: Instant) {
        for _ in 0..64 {
            let mut any = false;
            while let Some(m) = s.poll_transmit() {
                any = true;
                match &m {
                    Msg::Challenge { nonce } => {
                        assert_eq!(nonce, &nonce_hex(&NONCE));
                        self.challenges += 1;
                        assert_eq!(self.challenges, 1, "a second challenge");
                    }
                    Msg::Accepted { .. } | Msg::Ready | Msg::Results { .. } | Msg::Interval(_) => {
                        assert!(self.genuine, "{} sent to a client without a proof", m.kind());
                        assert!(self.prepared == 1);
                    }
                    _ => {}
                }
            }
            while let Some(a) = s.poll_action() {
                any = true;
                match a {
                    ServerAction::Prepare(spec) => {
                        // The security property: only the listed key's proof over this
                        // connection's nonce admits a test, and only the signed spec.
                        assert!(self.genuine, "test admitted without a valid proof: {spec:?}");
                        assert_eq!(spec, fixed().spec);
                        assert_eq!(s.client_key(), Some("fuzz"));
                        self.prepared += 1;
                        assert_eq!(self.prepared, 1, "a second Prepare");
                        dec.set_max_payload(MAX_PAYLOAD);
                        s.handle_prepared(now, vec![]);
                        if self.attach {
                            for id in 0..spec.connections() {
                                let _ = s.handle_stream(now, id);
                            }
                        }
                        if let Some(id) = self.extra_stream {
                            let _ = s.handle_stream(now, id);
                        }
                    }
                    ServerAction::Collect => {
                        s.queue_interval(SideInterval::default());
                        s.handle_local_report(SideReport::default());
                    }
                    ServerAction::StartWorkers | ServerAction::Abort(_) | ServerAction::Close => {}
                }
            }
            if !any {
                break;
            }
        }
        if !self.genuine {
            assert!(!s.is_admitted(), "admitted without a valid proof");
            assert!(s.client_key().is_none());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let f = fixed();
    let mut run = Run {
        genuine: mode & 1 == 1,
        attach: mode & 2 == 2,
        extra_stream: (mode & 4 == 4).then_some(u32::from(mode >> 3)),
        prepared: 0,
        challenges: 0,
    };
    let mut stream = Vec::with_capacity(f.genuine.len() + rest.len());
    if run.genuine {
        stream.extend_from_slice(&f.genuine);
    }
    stream.extend_from_slice(rest);

    let mut s = ServerSession::new(
        f.base,
        Limits::default(),
        Timeouts::default(),
        0,
        [5; 16],
        "fuzz".into(),
        HostCapture::default(),
    );
    s.require_auth(f.keys.clone(), NONCE);
    let mut dec = FrameDecoder::new();
    dec.set_max_payload(PRE_ADMISSION_MAX_FRAME);
    dec.push(&stream);
    let mut now = f.base;
    for _ in 0..MAX_MSGS {
        if s.is_finished() {
            break;
        }
        // The frame's reserved header bytes: time before it arrives.
        let at = stream.len() - dec.buffered();
        let ms = stream.get(at + 6..at + 8).map_or(0, |r| u16::from_be_bytes([r[0], r[1]]));
        let msg = match dec.next_msg() {
            Ok(Some(m)) => m,
            // The stream ends (or turns bad): the server sees the connection close.
            Ok(None) | Err(_) => break,
        };
        now += Duration::from_millis(u64::from(ms));
        if s.poll_timeout().is_some_and(|t| now >= t) {
            let _ = s.handle_timeout(now);
            run.drain(&mut s, &mut dec, now);
        }
        let _ = s.handle_msg(now, msg);
        run.drain(&mut s, &mut dec, now);
    }
    let _ = s.handle_closed();
    run.drain(&mut s, &mut dec, now);
    assert!(s.is_finished());
    assert_eq!(s.poll_timeout(), None);
    if !run.genuine {
        assert_eq!(run.prepared, 0);
    }
});
