//! Key text from outside: an authorized-keys file (`serve --authorized-keys FILE`), a private
//! key file (`--key FILE`), the public key line a client offers in `Auth`, and the nonce hex
//! a server's `Challenge` carries.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use wanperf_proto::auth::{nonce_from_hex, nonce_hex, AuthorizedKeys, PrivateKey, PublicKey};

/// A server's key list (one fixed key) to check the fuzzer's proofs against.
fn listed() -> &'static AuthorizedKeys {
    static KEYS: OnceLock<AuthorizedKeys> = OnceLock::new();
    KEYS.get_or_init(|| AuthorizedKeys::parse(&PrivateKey::from_seed([7; 32], "fuzz").public().to_line()).unwrap())
}

/// Whatever public key parses prints as a line that parses to the same key and comment.
fn check_public(k: &PublicKey) {
    let line = k.to_line();
    assert_eq!(PublicKey::parse(&line).as_ref(), Ok(k), "{line}");
    assert!(!line.contains('\n'));
    let one = AuthorizedKeys::parse(&line).expect("a printed key is an authorized-keys file");
    assert_eq!(one.len(), 1);
    let _ = k.name();
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };

    // An authorized-keys file: every key line in it is a public key on its own.
    if let Ok(keys) = AuthorizedKeys::parse(s) {
        assert!(!keys.is_empty());
        let mut n = 0;
        for l in s.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            check_public(&PublicKey::parse(l).expect("a line of a parsed file parses alone"));
            n += 1;
        }
        assert_eq!(keys.len(), n);
        // Its verify on the fuzzer's first three lines (key, signature, spec): no panic.
        let mut ls = s.lines();
        let (k, sig, spec) = (ls.next().unwrap_or(""), ls.next().unwrap_or(""), ls.next().unwrap_or(""));
        let _ = keys.verify(k, sig, &[9; 32], spec);
    }

    // One public key line (as `Auth` carries it).
    if let Ok(k) = PublicKey::parse(s) {
        check_public(&k);
    }

    // A private key file: its text parses back to the same key, and what it signs verifies
    // against its public key (and only over the same nonce).
    if let Ok(p) = PrivateKey::parse(s) {
        let text = p.to_text();
        let again = PrivateKey::parse(&text).expect("a printed private key parses");
        assert_eq!(again.public(), p.public(), "{text}");
        assert_eq!(again.comment, p.comment);
        check_public(&p.public());
        let line = p.public().to_line();
        let keys = AuthorizedKeys::parse(&line).unwrap();
        let sig = p.sign(&[9; 32], s);
        assert_eq!(keys.verify(&line, &sig, &[9; 32], s).map(|k| k.comment.clone()), Ok(p.comment.clone()));
        assert!(keys.verify(&line, &sig, &[8; 32], s).is_err());
    }

    // The fuzzer's text as an offered key and signature against a fixed list: never admitted
    // (it cannot forge the listed key's signature), never a panic.
    let mut ls = s.splitn(3, '\n');
    let (k, sig, spec) = (ls.next().unwrap_or(""), ls.next().unwrap_or(""), ls.next().unwrap_or(""));
    assert!(listed().verify(k, sig, &[9; 32], spec).is_err());
    assert!(listed().verify(s, s, &[9; 32], s).is_err());

    // A challenge nonce.
    if let Some(n) = nonce_from_hex(s) {
        assert_eq!(s.len(), 64);
        assert_eq!(nonce_from_hex(&nonce_hex(&n)), Some(n));
    }
});
