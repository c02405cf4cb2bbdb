//! A standard `wasi:http/proxy` component, for the tests of edgegate's component ABI. Built
//! for `wasm32-unknown-unknown` with the `wasip2` bindings and wrapped into a component by
//! the guests' build script (`wit-component`).
//!
//! | path | answer |
//! |---|---|
//! | `GET /hello` | 200 `hello from a component`, `x-kind: component` |
//! | `POST /echo` | 200, the body echoed in 3-byte writes, the request's `content-type` |
//! | `/status/NNN` | status NNN, empty |
//! | `/headers` | the request's method, path and headers, one per line |
//! | `/alloc/N` | allocates and touches N MiB, then 200 |
//! | `/spin` | loops forever (the CPU budget stops it) |
//! | `/sleep` | waits 10 s on a monotonic-clock pollable (the deadline stops it) |
//! | `/hostcalls` | reads the monotonic clock 100 000 times (the host call budget stops it) |
//! | `/panic` | panics: a trap |
//! | `/log` | writes a line to stdout and one to stderr, then 200 |
//! | `/fetch?URL` | GETs URL (`http://host:port/path`, or `upstream://NAME/path`); 200 with its status and body, or 502 with the error |
//! | `/fetch-many/N?URL` | N GETs of URL; 200 with how many got a response, and the first error |
//! | `/fields/N/K` | builds N header maps of K KiB each in the host and keeps them; 200 with how many it could build |
//! | `/random/N/K` | asks for K KiB of random bytes N times; 200 |
//! | `/unfinished` | answers 200, writes part of the body, and returns without finishing or dropping it |
//! | `/big/N` | 200 and N KiB, in 4 KiB writes: byte `i` is `i % 251` |
//! | `/big-then-trap/N` | writes N KiB as `/big/N` does, then panics before finishing |
//! | `/past-end` | reads a byte 4 KiB past the end of its memory: a trap |
//! | `/stain` | grows its memory by a page, answers what byte 100 of the new page held, and writes 0xAB there |

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code, reason = "built for wasm32 only"))]

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingRequest,
    OutgoingResponse, ResponseOutparam, Scheme,
};
use wasip2::io::streams::StreamError;

struct Component;

