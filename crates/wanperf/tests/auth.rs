//! `serve --authorized-keys`: only clients proving a listed key run tests. No key, a wrong key,
//! a replayed handshake and an altered test are each refused with one clear line on both ends.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wanperf_proto::auth::{nonce_from_hex, PrivateKey};
use wanperf_proto::frame::{encode, FrameDecoder};
use wanperf_proto::msg::{Msg, TestSpec};

struct Keys {
    dir: PathBuf,
    good: PathBuf,
    wrong: PathBuf,
    authorized: PathBuf,
}

fn keys(tag: &str) -> Keys {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let dir = std::env::temp_dir().join(format!("wanperf-auth-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.key");
    let wrong = dir.join("wrong.key");
    for (k, c) in [(&good, "alice@lab"), (&wrong, "mallory@elsewhere")] {
        let out = run(&["keygen", "-o", &k.display().to_string(), "-C", c], Duration::from_secs(10));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let authorized = dir.join("authorized_keys");
    let public = std::fs::read_to_string(dir.join("good.key.pub")).unwrap();
    std::fs::write(&authorized, format!("# the lab's clients\n{public}")).unwrap();
    Keys { dir, good, wrong, authorized }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The server log's lines about refusals, waited for (bounded) since the log is asynchronous.
fn wait_log(server: &Server, needle: &str) -> String {
    let t0 = Instant::now();
    loop {
        let log = server.log_text();
        if let Some(l) = log.lines().find(|l| l.contains(needle)) {
            return l.to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no `{needle}` in the server log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn one_line(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    err
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads() {
    use std::os::unix::fs::PermissionsExt;
    let k = keys("keygen");
    assert_eq!(std::fs::metadata(&k.good).unwrap().permissions().mode() & 0o777, 0o600);
    let public = std::fs::read_to_string(k.dir.join("good.key.pub")).unwrap();
    assert!(public.starts_with("wanperf-ed25519 ") && public.trim_end().ends_with("alice@lab"), "{public}");
    // It refuses to overwrite a key without --force.
    let out = run(&["keygen", "-o", &s(&k.good)], Duration::from_secs(10));
    assert!(!out.status.success());
    assert!(one_line(&out).contains("--force"));
    // A private key others can read is refused by the client.
    std::fs::set_permissions(&k.wrong, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&["tput", "127.0.0.1", "-p", "1", "--key", &s(&k.wrong)], Duration::from_secs(10));
    assert!(!out.status.success());
    assert!(one_line(&out).contains("chmod 600"));
    let _ = std::fs::remove_dir_all(&k.dir);
}

#[test]
fn a_server_with_a_bad_key_file_does_not_start() {
    let k = keys("badfile");
    for (content, want) in [
        (None, "cannot read --authorized-keys"),
        (Some("# nobody yet\n"), "no key in it"),
        (Some("ssh-ed25519 AAAAC3Nza x@y\n"), "line 1: not a wanperf public key"),
    ] {
        let f = k.dir.join("ak");
        let _ = std::fs::remove_file(&f);
        if let Some(c) = content {
            std::fs::write(&f, c).unwrap();
        }
        let out = run(&["serve", "--listen", "127.0.0.1:0", "--authorized-keys", &s(&f)], Duration::from_secs(10));
        assert!(!out.status.success(), "server started with {content:?}");
        assert!(one_line(&out).contains(want), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_dir_all(&k.dir);
}

#[test]
fn only_a_listed_key_runs_tests_and_every_refusal_is_one_line_on_both_ends() {
    let k = keys("e2e");
    let server = Server::start(&["--authorized-keys", &s(&k.authorized), "--handshake-timeout", "3s"]);
    let port = server.port_s();
    let home = s(&k.dir); // no default key there

    // The listed key: the test runs, and the server's log names the key.
    let out = std::process::Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "0.5", "--json", "--key", &s(&k.good)])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(end(&records(&out))["complete"].as_bool().unwrap());
    wait_log(&server, "(key alice@lab)");

    // No key.
    let out = std::process::Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "0.5"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(one_line(&out).contains("requires a key"), "{}", String::from_utf8_lossy(&out.stderr));
    wait_log(&server, "requires a key");

    // A key that is not listed.
    let out = std::process::Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "0.5", "--key", &s(&k.wrong)])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = one_line(&out);
    assert!(err.contains("not authorized") && err.contains("mallory@elsewhere"), "{err}");
    wait_log(&server, "key mallory@elsewhere is not in this server's authorized keys");

    // A recorded handshake, replayed: a valid proof for one connection's nonce, sent again
    // on a new connection.
    let key = PrivateKey::parse(&std::fs::read_to_string(&k.good).unwrap()).unwrap();
    let spec = TestSpec::tcp(1, 1.0);
    let spec_json = serde_json::to_string(&spec).unwrap();
    let request = encode(&Msg::Request { software: "recorder".into(), spec: spec.clone() });
    let mut first = Peer::connect(server.port);
    first.write_all(&request).unwrap();
    let nonce = match first.next() {
        Msg::Challenge { nonce } => nonce_from_hex(&nonce).unwrap(),
        m => panic!("expected a challenge, got {m:?}"),
    };
    let auth = encode(&Msg::Auth {
        key: key.public().to_line(),
        spec: spec_json.clone(),
        signature: key.sign(&nonce, &spec_json),
    });
    first.write_all(&auth).unwrap();
    assert!(matches!(first.next(), Msg::Accepted { .. }), "the original handshake is valid");
    drop(first);
    let mut replay = Peer::connect(server.port);
    replay.write_all(&request).unwrap();
    replay.write_all(&auth).unwrap();
    assert!(matches!(replay.next(), Msg::Challenge { .. }));
    match replay.next() {
        Msg::Refused { reason } => {
            assert!(reason.contains("signature does not verify") && !reason.contains('\n'), "{reason}")
        }
        m => panic!("a replayed handshake got {m:?}"),
    }
    wait_log(&server, "replayed or altered handshake");

    // An altered test: the request changed in transit (10 s instead of 1 s) while the client
    // signed what it sent.
    let mut tampered = Peer::connect(server.port);
    let longer = TestSpec::tcp(1, 10.0);
    tampered.write_all(&encode(&Msg::Request { software: "mitm".into(), spec: longer })).unwrap();
    let nonce = match tampered.next() {
        Msg::Challenge { nonce } => nonce_from_hex(&nonce).unwrap(),
        m => panic!("expected a challenge, got {m:?}"),
    };
    tampered
        .write_all(&encode(&Msg::Auth {
            key: key.public().to_line(),
            spec: spec_json.clone(),
            signature: key.sign(&nonce, &spec_json),
        }))
        .unwrap();
    match tampered.next() {
        Msg::Refused { reason } => assert!(reason.contains("altered in transit"), "{reason}"),
        m => panic!("an altered request got {m:?}"),
    }
    wait_log(&server, "altered in transit");
    // The signed spec itself altered: the signature no longer matches.
    let mut tampered = Peer::connect(server.port);
    tampered.write_all(&request).unwrap();
    let nonce = match tampered.next() {
        Msg::Challenge { nonce } => nonce_from_hex(&nonce).unwrap(),
        m => panic!("expected a challenge, got {m:?}"),
    };
    let altered = spec_json.replace("\"streams\":1", "\"streams\":2");
    assert_ne!(altered, spec_json);
    tampered
        .write_all(&encode(&Msg::Auth {
            key: key.public().to_line(),
            spec: altered,
            signature: key.sign(&nonce, &spec_json),
        }))
        .unwrap();
    match tampered.next() {
        Msg::Refused { reason } => assert!(reason.contains("signature does not verify"), "{reason}"),
        m => panic!("an altered signed spec got {m:?}"),
    }

    // After all that, the listed key still runs tests.
    let out = std::process::Command::new(BIN)
        .args(["tput", "127.0.0.1", "-p", &port, "-t", "0.3", "--key", &s(&k.good)])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&k.dir);
}

/// A raw control connection, as an attacker holds it.
struct Peer {
    s: TcpStream,
    dec: FrameDecoder,
}

impl Peer {
    fn connect(port: u16) -> Peer {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Peer { s, dec: FrameDecoder::new() }
    }

    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.s.write_all(b)
    }

    /// The next control message (bounded: the server answers or closes within seconds).
    fn next(&mut self) -> Msg {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(m) = self.dec.next_msg().unwrap() {
                return m;
            }
            let n = self.s.read(&mut buf).expect("server answers within 10 s");
            assert!(n > 0, "server closed without a message");
            self.dec.push(&buf[..n]);
        }
    }
}

/// Copies obey the same key policy as tests (`serve --root DIR --authorized-keys`): a listed
/// key copies (here with `--direct`, which reports whether O_DIRECT was used), no key and an
/// unlisted key are refused with one line and nothing is written under the root.
#[test]
fn copies_need_a_listed_key_and_direct_writes_say_so() {
    let k = keys("copy");
    let root = k.dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let server =
        Server::start(&["--authorized-keys", &s(&k.authorized), "--root", &s(&root), "--handshake-timeout", "3s"]);
    let port = server.port_s();
    let home = s(&k.dir);
    let src = k.dir.join("data.bin");
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let copy = |key: Option<&Path>, dst: &str, extra: &[&str]| {
        let mut c = std::process::Command::new(BIN);
        c.args(["copy", "-p", &port, "--json"]).args(extra);
        if let Some(key) = key {
            c.arg("--key").arg(key);
        }
        c.arg(&src).arg(format!("127.0.0.1:{dst}")).env("HOME", &home).output().unwrap()
    };
    let out = copy(Some(&k.good), "in/", &["--direct"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(root.join("in/data.bin")).unwrap(), data);
    let recs = records(&out);
    let summary = &end(&recs)["summary"]["copy"];
    // The receiver (the server, here) writes.
    let direct = summary["receiver"]["direct"].as_bool().unwrap_or_else(|| panic!("no `direct` in {summary}"));
    // O_DIRECT works on ext4 and xfs, not on tmpfs: the report must say which happened.
    let fs = std::process::Command::new("stat").args(["-f", "-c", "%T", &s(&root)]).output().unwrap();
    let fs = String::from_utf8_lossy(&fs.stdout).trim().to_string();
    if fs == "tmpfs" {
        assert!(!direct, "{fs}: {summary}");
    } else if fs.starts_with("ext") || fs == "xfs" {
        assert!(direct, "{fs}: {summary}");
    }
    wait_log(&server, "(key alice@lab)");
    for (key, why) in [(None, "requires a key"), (Some(k.wrong.as_path()), "not authorized")] {
        let out = copy(key, "other/", &[]);
        assert!(!out.status.success());
        let err = one_line(&out);
        assert!(err.contains(why), "{err}");
    }
    assert!(!root.join("other").exists(), "a refused copy wrote under the root");
    let _ = std::fs::remove_dir_all(&k.dir);
}
