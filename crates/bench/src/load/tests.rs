use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper::service::service_fn;
use tokio::net::TcpListener;

use super::*;

/// A loopback listener on its own thread and runtime, each accepted connection handed to
/// `connection` on its own task.
fn listen<F, Fut>(connection: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(connection(stream));
            }
        });
    });
    addr
}

/// A loopback HTTP/1.1 server on its own thread; `behave(n)` decides the status of the n-th
/// request (from 0) and how long it is held before it is answered.
fn server(behave: impl Fn(u64) -> (u16, Duration) + Send + Sync + 'static) -> SocketAddr {
    let behave = Arc::new(behave);
    let count = Arc::new(AtomicU64::new(0));
    listen(move |stream| {
        let (behave, count) = (behave.clone(), count.clone());
        async move {
            let service = service_fn(move |_req| {
                let (status, hold) = behave(count.fetch_add(1, Ordering::Relaxed));
                async move {
                    tokio::time::sleep(hold).await;
                    let mut response = http::Response::new(Full::new(Bytes::from("ok")));
                    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(response)
                }
            });
            let io = TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        }
    })
}

fn get() -> Arc<[RequestTemplate]> {
    Arc::from(vec![RequestTemplate {
        method: Method::GET,
        uri: Uri::from_static("/"),
        headers: Vec::new(),
        body: Bytes::new(),
        expect: 200,
    }])
}

