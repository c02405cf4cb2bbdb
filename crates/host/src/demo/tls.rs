//! Certificates made on the spot (rcgen): a certificate authority and the certificates it
//! issues. `edgegate serve --demo-tls` serves the demo over TLS with them, and the tests use
//! them. Nothing here is for production: the authority's key lives only in memory, and its
//! certificate is trusted by whoever is told to trust it (`curl --cacert`).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A certificate authority, made now.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A certificate chain (leaf, then the authority) and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The chain.
    pub cert_pem: String,
    /// The leaf's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new authority named `name`, valid from 2020 to 4096.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, name);
        params.distinguished_name = subject;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Self { issuer: Issuer::new(params, key), pem })
    }

    /// The authority's certificate, in PEM: what a client trusts.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for `names` (DNS names, `*.` wildcards, IP addresses), valid from
    /// yesterday for a year: within the 398 days browsers accept.
    pub fn issue(&self, names: &[&str]) -> Result<Issued, rcgen::Error> {
        let now = time::OffsetDateTime::now_utc();
        self.issue_between(names, now - time::Duration::days(1), now + time::Duration::days(364))
    }

    /// A certificate for `names` that expired on the first of January 2021.
    pub fn issue_expired(&self, names: &[&str]) -> Result<Issued, rcgen::Error> {
        let date = rcgen::date_time_ymd;
        self.issue_between(names, date(2020, 1, 1), date(2021, 1, 1))
    }

    fn issue_between(
        &self,
        names: &[&str],
        not_before: time::OffsetDateTime,
        not_after: time::OffsetDateTime,
    ) -> Result<Issued, rcgen::Error> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, names.first().copied().unwrap_or("edgegate"));
        params.distinguished_name = subject;
        params.not_before = not_before;
        params.not_after = not_after;
        // Strict path builders (Python's `cryptography`, Go) want the issuer's key id.
        params.use_authority_key_identifier_extension = true;
        // What a public CA's certificate says (testssl.sh flags their absence): an ECDSA key
        // signs, for a TLS server, or a client when mTLS tests present one.
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued { cert_pem: format!("{}{}", cert.pem(), self.pem), key_pem: key.serialize_pem() })
    }
}

impl Issued {
    /// Writes `NAME.pem` (the chain) and `NAME.key` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> std::io::Result<(PathBuf, PathBuf)> {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.cert_pem)?;
        std::fs::write(&key, &self.key_pem)?;
        Ok((cert, key))
    }
}
