//! A hostile guest for the gateway's tests. The last segment of the path picks the
//! misbehaviour, so the guest works under any route prefix (`/h/loop` is `/loop`):
//!
//! | path | does |
//! |---|---|
//! | `/ok` | answers 200 `ok`: proof the worker still serves |
//! | `/loop` | loops forever (the CPU budget must stop it) |
//! | `/spin?ms=N` | burns about N ms of CPU, checking the clock now and then, then answers |
//! | `/grow` | `memory.grow`s past any cap, then writes where the memory would be |
//! | `/alloc` | makes one 64 MiB allocation |
//! | `/bomb` | allocates 64 KiB blocks until memory runs out |
//! | `/recurse` | recurses without end (a stack overflow) |
//! | `/trap` | executes `unreachable` |
//! | `/panic` | panics |
//! | `/hostcalls` | calls the clock forever (the host-call budget must stop it) |
//! | `/leak` | returns what a static buffer holds, then writes a secret into it |
//! | `/bytes?n=N` | answers N bytes |
//! | `/bad-header` | answers with a header name the host cannot send |
//! | `/forward` | forwards to an upstream nobody configured |
//! | `/unavailable` | returns the `Unavailable` error outcome |
//! | `/config?key=K` | answers the configured value of K, or 404 |
//! | `/random` | answers 16 random bytes from the host, hex encoded |
//! | `/verify` | checks the body as a compact JWS with the host's keys: 200 `verified` or 401 and the code |
//! | `/jws-abuse` | calls `jws_verify` with out-of-bounds pointers, an over-long kid and an unknown algorithm; answers the codes |
//! | `/claims-abuse` | calls `jwt_claims` with out-of-bounds and over-long name lists, lists that do not decode, an answer buffer past the end, then a 1-byte buffer and a right-sized one; answers the codes, then the answer's JSON |
//! | `/kv?op=OP&ns=NS&key=K&n=N&delta=D&ttl=MS` | one KV call (`get`, `put` of the body or of N bytes, `incr`, `delete`, `list` with the key as prefix, `batch`: N puts in one call then a get of them all, `many`: N single gets into one buffer); 200 and the result, or 500 and the error code's name |
//! | `/kv-abuse` | calls the KV hostcalls with out-of-bounds pointers and a negative TTL; answers the codes |
//! | `/fetch?url=U&n=N` | starts N fetches of U (default 1) at once, waits for each; 200 and `status body` per line, or 500 and the error code's name |
//! | `/target` | answers the host and the request target it was given: `HOST TARGET` |
//! | `/pass?set=CASE` | forwards to the upstream `origin`, setting the header CASE names (see `/status`) |
//! | `/status?code=N&set=CASE` | answers status N (default 200) with one more header: `crlf`, `nul`, `connection`, `transfer-encoding`, `upgrade`, `keep-alive`, `content-length` (a wrong one), `content-length-ok` (the body's), or none |
//! | `/log-inject` | logs a message with a newline, a forged log line and ANSI escapes, then answers 200 |

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicU8, Ordering};
use edgegate_sdk::{ErrorCode, Forward, LogLevel, Request, Response, host};

/// Written by `/leak`. A fresh instance must always start with zeros here.
static SECRET: [AtomicU8; 16] = [const { AtomicU8::new(0) }; 16];

fn param(req: &Request, name: &str) -> u64 {
    req.query_param(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Recursion that the compiler cannot turn into a loop: the subtraction after the call is
/// neither associative nor commutative.
fn recurse(depth: u64, limit: u64) -> u64 {
    if depth == limit {
        return 0;
    }
    recurse(depth + 1, limit).wrapping_sub(depth)
}

fn hex(bytes: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]).collect()
}

