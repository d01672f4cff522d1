//! The server keeps serving through killed, stalled and lying clients; clients end cleanly
//! when the server dies or the user interrupts.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wanperf_proto::frame;
use wanperf_proto::msg::{Msg, TestSpec};

#[test]
fn killed_stalled_and_lying_clients_do_not_wedge_the_server() {
    let mut s = Server::start(&["--handshake-timeout", "1s"]);
    let port = s.port_s();

    // A long test that will be killed mid-way.
    let mut victim = Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "30", "-P", "2", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A client that connects and says nothing.
    let mut silent = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    // A client that sends a request, then garbage.
    let mut liar = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    liar.write_all(&frame::encode(&Msg::Request { software: "liar".into(), spec: TestSpec::tcp(1, 5.0) })).unwrap();
    liar.write_all(b"WNPF\x00\x01\x00\x00\x00\x00\x00\x05{oops").unwrap();
    // A client that stalls after its request (never opens data connections).
    let mut staller = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    staller
        .write_all(&frame::encode(&Msg::Request { software: "staller".into(), spec: TestSpec::tcp(1, 5.0) }))
        .unwrap();

    // Meanwhile a well-behaved test runs to completion.
    std::thread::sleep(Duration::from_millis(1000));
    victim.kill().unwrap();
    victim.wait().unwrap();
    let recs = tput_json(&s, &["-t", "2", "-P", "2"]);
    assert_eq!(end(&recs)["complete"], true);
    assert!(u(&end(&recs)["summary"]["received_bytes"]) > 0);

    // The misbehaving connections were dropped with a reason where one could be given.
    let mut buf = Vec::new();
    liar.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = liar.read_to_end(&mut buf);
    let mut dec = frame::FrameDecoder::new();
    dec.push(&buf);
    let mut got_error = false;
    while let Ok(Some(m)) = dec.next_msg() {
        if matches!(m, Msg::Error { .. }) {
            got_error = true;
        }
    }
    assert!(got_error, "liar got no error frame: {:?}", String::from_utf8_lossy(&buf));
    silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 64];
    assert!(matches!(silent.read(&mut b), Ok(0) | Err(_)), "silent client was not dropped");
    staller.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let mut all = Vec::new();
    let _ = staller.read_to_end(&mut all);
    assert!(t0.elapsed() < Duration::from_secs(5), "staller not timed out");

    // And the server still serves.
    let recs = tput_json(&s, &["-t", "1"]);
    assert_eq!(end(&recs)["complete"], true);
    assert!(s.alive());
    let log = s.log_text();
    assert!(log.contains("timed out"), "server log: {log}");
}

#[test]
fn two_clients_at_once_each_get_their_own_test() {
    let s = Server::start(&[]);
    let port = s.port_s();
    let spawn = |extra: &[&str]| {
        let mut args = vec!["tput".to_string(), "127.0.0.1".into(), "-p".into(), port.clone(), "--json".into()];
        args.extend(extra.iter().map(|x| x.to_string()));
        std::thread::spawn(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&a, Duration::from_secs(30))
        })
    };
    let a = spawn(&["-t", "2", "-P", "2"]);
    let b = spawn(&["-t", "2", "-R"]);
    for h in [a, b] {
        let out = h.join().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&out);
        assert_eq!(end(&recs)["complete"], true);
        let sum = &end(&recs)["summary"];
        assert_eq!(u(&sum["sent_bytes"]), u(&sum["received_bytes"]));
    }
}

#[test]
fn interrupted_client_keeps_what_it_measured() {
    let s = Server::start(&[]);
    let port = s.port_s();
    let child = Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "20", "--json", "-i", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // Ctrl-C to our own child.
    let _ = wanperf_sys::signal::interrupt(child.id());
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "interrupt took too long");
    assert!(!out.status.success());
    let recs = records(&out);
    let e = end(&recs);
    assert_eq!(e["complete"], false);
    assert!(e["error"].as_str().unwrap().contains("interrupted"));
    assert!(u(&e["summary"]["sent_bytes"]) > 0, "measured data kept");
    assert!(intervals(&recs).len() >= 2);
}

#[test]
fn server_death_mid_test_ends_the_client_with_partial_results() {
    let mut s = Server::start(&[]);
    let port = s.port_s();
    let child = Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "20", "--json", "-R"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    s.child.kill().unwrap();
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "client hung after the server died");
    assert!(!out.status.success());
    let recs = records(&out);
    let e = end(&recs);
    assert_eq!(e["complete"], false);
    assert!(u(&e["summary"]["received_bytes"]) > 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one error line: {err}");
}