fn spec(
    addr: SocketAddr,
    rate: f64,
    warmup_ms: u64,
    duration_ms: u64,
    connections: usize,
) -> LoadSpec {
    LoadSpec {
        addr,
        rate,
        warmup: Duration::from_millis(warmup_ms),
        duration: Duration::from_millis(duration_ms),
        connections,
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn the_schedule_is_computed_per_slot_and_interleaves_threads() {
    let start = Instant::now();
    let one = Schedule::new(start, 3.0, 0, 1);
    assert_eq!(one.due(3) - start, Duration::from_secs(1));
    assert_eq!(one.due(3_000_000) - start, Duration::from_secs(1_000_000));
    // Two threads at 1000/s: thread 0 takes slots 0, 2, 4…; thread 1 slots 1, 3, 5….
    let (a, b) = (Schedule::new(start, 1000.0, 0, 2), Schedule::new(start, 1000.0, 1, 2));
    assert_eq!(a.due(1) - start, Duration::from_millis(2));
    assert_eq!(b.due(0) - start, Duration::from_millis(1));
    assert_eq!(b.due(1) - start, Duration::from_millis(3));
}

#[test]
fn latency_is_measured_from_the_time_a_request_was_due() {
    // Each answer takes 10 ms on one connection, but one is due every 5 ms: the queue grows
    // by 5 ms per request. Measured from the send, every request takes ~10 ms; measured from
    // when it was due, the later ones wait far longer.
    let addr = server(|_| (200, Duration::from_millis(10)));
    let r = run(&spec(addr, 200.0, 0, 500, 1), &get(), &[], &|| None).unwrap();
    let (corrected, uncorrected) = (r.corrected.summary(), r.uncorrected.summary());
    assert!(uncorrected.p50 >= 10_000.0, "{uncorrected:?}");
    assert!(corrected.p99 > 2.0 * uncorrected.p99, "{corrected:?} vs {uncorrected:?}");
    assert!(corrected.max >= 200_000.0, "the last of 100 requests waited ~250 ms: {corrected:?}");
}

#[test]
fn a_stall_shows_in_the_corrected_p99_and_not_in_the_naive_one() {
    // 1000 requests/s on one connection; the 1500th request is held for 200 ms. About 200
    // requests come due during the stall, 10 % of the 2000 recorded, so the corrected p99 must
    // be in the stall, while only one request *sent* during it was slow.
    let stall = Duration::from_millis(200);
    let addr = server(move |n| (200, if n == 1500 { stall } else { Duration::ZERO }));
    let r = run(&spec(addr, 1000.0, 200, 2000, 1), &get(), &[], &|| None).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    let corrected = r.corrected.summary();
    assert!(corrected.p99 >= 100_000.0, "corrected p99 misses the stall: {corrected:?}");
    assert!(corrected.max >= 190_000.0, "{corrected:?}");
    let naive = r.uncorrected.summary();
    assert!(naive.p99 < 100_000.0, "one slow send cannot move the naive p99: {naive:?}");
}

#[test]
fn warm_up_requests_are_sent_but_not_recorded() {
    let addr = server(|_| (200, Duration::ZERO));
    let r = run(&spec(addr, 1000.0, 300, 500, 4), &get(), &[], &|| None).unwrap();
    // 500 recorded of the 800 sent; a request or two may fall either side of the boundary.
    assert!((498..=502).contains(&r.ok), "{}", r.ok);
    assert_eq!(r.corrected.count(), r.ok);
}

#[test]
fn wrong_statuses_and_dead_servers_are_errors_not_latencies() {
    let addr = server(|n| (if n % 2 == 0 { 200 } else { 500 }, Duration::ZERO));
    let r = run(&spec(addr, 500.0, 0, 400, 1), &get(), &[], &|| None).unwrap();
    assert!(r.errors.status >= 90 && r.ok >= 90, "{:?} ok {}", r.errors, r.ok);
    assert_eq!(r.errors.last_status, Some(500), "what the server answered is kept");
    assert!(r.errors.describe().contains("the last answered 500"), "{}", r.errors.describe());
    assert_eq!(r.corrected.count(), r.ok);

    // Nothing listens: the connections cannot even be opened, and the run says so at once,
    // not when its 30 s would have ended.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let started = Instant::now();
    assert!(run(&spec(closed, 100.0, 0, 30_000, 1), &get(), &[], &|| None).is_err());
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn threads_split_the_rate_and_their_results_merge() {
    let addr = server(|_| (200, Duration::ZERO));
    let cpus = crate::affinity::available_cpus().unwrap();
    let threads = vec![cpus.clone(), cpus];
    let r = run(&spec(addr, 2000.0, 100, 500, 4), &get(), &threads, &|| None).unwrap();
    assert!((998..=1002).contains(&r.ok), "{}", r.ok);
    assert_eq!(r.corrected.count(), r.ok);
}

/// A loopback server written by hand: each answer is chunked, and every third on a connection
/// says `connection: close` and closes it, as some servers do under load.
fn chunked_and_closing_server() -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                for n in 1.. {
                    // A GET with no body: read to its empty line.
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let close = n % 3 == 0;
                    let head = if close { "connection: close\r\n" } else { "" };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\n{head}transfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                    );
                    if writer.write_all(answer.as_bytes()).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn chunked_answers_and_closed_connections_are_read_and_replaced() {
    let addr = chunked_and_closing_server();
    let r = run(&spec(addr, 200.0, 0, 500, 2), &get(), &[], &|| None).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!((99..=101).contains(&r.ok), "{}", r.ok);
}

mod closed_loop {
    use super::*;
    use crate::load::WindowMark;
    use crate::load::closed::{self, ClosedSpec};

    fn spec(addr: SocketAddr, connections: usize) -> ClosedSpec {
        ClosedSpec {
            addr,
            connections,
            warmup: Duration::from_millis(200),
            duration: Duration::from_millis(1000),
            timeout: Duration::from_secs(5),
            transport: crate::load::Transport::Plain,
        }
    }

    #[test]
    fn every_connection_stays_busy_so_throughput_is_concurrency_over_latency() {
        // Each request is held 2 ms: a closed loop over 4 connections has 4 in flight all the
        // time, so by Little's law it answers 4 / latency per second.
        let addr = server(|_| (200, Duration::from_millis(2)));
        let marks = std::sync::atomic::AtomicU32::new(0);
        let at_window = || {
            marks.fetch_add(1, Ordering::Relaxed);
            Some(WindowMark::default())
        };
        let r = closed::run(&spec(addr, 4), &get(), &[], &at_window).unwrap();
        assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
        assert_eq!(r.latency.count(), r.ok);
        let mean = r.latency.summary().mean / 1e6;
        let little = 4.0 / mean;
        assert!(
            (r.rate() - little).abs() / little < 0.1,
            "{} rps, Little's law {little}",
            r.rate()
        );
        assert!(r.rate() < 2000.0 && r.rate() > 500.0, "{} rps", r.rate());
        assert!((r.window.as_secs_f64() - 1.0).abs() < 0.05, "{:?}", r.window);
        assert_eq!(marks.load(Ordering::Relaxed), 2, "read at the window's start and end");
        assert!(r.marks.is_some() && r.cpu_times.is_some());
        assert!(r.load_cpu > Duration::ZERO && r.load_cpu < r.window);
    }

    #[test]
    fn failures_are_counted_and_the_loop_goes_on() {
        // Every other request answers 500; the loop counts them and keeps its pace.
        let addr = server(|n| (if n % 2 == 1 { 500 } else { 200 }, Duration::from_millis(1)));
        let r = closed::run(&spec(addr, 2), &get(), &[], &|| None).unwrap();
        assert!(r.ok > 100 && r.errors.status > 100, "{} ok, {:?}", r.ok, r.errors);
        let ratio = r.errors.status as f64 / r.ok as f64;
        assert!((ratio - 1.0).abs() < 0.1, "{ratio}");
        assert_eq!(r.errors.last_status, Some(500));
        assert_eq!(r.marks, None);
        // Nobody listening: an error at once, not a hang.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert!(closed::run(&spec(dead, 1), &get(), &[], &|| None).is_err());
    }

    /// A loopback HTTPS server (rustls, tickets on) answering 200; counts its handshakes:
    /// (full, resumed).
    fn tls_server() -> (SocketAddr, Arc<rustls::RootCertStore>, Arc<[AtomicU64; 2]>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], der)
            .unwrap();
        config.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let kinds: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let counted = kinds.clone();
        let addr = listen(move |stream| {
            let (acceptor, kinds) = (acceptor.clone(), counted.clone());
            async move {
                let Ok(stream) = acceptor.accept(stream).await else { return };
                let resumed =
                    stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                kinds[usize::from(resumed)].fetch_add(1, Ordering::Relaxed);
                let service = service_fn(|_req| async {
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from("ok"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        });
        (addr, Arc::new(roots), kinds)
    }

    #[test]
    fn over_tls_the_loop_keeps_connections_or_handshakes_per_request_resumed_or_not() {
        use crate::load::{TlsTransport, Transport};
        let (addr, roots, kinds) = tls_server();
        let client = |resume: bool| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            if !resume {
                config.resumption = rustls::client::Resumption::disabled();
            }
            Arc::new(config)
        };
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let counts = || kinds.iter().map(|k| k.swap(0, Ordering::Relaxed)).collect::<Vec<_>>();
        for (per_request, resume) in [(false, true), (true, true), (true, false)] {
            let mut spec = spec(addr, 2);
            spec.transport = Transport::Tls(TlsTransport {
                config: client(resume),
                name: name.clone(),
                per_request,
            });
            let r = closed::run(&spec, &get(), &[], &|| None).unwrap();
            assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
            // A debug build of rustls on both sides: full handshakes take milliseconds.
            assert!(r.ok >= 10, "{} answers", r.ok);
            let (full, resumed) = match counts()[..] {
                [full, resumed] => (full, resumed),
                _ => unreachable!(),
            };
            let label = format!(
                "per request {per_request}, resume {resume}: {full} full, {resumed} resumed, {} ok",
                r.ok
            );
            match (per_request, resume) {
                // Two keep-alive connections, two handshakes.
                (false, _) => assert_eq!((full, resumed), (2, 0), "{label}"),
                // A handshake per request, all but the first few resumed.
                (true, true) => assert!(resumed > r.ok / 2 && full <= 4, "{label}"),
                (true, false) => assert!(full > r.ok && resumed == 0, "{label}"),
            }
        }
    }
}