/// The handler.
pub fn handle(req: &Request) -> Response {
    let behaviour = req.path().rsplit('/').next().unwrap_or("");
    match behaviour {
        "ok" => Response::text(200, "ok"),
        "loop" => loop {
            black_box(());
        },
        "spin" => {
            let until = host::monotonic_now() + param(req, "ms") * 1_000_000;
            let mut n = 0u64;
            while host::monotonic_now() < until {
                for _ in 0..100_000 {
                    n = black_box(n.wrapping_add(1));
                }
            }
            Response::text(200, "spun")
        }
        "grow" => grow_past_the_cap(),
        "alloc" => {
            let big: Vec<u8> = vec![1; 64 << 20];
            Response::new(200, &big[..1])
        }
        "bomb" => {
            let mut blocks = Vec::new();
            loop {
                blocks.push(black_box(Box::new([7u8; 65536])));
            }
        }
        "recurse" => {
            let depth = recurse(0, black_box(u64::MAX));
            Response::new(200, &depth.to_le_bytes())
        }
        "trap" => trap(),
        "panic" => panic!("the hostile guest panics on purpose"),
        "hostcalls" => {
            let mut sum = 0u64;
            loop {
                sum = sum.wrapping_add(black_box(host::monotonic_now()));
            }
        }
        "leak" => {
            let seen: Vec<u8> = SECRET.iter().map(|b| b.load(Ordering::Relaxed)).collect();
            for (i, b) in SECRET.iter().enumerate() {
                b.store(0xA0 + i as u8, Ordering::Relaxed);
            }
            Response::new(200, &hex(&seen))
        }
        "bytes" => Response::new(200, &vec![b'x'; param(req, "n") as usize]),
        "bad-header" => Response::builder(200).header("bad header\n", "x").body("x"),
        "forward" => Forward::to("nowhere").set_header("x-from", "hostile").into(),
        "unavailable" => Response::error(ErrorCode::Unavailable, "hostile says: try later"),
        "config" => match req.query_param("key").and_then(host::config) {
            Some(value) => Response::text(200, &value),
            None => Response::text(404, "not configured"),
        },
        "random" => {
            let mut bytes = [0u8; 16];
            match host::random_fill(&mut bytes) {
                Ok(()) => Response::new(200, &hex(&bytes)),
                Err(_) => Response::text(500, "no randomness"),
            }
        }
        "verify" => {
            let token = core::str::from_utf8(req.body()).unwrap_or("");
            match edgegate_sdk::jwt::verify_jws(token, 64 << 10, &edgegate_sdk::jwt::HostKeys) {
                Ok(_) => Response::text(200, "verified"),
                Err(e) => Response::text(401, e.code()),
            }
        }
        "jws-abuse" => {
            let codes = jws_abuse();
            let text = alloc::format!("{} {} {} {}", codes[0], codes[1], codes[2], codes[3]);
            Response::text(200, &text)
        }
        "claims-abuse" => {
            let (codes, json) = claims_abuse();
            let codes = codes.map(|c| alloc::format!("{c}")).join(" ");
            Response::text(200, &alloc::format!("{codes} {json}"))
        }
        "kv" => kv_op(req),
        "kv-abuse" => {
            let codes = kv_abuse();
            let text =
                alloc::format!("{} {} {} {} {}", codes[0], codes[1], codes[2], codes[3], codes[4]);
            Response::text(200, &text)
        }
        "fetch" => fetch_many(req),
        "target" => Response::text(200, &alloc::format!("{} {}", req.host(), req.target())),
        "blob" => blob_echo(req),
        "pass" => match hostile_header(req) {
            Some((name, value)) => Forward::to("origin").set_header(name, value).into(),
            None => Forward::to("origin").into(),
        },
        "status" => {
            let code = req.query_param("code").and_then(|c| c.parse().ok()).unwrap_or(200);
            let builder = Response::builder(code);
            match hostile_header(req) {
                Some((name, value)) => builder.header(name, value).body(STATUS_BODY),
                None => builder.body(STATUS_BODY),
            }
        }
        "log-inject" => {
            host::log(
                LogLevel::Error,
                "first\nFORGED level=ERROR request_id=0 forged line\u{1b}[31m red\u{1b}[0m end",
            );
            Response::text(200, "logged")
        }
        other => {
            host::log_fmt(LogLevel::Warn, format_args!("hostile: unknown path {other}"));
            Response::text(404, "unknown hostile path")
        }
    }
}

/// The body `/status` answers with.
const STATUS_BODY: &str = "status";

/// The header `set=CASE` names: one a worker must not be able to send.
fn hostile_header(req: &Request) -> Option<(&'static str, &'static [u8])> {
    Some(match req.query_param("set")? {
        "crlf" => ("x-split", b"a\r\nx-injected: 1"),
        "nul" => ("x-nul", b"a\0b"),
        "connection" => ("connection", b"close"),
        "transfer-encoding" => ("transfer-encoding", b"chunked"),
        "upgrade" => ("upgrade", b"websocket"),
        "keep-alive" => ("keep-alive", b"timeout=5"),
        "content-length" => ("content-length", b"999"),
        "content-length-ok" => ("content-length", b"6"),
        _ => return None,
    })
}

fn failed(e: edgegate_sdk::HostError) -> Response {
    Response::text(500, &alloc::format!("{e:?}"))
}

