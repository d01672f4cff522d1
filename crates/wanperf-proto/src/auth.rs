//! Keys for `serve --authorized-keys`: Ed25519 (ed25519-dalek), a challenge–response inside the
//! control handshake, pure functions of bytes (no files, no randomness: the caller passes seeds
//! and nonces in).
//!
//! The exchange, when the server has authorized keys:
//! 1. client → `Request { spec }` (as without keys);
//! 2. server → `Challenge { nonce }`, 32 fresh random bytes per connection;
//! 3. client → `Auth { key, spec, signature }`: its public key, the exact JSON text of the
//!    spec it requested, and an Ed25519 signature over `wanperf-auth-v1\0 ‖ nonce ‖ spec`;
//! 4. the server admits the test only if the key is listed, the signature verifies, and the
//!    signed spec is the requested one. A recorded handshake fails on a new connection (new
//!    nonce); a spec changed in transit fails the signature or the comparison.
//!
//! Text formats (one line each, like OpenSSH's): a public key is
//! `wanperf-ed25519 BASE64(32 bytes) [comment]`; a private key file holds
//! `wanperf-ed25519-private BASE64(32-byte seed) [comment]`; an authorized-keys file holds
//! public keys, one per line, with blank lines and `#` comments.
//!
//! ```
//! use wanperf_proto::auth::{AuthorizedKeys, PrivateKey};
//! use wanperf_proto::msg::TestSpec;
//! let key = PrivateKey::from_seed([7; 32], "alice@lab");
//! let keys = AuthorizedKeys::parse(&key.public().to_line()).unwrap();
//! let spec = serde_json::to_string(&TestSpec::tcp(1, 5.0)).unwrap();
//! let nonce = [1; 32];
//! let sig = key.sign(&nonce, &spec);
//! assert_eq!(keys.verify(&key.public().to_line(), &sig, &nonce, &spec).unwrap().comment, "alice@lab");
//! assert!(keys.verify(&key.public().to_line(), &sig, &[2; 32], &spec).is_err()); // replayed
//! ```

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use thiserror::Error;

/// The public key's type word.
pub const KEY_TYPE: &str = "wanperf-ed25519";
/// The private key's type word.
pub const PRIVATE_KEY_TYPE: &str = "wanperf-ed25519-private";
/// Domain separation: a wanperf handshake signature is never valid for anything else.
pub const CONTEXT: &[u8] = b"wanperf-auth-v1\0";
/// Bytes in a challenge nonce.
pub const NONCE_LEN: usize = 32;

/// A key or key file that cannot be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// Not a key of this type.
    #[error("line {line}: not a {what} (expected `{want} BASE64 [comment]`)")]
    Format {
        /// 1-based line.
        line: usize,
        /// What was expected.
        what: &'static str,
        /// The type word expected.
        want: &'static str,
    },
    /// The base64 or the key bytes are wrong.
    #[error("line {line}: {why}")]
    Bytes {
        /// 1-based line.
        line: usize,
        /// Why.
        why: String,
    },
    /// A file without a single key.
    #[error("no key in it")]
    Empty,
}

/// Why a handshake's proof was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The client offered no key.
    #[error("this server requires a key: the client must give --key FILE (make one with `wanperf keygen`)")]
    NoKey,
    /// The offered key is malformed.
    #[error("the client's key is malformed: {0}")]
    BadKey(String),
    /// The key is not in the server's authorized keys.
    #[error("key {0} is not in this server's authorized keys")]
    NotAuthorized(String),
    /// The signature does not verify over this connection's nonce and the spec.
    #[error("the handshake signature does not verify (a replayed or altered handshake)")]
    BadSignature,
    /// The signed spec is not the requested one.
    #[error("the signed test differs from the requested one (altered in transit)")]
    SpecMismatch,
}

/// A public key with its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    /// Free text after the key (who it is).
    pub comment: String,
}

impl PublicKey {
    /// Parses `wanperf-ed25519 BASE64 [comment]`.
    pub fn parse(line: &str) -> Result<PublicKey, KeyError> {
        parse_line(line, 1)
    }

