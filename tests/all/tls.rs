//! TLS termination through the real binary, with real clients (curl and openssl): ALPN, SNI,
//! resumption across a certificate reload, the handshake timeout, plain HTTP on the TLS
//! port, refused certificates and client certificates.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgegate_host::demo::tls::Authority;

use crate::support::{Gateway, get, metric_line, raw, read_one, runtime_section};

/// A directory of certificates: the authority, `api.example.test`, `*.example.test`, and the
/// default `default.test`.
struct Certs {
    dir: tempfile::TempDir,
    authority: Authority,
}

impl Certs {
    fn new() -> Self {
        let certs = Self {
            dir: tempfile::tempdir().unwrap(),
            authority: Authority::new("test CA").unwrap(),
        };
        std::fs::write(certs.ca(), certs.authority.pem()).unwrap();
        for (file, name) in
            [("default", "default.test"), ("api", "api.example.test"), ("wild", "*.example.test")]
        {
            certs.issue(file, name);
        }
        certs
    }

    fn issue(&self, file: &str, name: &str) {
        self.authority.issue(&[name]).unwrap().write(self.dir.path(), file).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// A configuration serving the hostile guest on `/h` over TLS with the three
    /// certificates, and `extra` in `[server.tls]`.
    fn config(&self, extra: &str) -> String {
        let cert = |name: &str, default: bool| {
            format!(
                "{{ cert = {:?}, key = {:?}, default = {default} }}",
                self.path(&format!("{name}.pem")).display().to_string(),
                self.path(&format!("{name}.key")).display().to_string(),
            )
        };
        format!(
            r#"[server]
handshake_timeout = "1s"

[server.tls]
listen = "127.0.0.1:0"
certificates = [{}, {}, {}]
{extra}

{runtime}
[workers.hostile]
module = "{hostile}"

[[routes]]
prefix = "/h"
worker = "hostile"
"#,
            cert("api", false),
            cert("default", true),
            cert("wild", false),
            runtime = runtime_section(),
            hostile = edgegate_guests::HOSTILE,
        )
    }
}

/// Runs `program` with `args` (and `stdin`); its stdout and stderr.
fn run(program: &str, args: &[&str], stdin: &[u8]) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `curl` over TLS to `name` (resolved to the TLS listener), trusting the test authority.
fn curl(certs: &Certs, tls: SocketAddr, name: &str, args: &[&str]) -> (bool, String) {
    let resolve = format!("{name}:{}:127.0.0.1", tls.port());
    let url = format!("https://{name}:{}/h/ok", tls.port());
    let ca = certs.ca();
    let mut all =
        vec!["-sS", "--max-time", "10", "--cacert", ca.to_str().unwrap(), "--resolve", &resolve];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-w", " %{http_version}", &url]);
    run("curl", &all, b"")
}

/// The subject of the certificate the listener sends for `name` (`None`: no SNI).
fn served_subject(tls: SocketAddr, name: Option<&str>) -> String {
    let connect = tls.to_string();
    let mut args = vec!["s_client", "-connect", &connect];
    match name {
        Some(name) => args.extend_from_slice(&["-servername", name]),
        None => args.push("-noservername"),
    }
    let (_, out) = run("openssl", &args, b"");
    out.lines()
        .find_map(|l| l.strip_prefix("subject="))
        .unwrap_or_else(|| panic!("no subject in:\n{out}"))
        .to_owned()
}

#[test]
fn alpn_chooses_h2_or_http1_and_sni_chooses_the_certificate() {
    let certs = Certs::new();
    let gw = Gateway::start(&certs.config(""));
    let tls = gw.tls.expect("a TLS listener");

    let (ok, out) = curl(&certs, tls, "api.example.test", &["--http2"]);
    assert!(ok && out == "ok 2", "{out}");
    let (ok, out) = curl(&certs, tls, "www.example.test", &["--http1.1"]);
    assert!(ok && out == "ok 1.1", "{out}");
    // A name no certificate has gets the default one, which curl refuses for that name.
    let (ok, out) = curl(&certs, tls, "nothing.test", &[]);
    assert!(!ok && out.contains("certificate"), "{out}");

    assert!(served_subject(tls, Some("api.example.test")).contains("api.example.test"));
    assert!(served_subject(tls, Some("WWW.example.test")).contains("*.example.test"));
    assert!(served_subject(tls, Some("a.b.example.test")).contains("default.test"));
    assert!(served_subject(tls, None).contains("default.test"), "no SNI: the default");

    // Counted by version and protocol (h2: api and nothing.test, where curl refused the
    // certificate after the handshake; none: openssl's four), and logged with them.
    for (alpn, count) in [("h2", 2), ("http/1.1", 1), ("-", 4)] {
        let line =
            format!("edgegate_tls_handshakes_total{{version=\"TLSv1.3\",alpn=\"{alpn}\"}} {count}");
        assert!(metric_line(&gw, &line).is_some(), "no {line}");
    }
    let mut gw = gw;
    let (_, log) = gw.stop();
    assert!(log.contains("tls=\"TLSv1.3\" alpn=\"h2\""), "{log}");
    assert!(log.contains("tls=\"TLSv1.3\" alpn=\"http/1.1\""), "{log}");
}

/// One request over a TLS connection that `openssl s_client` makes with `extra` options; all
/// it printed (the session, then the answer).
fn request_over(tls: SocketAddr, extra: &[&str]) -> String {
    let connect = tls.to_string();
    let mut args =
        vec!["s_client", "-ign_eof", "-connect", &connect, "-servername", "api.example.test"];
    args.extend_from_slice(extra);
    // A request, so that the session ticket (sent after the TLS 1.3 handshake) arrives.
    run("openssl", &args, b"GET /h/ok HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n").1
}

#[test]
fn sessions_resume_across_a_certificate_reload_and_no_connection_drops() {
    let certs = Certs::new();
    let gw = Gateway::start(&certs.config(""));
    let tls_addr = gw.tls.unwrap();
    let tls = tls_addr.to_string();
    let session = certs.path("session.pem");
    let session = session.to_str().unwrap();
    let handshake = |extra: &[&str]| request_over(tls_addr, extra);
    let first = handshake(&["-sess_out", session]);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    let fingerprint =
        |out: &str| out.split("-----BEGIN CERTIFICATE-----").nth(1).map(str::to_owned);
    let again = handshake(&["-sess_in", session]);
    assert!(again.contains("Reused, TLSv1.3"), "not resumed:\n{again}");

    // A keep-alive connection open across the reload.
    let mut open = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &tls, "-servername", "api.example.test"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = open.stdin.take().unwrap();
    let mut output = open.stdout.take().unwrap();
    input.write_all(b"GET /h/ok HTTP/1.1\r\nHost: api\r\n\r\n").unwrap();
    assert!(read_one(&mut output).starts_with("http/1.1 200"));

    // A new certificate for the same name, with a new key.
    certs.issue("api", "api.example.test");
    let reloaded = crate::support::reload(&gw, None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    let after = handshake(&["-sess_in", session]);
    assert!(after.contains("Reused, TLSv1.3"), "not resumed after the reload:\n{after}");
    let fresh = handshake(&[]);
    assert_ne!(fingerprint(&fresh), fingerprint(&first), "the new certificate is served");

    input.write_all(b"GET /h/ok HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n").unwrap();
    let mut rest = String::new();
    output.read_to_string(&mut rest).unwrap();
    assert!(rest.starts_with("HTTP/1.1 200"), "the open connection still answers: {rest}");
    let _ = open.wait();
}

/// The ways a client resumes a session: a TLS 1.3 ticket, a TLS 1.2 ticket, a TLS 1.2
/// session id.
const RESUMPTIONS: [&[&str]; 3] = [&["-tls1_3"], &["-tls1_2"], &["-tls1_2", "-no_ticket"]];

/// Makes a session in each of the [`RESUMPTIONS`] ways with `args` (a client certificate,
/// say), checks that each resumes, and returns the files they are in.
fn sessions(certs: &Certs, tls: SocketAddr, args: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (i, way) in RESUMPTIONS.iter().enumerate() {
        let file = certs.path(&format!("session-{i}.pem"));
        let out = request_over(tls, &[*way, args, &["-sess_out", file.to_str().unwrap()]].concat());
        assert!(out.contains("HTTP/1.1 200"), "{way:?}: not served:\n{out}");
        let again =
            request_over(tls, &[*way, args, &["-sess_in", file.to_str().unwrap()]].concat());
        assert!(again.contains("Reused,"), "{way:?}: not resumed:\n{again}");
        files.push(file);
    }
    files
}

/// Resumes each session of [`sessions`] with `args`: none may be resumed or served.
fn assert_none_resumes(tls: SocketAddr, files: &[PathBuf], args: &[&str], what: &str) {
    for (way, file) in RESUMPTIONS.iter().zip(files) {
        let out = request_over(tls, &[*way, args, &["-sess_in", file.to_str().unwrap()]].concat());
        assert!(!out.contains("Reused,"), "{what}, {way:?}: resumed:\n{out}");
        assert!(!out.contains("HTTP/1.1 200"), "{what}, {way:?}: served:\n{out}");
    }
}

/// A session made before a reload turned client certificates on cannot skip them: not with
/// a stateless ticket, a stateful one (from the cache, `tickets = false`), or a session id.
#[test]
fn a_session_from_before_client_certificates_were_required_does_not_resume() {
    for tickets in [true, false] {
        let certs = Certs::new();
        let tickets = format!("tickets = {tickets}");
        let gw = Gateway::start(&certs.config(&tickets));
        let tls = gw.tls.unwrap();
        let files = sessions(&certs, tls, &[]);

        let ca = certs.ca().display().to_string();
        gw.rewrite_config(&certs.config(&format!("{tickets}\nclient_auth = {{ ca = {ca:?} }}")));
        let reloaded = crate::support::reload(&gw, None);
        assert_eq!(reloaded.status, 200, "{}", reloaded.text());
        assert_none_resumes(tls, &files, &[], &tickets);

        // A client with a certificate is served, by a full handshake.
        certs.issue("client", "client.example.test");
        let (cert, key) = (certs.path("client.pem"), certs.path("client.key"));
        let args = ["-cert", cert.to_str().unwrap(), "-key", key.to_str().unwrap()];
        let out = request_over(tls, &args);
        assert!(out.contains("HTTP/1.1 200") && out.contains("New,"), "{tickets}:\n{out}");
    }
}

/// A session made with a certificate from an authority that a reload then removed does not
/// resume: the client must present its certificate again, and it is refused.
#[test]
fn a_session_made_with_a_removed_authoritys_certificate_does_not_resume() {
    let certs = Certs::new();
    let other = Authority::new("another CA").unwrap();
    let both = format!("{}{}", certs.authority.pem(), other.pem());
    let authorities = certs.path("authorities.pem");
    std::fs::write(&authorities, both).unwrap();
    other.issue(&["client.example.test"]).unwrap().write(certs.dir.path(), "stranger").unwrap();
    let (cert, key) = (certs.path("stranger.pem"), certs.path("stranger.key"));
    let args = ["-cert", cert.to_str().unwrap(), "-key", key.to_str().unwrap()];
    let ca = authorities.display().to_string();
    let gw = Gateway::start(&certs.config(&format!("client_auth = {{ ca = {ca:?} }}")));
    let tls = gw.tls.unwrap();
    let files = sessions(&certs, tls, &args);

    // The configuration is unchanged; the authorities' file loses one.
    std::fs::write(&authorities, certs.authority.pem()).unwrap();
    let reloaded = crate::support::reload(&gw, None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    assert_none_resumes(tls, &files, &args, "authority removed");
}

#[test]
fn a_stalled_handshake_is_closed_at_the_timeout_and_plain_http_gets_400() {
    let certs = Certs::new();
    let gw = Gateway::start(&certs.config(""));
    let tls = gw.tls.unwrap();

    let mut stalled = TcpStream::connect(tls).unwrap();
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The start of a TLS record, and then nothing.
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let closed = matches!(stalled.read(&mut buf), Ok(0) | Err(_));
    let waited = started.elapsed();
    assert!(closed && waited < Duration::from_secs(5), "closed {closed} after {waited:?}");
    assert!(waited > Duration::from_millis(500), "closed too early: {waited:?}");

    // Plain HTTP is answered (read to a clean end: a reset would fail the read) and closed.
    let reply = raw(tls, b"GET /h/ok HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((reply.status, reply.error()), (400, "plain_http_on_tls".to_owned()));

    for reason in ["timeout", "plain_http"] {
        let line = format!("edgegate_tls_handshake_failures_total{{reason=\"{reason}\"}} 1");
        assert!(metric_line(&gw, &line).is_some(), "{line}");
    }
}

#[test]
fn an_expired_or_mismatched_certificate_is_refused_at_start_check_and_reload() {
    let certs = Certs::new();
    let expired = certs.authority.issue_expired(&["api.example.test"]).unwrap();
    let good = certs.config("");

    // Expired: the start fails, naming the file.
    expired.write(certs.dir.path(), "api").unwrap();
    let refused = |what: &str, config: &str| {
        let (_dir, path) = crate::support::write_config(config);
        let check = Command::new(env!("CARGO_BIN_EXE_edgegate"))
            .args(["check", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&check.stderr).into_owned();
        assert_eq!(check.status.code(), Some(1), "{what}: {text}");
        assert!(
            text.contains("api.pem") || text.contains("api.key"),
            "{what} names no file: {text}"
        );
        text
    };
    let text = refused("expired", &good);
    assert!(text.contains("expired"), "{text}");

    // The key of another certificate.
    certs.issue("api", "api.example.test");
    std::fs::copy(certs.path("wild.key"), certs.path("api.key")).unwrap();
    let text = refused("mismatched", &good);
    assert!(text.contains("is not the key of the certificate"), "{text}");

    // At reload: refused, and the certificate serving stays.
    certs.issue("api", "api.example.test");
    let gw = Gateway::start(&good);
    let tls = gw.tls.unwrap();
    expired.write(certs.dir.path(), "api").unwrap();
    let reply = crate::support::reload(&gw, None);
    assert_eq!(reply.status, 422, "{}", reply.text());
    assert!(reply.text().contains("expired"), "{}", reply.text());
    let (ok, out) = curl(&certs, tls, "api.example.test", &[]);
    assert!(ok && out.starts_with("ok"), "{out}");
}

#[test]
fn client_certificates_are_required_when_configured() {
    let certs = Certs::new();
    let ca = certs.ca().display().to_string();
    let gw = Gateway::start(&certs.config(&format!("client_auth = {{ ca = {ca:?} }}")));
    let tls = gw.tls.unwrap();
    let (ok, out) = curl(&certs, tls, "api.example.test", &[]);
    assert!(!ok, "no client certificate, yet: {out}");

    certs.issue("client", "client.example.test");
    let (cert, key) = (certs.path("client.pem"), certs.path("client.key"));
    let args = ["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()];
    let (ok, out) = curl(&certs, tls, "api.example.test", &args);
    assert!(ok && out.starts_with("ok"), "{out}");

    // A certificate from another authority is refused too.
    let other = Authority::new("another CA").unwrap();
    other.issue(&["client.example.test"]).unwrap().write(certs.dir.path(), "stranger").unwrap();
    let (cert, key) = (certs.path("stranger.pem"), certs.path("stranger.key"));
    let args = ["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()];
    let (ok, out) = curl(&certs, tls, "api.example.test", &args);
    assert!(!ok, "a stranger's certificate was accepted: {out}");
}

/// The demo over TLS, as the README shows it: `serve --demo-tls`, then curl with the CA it
/// wrote.
#[test]
fn the_demo_serves_tls_with_a_certificate_it_makes() {
    let gw = Gateway::demo_with(&["--demo-tls"], &[]);
    let tls = gw.tls.expect("a TLS listener");
    let ca = demo_ca(&gw);
    let url = format!("https://localhost:{}/echo", tls.port());
    let ca = ca.to_str().unwrap();
    let (ok, out) = run("curl", &["-sS", "--cacert", ca, "-d", "{\"a\": 1}", &url], b"");
    assert!(ok && out == "{\"a\":1}", "{out}");

    // Forwarded to an upstream (the demo origin echoes what it got): X-Forwarded-Proto says
    // the client came over TLS.
    let (_, token) = gw.demo_tokens().remove(0);
    let auth = format!("Authorization: Bearer {token}");
    let url = format!("https://localhost:{}/auth/orders", tls.port());
    let (ok, out) = run("curl", &["-sS", "--cacert", ca, "-H", &auth, &url], b"");
    let seen: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("{ok} {out}"));
    assert_eq!(seen["headers"]["x-forwarded-proto"], "https", "{seen}");
}

/// Where `serve --demo-tls` says it wrote its authority's certificate.
fn demo_ca(gw: &Gateway) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(line) = gw.next_line(Duration::from_secs(30))
            && let Some(rest) = line.strip_prefix("demo CA: ")
        {
            let path = rest.split(" (").next().unwrap();
            assert!(Path::new(path).exists(), "{path}");
            return PathBuf::from(path);
        }
    }
    panic!("serve --demo-tls printed no CA path");
}

/// The bytes of a ClientHello for `api.example.test`, as rustls' client sends it.
fn client_hello() -> Vec<u8> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = "api.example.test".try_into().unwrap();
    let mut client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

/// A handshake place is taken only by a whole ClientHello: clients that send the start of a
/// record and stall (eight at a time, with one place) hold none, and a normal client is served
/// at once. A whole ClientHello followed by silence does hold the place, until its deadline.
#[test]
fn max_handshakes_caps_handshakes_from_a_whole_client_hello() {
    let certs = Certs::new();
    let gw = Gateway::start(&certs.config("max_handshakes = 1"));
    let tls = gw.tls.unwrap();
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut stream = TcpStream::connect(tls).unwrap();
            stream.write_all(&[0x16, 0x03, 0x01]).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let (ok, out) = curl(&certs, tls, "api.example.test", &[]);
    let waited = started.elapsed();
    assert!(ok && out.starts_with("ok"), "{out}");
    // Their deadline is 1 s after their accept: a client that had to wait for it would wait
    // at least 900 ms.
    assert!(waited < Duration::from_millis(700), "a stalled start held the place: {waited:?}");
    drop(stalled);

    let mut holder = TcpStream::connect(tls).unwrap();
    holder.write_all(&client_hello()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let (ok, out) = curl(&certs, tls, "api.example.test", &[]);
    let waited = started.elapsed();
    assert!(ok && out.starts_with("ok"), "{out}");
    assert!(waited > Duration::from_millis(700), "no wait for the place: {waited:?}");
    let line = "edgegate_tls_handshake_failures_total{reason=\"timeout\"}";
    assert!(metric_line(&gw, line).is_some(), "{}", get(gw.admin, "/metrics").text());
    drop(holder);
}

#[test]
fn per_core_serves_tls_from_every_cores_listener() {
    let certs = Certs::new();
    let config = certs.config("").replacen("[server]\n", "[server]\nscheduler = \"per-core\"\n", 1);
    let gw = Gateway::start(&config);
    let tls = gw.tls.expect("a TLS listener");
    // Each a new connection, which the kernel gives to one of the listeners: a listener no
    // thread accepted on would leave curl waiting until its 10 s are up.
    for version in ["--http1.1", "--http2"].into_iter().cycle().take(12) {
        let (ok, out) = curl(&certs, tls, "api.example.test", &[version]);
        let expected = if version == "--http2" { "ok 2" } else { "ok 1.1" };
        assert!(ok && out == expected, "{version}: {out}");
    }
}