/// One KV call, as the query asks.
fn kv_op(req: &Request) -> Response {
    use edgegate_sdk::kv;
    let ns = kv::namespace(req.query_param("ns").unwrap_or("t"));
    let key = req.query_param("key").unwrap_or("k").as_bytes();
    let n = param(req, "n") as usize;
    let ttl = Some(param(req, "ttl")).filter(|&t| t > 0);
    let result = match req.query_param("op").unwrap_or("") {
        "get" => ns.get(key).map(|v| v.unwrap_or_else(|| b"(none)".to_vec())),
        "put" if n > 0 => ns.put_with_ttl(key, &vec![b'v'; n], ttl).map(|()| b"stored".to_vec()),
        "put" => ns.put_with_ttl(key, req.body(), ttl).map(|()| b"stored".to_vec()),
        "incr" => {
            let delta = req.query_param("delta").and_then(|d| d.parse().ok()).unwrap_or(1);
            ns.incr(key, delta, ttl).map(|sum| alloc::format!("{sum}").into_bytes())
        }
        "delete" => ns.delete(key).map(|existed| alloc::format!("{existed}").into_bytes()),
        "list" => ns.list(key, b"", n as u32).map(|keys| {
            let mut out = Vec::new();
            for key in keys.iter().flatten() {
                out.extend_from_slice(key);
                out.push(b'\n');
            }
            out
        }),
        "batch" => {
            let keys: Vec<Vec<u8>> = (0..n).map(|i| alloc::format!("b{i}").into_bytes()).collect();
            let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"x"[..])).collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            ns.put_batch(&entries, ttl).and_then(|_| ns.get_batch(&refs)).map(|values| {
                alloc::format!("{} found", values.iter().flatten().count()).into_bytes()
            })
        }
        "many" => {
            // One buffer for every get: the loop measures the hostcall, not the allocator.
            let mut buf = [0u8; 1024];
            (0..n)
                .try_fold(0, |found, _| {
                    ns.get_into(key, &mut buf).map(|v| found + usize::from(v.is_some()))
                })
                .map(|found| alloc::format!("{found} found").into_bytes())
        }
        _ => return Response::text(400, "op?"),
    };
    match result {
        Ok(body) => Response::new(200, &body),
        Err(e) => failed(e),
    }
}

/// N concurrent fetches of one URL.
fn fetch_many(req: &Request) -> Response {
    use edgegate_sdk::fetch::{self, FetchRequest};
    let url = req.query_param("url").unwrap_or("");
    let n = param(req, "n").max(1);
    let mut pending = Vec::new();
    for _ in 0..n {
        match fetch::start(&FetchRequest::get(url)) {
            Ok(p) => pending.push(p),
            Err(e) => return failed(e),
        }
    }
    let mut out = Vec::new();
    for p in pending {
        match p.wait() {
            Ok(r) => {
                out.extend_from_slice(alloc::format!("{} ", r.status()).as_bytes());
                out.extend_from_slice(r.body());
                out.push(b'\n');
            }
            Err(e) => return failed(e),
        }
    }
    Response::new(200, &out)
}

