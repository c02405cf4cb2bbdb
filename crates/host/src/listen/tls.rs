//! TLS termination: the rustls server configuration a snapshot carries, built from
//! `[server.tls]`, and the certificate choice by SNI.
//!
//! ```text
//!  ClientHello ─▶ SNI name? ── exact name ─▶ its certificate
//!                    │     └── *.parent  ─▶ the wildcard's
//!                    └ none, or no match ──▶ the default certificate
//! ```
//!
//! rustls' own `ResolvesServerCertUsingSni` matches exact names only and fails a handshake
//! without SNI, hence [`Certificates`]. The names come from each certificate's subject
//! alternative names. The session cache and the ticket keys ([`Sessions`]) belong to the
//! gateway, not to a snapshot, so a reload (a new certificate, say) keeps every session
//! resumable.
//!
//! A session is bound to the client-certificate policy it was made under, as a session-id
//! context binds it in OpenSSL and NGINX: every ticket and cache key carries a digest of
//! `client_auth` (off, or required or optional, and every authority's certificate), and a
//! session made under another policy is not found. A reload that turns client certificates
//! on, or removes an authority, therefore makes each client prove itself again, while one
//! that changes only certificates keeps resumption.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{CertificateConfig, ConfigError, Loaded, TlsConfig, TlsVersion};

/// The protocols offered by ALPN, most preferred first.
pub(crate) const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// What makes sessions resumable, kept for the gateway's life.
#[derive(Debug)]
pub(crate) struct Sessions {
    /// Encrypts stateless tickets; its keys rotate every 6 hours.
    ticketer: Arc<dyn ProducesTickets>,
    /// Sessions remembered by id (TLS 1.2) and stateful tickets.
    cache: Arc<dyn StoresServerSessions>,
}

impl Sessions {
    /// A ticketer and a cache of `size` sessions (none when 0).
    pub(crate) fn new(size: usize) -> Result<Self, rustls::Error> {
        let cache: Arc<dyn StoresServerSessions> = if size == 0 {
            Arc::new(rustls::server::NoServerSessionStorage {})
        } else {
            rustls::server::ServerSessionMemoryCache::new(size)
        };
        Ok(Self { ticketer: rustls::crypto::ring::Ticketer::new()?, cache })
    }
}

