//! Bytes a peer sends on a control connection, split at an arbitrary point (as TCP may).
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_proto::frame::{encode, FrameDecoder};

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| *b as usize).min(data.len());
    let mut dec = FrameDecoder::new();
    dec.push(&data[..split]);
    let mut n = 0;
    loop {
        match dec.next_msg() {
            Ok(Some(m)) => {
                // Whatever decodes must re-encode and decode to the same message.
                let mut d2 = FrameDecoder::new();
                d2.push(&encode(&m));
                assert_eq!(d2.next_msg().unwrap(), Some(m));
                n += 1;
                if n > 1000 {
                    break;
                }
            }
            Ok(None) if split < data.len() && dec.buffered() <= data.len() => {
                dec.push(&data[split..]);
                while let Ok(Some(_)) = dec.next_msg() {}
                break;
            }
            _ => break,
        }
    }
    let _ = dec.eof_error();
});