    /// The one-line text form.
    pub fn to_line(&self) -> String {
        let b = B64.encode(self.key.as_bytes());
        if self.comment.is_empty() {
            format!("{KEY_TYPE} {b}")
        } else {
            format!("{KEY_TYPE} {b} {}", self.comment)
        }
    }

    /// Whether `signature` (base64, from [`PrivateKey::sign_message`]) is this key's over
    /// `message` (strict verification).
    pub fn verify_message(&self, message: &[u8], signature: &str) -> Result<(), AuthError> {
        if message.starts_with(CONTEXT) {
            return Err(AuthError::BadSignature);
        }
        let sig = B64.decode(signature).map_err(|_| AuthError::BadSignature)?;
        let sig = Signature::from_slice(&sig).map_err(|_| AuthError::BadSignature)?;
        self.key.verify_strict(message, &sig).map_err(|_| AuthError::BadSignature)
    }

    /// A short name for logs: the comment, or the key's first base64 characters.
    pub fn name(&self) -> String {
        if self.comment.is_empty() {
            format!("{}…", &B64.encode(self.key.as_bytes())[..12])
        } else {
            self.comment.clone()
        }
    }
}

fn parse_line(text: &str, line: usize) -> Result<PublicKey, KeyError> {
    let mut words = text.split_whitespace();
    if words.next() != Some(KEY_TYPE) {
        return Err(KeyError::Format { line, what: "wanperf public key", want: KEY_TYPE });
    }
    let b = words.next().ok_or(KeyError::Format { line, what: "wanperf public key", want: KEY_TYPE })?;
    let bytes: [u8; 32] = decode32(b, line)?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|_| KeyError::Bytes { line, why: "not a valid Ed25519 public key".into() })?;
    Ok(PublicKey { key, comment: words.collect::<Vec<_>>().join(" ") })
}

fn decode32(b: &str, line: usize) -> Result<[u8; 32], KeyError> {
    let v = B64.decode(b).map_err(|e| KeyError::Bytes { line, why: format!("bad base64: {e}") })?;
    v.try_into()
        .map_err(|v: Vec<u8>| KeyError::Bytes { line, why: format!("{} bytes, an Ed25519 key has 32", v.len()) })
}

/// A private key with its comment.
pub struct PrivateKey {
    key: SigningKey,
    /// Free text after the key.
    pub comment: String,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.public().to_line())
    }
}