/// The server configuration for `tls`: every certificate read and checked (its key matches,
/// it is valid now), client certificate authorities loaded, ALPN `h2` and `http/1.1`.
pub(crate) fn server_config(
    loaded: &Loaded,
    tls: &TlsConfig,
    sessions: &Sessions,
) -> Result<Arc<ServerConfig>, ConfigError> {
    let file = &loaded.file;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificates = Certificates::load(loaded, &tls.certificates, &provider)?;
    let versions: Vec<&'static SupportedProtocolVersion> = tls
        .versions
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ConfigError::caused(file, "server.tls.versions", e))?;
    let mut policy = Policy::new();
    let builder = match &tls.client_auth {
        None => builder.with_no_client_auth(),
        Some(auth) => {
            let key = "server.tls.client_auth.ca";
            let path = loaded.resolve(&auth.ca);
            let mut roots = rustls::RootCertStore::empty();
            let authorities = read_chain(&path).map_err(|e| ConfigError::caused(file, key, e))?;
            policy.client_auth(auth.required, &authorities);
            for cert in authorities {
                roots.add(cert).map_err(|e| {
                    ConfigError::caused(file, key, FileError::new(&path, e.to_string()))
                })?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            let verifier = if auth.required { verifier } else { verifier.allow_unauthenticated() };
            let verifier = verifier.build().map_err(|e| {
                ConfigError::caused(file, key, FileError::new(&path, e.to_string()))
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(certificates));
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    let context = policy.finish();
    config.session_storage = Arc::new(BoundCache { inner: sessions.cache.clone(), context });
    if tls.tickets {
        config.ticketer = Arc::new(BoundTickets { inner: sessions.ticketer.clone(), context });
    }
    Ok(Arc::new(config))
}

/// The digest that names a client-certificate policy: what a session is bound to.
type Context = [u8; 16];

/// Builds a policy's [`Context`].
struct Policy(ring::digest::Context);

impl Policy {
    /// No client certificates.
    fn new() -> Self {
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        digest.update(b"edgegate tls session context v1\0");
        Self(digest)
    }

    /// Client certificates that chain to `authorities`, required or not.
    fn client_auth(&mut self, required: bool, authorities: &[CertificateDer<'_>]) {
        self.0.update(&[1, u8::from(required)]);
        for der in authorities {
            self.0.update(&(der.len() as u64).to_be_bytes());
            self.0.update(der);
        }
    }

    fn finish(self) -> Context {
        let digest = self.0.finish();
        let mut context = Context::default();
        let len = context.len();
        context.copy_from_slice(&digest.as_ref()[..len]);
        context
    }
}

/// The gateway's ticket keys, for sessions of one policy: the context is sealed inside each
/// ticket, and a ticket that does not carry this one is not resumed.
#[derive(Debug)]
struct BoundTickets {
    inner: Arc<dyn ProducesTickets>,
    context: Context,
}

impl ProducesTickets for BoundTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.inner.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(&[&self.context[..], plain].concat())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let plain = self.inner.decrypt(cipher)?;
        plain.strip_prefix(&self.context[..]).map(<[u8]>::to_vec)
    }
}

/// The gateway's session cache, for sessions of one policy: each key is prefixed with the
/// context, so a session stored under another policy is not found.
#[derive(Debug)]
struct BoundCache {
    inner: Arc<dyn StoresServerSessions>,
    context: Context,
}

impl BoundCache {
    fn key(&self, id: &[u8]) -> Vec<u8> {
        [&self.context[..], id].concat()
    }
}

impl StoresServerSessions for BoundCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(self.key(&key), value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(&self.key(key))
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.take(&self.key(key))
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

/// The certificates by the names they carry.
#[derive(Debug)]
struct Certificates {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com`'s certificate under `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
}

impl Certificates {
    fn load(
        loaded: &Loaded,
        configs: &[CertificateConfig],
        provider: &CryptoProvider,
    ) -> Result<Self, ConfigError> {
        let mut exact = HashMap::new();
        let mut wildcard = HashMap::new();
        let mut default = None;
        for (i, config) in configs.iter().enumerate() {
            let at = |field: &str| format!("server.tls.certificates[{i}].{field}");
            let cert = loaded.resolve(&config.cert);
            let key = loaded.resolve(&config.key);
            let chain =
                read_chain(&cert).map_err(|e| ConfigError::caused(&loaded.file, at("cert"), e))?;
            let leaf = Leaf::parse(&cert, &chain[0])
                .map_err(|e| ConfigError::caused(&loaded.file, at("cert"), e))?;
            let signing = PrivateKeyDer::from_pem_file(&key)
                .map_err(|e| FileError::new(&key, pem_error(e)))
                .and_then(|der| {
                    provider
                        .key_provider
                        .load_private_key(der)
                        .map_err(|e| FileError::new(&key, e.to_string()))
                })
                .map_err(|e| ConfigError::caused(&loaded.file, at("key"), e))?;
            let certified = Arc::new(CertifiedKey::new(chain, signing));
            certified.keys_match().map_err(|_| {
                ConfigError::caused(
                    &loaded.file,
                    at("key"),
                    FileError::new(
                        &key,
                        format!("is not the key of the certificate in {}", cert.display()),
                    ),
                )
            })?;
            for name in &leaf.names {
                match name.strip_prefix("*.") {
                    Some(parent) => wildcard.entry(parent.to_owned()),
                    None => exact.entry(name.clone()),
                }
                .or_insert_with(|| certified.clone());
            }
            if config.default || default.is_none() {
                default = Some(certified);
            }
        }
        let default = default.expect("validated: at least one certificate");
        Ok(Self { exact, wildcard, default })
    }

    fn choose(&self, name: Option<&str>) -> &Arc<CertifiedKey> {
        let Some(name) = name.map(str::to_ascii_lowercase) else { return &self.default };
        if let Some(cert) = self.exact.get(&name) {
            return cert;
        }
        name.split_once('.')
            .and_then(|(_, parent)| self.wildcard.get(parent))
            .unwrap_or(&self.default)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.choose(hello.server_name()).clone())
    }
}

/// What edgegate reads from a leaf certificate.
struct Leaf {
    /// Its DNS names, lower case (wildcards as `*.example.com`).
    names: Vec<String>,
}

impl Leaf {
    /// Parses the leaf and refuses one that is not valid now.
    fn parse(path: &Path, der: &CertificateDer<'_>) -> Result<Self, FileError> {
        use x509_parser::prelude::*;
        let (_, cert) = X509Certificate::from_der(der)
            .map_err(|e| FileError::new(path, format!("cannot parse its certificate: {e}")))?;
        let validity = cert.validity();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if validity.not_after.timestamp() < now {
            return Err(FileError::new(
                path,
                format!("certificate expired on {}", validity.not_after),
            ));
        }
        if validity.not_before.timestamp() > now {
            return Err(FileError::new(
                path,
                format!("certificate is not valid before {}", validity.not_before),
            ));
        }
        let names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        GeneralName::DNSName(name) => Some(name.to_ascii_lowercase()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self { names })
    }
}

/// The certificates of a PEM file, at least one.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, FileError> {
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| FileError::new(path, pem_error(e)))?;
    if chain.is_empty() {
        return Err(FileError::new(path, "has no PEM certificate".into()));
    }
    Ok(chain)
}