/// The KV hostcalls with arguments a well-behaved guest never passes.
#[cfg(target_arch = "wasm32")]
fn kv_abuse() -> [i32; 5] {
    #[link(wasm_import_module = "edgegate_v1")]
    unsafe extern "C" {
        fn kv_get(ns: u32, ns_len: u32, key: u32, key_len: u32, out: u32, cap: u32) -> i32;
        fn kv_put(
            ns: u32,
            ns_len: u32,
            key: u32,
            key_len: u32,
            v: u32,
            v_len: u32,
            ttl: i64,
        ) -> i32;
        fn kv_incr(ns: u32, ns_len: u32, key: u32, key_len: u32, d: i64, ttl: i64, out: u32)
        -> i32;
        fn kv_put_batch(ns: u32, ns_len: u32, e: u32, e_len: u32, ttl: i64) -> i32;
    }
    static NS: &[u8] = b"t";
    let ns = NS.as_ptr() as u32;
    let far = u32::MAX - 8;
    // SAFETY: the host reads and writes guest memory only through bounds-checked slices; these
    // pointers are out of bounds on purpose, and nothing here touches them.
    unsafe {
        [
            kv_get(ns, 1, far, 100, 0, 0),    // the key past the end of memory
            kv_put(ns, 1, 0, 4, far, 100, 0), // the value past the end
            kv_put(ns, 1, 0, 4, 0, 4, -5),    // a negative TTL
            kv_incr(ns, 1, 0, 4, 1, 0, far),  // the answer's address past the end
            kv_put_batch(ns, 1, 0, 7, 0),     // a malformed entry block
        ]
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn kv_abuse() -> [i32; 5] {
    [0; 5]
}

#[cfg(target_arch = "wasm32")]
fn grow_past_the_cap() -> Response {
    use core::arch::wasm32::{memory_grow, memory_size};
    let pages_before = memory_size(0);
    // Ask for 64 MiB more; a capped worker is refused (the result is usize::MAX) ...
    black_box(memory_grow(0, 1024));
    // ... and a bomb that ignores the refusal writes where the memory would have been.
    let past_the_end = (pages_before + 512) * 65536;
    // SAFETY: deliberately not safe. This is a hostile guest: the write is out of bounds when
    // the grow was refused, and the host must turn the resulting trap into a 500.
    unsafe { core::ptr::write_volatile(past_the_end as *mut u8, 1) };
    Response::text(200, "grew")
}

#[cfg(not(target_arch = "wasm32"))]
fn grow_past_the_cap() -> Response {
    Response::text(501, "only on wasm32")
}

/// `jws_verify` with arguments a well-behaved guest never passes; the host must answer each
/// with an error code, never trap or read outside memory.
#[cfg(target_arch = "wasm32")]
fn jws_abuse() -> [i32; 4] {
    #[link(wasm_import_module = "edgegate_v1")]
    unsafe extern "C" {
        fn jws_verify(
            alg: i32,
            kid: u32,
            kid_len: u32,
            input: u32,
            input_len: u32,
            sig: u32,
            sig_len: u32,
        ) -> i32;
    }
    let far = u32::MAX - 8;
    // SAFETY: the host reads guest memory only through bounds-checked slices; these pointers
    // are out of bounds on purpose, and nothing here touches them.
    unsafe {
        [
            jws_verify(1, 0, 8, far, 100, 0, 32), // the input past the end of memory
            jws_verify(1, 0, 100_000, 0, 8, 0, 32), // a kid past its cap
            jws_verify(99, 0, u32::MAX, 0, 8, 0, 32), // no such algorithm
            jws_verify(1, 0, u32::MAX, 0, 8, far, 64), // the signature past the end
        ]
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn jws_abuse() -> [i32; 4] {
    [0; 4]
}

/// `jwt_claims` with arguments a well-behaved guest never passes, then asked for `sub` into
/// a 1-byte buffer and again into one of the size the host said: the codes, and the answer
/// after its algorithm byte.
#[cfg(target_arch = "wasm32")]
fn claims_abuse() -> ([i32; 7], alloc::string::String) {
    #[link(wasm_import_module = "edgegate_v1")]
    unsafe extern "C" {
        fn jwt_claims(names: u32, names_len: u32, out: u32, cap: u32) -> i32;
    }
    let far = u32::MAX - 8;
    let missing = u32::MAX.to_le_bytes();
    let truncated = [5u8, 0, 0, 0, b'a'];
    let sub = [3u8, 0, 0, 0, b's', b'u', b'b'];
    let ptr = |bytes: &[u8]| bytes.as_ptr() as u32;
    let mut small = [0u8; 1];
    let mut out = vec![0u8; 256];
    // SAFETY: the host reads guest memory only through bounds-checked slices; the far
    // pointers are out of bounds on purpose, and nothing here touches them. The buffers
    // passed for writing are valid for the capacities given.
    let codes = unsafe {
        [
            jwt_claims(far, 100, 0, 0),           // names past the end
            jwt_claims(0, 100_000, 0, 0),         // names past their cap
            jwt_claims(ptr(&missing), 4, 0, 0),   // an absent name
            jwt_claims(ptr(&truncated), 5, 0, 0), // a list that does not decode
            jwt_claims(ptr(&sub), 7, far, 64),    // the answer past the end
            jwt_claims(ptr(&sub), 7, small.as_mut_ptr() as u32, 1), // too small: kept
            jwt_claims(ptr(&sub), 7, out.as_mut_ptr() as u32, out.len() as u32),
        ]
    };
    let len = usize::try_from(codes[6]).unwrap_or(0).min(out.len());
    let json = core::str::from_utf8(out.get(1..len).unwrap_or_default()).unwrap_or("?");
    (codes, json.into())
}

#[cfg(not(target_arch = "wasm32"))]
fn claims_abuse() -> ([i32; 7], alloc::string::String) {
    ([0; 7], alloc::string::String::new())
}

#[cfg(target_arch = "wasm32")]
fn trap() -> Response {
    core::arch::wasm32::unreachable()
}

#[cfg(not(target_arch = "wasm32"))]
fn trap() -> Response {
    Response::text(501, "only on wasm32")
}

edgegate_sdk::export!(handle);

/// Reads the body back from the host in 7-byte pieces (blob 0), checks it against the copy in
/// memory, and answers with the host's copy by handle.
fn blob_echo(req: &Request) -> Response {
    let mut copy = Vec::new();
    let mut piece = [0u8; 7];
    loop {
        match edgegate_sdk::Blob::BODY.read_at(copy.len() as u32, &mut piece) {
            Ok(0) => break,
            Ok(n) => copy.extend_from_slice(&piece[..n]),
            Err(_) => return Response::text(500, "blob_read failed"),
        }
    }
    if copy != req.body() || edgegate_sdk::Blob::BODY.read().as_deref() != Ok(req.body()) {
        return Response::text(500, "the blob differs from the body");
    }
    Response::builder(200)
        .header("x-blob-len", alloc::format!("{}", copy.len()))
        .body_blob(edgegate_sdk::Blob::BODY)
}