// Only for wasm32: natively (clippy, `cargo test --workspace`) a `:` in an export's name
// is not a linker symbol.
#[cfg(target_arch = "wasm32")]
wasip2::http::proxy::export!(Component);

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let (route, query) = path.split_once('?').unwrap_or((&path, ""));
        match route {
            "/hello" => {
                respond(out, 200, &[("x-kind", b"component")], &[b"hello from a component"])
            }
            "/echo" => {
                let content_type = header(&request, "content-type");
                let body = read_body(request);
                let chunks: Vec<&[u8]> = body.chunks(3).collect();
                let headers: Vec<(&str, &[u8])> =
                    content_type.iter().map(|v| ("content-type", v.as_slice())).collect();
                respond(out, 200, &headers, &chunks);
            }
            "/headers" => {
                let mut text = format!("{} {path}\n", method_name(&request.method()));
                for (name, value) in request.headers().entries() {
                    text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(&value)));
                }
                respond(out, 200, &[], &[text.as_bytes()]);
            }
            "/spin" => spin(),
            "/panic" => panic!("asked to"),
            "/hostcalls" => {
                let mut last = 0;
                for _ in 0..100_000 {
                    last = wasip2::clocks::monotonic_clock::now();
                }
                respond(out, 200, &[], &[last.to_string().as_bytes()]);
            }
            "/sleep" => {
                wasip2::clocks::monotonic_clock::subscribe_duration(10_000_000_000).block();
                respond(out, 200, &[], &[b"woke"]);
            }
            "/log" => {
                let stdout = wasip2::cli::stdout::get_stdout();
                let _ = stdout.blocking_write_and_flush(b"to stdout\nsecond\x1b[31m line\n");
                let stderr = wasip2::cli::stderr::get_stderr();
                let _ = stderr.blocking_write_and_flush(b"to stderr\n");
                respond(out, 200, &[], &[b"logged"]);
            }
            "/fetch" => match fetch(query) {
                Ok((status, body)) => {
                    let text = format!("{status} {}", String::from_utf8_lossy(&body));
                    respond(out, 200, &[], &[text.as_bytes()]);
                }
                Err(error) => respond(out, 502, &[], &[format!("{error:?}").as_bytes()]),
            },
            _ if route.starts_with("/fetch-many/") => {
                let n: u32 = route["/fetch-many/".len()..].parse().unwrap_or(0);
                let mut ok = 0;
                let mut first_error = None;
                for _ in 0..n {
                    match fetch(query) {
                        Ok(_) => ok += 1,
                        Err(error) => {
                            first_error.get_or_insert(error);
                        }
                    }
                }
                let text = format!("{ok} {first_error:?}");
                respond(out, 200, &[], &[text.as_bytes()]);
            }
            _ if route.starts_with("/fields/") => {
                let (n, kib) = two_numbers(&route["/fields/".len()..]);
                let mut kept = Vec::new();
                for i in 0..n {
                    // Values of at most 8 KiB each, K KiB in all.
                    let list: Vec<(String, Vec<u8>)> = (0..kib.div_ceil(8))
                        .map(|j| (format!("x-{i}-{j}"), vec![b'a'; 8 << 10]))
                        .collect();
                    match Fields::from_list(&list) {
                        Ok(fields) => kept.push(fields),
                        Err(_) => break,
                    }
                }
                respond(out, 200, &[], &[kept.len().to_string().as_bytes()]);
            }
            _ if route.starts_with("/random/") => {
                let (n, kib) = two_numbers(&route["/random/".len()..]);
                let mut sum = 0u64;
                for _ in 0..n {
                    let bytes = wasip2::random::random::get_random_bytes(kib << 10);
                    sum += bytes.len() as u64;
                }
                respond(out, 200, &[], &[sum.to_string().as_bytes()]);
            }
            "/unfinished" => {
                let response = OutgoingResponse::new(Fields::new());
                let body = response.body().expect("the body, once");
                ResponseOutparam::set(out, Ok(response));
                let stream = body.write().expect("the body's stream, once");
                stream.blocking_write_and_flush(b"the first half").expect("writing the body");
                drop(stream);
                // Neither finished nor dropped.
                std::mem::forget(body);
            }
            _ if route.starts_with("/big/") || route.starts_with("/big-then-trap/") => {
                let (trap, kib) = match route.strip_prefix("/big/") {
                    Some(kib) => (false, kib),
                    None => (true, &route["/big-then-trap/".len()..]),
                };
                let kib: usize = kib.parse().unwrap_or(0);
                let response = OutgoingResponse::new(Fields::new());
                let body = response.body().expect("the body, once");
                ResponseOutparam::set(out, Ok(response));
                {
                    let stream = body.write().expect("the body's stream, once");
                    let bytes: Vec<u8> = (0..kib << 10).map(|i| (i % 251) as u8).collect();
                    for chunk in bytes.chunks(4096) {
                        stream.blocking_write_and_flush(chunk).expect("writing the body");
                    }
                }
                assert!(!trap, "a trap after the answer started");
                OutgoingBody::finish(body, None).expect("finishing the body");
            }
            _ if route.starts_with("/status/") => {
                let status = route["/status/".len()..].parse().unwrap_or(500);
                respond(out, status, &[], &[]);
            }
            _ if route.starts_with("/alloc/") => {
                let mib: usize = route["/alloc/".len()..].parse().unwrap_or(0);
                let mut block = vec![0u8; mib << 20];
                for i in (0..block.len()).step_by(4096) {
                    block[i] = 1;
                }
                let text = format!("{}", block.iter().map(|&b| usize::from(b)).sum::<usize>());
                respond(out, 200, &[], &[text.as_bytes()]);
            }
            "/past-end" => {
                let byte = memory_byte(memory_pages() * PAGE + 4096);
                respond(out, 200, &[], &[format!("{byte}").as_bytes()]);
            }
            "/stain" => {
                let at = grow_one_page() * PAGE + 100;
                let byte = memory_byte(at);
                // SAFETY: `at` is in the page just grown, which no Rust object owns.
                unsafe { std::ptr::write_volatile(at as *mut u8, 0xAB) };
                respond(out, 200, &[], &[format!("{byte}").as_bytes()]);
            }
            _ => respond(out, 404, &[], &[b"no such path"]),
        }
    }
}