fn pem_error(e: rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(e) => format!("cannot read it: {e}"),
        rustls_pki_types::pem::Error::NoItemsFound => "has no PEM item of the right kind".into(),
        e => format!("is not valid PEM: {e:?}"),
    }
}

/// A problem with a named file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
struct FileError {
    path: std::path::PathBuf,
    message: String,
}

impl FileError {
    fn new(path: &Path, message: String) -> Self {
        Self { path: path.to_owned(), message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Arc<CertifiedKey> {
        let pair = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&pair)
            .unwrap();
        let der = PrivateKeyDer::try_from(pair.serialize_der()).unwrap();
        let signing =
            rustls::crypto::ring::default_provider().key_provider.load_private_key(der).unwrap();
        Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing))
    }

    #[test]
    fn an_exact_name_wins_then_a_wildcard_then_the_default() {
        let (api, wild, fallback) = (key("api.example.com"), key("*.example.com"), key("other"));
        let certificates = Certificates {
            exact: [("api.example.com".to_owned(), api.clone())].into(),
            wildcard: [("example.com".to_owned(), wild.clone())].into(),
            default: fallback.clone(),
        };
        let chose = |name| certificates.choose(name).clone();
        assert!(Arc::ptr_eq(&chose(Some("api.example.com")), &api));
        assert!(Arc::ptr_eq(&chose(Some("API.Example.com")), &api), "names are case-blind");
        assert!(Arc::ptr_eq(&chose(Some("www.example.com")), &wild));
        // A wildcard covers one label only, and not the bare parent.
        assert!(Arc::ptr_eq(&chose(Some("a.b.example.com")), &fallback));
        assert!(Arc::ptr_eq(&chose(Some("example.com")), &fallback));
        assert!(Arc::ptr_eq(&chose(None), &fallback), "no SNI");
    }

    #[test]
    fn a_session_resumes_only_under_the_policy_it_was_made_under() {
        let sessions = Sessions::new(16).unwrap();
        let ca = |name: &str| key(name).cert[0].clone();
        let (a, b) = (ca("a"), ca("b"));
        let policy = |auth: Option<(bool, &[CertificateDer<'static>])>| {
            let mut policy = Policy::new();
            if let Some((required, authorities)) = auth {
                policy.client_auth(required, authorities);
            }
            policy.finish()
        };
        let none = policy(None);
        let both = policy(Some((true, &[a.clone(), b.clone()])));
        let contexts = [
            none,
            both,
            policy(Some((false, &[a.clone(), b.clone()]))),
            policy(Some((true, std::slice::from_ref(&a)))),
        ];
        for (i, x) in contexts.iter().enumerate() {
            for y in &contexts[i + 1..] {
                assert_ne!(x, y, "two policies share a context");
            }
        }
        assert_eq!(policy(Some((true, &[a, b]))), both, "the same policy, the same context");

        let tickets = |context| BoundTickets { inner: sessions.ticketer.clone(), context };
        let ticket = tickets(none).encrypt(b"session state").unwrap();
        assert_eq!(tickets(none).decrypt(&ticket).as_deref(), Some(&b"session state"[..]));
        assert_eq!(tickets(both).decrypt(&ticket), None, "mTLS turned on: not resumed");

        let cache = |context| BoundCache { inner: sessions.cache.clone(), context };
        assert!(cache(none).put(b"id".to_vec(), b"state".to_vec()));
        assert_eq!(cache(both).get(b"id"), None);
        assert_eq!(cache(both).take(b"id"), None);
        assert_eq!(cache(none).take(b"id").as_deref(), Some(&b"state"[..]));
    }
}
