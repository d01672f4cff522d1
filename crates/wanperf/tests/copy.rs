//! `wanperf copy` end to end: trees both ways with identical content and BLAKE3 (checked with
//! the blake3 crate's own whole-file hasher, independent of the block tree), a corrupted block
//! resent, kill -9 of either end and resume, one clear line for each bad case, and the verdict
//! naming injected limits (slow source, slow sink, CPU-bound compression, the emulator's rate,
//! a small window at 100 ms).

mod common;
use common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory under the temp dir, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("wanperf-copy-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
    fn s(&self, sub: &str) -> String {
        self.join(sub).to_string_lossy().into_owned()
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic, incompressible bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

fn write(p: &Path, data: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

fn b3(p: &Path) -> String {
    let mut h = blake3::Hasher::new();
    h.update_reader(std::fs::File::open(p).unwrap()).unwrap();
    h.finalize().to_hex().to_string()
}

/// Every regular file under `root`, relative path → BLAKE3.
fn tree(root: &Path) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, b3(&e.path()));
            }
        }
    }
    out
}

fn copy(server: &Server, args: &[&str], limit: Duration) -> std::process::Output {
    let port = server.port_s();
    let mut a = vec!["copy", "-p", &port, "--json"];
    a.extend_from_slice(args);
    run(&a, limit)
}

fn serve_root(root: &Path, env: &[(&str, &str)]) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"]).arg(root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::spawn(cmd)
}

fn recs_ok(out: &std::process::Output) -> Vec<Value> {
    ok(out);
    records(out)
}

fn summary_copy(recs: &[Value]) -> Value {
    end(recs)["summary"]["copy"].clone()
}

fn one_line_error(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "should fail: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line, got: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// No partial or journal file left under `root`, and nothing under a final name that differs
/// from the source.
fn no_leftovers(root: &Path) -> bool {
    tree(root).keys().all(|k| !k.contains(".wanperf-part") && !k.contains(".wanperf-journal"))
}

#[test]
fn trees_round_trip_both_ways_with_identical_content_and_hashes() {
    let _g = serial();
    let t = Tmp::new("tree");
    let src = t.join("src/data");
    let mb = 1 << 20;
    for (name, n) in [
        ("empty", 0usize),
        ("one", 1),
        ("block-1", mb - 1),
        ("block", mb),
        ("block+1", mb + 1),
        ("three-blocks", 3 * mb + 77),
    ] {
        write(&src.join(name), &bytes(n, n as u64 + 1));
    }
    for i in 0..2000u64 {
        write(&src.join(format!("small/{:02}/f{i}", i % 17)), &bytes((i * 13 % 5000) as usize, i));
    }
    write(&src.join("ünïcødé/файл 名前.txt"), b"unicode names\n");
    std::fs::create_dir_all(src.join("empty-dir")).unwrap();
    // A large file, written once (not sparse), pushed with 4 streams.
    let big = t.join("src/big.bin");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big).unwrap();
        let chunk = bytes(8 * mb, 99);
        for _ in 0..256 {
            f.write_all(&chunk).unwrap();
        }
    }
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let server = serve_root(&root, &[]);

    let out =
        copy(&server, &["-P", "4", &t.s("src/data"), &t.s("src/big.bin"), "127.0.0.1:in/"], Duration::from_secs(240));
    let recs = recs_ok(&out);
    let c = summary_copy(&recs);
    assert_eq!(c["files"], 2000 + 7 + 1, "{c}");
    // Content and hashes: the far end's files hash like the sources, and the reported hashes
    // are the files' BLAKE3 as the blake3 crate computes it over the whole file.
    let want = tree(&src);
    assert_eq!(tree(&root.join("in/data")), want);
    assert!(root.join("in/data/empty-dir").is_dir());
    let files: Vec<&Value> = recs.iter().filter(|r| r["event"] == "file").collect();
    assert_eq!(files.len(), 2008);
    let big_rec = files.iter().find(|r| r["path"] == "big.bin").expect("big.bin record");
    assert_eq!(big_rec["bytes"], 2u64 << 30);
    assert_eq!(big_rec["blake3"].as_str().unwrap(), b3(&big));
    assert_eq!(b3(&root.join("in/big.bin")), b3(&big));
    for r in &files {
        let p = r["path"].as_str().unwrap();
        if p != "big.bin" {
            assert_eq!(r["blake3"].as_str().unwrap(), want[p.strip_prefix("data/").unwrap()], "{p}");
        }
    }
    assert!(no_leftovers(&root));
    // Modes and modification times come along.
    let (a, b) = (std::fs::metadata(src.join("one")).unwrap(), std::fs::metadata(root.join("in/data/one")).unwrap());
    assert_eq!(a.modified().unwrap(), b.modified().unwrap());
    assert_eq!(a.permissions().mode() & 0o7777, b.permissions().mode() & 0o7777);
    std::fs::remove_file(root.join("in/big.bin")).unwrap();

    // Pull it back, 2 streams: `back` does not exist, so the tree takes its name (as with scp).
    let back = t.join("back");
    let out = copy(&server, &["-P", "2", "127.0.0.1:in/data", &back.to_string_lossy()], Duration::from_secs(120));
    let recs = recs_ok(&out);
    assert_eq!(summary_copy(&recs)["files"], 2007);
    assert_eq!(tree(&back), want);
    assert!(no_leftovers(&back));

    // Again: everything is already there, nothing moves.
    let out = copy(&server, &[&t.s("src/data"), "127.0.0.1:in"], Duration::from_secs(60));
    let c = summary_copy(&recs_ok(&out));
    assert_eq!(c["skipped_files"], 2007, "{c}");
    assert_eq!(c["bytes"], 0, "{c}");
}