const PAGE: usize = 65536;

#[cfg(target_arch = "wasm32")]
fn memory_pages() -> usize {
    core::arch::wasm32::memory_size(0)
}

/// The first page of a page just added to memory.
#[cfg(target_arch = "wasm32")]
fn grow_one_page() -> usize {
    core::arch::wasm32::memory_grow(0, 1)
}

#[cfg(not(target_arch = "wasm32"))]
fn memory_pages() -> usize {
    unreachable!("built for wasm32 only")
}

#[cfg(not(target_arch = "wasm32"))]
fn grow_one_page() -> usize {
    unreachable!("built for wasm32 only")
}

/// The byte at address `at` of linear memory, read as a plain load: past the memory's end the
/// host must trap it.
fn memory_byte(at: usize) -> u8 {
    // SAFETY: none in general; this guest probes the host's bounds checks on purpose.
    unsafe { std::ptr::read_volatile(at as *const u8) }
}

/// `N/K` as two numbers (0 for what does not parse).
fn two_numbers(text: &str) -> (u64, u64) {
    let (n, k) = text.split_once('/').unwrap_or((text, ""));
    (n.parse().unwrap_or(0), k.parse().unwrap_or(0))
}

fn spin() -> ! {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn method_name(method: &Method) -> String {
    match method {
        Method::Get => "GET".into(),
        Method::Head => "HEAD".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Connect => "CONNECT".into(),
        Method::Options => "OPTIONS".into(),
        Method::Trace => "TRACE".into(),
        Method::Patch => "PATCH".into(),
        Method::Other(other) => other.clone(),
    }
}

fn header(request: &IncomingRequest, name: &str) -> Option<Vec<u8>> {
    request.headers().get(name).into_iter().next()
}

fn read_body(request: IncomingRequest) -> Vec<u8> {
    drain(request.consume().expect("the body, once"))
}

/// All of an incoming body.
fn drain(body: IncomingBody) -> Vec<u8> {
    let mut bytes = Vec::new();
    {
        let stream = body.stream().expect("the body's stream, once");
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => panic!("{}", e.to_debug_string()),
            }
        }
    }
    bytes
}

/// Answers `status` with `headers` and a body written as `chunks`, one write each.
fn respond(out: ResponseOutparam, status: u16, headers: &[(&str, &[u8])], chunks: &[&[u8]]) {
    let list: Vec<(String, Vec<u8>)> =
        headers.iter().map(|(n, v)| ((*n).to_owned(), v.to_vec())).collect();
    let fields = Fields::from_list(&list).expect("valid headers");
    let response = OutgoingResponse::new(fields);
    response.set_status_code(status).expect("a valid status");
    let body = response.body().expect("the body, once");
    ResponseOutparam::set(out, Ok(response));
    {
        let stream = body.write().expect("the body's stream, once");
        for chunk in chunks {
            stream.blocking_write_and_flush(chunk).expect("writing the body");
        }
    }
    OutgoingBody::finish(body, None).expect("finishing the body");
}

/// GETs `url` (`http://authority/path` or `upstream://NAME/path`): its status and body.
fn fetch(url: &str) -> Result<(u16, Vec<u8>), ErrorCode> {
    let (scheme, rest) = match url.split_once("://") {
        Some(("upstream", rest)) => (Scheme::Other("upstream".into()), rest),
        Some((_, rest)) => (Scheme::Http, rest),
        None => (Scheme::Http, url),
    };
    let (authority, path) =
        rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(&path));
    let future = outgoing_handler::handle(request, None)?;
    future.subscribe().block();
    let response = future.get().expect("ready").expect("taken once")?;
    let status = response.status();
    Ok((status, drain(response.consume().expect("the body, once"))))
}
