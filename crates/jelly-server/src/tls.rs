//! TLS for the listener (rustls with the ring provider): HTTP/1.1, HTTP/2 and gRPC
//! all run over it, HTTP/2 chosen by ALPN.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use tokio_rustls::TlsAcceptor;

/// The `[tls]` section of the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file with the server's certificate chain (leaf first).
    pub cert: PathBuf,
    /// PEM file with its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Certificates or a key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls {what} {path}: {message}")]
    File {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error(
        "tls: the key in {key} does not belong to the first certificate in {cert} (the \
         chain must start with the server's own certificate, then its issuers)"
    )]
    Mismatch { cert: String, key: String },
    #[error("tls: {0}")]
    Config(#[from] rustls::Error),
}

fn file_error(what: &'static str, path: &Path, message: impl ToString) -> TlsError {
    TlsError::File {
        what,
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// A PEM file's error in words (the library's own prints markers as byte lists).
fn pem_message(e: &rustls::pki_types::pem::Error, wanted: &str) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        // The marker is the label (`CERTIFICATE`), without its dashes.
        E::MissingSectionEnd { end_marker } => format!(
            "a PEM section is not ended (no `-----END {}-----` line): the file is cut short",
            String::from_utf8_lossy(end_marker).trim()
        ),
        E::IllegalSectionStart { line } => format!(
            "a bad PEM section start: `{}`",
            String::from_utf8_lossy(line).trim()
        ),
        E::Base64Decode(m) => format!("a PEM section is not valid base64: {m}"),
        E::NoItemsFound => format!("no {wanted} in the file"),
        other => other.to_string(),
    }
}

/// Makes ring the process's default rustls crypto provider, unless one is installed
/// already. reqwest's TLS (built without a provider of its own, to avoid aws-lc's C
/// build) looks the default up when a client is built, and panics without one: call
/// this before building an HTTP client (the server, the mirrors and the CLI do).
///
/// ```
/// jelly_server::tls::install_crypto_provider();
/// assert!(rustls::crypto::CryptoProvider::get_default().is_some());
/// ```
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may win the race: either provider is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The certificates of a PEM file's bytes, to trust as roots in an HTTP client (the
/// CLI's `--cacert`, a mirror's `ca`). A file with none is an error too.
///
/// ```
/// assert!(jelly_server::tls::root_certificates(b"not a certificate").is_err());
/// ```
pub fn root_certificates(pem: &[u8]) -> Result<Vec<reqwest::Certificate>, String> {
    let certs = reqwest::Certificate::from_pem_bundle(pem)
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE in the file".into());
    }
    Ok(certs)
}

/// True when an HTTP client error is the server's certificate failing verification
/// (an unknown issuer, expired, another name): trying again cannot help, unlike a
/// refused or dropped connection.
pub fn is_certificate_error(e: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(t) = c.downcast_ref::<rustls::Error>() {
            return matches!(
                t,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            );
        }
        // rustls' error travels inside io::Errors, whose `source` skips what they wrap.
        cause = match c.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => c.source(),
        };
    }
    false
}

/// How long before its end a certificate is said to expire soon.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

/// The validity period of the server's own certificate (the chain's first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validity {
    /// Its `notBefore`, in Unix seconds.
    pub not_before: i64,
    /// Its `notAfter`, in Unix seconds.
    pub not_after: i64,
    /// `notBefore` as `openssl x509 -dates` would print it.
    pub not_before_text: String,
    /// `notAfter` likewise.
    pub not_after_text: String,
}

impl Validity {
    /// The validity of a DER certificate; `None` if it cannot be parsed (rustls
    /// then judges it).
    ///
    /// ```
    /// assert_eq!(jelly_server::tls::Validity::of_der(b"not DER"), None);
    /// ```
    pub fn of_der(der: &[u8]) -> Option<Validity> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let v = cert.validity();
        Some(Validity {
            not_before: v.not_before.timestamp(),
            not_after: v.not_after.timestamp(),
            not_before_text: v.not_before.to_string(),
            not_after_text: v.not_after.to_string(),
        })
    }

    /// What to warn about at `now` (Unix seconds): a certificate that has expired,
    /// is not valid yet, or expires within [`EXPIRY_WARNING_DAYS`]. Clients refuse the
    /// first two, and certificates are read at start only.
    ///
    /// ```
    /// use jelly_server::tls::Validity;
    /// const DAY: i64 = 86_400;
    /// let v = Validity { not_before: 0, not_after: 100 * DAY, not_before_text: "a".into(),
    ///                    not_after_text: "b".into() };
    /// assert!(v.warning(101 * DAY).unwrap().contains("expired on b"));
    /// assert!(v.warning(90 * DAY).unwrap().contains("expires on b (in 10 day(s))"));
    /// assert_eq!(v.warning(DAY), None);
    /// ```
    pub fn warning(&self, now: i64) -> Option<String> {
        const DAY: i64 = 86_400;
        if now > self.not_after {
            let days = (now - self.not_after) / DAY;
            Some(format!(
                "expired on {} ({days} day(s) ago): TLS clients will refuse it",
                self.not_after_text
            ))
        } else if now < self.not_before {
            Some(format!(
                "is not valid before {}: TLS clients will refuse it until then (is the clock \
                 right?)",
                self.not_before_text
            ))
        } else if self.not_after - now < EXPIRY_WARNING_DAYS * DAY {
            let days = (self.not_after - now) / DAY;
            Some(format!(
                "expires on {} (in {days} day(s)); certificates are read at start only: \
                 restart the server after renewing it",
                self.not_after_text
            ))
        } else {
            None
        }
    }
}

/// The validity of the first certificate of a `[tls]` section's chain (`None` if the
/// file holds none that parses: [`acceptor`] reports that).
pub fn certificate_validity(c: &TlsConfig) -> Option<Validity> {
    let first = CertificateDer::pem_file_iter(&c.cert).ok()?.next()?.ok()?;
    Validity::of_der(first.as_ref())
}

/// The acceptor for a `[tls]` section: reads the chain and the key and checks they
/// belong together.
pub fn acceptor(c: &TlsConfig) -> Result<TlsAcceptor, TlsError> {
    let cert_err = |e| file_error("cert", &c.cert, pem_message(&e, "CERTIFICATE"));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&c.cert)
        .map_err(cert_err)?
        .collect::<Result<_, _>>()
        .map_err(cert_err)?;
    if chain.is_empty() {
        return Err(file_error("cert", &c.cert, "no CERTIFICATE in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&c.key).map_err(|e| {
        file_error(
            "key",
            &c.key,
            pem_message(
                &e,
                "private key (PKCS#8, PKCS#1 or SEC1; an encrypted key must be decrypted \
                 first, e.g. `openssl pkey -in KEY -out PLAIN`)",
            ),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::Mismatch {
                cert: c.cert.display().to_string(),
                key: c.key.display().to_string(),
            },
            rustls::Error::General(m) if m.contains("failed to parse private key") => file_error(
                "key",
                &c.key,
                format!(
                    "{m} (ring takes RSA keys of 2048 bits or more, ECDSA P-256/P-384, Ed25519)"
                ),
            ),
            e => TlsError::Config(e),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