#[test]
fn a_corrupted_block_on_the_wire_is_detected_and_resent() {
    let _g = serial();
    let t = Tmp::new("corrupt");
    let f = t.join("f.bin");
    write(&f, &bytes(6 << 20, 5));
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let server = serve_root(&root, &[]);
    let port = server.port_s();
    let out = Command::new(BIN)
        .args(["copy", "-p", &port, "--json", &f.to_string_lossy(), "127.0.0.1:x/"])
        .env("WANPERF_TEST_CORRUPT_BLOCK", "3")
        .output()
        .unwrap();
    let recs = recs_ok(&out);
    let c = summary_copy(&recs);
    assert_eq!(c["resent_blocks"], 1, "{c}");
    assert_eq!(b3(&root.join("x/f.bin")), b3(&f));

    // The same with XXH3-128: the flipped byte is caught, and the file's hash is the documented
    // list hash (XXH3-128 seeded with the size over the block size and each 1 MiB block's
    // XXH3-128 seeded with its index), recomputed here with twox-hash.
    let out = Command::new(BIN)
        .args(["copy", "-p", &port, "--json", "--hash", "xxh3", &f.to_string_lossy(), "127.0.0.1:y/"])
        .env("WANPERF_TEST_CORRUPT_BLOCK", "2")
        .output()
        .unwrap();
    let recs = recs_ok(&out);
    assert_eq!(summary_copy(&recs)["resent_blocks"], 1);
    assert_eq!(b3(&root.join("y/f.bin")), b3(&f));
    let rec = recs.iter().find(|r| r["event"] == "file").unwrap();
    assert!(rec.get("blake3").is_none(), "{rec}");
    let data = std::fs::read(&f).unwrap();
    let mut list = twox_hash::XxHash3_128::with_seed(data.len() as u64);
    list.write(&(1u32 << 20).to_le_bytes());
    for (i, b) in data.chunks(1 << 20).enumerate() {
        list.write(&twox_hash::XxHash3_128::oneshot_with_seed(i as u64, b).to_le_bytes());
    }
    let want: String = list.finish_128().to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(rec["xxh3"], want.as_str(), "{rec}");
    // A bad name is one clear line.
    let out = Command::new(BIN)
        .args(["copy", "-p", &port, "--hash", "md5", &f.to_string_lossy(), "127.0.0.1:z"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a hash (blake3 or xxh3)"));
}

/// Waits until the receiver's journal for `name` in `dir` records at least `blocks` blocks.
fn wait_journal(dir: &Path, name: &str, blocks: u64, limit: Duration) {
    let j = dir.join(format!(".{name}.wanperf-journal"));
    let t0 = Instant::now();
    loop {
        let n = std::fs::read(&j).ok().map_or(0, |v| {
            let nl = v.iter().position(|&b| b == b'\n').map_or(v.len(), |i| i + 1);
            ((v.len() - nl) / 40) as u64
        });
        if n >= blocks {
            return;
        }
        assert!(t0.elapsed() < limit, "the journal never reached {blocks} blocks");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills `victim` ("client" or "server") with SIGKILL, then stops whatever is left.
fn kill_victim(victim: &str, server: &mut Server, client: &mut std::process::Child) {
    if victim == "client" {
        client.kill().unwrap();
    } else {
        server.child.kill().unwrap();
    }
    let _ = server.child.kill();
    let _ = server.child.wait();
    let _ = client.kill();
    let _ = client.wait();
}

/// A resumed copy's resumed and moved bytes: at least `at_least` resumed, and together the file.
fn resumed_and_moved(out: &std::process::Output, victim: &str, at_least: u64, size: u64) -> (u64, u64) {
    let c = summary_copy(&recs_ok(out));
    let resumed = c["resumed_bytes"].as_u64().unwrap();
    let moved = c["bytes"].as_u64().unwrap();
    assert!(resumed >= at_least, "{victim}: resumed only {resumed} B");
    assert_eq!(resumed + moved, size, "{victim}: resumed {resumed} + moved {moved} ≠ {size}");
    (resumed, moved)
}

#[test]
fn kill_9_of_either_end_half_way_then_resume_sends_only_what_is_missing() {
    let _g = serial();
    let t = Tmp::new("resume");
    let f = t.join("f.bin");
    let size: u64 = 64 << 20;
    write(&f, &bytes(size as usize, 11));
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let block = 1u64 << 20;
    let streams = 2u64;

    for victim in ["client", "server"] {
        let _ = std::fs::remove_dir_all(root.join("r"));
        let mut server = serve_root(&root, &[]);
        let port = server.port_s();
        // 16 MB/s source: 4 s for the file, killed half way.
        let mut client = Command::new(BIN)
            .args(["copy", "-p", &port, "-P", "2", "--json", &f.to_string_lossy(), "127.0.0.1:r/"])
            .env("WANPERF_TEST_READ_RATE", "16000000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_journal(&root.join("r"), "f.bin", 32, Duration::from_secs(30));
        kill_victim(victim, &mut server, &mut client);
        assert!(!root.join("r/f.bin").exists(), "{victim}: a final name before the file was complete");
        // What the receiver holds, checked by the journal: the resume must ask for the rest.
        let server = serve_root(&root, &[]);
        let out = copy(&server, &["-P", "2", &f.to_string_lossy(), "127.0.0.1:r/"], Duration::from_secs(60));
        let (resumed, moved) = resumed_and_moved(&out, victim, 32 * block, size);
        // Exact: the blocks written before the kill are not sent again (at most one block
        // per stream beyond what was missing is allowed; the journal makes it zero).
        assert!(moved <= size - resumed + streams * block, "{victim}");
        assert_eq!(b3(&root.join("r/f.bin")), b3(&f), "{victim}");
        assert!(no_leftovers(&root), "{victim}");
    }
}

/// The same for a pull: the client is the receiver, its journal beside the partial file in
/// the destination directory; after kill -9 of either end, the resumed pull asks only for
/// what is missing.
#[test]
fn kill_9_of_either_end_of_a_pull_then_resume_sends_only_what_is_missing() {
    let _g = serial();
    let t = Tmp::new("pull-resume");
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let size: u64 = 64 << 20;
    write(&root.join("f.bin"), &bytes(size as usize, 12));
    let block = 1u64 << 20;
    let streams = 2u64;
    // The server reads at 16 MB/s: 4 s for the file, killed half way.
    let slow = [("WANPERF_TEST_READ_RATE", "16000000")];
    for victim in ["client", "server"] {
        let dst = t.join(&format!("dst-{victim}"));
        std::fs::create_dir_all(&dst).unwrap();
        let mut server = serve_root(&root, &slow);
        let port = server.port_s();
        let mut client = Command::new(BIN)
            .args(["copy", "-p", &port, "-P", "2", "--json", "127.0.0.1:f.bin", &dst.to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_journal(&dst, "f.bin", 32, Duration::from_secs(30));
        kill_victim(victim, &mut server, &mut client);
        assert!(!dst.join("f.bin").exists(), "{victim}: a final name before the file was complete");
        let server = serve_root(&root, &[]);
        let out = copy(&server, &["-P", "2", "127.0.0.1:f.bin", &dst.to_string_lossy()], Duration::from_secs(60));
        let (resumed, moved) = resumed_and_moved(&out, victim, 32 * block, size);
        assert!(moved <= size - resumed + streams * block, "{victim}");
        assert_eq!(b3(&dst.join("f.bin")), b3(&root.join("f.bin")), "{victim}");
        assert!(no_leftovers(&dst), "{victim}");
    }
}

#[test]
fn bad_cases_get_one_clear_line_and_nothing_half_written_under_a_final_name() {
    let _g = serial();
    let t = Tmp::new("bad");
    let f = t.join("f.bin");
    write(&f, &bytes(3 << 20, 3));
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();

    // A server without --root takes no copies.
    let plain = Server::start(&[]);
    let e = one_line_error(&copy(&plain, &[&t.s("f.bin"), "127.0.0.1:x"], Duration::from_secs(20)));
    assert!(e.contains("--root"), "{e}");

    let server = serve_root(&root, &[]);
    // Paths out of the root: refused before anything is sent.
    for dst in ["127.0.0.1:../x", "127.0.0.1:/etc", "127.0.0.1:a/../../b"] {
        let e = one_line_error(&copy(&server, &[&t.s("f.bin"), dst], Duration::from_secs(20)));
        assert!(e.contains("root"), "{e}");
    }
    // A symbolic link under the root pointing out of it is not followed.
    let outside = t.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
    let e = one_line_error(&copy(&server, &[&t.s("f.bin"), "127.0.0.1:link/x"], Duration::from_secs(20)));
    assert!(e.contains("symbolic link"), "{e}");
    let e = one_line_error(&copy(&server, &["127.0.0.1:link", &t.s("pulled")], Duration::from_secs(20)));
    assert!(e.contains("link") || e.contains("not"), "{e}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // A source that does not exist, locally and remotely.
    let e = one_line_error(&copy(&server, &[&t.s("nope"), "127.0.0.1:x"], Duration::from_secs(20)));
    assert!(e.contains("nope"), "{e}");
    let e = one_line_error(&copy(&server, &["127.0.0.1:nope", &t.s("pulled")], Duration::from_secs(20)));
    assert!(e.contains("nope"), "{e}");
    // Both sides local, both remote.
    one_line_error(&run(&["copy", &t.s("f.bin"), &t.s("g")], Duration::from_secs(10)));
    one_line_error(&run(&["copy", "a:x", "b:y"], Duration::from_secs(10)));
    one_line_error(&run(&["copy", "-z", "99", &t.s("f.bin"), "127.0.0.1:x"], Duration::from_secs(10)));
    one_line_error(&run(&["copy", "--block", "1000", &t.s("f.bin"), "127.0.0.1:x"], Duration::from_secs(10)));

    // A file that changes while it is read: refused, and no final name at the far end.
    let grow = t.join("grow.bin");
    write(&grow, &bytes(24 << 20, 4));
    let port = server.port_s();
    let mut child = Command::new(BIN)
        .args(["copy", "-p", &port, &grow.to_string_lossy(), "127.0.0.1:g/"])
        .env("WANPERF_TEST_READ_RATE", "8000000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_journal(&root.join("g"), "grow.bin", 4, Duration::from_secs(30));
    {
        use std::io::Write;
        let mut a = std::fs::OpenOptions::new().append(true).open(&grow).unwrap();
        a.write_all(b"more").unwrap();
    }
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "copy of a changing file hung");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("changed while it was read"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!root.join("g/grow.bin").exists());

    // Permission denied: a server running as nobody under a root-owned root.
    if wanperf_sys::euid() == 0 {
        let bin_dir = Tmp::new("nobody-bin");
        std::fs::set_permissions(&bin_dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = bin_dir.join("wanperf");
        std::fs::copy(BIN, &bin).unwrap();
        let locked = Tmp::new("locked");
        std::fs::set_permissions(&locked.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--root"])
            .arg(&locked.0);
        let nobody = Server::spawn(cmd);
        let e = one_line_error(&copy(&nobody, &[&t.s("f.bin"), "127.0.0.1:sub"], Duration::from_secs(20)));
        assert!(e.contains("ermission denied"), "{e}");

        // Disk full: a 4 MiB tmpfs as the root.
        let small = Tmp::new("full");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(&small.0)
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            let big = t.join("big.bin");
            write(&big, &bytes(12 << 20, 8));
            let srv = serve_root(&small.0, &[]);
            let e = one_line_error(&copy(&srv, &[&big.to_string_lossy(), "127.0.0.1:"], Duration::from_secs(30)));
            assert!(e.contains("disk full"), "{e}");
            assert!(!small.join("big.bin").exists());
            drop(srv);
            let _ = Command::new("umount").arg(&small.0).status();
        } else if std::env::var_os("CI").is_some() {
            panic!("cannot mount a small tmpfs for the disk-full case");
        }
    } else {
        eprintln!("SKIPPED: permission and disk-full cases need root");
    }
}

/// `wanperf copy ARGS` from the left host of an emulated path with LINK options, a server
/// (`right`) on the right.
fn copy_on_path(right: &str, link: &[&str], args: &[&str], limit: Duration) -> std::process::Output {
    let mut a = vec!["path", "run"];
    a.extend_from_slice(link);
    a.extend(["--right", right, "--", BIN, "copy", "--json"]);
    a.extend_from_slice(args);
    run(&a, limit)
}

fn verdict(recs: &[Value]) -> (String, f64, String) {
    let v = &end(recs)["summary"]["verdict"];
    let limit = match &v["limit"] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o.iter().map(|(k, v)| format!("{k}:{}", v.as_str().unwrap_or(""))).collect(),
        other => other.to_string(),
    };
    (limit, v["rate_bytes_s"].as_f64().unwrap_or(0.0), v["text"].as_str().unwrap_or("").to_string())
}

#[test]
fn the_verdict_names_injected_disk_and_cpu_limits_and_never_blames_disk_or_network_on_loopback() {
    let _g = serial();
    let t = Tmp::new("verdict");
    let f = t.join("f.bin");
    write(&f, &bytes(48 << 20, 6));
    // Page-cache-fast storage for the roots, so only the injected limit is slow.
    let shm = Path::new("/dev/shm");
    let base =
        if shm.is_dir() { Tmp(shm.join(format!("wanperf-verdict-{}", std::process::id()))) } else { Tmp::new("vroot") };
    std::fs::create_dir_all(&base.0).unwrap();
    let rate = 30e6;
    for _ in 0..3 {
        // Slow source disk.
        let server = serve_root(&base.0, &[]);
        let port = server.port_s();
        let out = Command::new(BIN)
            .args(["copy", "-p", &port, "--json", "--force", "--no-fsync", &f.to_string_lossy(), "127.0.0.1:a"])
            .env("WANPERF_TEST_READ_RATE", rate.to_string())
            .output()
            .unwrap();
        let (limit, got, text) = verdict(&recs_ok(&out));
        assert_eq!(limit, "stage:read", "{text}");
        assert!((got - rate).abs() <= 0.1 * rate, "{got} vs {rate}: {text}");
        drop(server);
        // Slow sink.
        let server = serve_root(&base.0, &[("WANPERF_TEST_WRITE_RATE", &rate.to_string())]);
        let out = copy(&server, &["--force", "--no-fsync", &t.s("f.bin"), "127.0.0.1:b"], Duration::from_secs(60));
        let (limit, got, text) = verdict(&recs_ok(&out));
        assert_eq!(limit, "stage:write", "{text}");
        assert!((got - rate).abs() <= 0.1 * rate, "{got} vs {rate}: {text}");
        drop(server);
        // CPU-bound compression, into a sink without the injected limit (zstd -19 runs at
        // 30-50 MB/s: as slow as the injected sink, so the two must not be combined).
        let server = serve_root(&base.0, &[]);
        let out = copy(
            &server,
            &["--force", "--no-fsync", "-z", "19", &t.s("f.bin"), "127.0.0.1:c"],
            Duration::from_secs(120),
        );
        let (limit, _, text) = verdict(&recs_ok(&out));
        assert_eq!(limit, "stage:compress", "{text}");
        drop(server);
        // Unconstrained loopback: never the disk or the network.
        let server = serve_root(&base.0, &[]);
        let out = copy(&server, &["--force", "--no-fsync", &t.s("f.bin"), "127.0.0.1:d"], Duration::from_secs(60));
        let (limit, _, text) = verdict(&recs_ok(&out));
        assert!(
            !["stage:read", "stage:write", "network", "receive_window", "send_buffer"].contains(&limit.as_str()),
            "{limit}: {text}"
        );
    }
}

#[test]
fn the_verdict_names_the_emulated_network_and_a_small_window() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    let t = Tmp::new("netverdict");
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = t.join("f.bin");
    write(&f, &bytes(24 << 20, 7));
    let small = t.join("small.bin");
    write(&small, &bytes(3 << 20, 8));
    let root = t.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let right = format!("{BIN} serve --listen 0.0.0.0:5301 --allow 198.18.0.0/15 --root {}", root.display());
    for _ in 0..2 {
        // The emulator's 100 Mbit/s bottleneck, 10 ms each way.
        let out = copy_on_path(
            &right,
            &["--rtt", "20ms", "--rate", "100M"],
            &["--force", "--no-fsync", &f.to_string_lossy(), "198.18.0.2:n"],
            Duration::from_secs(90),
        );
        let (limit, got, text) = verdict(&recs_ok(&out));
        assert_eq!(limit, "network", "{text}");
        // TCP/IP headers take about 3.5 % of a 1500-byte packet.
        let want = 100e6 / 8.0 * 0.965;
        assert!((got - want).abs() <= 0.1 * want, "{got} vs {want}: {text}");
        // A 64 KiB window at 100 ms.
        let out = copy_on_path(
            &right,
            &["--rtt", "100ms", "--rate", "1G"],
            &["--force", "--no-fsync", "-w", "64k", &small.to_string_lossy(), "198.18.0.2:w"],
            Duration::from_secs(120),
        );
        let (limit, _, text) = verdict(&recs_ok(&out));
        assert!(limit == "receive_window" || limit == "send_buffer", "{limit}: {text}");
    }
    // Ten streams: their first blocks cross together, and the copy's time still runs from the
    // first bytes, so its rate never exceeds the bottleneck's (it read 34 Mbit/s on a 27 Mbit/s
    // path when timed from the first complete block).
    let out = copy_on_path(
        &right,
        &["--rtt", "20ms", "--rate", "100M"],
        &["--force", "--no-fsync", "-P", "10", &f.to_string_lossy(), "198.18.0.2:p"],
        Duration::from_secs(90),
    );
    let (_, got, text) = verdict(&recs_ok(&out));
    let want = 100e6 / 8.0 * 0.965;
    assert!(got <= 1.02 * want && got >= 0.8 * want, "{got} vs {want}: {text}");
}

#[test]
fn tput_end_records_carry_a_verdict() {
    let _g = serial();
    let server = Server::start(&[]);
    let recs = tput_json(&server, &["-t", "2"]);
    let (limit, _, text) = verdict(&recs);
    // Loopback: the CPUs, never the network or a window.
    assert!(["sender_cpu", "receiver_cpu", "host_cpu"].contains(&limit.as_str()), "{limit}: {text}");
    let recs = tput_json(&server, &["-t", "2", "-b", "40M"]);
    let (limit, rate, text) = verdict(&recs);
    assert_eq!(limit, "application", "{text}");
    assert!((rate - 5e6).abs() < 0.5e6, "{rate}: {text}");
}

/// `--save` keeps a copy and a test in the archive as runs of their own; `wanperf report`
/// shows the copy's files, rate and verdict; `import wanperf` reads the same NDJSON back;
/// `--probe` measures each stage alone and checks the verdict against it.
#[test]
fn copies_and_tests_are_stored_reported_and_probed() {
    let _g = serial();
    let t = Tmp::new("save");
    let data = bytes(24 << 20, 11);
    write(&t.join("src/big.bin"), &data);
    std::fs::create_dir_all(t.join("root")).unwrap();
    let server = serve_root(&t.join("root"), &[]);
    let db = t.s("archive.sqlite");
    let out = copy(
        &server,
        &["-P", "2", "--probe", "--db", &db, &t.s("src/big.bin"), "127.0.0.1:in/"],
        Duration::from_secs(90),
    );
    let all = recs_ok(&out);
    assert_eq!(b3(&t.join("root/in/big.bin")), b3(&t.join("src/big.bin")));
    // The `saved` record comes after the end record.
    assert_eq!(all.last().unwrap()["event"], "saved", "{:?}", all.last());
    let run_id = all.last().unwrap()["run"].as_i64().unwrap();
    let recs = &all[..all.len() - 1];

    // --probe: both ends' ceilings, the network's, and a check of the verdict.
    let c = summary_copy(recs);
    let stages = |side: &str| -> Vec<String> {
        c[side]["probes"].as_array().unwrap().iter().map(|p| p["stage"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(stages("sender"), ["read", "hash"], "{c}");
    assert_eq!(stages("receiver"), ["write", "verify"], "{c}");
    for side in ["sender", "receiver"] {
        for p in c[side]["probes"].as_array().unwrap() {
            assert!(p["rate_bytes_s"].as_f64().is_some_and(|r| r > 1e6), "{side}: {p}");
        }
    }
    assert!(c["sender"]["probes"][0]["how"].as_str().unwrap().contains("24 MiB of `big.bin`"), "{c}");
    let v = &end(recs)["summary"]["verdict"];
    let check = &v["probe"];
    assert_eq!(check["ceilings"].as_array().unwrap().len(), 5, "{v}");
    let net = &check["ceilings"][4];
    assert!(net[0].as_str().unwrap().starts_with("the network") && net[1].as_f64().is_some_and(|r| r > 1e6), "{v}");
    assert!(check["text"].as_str().unwrap().starts_with("--probe"), "{v}");
    // On loopback the verdict is the CPU; every stage alone beats the copy, or the check says
    // which one did not.
    assert!(
        v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("alone (--probe): disk write")),
        "{v}"
    );
    // Nothing of the probes is left behind at either end.
    assert_eq!(tree(&t.join("root")).len(), 1, "{:?}", tree(&t.join("root")));
    assert!(std::fs::read_dir(t.join("src")).unwrap().count() == 1);

    // The archive holds the copy as a run of one cell of kind `copy`.
    let runs = run(&["runs", "--db", &db, "--json"], Duration::from_secs(10));
    ok(&runs);
    let line = String::from_utf8_lossy(&runs.stdout).lines().next().unwrap().to_string();
    let r: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (r["id"].as_i64(), r["study"].as_str(), r["status"].as_str()),
        (Some(run_id), Some("copy"), Some("complete")),
        "{r}"
    );
    let export = run(&["export", &run_id.to_string(), "--db", &db], Duration::from_secs(10));
    ok(&export);
    let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
    let cell = &doc["cells"][0];
    assert_eq!(cell["kind"], "copy", "{cell}");
    assert_eq!(cell["params"]["way"], "push");
    assert_eq!(cell["params"]["streams"], 2);
    assert_eq!(cell["summary"]["copy"]["bytes"], data.len() as u64);
    assert_eq!(cell["summary"]["verdict"]["text"], v["text"]);

    // The report draws it: the copies table and the verdict with its evidence.
    let html = t.join("copy.html");
    ok(&run(&["report", &run_id.to_string(), "--db", &db, "-o", html.to_str().unwrap()], Duration::from_secs(20)));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h3>Copies</h3>") && page.contains("What limited it"), "no copy tables");
    let limit = v["limit"].as_str().unwrap();
    assert!(page.contains(&format!("data-verdict=\"{limit}\"")), "no verdict {limit} in the report");
    assert!(page.contains("--probe"), "the probe's check is not in the report");

    // A test is stored the same way (kind `tput`), and `import wanperf` reads a copy's NDJSON.
    let port = server.port_s();
    let tput = run(&["tput", "127.0.0.1", "-p", &port, "-t", "1", "--save", "--db", &db], Duration::from_secs(30));
    ok(&tput);
    let said = String::from_utf8_lossy(&tput.stderr);
    assert!(said.contains(&format!("stored as run {}", run_id + 1)), "{said}");
    let nd = t.join("copy.ndjson");
    std::fs::write(&nd, &out.stdout).unwrap();
    let imp = run(&["import", "wanperf", nd.to_str().unwrap(), "--db", &db, "--json"], Duration::from_secs(10));
    ok(&imp);
    let imported: Value = serde_json::from_slice(&imp.stdout).unwrap();
    assert_eq!(imported["run"], run_id + 2, "{imported}");
    let export = run(&["export", &(run_id + 2).to_string(), "--db", &db], Duration::from_secs(10));
    let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(doc["cells"][0]["kind"], "copy");
    assert_eq!(doc["cells"][0]["summary"]["copy"]["bytes"], data.len() as u64);
    let kinds = run(&["export", &(run_id + 1).to_string(), "--db", &db], Duration::from_secs(10));
    let doc: Value = serde_json::from_slice(&kinds.stdout).unwrap();
    assert_eq!(doc["cells"][0]["kind"], "tput");
    assert!(doc["cells"][0]["summary"]["verdict"]["text"].is_string());

    // Bad input: text that is not wanperf's output, and a cut-short one, get one line each.
    std::fs::write(&nd, "not json\n").unwrap();
    let bad = run(&["import", "wanperf", nd.to_str().unwrap(), "--db", &db], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.trim().lines().count() == 1 && err.contains("line 1"), "{err}");
    let first = String::from_utf8_lossy(&out.stdout).lines().next().unwrap().to_string();
    std::fs::write(&nd, first).unwrap();
    let bad = run(&["import", "wanperf", nd.to_str().unwrap(), "--db", &db], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("no end record"), "{err}");
}

/// Destinations as scp, rsync and cp take them, both ways: a destination that is an existing
/// directory or ends in `/` receives the sources under their own names; otherwise a single
/// source (a file or a tree) takes the destination's name; several sources go into it.
#[test]
fn destinations_are_taken_as_scp_takes_them_both_ways() {
    let _g = serial();
    let t = Tmp::new("dest");
    let f = t.join("src/f.bin");
    write(&f, &bytes(300_000, 1));
    let g = t.join("src/g.bin");
    write(&g, &bytes(1000, 2));
    write(&t.join("src/tree/a/b.txt"), b"b\n");
    write(&t.join("src/tree/c.txt"), b"c\n");
    let root = t.join("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    write(&root.join("old.bin"), b"to be replaced");
    let server = serve_root(&root, &[]);
    let push = |srcs: &[&str], dst: &str| {
        let mut a: Vec<String> = srcs.iter().map(|s| t.s(&format!("src/{s}"))).collect();
        a.push(format!("127.0.0.1:{dst}"));
        recs_ok(&copy(&server, &a.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_secs(30)));
    };
    // Push: a new name, an existing directory, a trailing `/`, a tree, several, an existing file.
    push(&["f.bin"], "new.bin");
    assert_eq!(b3(&root.join("new.bin")), b3(&f));
    push(&["f.bin"], "dir");
    assert_eq!(b3(&root.join("dir/f.bin")), b3(&f));
    push(&["f.bin"], "sub/");
    assert_eq!(b3(&root.join("sub/f.bin")), b3(&f));
    push(&["tree"], "renamed");
    assert_eq!(tree(&root.join("renamed")), tree(&t.join("src/tree")));
    push(&["f.bin", "g.bin"], "multi");
    assert_eq!((b3(&root.join("multi/f.bin")), b3(&root.join("multi/g.bin"))), (b3(&f), b3(&g)));
    push(&["g.bin"], "old.bin");
    assert_eq!(b3(&root.join("old.bin")), b3(&g));
    push(&["f.bin"], "deep/er/name.bin");
    assert_eq!(b3(&root.join("deep/er/name.bin")), b3(&f));
    assert!(no_leftovers(&root));
    // Pull: the same cases on the client's side.
    let here = t.join("here");
    std::fs::create_dir_all(here.join("dir")).unwrap();
    let pull = |srcs: &[&str], dst: &str| {
        let mut a: Vec<String> = srcs.iter().map(|s| format!("127.0.0.1:{s}")).collect();
        a.push(if dst.is_empty() { t.s("here") } else { format!("{}/{dst}", t.s("here")) });
        recs_ok(&copy(&server, &a.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_secs(30)));
    };
    pull(&["new.bin"], "got.bin");
    assert_eq!(b3(&here.join("got.bin")), b3(&f));
    pull(&["new.bin"], "dir");
    assert_eq!(b3(&here.join("dir/new.bin")), b3(&f));
    pull(&["new.bin"], "sub/");
    assert_eq!(b3(&here.join("sub/new.bin")), b3(&f));
    pull(&["renamed"], "tree2");
    assert_eq!(tree(&here.join("tree2")), tree(&t.join("src/tree")));
    pull(&["new.bin", "old.bin"], "multi");
    assert_eq!((b3(&here.join("multi/new.bin")), b3(&here.join("multi/old.bin"))), (b3(&f), b3(&g)));
    pull(&["old.bin"], "got.bin");
    assert_eq!(b3(&here.join("got.bin")), b3(&g));
    assert!(no_leftovers(&here));
}