impl PrivateKey {
    /// The key from a 32-byte seed (the caller draws it from the OS's random source).
    pub fn from_seed(seed: [u8; 32], comment: &str) -> PrivateKey {
        PrivateKey {
            key: SigningKey::from_bytes(&seed),
            comment: comment.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }

    /// Parses a private key file's text (its first non-comment line).
    pub fn parse(text: &str) -> Result<PrivateKey, KeyError> {
        let (n, l) = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .find(|(_, l)| !l.is_empty() && !l.starts_with('#'))
            .ok_or(KeyError::Empty)?;
        let mut words = l.split_whitespace();
        if words.next() != Some(PRIVATE_KEY_TYPE) {
            return Err(KeyError::Format { line: n, what: "wanperf private key", want: PRIVATE_KEY_TYPE });
        }
        let b =
            words.next().ok_or(KeyError::Format { line: n, what: "wanperf private key", want: PRIVATE_KEY_TYPE })?;
        let seed = decode32(b, n)?;
        Ok(PrivateKey { key: SigningKey::from_bytes(&seed), comment: words.collect::<Vec<_>>().join(" ") })
    }

    /// The private key file's text.
    pub fn to_text(&self) -> String {
        let b = B64.encode(self.key.to_bytes());
        let c = if self.comment.is_empty() { String::new() } else { format!(" {}", self.comment) };
        format!("# wanperf private key: keep it secret (mode 0600)\n{PRIVATE_KEY_TYPE} {b}{c}\n")
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey { key: self.key.verifying_key(), comment: self.comment.clone() }
    }

    /// Signs a message of another protocol (base64). The message must begin with that
    /// protocol's own context string, never with [`CONTEXT`], so that no signature made for
    /// one protocol is valid in another (the monitoring mesh signs `wanperf-mesh/1\n…`).
    pub fn sign_message(&self, message: &[u8]) -> String {
        debug_assert!(!message.starts_with(CONTEXT));
        B64.encode(self.key.sign(message).to_bytes())
    }

    /// Signs the handshake: base64 of the Ed25519 signature over [`signed_message`].
    pub fn sign(&self, nonce: &[u8; NONCE_LEN], spec_json: &str) -> String {
        B64.encode(self.key.sign(&signed_message(nonce, spec_json)).to_bytes())
    }
}

/// Hex text of a nonce (as the `Challenge` carries it).
pub fn nonce_hex(n: &[u8; NONCE_LEN]) -> String {
    n.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a nonce from hex.
pub fn nonce_from_hex(s: &str) -> Option<[u8; NONCE_LEN]> {
    // Hex digits only: from_str_radix alone would also take a `+` sign in a pair.
    if s.len() != 2 * NONCE_LEN || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut n = [0u8; NONCE_LEN];
    for (i, b) in n.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(n)
}

/// What the client signs: the context string, the server's nonce, the spec's JSON text.
pub fn signed_message(nonce: &[u8; NONCE_LEN], spec_json: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(CONTEXT.len() + NONCE_LEN + spec_json.len());
    m.extend_from_slice(CONTEXT);
    m.extend_from_slice(nonce);
    m.extend_from_slice(spec_json.as_bytes());
    m
}

/// The keys a server accepts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorizedKeys {
    keys: Vec<PublicKey>,
}

impl AuthorizedKeys {
    /// Parses an authorized-keys file: one public key per line, blank lines and `#` comments
    /// allowed. A file without any key is an error (a server must not start open by mistake).
    pub fn parse(text: &str) -> Result<AuthorizedKeys, KeyError> {
        let mut keys = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            keys.push(parse_line(l, i + 1)?);
        }
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(AuthorizedKeys { keys })
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks a handshake's proof: `key` is listed, and `signature` (base64) verifies over
    /// this connection's `nonce` and `spec_json`. Returns the listed key (with its comment).
    pub fn verify(
        &self,
        key: &str,
        signature: &str,
        nonce: &[u8; NONCE_LEN],
        spec_json: &str,
    ) -> Result<&PublicKey, AuthError> {
        let offered = PublicKey::parse(key).map_err(|e| AuthError::BadKey(e.to_string()))?;
        let listed =
            self.keys.iter().find(|k| k.key == offered.key).ok_or_else(|| AuthError::NotAuthorized(offered.name()))?;
        let sig = B64.decode(signature).map_err(|_| AuthError::BadSignature)?;
        let sig = Signature::from_slice(&sig).map_err(|_| AuthError::BadSignature)?;
        // Strict verification: no malleable or small-order-key signatures.
        listed.key.verify_strict(&signed_message(nonce, spec_json), &sig).map_err(|_| AuthError::BadSignature)?;
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> String {
        serde_json::to_string(&crate::msg::TestSpec::tcp(2, 1.0)).unwrap()
    }

    #[test]
    fn nonces_are_exactly_64_hex_digits() {
        let n = [0xa9; NONCE_LEN];
        assert_eq!(nonce_from_hex(&nonce_hex(&n)), Some(n));
        assert_eq!(nonce_from_hex(&"+9".repeat(NONCE_LEN)), None); // found by the auth_keys fuzzer
        assert_eq!(nonce_from_hex(&"A9".repeat(NONCE_LEN)), Some(n));
        assert_eq!(nonce_from_hex(&"a9".repeat(NONCE_LEN - 1)), None);
        assert_eq!(nonce_from_hex(&"é".repeat(NONCE_LEN)), None);
    }

    #[test]
    fn keys_round_trip_through_text() {
        let k = PrivateKey::from_seed([9; 32], "bob  at\tlab");
        assert_eq!(k.comment, "bob at lab");
        let again = PrivateKey::parse(&k.to_text()).unwrap();
        assert_eq!(again.public(), k.public());
        assert_eq!(PublicKey::parse(&k.public().to_line()).unwrap(), k.public());
    }

    #[test]
    fn authorized_keys_file() {
        let a = PrivateKey::from_seed([1; 32], "a").public().to_line();
        let b = PrivateKey::from_seed([2; 32], "").public().to_line();
        let keys = AuthorizedKeys::parse(&format!("# lab hosts\n\n{a}\n  {b}  \n")).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(AuthorizedKeys::parse("# nothing\n\n"), Err(KeyError::Empty));
        let bad = AuthorizedKeys::parse(&format!("{a}\nssh-ed25519 AAAA x\n")).unwrap_err();
        assert!(bad.to_string().starts_with("line 2: not a wanperf public key"), "{bad}");
        let bad = AuthorizedKeys::parse("wanperf-ed25519 AAAA\n").unwrap_err();
        assert!(bad.to_string().contains("line 1") && bad.to_string().contains("32"), "{bad}");
        let bad = AuthorizedKeys::parse("wanperf-ed25519 !!!\n").unwrap_err();
        assert!(bad.to_string().contains("bad base64"), "{bad}");
    }

    #[test]
    fn messages_of_other_protocols_verify_only_with_their_key_and_bytes() {
        let k = PrivateKey::from_seed([3; 32], "k");
        let other = PrivateKey::from_seed([4; 32], "other");
        let m = b"wanperf-mesh/1\na\n1\n{}";
        let sig = k.sign_message(m);
        assert!(k.public().verify_message(m, &sig).is_ok());
        assert_eq!(other.public().verify_message(m, &sig), Err(AuthError::BadSignature));
        assert_eq!(k.public().verify_message(b"wanperf-mesh/1\na\n2\n{}", &sig), Err(AuthError::BadSignature));
        assert_eq!(k.public().verify_message(m, "not base64!"), Err(AuthError::BadSignature));
        // A handshake signature is never accepted as another protocol's message.
        let hs = signed_message(&[5; NONCE_LEN], "{}");
        assert_eq!(k.public().verify_message(&hs, &k.sign(&[5; NONCE_LEN], "{}")), Err(AuthError::BadSignature));
    }

    #[test]
    fn verify_accepts_only_the_listed_key_this_nonce_and_this_spec() {
        let k = PrivateKey::from_seed([3; 32], "k");
        let other = PrivateKey::from_seed([4; 32], "other");
        let keys = AuthorizedKeys::parse(&k.public().to_line()).unwrap();
        let (n1, n2) = ([5; NONCE_LEN], [6; NONCE_LEN]);
        let s = spec();
        let sig = k.sign(&n1, &s);
        assert!(keys.verify(&k.public().to_line(), &sig, &n1, &s).is_ok());
        // Replay: the same proof against another connection's nonce.
        assert_eq!(keys.verify(&k.public().to_line(), &sig, &n2, &s), Err(AuthError::BadSignature));
        // Tampered spec.
        let t = s.replace("\"streams\":2", "\"streams\":3");
        assert_ne!(t, s);
        assert_eq!(keys.verify(&k.public().to_line(), &sig, &n1, &t), Err(AuthError::BadSignature));
        // A key not listed, even with a valid signature of its own.
        let osig = other.sign(&n1, &s);
        assert_eq!(
            keys.verify(&other.public().to_line(), &osig, &n1, &s),
            Err(AuthError::NotAuthorized("other".into()))
        );
        // The listed key with another key's signature.
        assert_eq!(keys.verify(&k.public().to_line(), &osig, &n1, &s), Err(AuthError::BadSignature));
        // Garbage.
        assert!(matches!(keys.verify("x", &sig, &n1, &s), Err(AuthError::BadKey(_))));
        assert_eq!(keys.verify(&k.public().to_line(), "not base64!", &n1, &s), Err(AuthError::BadSignature));
        assert_eq!(keys.verify(&k.public().to_line(), "AAAA", &n1, &s), Err(AuthError::BadSignature));
    }
}
