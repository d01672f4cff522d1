//! Certificates made for one test, pinned by their SHA-256 fingerprint on the other end.
//!
//! No certificate authority is involved and none is needed: each end learns the other's
//! fingerprint through the control protocol (the client's inside the spec its key signs, the
//! server's in its answer), and the TLS 1.3 handshake proves each end holds the private key of
//! the certificate it showed. A certificate that is not the pinned one is refused, never
//! accepted with a warning.

use crate::QuicError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The SHA-256 of a certificate's DER bytes, as 64 lowercase hex digits.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` reads as a fingerprint (64 hex digits).
pub fn is_fingerprint(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A self-signed certificate (ECDSA P-256) made for one test, with its key.
pub struct TestCert {
    /// The certificate.
    pub cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
    /// Its fingerprint.
    pub fingerprint: String,
}

impl std::fmt::Debug for TestCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCert").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

impl TestCert {
    /// A fresh certificate and key.
    pub fn generate() -> Result<TestCert, QuicError> {
        let key = rcgen::KeyPair::generate().map_err(|e| QuicError::Tls(e.to_string()))?;
        let params =
            rcgen::CertificateParams::new(vec!["wanperf".to_string()]).map_err(|e| QuicError::Tls(e.to_string()))?;
        let cert = params.self_signed(&key).map_err(|e| QuicError::Tls(e.to_string()))?;
        let der = cert.der().clone();
        Ok(TestCert { fingerprint: fingerprint(&der), cert: der, key: PrivatePkcs8KeyDer::from(key.serialize_der()) })
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate pinned by its fingerprint, and the signatures TLS 1.3 checks with it: the
/// client's verifier of the server ([`ServerCertVerifier`]) and the server's of the client
/// ([`ClientCertVerifier`], which requires a certificate).
#[derive(Debug)]
pub struct Pinned {
    pin: String,
    whose: &'static str,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    fn new(pin: &str, whose: &'static str) -> Pinned {
        Pinned { pin: pin.to_string(), whose, provider: provider() }
    }

    fn check(&self, der: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        let got = fingerprint(der);
        if got == self.pin {
            Ok(())
        } else {
            Err(rustls::Error::General(format!(
                "the {}'s certificate {got} is not the one its test announced ({})",
                self.whose, self.pin
            )))
        }
    }

    fn tls12(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity).map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls12(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls13(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

impl ClientCertVerifier for Pinned {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity).map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls12(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls13(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

/// The client's TLS: TLS 1.3 only, our certificate shown, the server's pinned.
pub fn client_tls(ours: &TestCert, server_pin: &str) -> Result<rustls::ClientConfig, QuicError> {
    let verifier = Arc::new(Pinned::new(server_pin, "server"));
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| QuicError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(vec![ours.cert.clone()], ours.key())
        .map_err(|e| QuicError::Tls(e.to_string()))?;
    c.alpn_protocols = vec![crate::ALPN.to_vec()];
    Ok(c)
}

/// The server's TLS: TLS 1.3 only, our certificate shown, the client's pinned.
pub fn server_tls(ours: &TestCert, client_pin: &str) -> Result<rustls::ServerConfig, QuicError> {
    let verifier = Arc::new(Pinned::new(client_pin, "client"));
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| QuicError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![ours.cert.clone()], ours.key())
        .map_err(|e| QuicError::Tls(e.to_string()))?;
    c.alpn_protocols = vec![crate::ALPN.to_vec()];
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_the_sha256_of_the_certificate_in_hex() {
        // SHA-256("abc"), FIPS 180-2's example.
        assert_eq!(fingerprint(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let c = TestCert::generate().unwrap();
        assert!(is_fingerprint(&c.fingerprint));
        assert_eq!(c.fingerprint, fingerprint(&c.cert));
        assert_ne!(c.fingerprint, TestCert::generate().unwrap().fingerprint, "a fresh key each time");
        assert!(!is_fingerprint("abc"));
    }

    #[test]
    fn only_the_pinned_certificate_passes() {
        let (a, b) = (TestCert::generate().unwrap(), TestCert::generate().unwrap());
        let v = Pinned::new(&a.fingerprint, "server");
        let name = ServerName::try_from("wanperf").unwrap();
        assert!(ServerCertVerifier::verify_server_cert(&v, &a.cert, &[], &name, &[], UnixTime::now()).is_ok());
        let err = ServerCertVerifier::verify_server_cert(&v, &b.cert, &[], &name, &[], UnixTime::now()).unwrap_err();
        assert!(err.to_string().contains("not the one its test announced"), "{err}");
        let c = Pinned::new(&b.fingerprint, "client");
        assert!(ClientCertVerifier::verify_client_cert(&c, &b.cert, &[], UnixTime::now()).is_ok());
        assert!(ClientCertVerifier::verify_client_cert(&c, &a.cert, &[], UnixTime::now()).is_err());
        assert!(c.client_auth_mandatory(), "a client without a certificate is refused");
        assert!(client_tls(&a, &b.fingerprint).is_ok() && server_tls(&b, &a.fingerprint).is_ok());
    }
}
