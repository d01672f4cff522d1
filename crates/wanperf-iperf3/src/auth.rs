//! iperf3's authentication token: the client encrypts "user, password, time" with the
//! server's RSA public key and sends it base64-encoded as `authtoken` in its parameters.
//!
//! Servers before 3.17 decrypt with PKCS#1 v1.5 padding; 3.17 and later use OAEP (SHA-1,
//! OpenSSL's default) unless started with `--use-pkcs1-padding`. The server checks the time
//! against its clock (10 s of skew by default) and the user against a file of
//! `user,sha256("{user}password")` lines.

use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::rand_core::CryptoRngCore;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPublicKey};
use sha2::Digest as _;
use thiserror::Error;

pub use rsa::rand_core::OsRng;
pub use rsa::RsaPublicKey as PublicKey;

/// RSA padding of the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// OAEP with SHA-1 (iperf3 3.17 and later).
    Oaep,
    /// PKCS#1 v1.5 (iperf3 before 3.17, or servers started with --use-pkcs1-padding).
    Pkcs1,
}

/// Why a token could not be made.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The key file is not an RSA public key in PEM.
    #[error(
        "not an RSA public key in PEM (expected -----BEGIN PUBLIC KEY----- or -----BEGIN RSA PUBLIC KEY-----): {0}"
    )]
    Key(String),
    /// The user name or password cannot be written into the token.
    #[error("{0}")]
    Credentials(&'static str),
    /// Encryption failed (e.g. a key too small for the text).
    #[error("RSA encryption failed: {0}")]
    Encrypt(String),
}

/// Reads a PEM public key (SubjectPublicKeyInfo, as `openssl rsa -pubout` writes, or PKCS#1).
pub fn public_key(pem: &str) -> Result<RsaPublicKey, AuthError> {
    RsaPublicKey::from_public_key_pem(pem.trim())
        .or_else(|e| RsaPublicKey::from_pkcs1_pem(pem.trim()).map_err(|_| AuthError::Key(e.to_string())))
}

/// The token's clear text.
pub fn token_text(user: &str, password: &str, unix_s: i64) -> String {
    format!("user: {user}\npwd:  {password}\nts:   {unix_s}")
}

/// The `authtoken` parameter for `user` and `password` at `unix_s`.
pub fn authtoken(
    rng: &mut impl CryptoRngCore,
    key: &RsaPublicKey,
    user: &str,
    password: &str,
    unix_s: i64,
    padding: Padding,
) -> Result<String, AuthError> {
    // The server reads the text back with a scanf of "%s" fields: whitespace would cut them.
    if user.is_empty() || user.chars().any(char::is_whitespace) || user.contains(',') {
        return Err(AuthError::Credentials("the iperf3 user name must be non-empty, without spaces or commas"));
    }
    if password.is_empty() || password.chars().any(char::is_whitespace) {
        return Err(AuthError::Credentials("the iperf3 password must be non-empty and without spaces"));
    }
    let text = token_text(user, password, unix_s);
    let sealed = match padding {
        Padding::Oaep => key.encrypt(rng, Oaep::new::<sha1::Sha1>(), text.as_bytes()),
        Padding::Pkcs1 => key.encrypt(rng, Pkcs1v15Encrypt, text.as_bytes()),
    }
    .map_err(|e| AuthError::Encrypt(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
}

/// A line of iperf3's credentials file for `user` and `password`.
pub fn credentials_line(user: &str, password: &str) -> String {
    let hash = sha2::Sha256::digest(format!("{{{user}}}{password}").as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("{user},{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::pkcs8::{EncodePublicKey, LineEnding};
    use rsa::RsaPrivateKey;

    #[test]
    fn tokens_decrypt_to_iperf3s_text_with_either_padding() {
        let mut rng = rsa::rand_core::OsRng;
        let private = RsaPrivateKey::new(&mut rng, 1024).unwrap();
        let pem = private.to_public_key().to_public_key_pem(LineEnding::LF).unwrap();
        let key = public_key(&pem).unwrap();
        for padding in [Padding::Oaep, Padding::Pkcs1] {
            let tok = authtoken(&mut rng, &key, "mary", "s3cret", 1_700_000_000, padding).unwrap();
            let sealed = base64::engine::general_purpose::STANDARD.decode(tok).unwrap();
            let clear = match padding {
                Padding::Oaep => private.decrypt(Oaep::new::<sha1::Sha1>(), &sealed),
                Padding::Pkcs1 => private.decrypt(Pkcs1v15Encrypt, &sealed),
            }
            .unwrap();
            assert_eq!(clear, b"user: mary\npwd:  s3cret\nts:   1700000000");
        }
    }

    #[test]
    fn bad_keys_and_credentials_are_one_line_errors() {
        let e = public_key("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----").unwrap_err();
        assert!(e.to_string().starts_with("not an RSA public key"));
        let mut rng = rsa::rand_core::OsRng;
        let key = RsaPrivateKey::new(&mut rng, 1024).unwrap().to_public_key();
        assert!(authtoken(&mut rng, &key, "two words", "x", 0, Padding::Oaep).is_err());
        assert!(authtoken(&mut rng, &key, "u", "", 0, Padding::Oaep).is_err());
    }

    #[test]
    fn credentials_lines_hash_the_salted_password() {
        // sha256("{mary}s3cret"), computed independently with sha256sum.
        let line = credentials_line("mary", "s3cret");
        assert_eq!(line, "mary,3897750636726b329d77d33b863564270408d52498a962a92107ea9dffba001d");
    }
}
