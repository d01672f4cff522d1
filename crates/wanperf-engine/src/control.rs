//! The control connection's reader thread, shared by server and client: it decodes frames
//! into events on the session's channel until the connection closes or misbehaves.

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use wanperf_proto::frame::{FrameDecoder, FrameError};
use wanperf_proto::msg::Msg;

/// What the reader reports.
pub(crate) enum CtrlEvent {
    /// A whole message.
    Msg(Msg),
    /// Bytes that are not a valid frame (the reader stops).
    Bad(FrameError),
    /// The peer closed the connection on a frame boundary (the reader stops).
    Closed,
}

/// Reads `stream` (after the already-read `prefix`) on a new thread, sending each event to
/// `tx` through `wrap`. Ends when the connection closes or the channel's receiver is gone.
/// Frames larger than `max_frame` (read before each frame) end it with an error.
pub(crate) fn spawn_reader<E: Send + 'static>(
    mut stream: TcpStream,
    prefix: &[u8],
    max_frame: Arc<AtomicUsize>,
    tx: Sender<E>,
    wrap: fn(CtrlEvent) -> E,
) -> std::io::Result<JoinHandle<()>> {
    let mut dec = FrameDecoder::new();
    dec.push(prefix);
    // A small stack (it only decodes frames): see the server's connection threads.
    std::thread::Builder::new().name("wanperf-ctrl".into()).stack_size(128 * 1024).spawn(move || {
        // Small until the peer may send large frames (a crowd of strangers costs little).
        let mut buf = vec![0u8; 4 * 1024];
        loop {
            loop {
                let max = max_frame.load(Ordering::Acquire);
                dec.set_max_payload(max);
                if max > buf.len() && buf.len() < 64 * 1024 {
                    buf.resize(64 * 1024, 0);
                }
                match dec.next_msg() {
                    Ok(Some(m)) => {
                        if tx.send(wrap(CtrlEvent::Msg(m))).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(wrap(CtrlEvent::Bad(e)));
                        return;
                    }
                }
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(wrap(match dec.eof_error() {
                        Some(e) => CtrlEvent::Bad(e),
                        None => CtrlEvent::Closed,
                    }));
                    return;
                }
                Ok(n) => dec.push(&buf[..n]),
            }
        }
    })
}
