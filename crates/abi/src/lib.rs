//! The edgegate guest ABI, version 1: the contract between the gateway (host) and a worker
//! compiled to `wasm32-unknown-unknown` (guest).
//!
//! This crate is `no_std` and has no dependencies, so that both sides build it: the host
//! (`edgegate-runtime`) encodes requests and decodes outcomes with it, the guest SDK
//! (`edgegate-sdk`) decodes requests and encodes outcomes with it. One codec, tested once,
//! natively.
//!
//! A worker is a core Wasm module that
//!
//! * exports its linear memory as [`EXPORT_MEMORY`];
//! * exports [`EXPORT_HANDLE`] `(request_len: i32) -> i64`, called once per request on a fresh
//!   instance;
//! * imports host functions from the module [`IMPORT_MODULE`] (see [`imports`]).
//!
//! The ABI version is part of every name (`edgegate_v1_…`), so a module built for another
//! version can never link by accident, and the host can tell which version a module speaks
//! from its exports alone, before instantiating it ([`abi_version_of_export`]).
//!
//! One request, step by step:
//!
//! ```text
//!  host                                   guest
//!  ────                                   ─────
//!  instantiate (fresh, copy-on-write)
//!  edgegate_v1_handle(len) ─────────────▶ allocate `len` bytes in the arena
//!                          ◀───────────── request_read(ptr, len)
//!  encode the request straight into
//!  guest memory at ptr (the one copy)
//!                          ─────────────▶ RequestView::parse (zero-copy), run the handler,
//!                                         encode the outcome in the arena
//!                          ◀───────────── return (outcome_ptr << 32) | outcome_len
//!  decode the outcome, drop the instance
//! ```
//!
//! Both buffers are little-endian and need no alignment; their layouts are in
//! [`request`] and [`outcome`], and `docs/abi.md` describes them for people.
//!
//! ```
//! use edgegate_abi::request::{self, RequestParts, RequestView};
//!
//! let headers = [(&b"content-type"[..], &b"application/json"[..])];
//! let parts = RequestParts {
//!     method: "POST",
//!     target: "/echo?pretty=1",
//!     authority: "localhost:8080",
//!     headers: &headers[..],
//!     body: b"{}",
//!     tls: false,
//!     body_held: false,
//! };
//! let mut buf = vec![0; request::encoded_len(&parts).unwrap()];
//! request::encode(&parts, &mut buf).unwrap();
//!
//! let view = RequestView::parse(&buf).unwrap();
//! assert_eq!(view.method(), "POST");
//! assert_eq!(view.path(), "/echo");
//! assert_eq!(view.header("Content-Type"), Some(&b"application/json"[..]));
//! ```

#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

extern crate alloc;

mod codec;
pub mod image;
pub mod jws;
pub mod kv;
pub mod outcome;
pub mod request;

pub use codec::{DecodeError, HeaderBlock, HeaderIter, LengthMismatch, encode_entries};

/// The ABI version this crate describes.
pub const ABI_VERSION: u32 = 1;

/// The module name of every host import.
pub const IMPORT_MODULE: &str = "edgegate_v1";

/// The request entry point a worker exports: `(request_len: i32) -> i64`.
///
/// The result packs the outcome buffer as `(ptr << 32) | len` (see [`pack_outcome`]).
pub const EXPORT_HANDLE: &str = "edgegate_v1_handle";

/// The exported linear memory.
pub const EXPORT_MEMORY: &str = "memory";

/// The prefix shared by the exported names of every ABI version.
const EXPORT_PREFIX: &str = "edgegate_v";

/// The ABI version an export name claims, if it is an edgegate entry point.
///
/// `edgegate_v1_handle` → `Some(1)`, `edgegate_v7_handle` → `Some(7)`, `memory` → `None`.
/// The host uses this to refuse a module built for another ABI version with a clear message
/// instead of a missing-export error.
pub fn abi_version_of_export(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(EXPORT_PREFIX)?;
    let (digits, tail) = rest.split_once('_')?;
    if tail != "handle" || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Packs an outcome buffer's address and length into the `i64` that
/// [`EXPORT_HANDLE`] returns.
pub const fn pack_outcome(ptr: u32, len: u32) -> u64 {
    ((ptr as u64) << 32) | len as u64
}

/// Splits the value returned by [`EXPORT_HANDLE`] into `(ptr, len)`.
pub const fn unpack_outcome(packed: u64) -> (u32, u32) {
    ((packed >> 32) as u32, packed as u32)
}

/// The host functions a worker may import from [`IMPORT_MODULE`].
///
/// Every pointer is an offset into the guest's exported memory and every length is in bytes.
/// Functions that can fail return an `i32` that is either a non-negative result or a negative
/// [`HostError`] code. Each call counts against the worker's host-call budget.
pub mod imports {
    /// `request_read(ptr: i32, len: i32) -> i32`: the host encodes the current request (see
    /// [`crate::request`]) into `[ptr, ptr + len)`. `len` must be the length passed to
    /// [`crate::EXPORT_HANDLE`]. Returns 0 or a negative [`crate::HostError`].
    pub const REQUEST_READ: &str = "request_read";
    /// `log_write(level: i32, ptr: i32, len: i32)`: writes a UTF-8 message to the gateway's log
    /// at a [`crate::LogLevel`], tagged with the worker and the request id. Messages past 1 KiB
    /// are cut.
    pub const LOG_WRITE: &str = "log_write";
    /// `clock_monotonic() -> i64`: nanoseconds on a monotonic clock shared by every request of
    /// this gateway process. Only differences between two readings mean anything.
    pub const CLOCK_MONOTONIC: &str = "clock_monotonic";
    /// `random_fill(ptr: i32, len: i32) -> i32`: fills `[ptr, ptr + len)` with bytes from the
    /// host's cryptographically secure generator. Returns 0 or a negative
    /// [`crate::HostError`]; at most 64 KiB per call.
    pub const RANDOM_FILL: &str = "random_fill";
    /// `config_get(key_ptr: i32, key_len: i32, out_ptr: i32, out_cap: i32) -> i32`: looks up
    /// `key` in the worker's `config` table. Returns the value's length `n`; the value is
    /// written to `out` only when `n <= out_cap`, so a guest may ask again with a larger
    /// buffer. [`crate::HostError::NotFound`] when the key is not configured.
    pub const CONFIG_GET: &str = "config_get";
    /// `config_all(out_ptr: i32, out_cap: i32) -> i32`: the worker's whole `config` table in
    /// one call, as a block of `[key_len][value_len][key][value]` entries in key order (see
    /// [`crate::HeaderBlock::parse_entries`]). Returns the block's length `n`; it is written
    /// only when `n <= out_cap`. A guest that reads several values makes one call instead of
    /// one per key.
    pub const CONFIG_ALL: &str = "config_all";
    /// `clock_wall() -> i64`: nanoseconds since the Unix epoch, from the host's real-time clock.
    /// For token lifetimes and timestamps; use [`CLOCK_MONOTONIC`] to measure durations.
    pub const CLOCK_WALL: &str = "clock_wall";
    /// `jws_verify(alg: i32, kid_ptr: i32, kid_len: i32, input_ptr: i32, input_len: i32,
    /// sig_ptr: i32, sig_len: i32) -> i32`: checks a JWS signature against the worker's key set,
    /// which lives in the host and never enters guest memory.
    ///
    /// `alg` is a [`crate::jws::Alg`] code, `kid` the token's key id (pass
    /// [`crate::jws::NO_KID`] as `kid_len` when the token names none), `input` the signing input
    /// (`header.payload`, as sent) and `sig` the decoded signature. Returns 0 when the signature
    /// is valid; otherwise [`crate::HostError::NotFound`] (no such key),
    /// [`crate::HostError::AlgorithmMismatch`] (the key is for another algorithm),
    /// [`crate::HostError::BadSignature`], [`crate::HostError::NotGranted`] (the worker has no
    /// keys), [`crate::HostError::Unavailable`] (a key source has not been fetched yet, or is
    /// stale), [`crate::HostError::LimitExceeded`] (a kid or input over its cap) or
    /// [`crate::HostError::InvalidArgument`].
    pub const JWS_VERIFY: &str = "jws_verify";
    /// `jwt_claims(names_ptr: i32, names_len: i32, out_ptr: i32, out_cap: i32) -> i32`: the
    /// host verifies the request's `Authorization: Bearer` token itself, whole: its shape, its
    /// signature against the worker's key set, and its claims against the worker's policy
    /// (the `jwt.*` keys of its configuration). The worker still decides what to do with it.
    ///
    /// `names` is a list in the [`crate::kv`] item encoding: the claims the guest wants back
    /// (none: every claim). The answer is the token's [`crate::jws::Alg`] code as one byte,
    /// then a JSON object of the named claims the token has, each value as signed. Returns the
    /// answer's length `n`; it is written to `out` only when `n <= out_cap`, and kept for the
    /// same call again otherwise, as [`KV_GET`] does.
    ///
    /// A token the policy refuses is [`crate::jws::REFUSED`] minus the refusal's number (see
    /// [`crate::jws::refused`]); [`crate::HostError::NotGranted`] when the worker has no keys,
    /// [`crate::HostError::Unavailable`] when they cannot be consulted now, and
    /// [`crate::HostError::InvalidArgument`] for a `names` list that does not decode.
    pub const JWT_CLAIMS: &str = "jwt_claims";

    /// `kv_get(ns_ptr: i32, ns_len: i32, key_ptr: i32, key_len: i32, out_ptr: i32,
    /// out_cap: i32) -> i32`: reads `key` from the namespace `ns`. Returns the value's length
    /// `n`; the value is written to `out` only when `n <= out_cap`. When it is not, the host
    /// keeps the value, and the same call again (with a larger buffer) answers from it without
    /// a second read of the store. [`crate::HostError::NotFound`] when there is no such key.
    ///
    /// Every KV call may also fail with [`crate::HostError::NotGranted`] (the worker's
    /// configuration does not grant `ns`), [`crate::HostError::LimitExceeded`] (a key over
    /// [`crate::kv::MAX_KEY_LEN`], a value over the worker's cap, or the request's KV
    /// operations spent: each key of a batch counts one), [`crate::HostError::Unavailable`]
    /// (the store cannot be reached), [`crate::HostError::Timeout`] or
    /// [`crate::HostError::InvalidArgument`].
    pub const KV_GET: &str = "kv_get";
    /// `kv_get_batch(ns_ptr: i32, ns_len: i32, keys_ptr: i32, keys_len: i32, out_ptr: i32,
    /// out_cap: i32) -> i32`: reads several keys in one call. `keys` is a list block (see
    /// [`crate::kv`]); the answer is a list block of the values in the same order, a missing key
    /// as [`crate::kv::MISSING`]. Returns the answer's length, written and kept as
    /// [`KV_GET`] does.
    pub const KV_GET_BATCH: &str = "kv_get_batch";
    /// `kv_put(ns_ptr: i32, ns_len: i32, key_ptr: i32, key_len: i32, value_ptr: i32,
    /// value_len: i32, ttl_ms: i64) -> i32`: stores `value` under `key`, for `ttl_ms`
    /// milliseconds ([`crate::kv::NO_TTL`]: until deleted). Returns 0.
    pub const KV_PUT: &str = "kv_put";
    /// `kv_put_batch(ns_ptr: i32, ns_len: i32, entries_ptr: i32, entries_len: i32,
    /// ttl_ms: i64) -> i32`: stores every entry of an entry block (see [`crate::kv`]) in one
    /// call, all with the same TTL. Returns the number of entries stored.
    pub const KV_PUT_BATCH: &str = "kv_put_batch";
    /// `kv_delete(ns_ptr: i32, ns_len: i32, key_ptr: i32, key_len: i32) -> i32`: removes
    /// `key`. Returns 1 if it existed, 0 if not.
    pub const KV_DELETE: &str = "kv_delete";
    /// `kv_incr(ns_ptr: i32, ns_len: i32, key_ptr: i32, key_len: i32, delta: i64, ttl_ms: i64,
    /// out_ptr: i32) -> i32`: atomically adds `delta` to the integer stored under `key` (a
    /// missing key counts as 0) and writes the new value, an `i64` little-endian, to
    /// `[out_ptr, out_ptr + 8)`. Values are stored as decimal text. A `ttl_ms` other than
    /// [`crate::kv::NO_TTL`] is set only when the key has no expiry yet, which is what a
    /// fixed-window rate limiter needs. Returns 0, or [`crate::HostError::NotAnInteger`].
    pub const KV_INCR: &str = "kv_incr";
    /// `kv_list(ns_ptr: i32, ns_len: i32, prefix_ptr: i32, prefix_len: i32, after_ptr: i32,
    /// after_len: i32, limit: i32, out_ptr: i32, out_cap: i32) -> i32`: the keys that start
    /// with `prefix` and sort (bytewise) after `after` (empty: from the first), in order, at
    /// most `limit` (at most [`crate::kv::MAX_LIST`]), as a list block. Pass the last key of
    /// one page as `after` to get the next. Returns the block's length, written and kept as
    /// [`KV_GET`] does.
    pub const KV_LIST: &str = "kv_list";

    /// `fetch_start(req_ptr: i32, req_len: i32) -> i32`: starts an outbound HTTP request and
    /// returns a handle (≥ 0) to wait on with [`FETCH_WAIT`], at once: several fetches run
    /// concurrently. The request is a request buffer (see [`crate::request`]) whose target is
    /// an absolute URL: `http://host[:port]/path`, `https://…`, or `upstream://NAME/path` for a
    /// configured upstream. Returns [`crate::HostError::NotGranted`] when the worker's
    /// configuration allows neither the URL's scheme, host and port nor the upstream,
    /// [`crate::HostError::LimitExceeded`] past the worker's subrequest cap, or
    /// [`crate::HostError::InvalidArgument`] for a malformed request.
    pub const FETCH_START: &str = "fetch_start";
    /// `fetch_wait(handle: i32, out_ptr: i32, out_cap: i32) -> i32`: waits for a fetch (the
    /// wait is not charged to the CPU budget) and returns the length `n` of its response,
    /// encoded like a response outcome (see [`crate::outcome`]): status, headers and the whole
    /// body. It is written only when `n <= out_cap`; the host keeps it, so the guest can call
    /// again with a larger buffer. Errors: [`crate::HostError::Unavailable`] (no connection, or
    /// not a valid HTTP response), [`crate::HostError::Timeout`],
    /// [`crate::HostError::LimitExceeded`] (the response body is over the worker's cap) and
    /// [`crate::HostError::InvalidArgument`] (no such handle, or its response was already
    /// taken).
    pub const FETCH_WAIT: &str = "fetch_wait";

    /// `request_head(out_ptr: i32, out_cap: i32) -> i32`: the request buffer without its body
    /// (`body_len` 0, flag [`crate::request::FLAG_BODY_HELD`] set), for a guest that leaves
    /// the body in the host as blob 0. Returns its length `n`, written only when
    /// `n <= out_cap` (ask again with a larger buffer).
    pub const REQUEST_HEAD: &str = "request_head";
    /// `blob_len(blob: i32) -> i64`: the length of a blob the host holds for this request
    /// (0: the request body; others: what [`IMAGE_TRANSFORM`] returned), or
    /// [`crate::HostError::NotFound`].
    pub const BLOB_LEN: &str = "blob_len";
    /// `blob_read(blob: i32, offset: i32, out_ptr: i32, out_len: i32) -> i32`: copies up to
    /// `out_len` bytes of the blob from `offset` into guest memory and returns how many (0 at
    /// the end). Errors: [`crate::HostError::NotFound`],
    /// [`crate::HostError::InvalidArgument`].
    pub const BLOB_READ: &str = "blob_read";
    /// `image_probe(blob: i32, out_ptr: i32) -> i32`: reads the picture's header (no pixels are
    /// decoded) and writes an [`crate::image::ImageInfo`] (16 bytes) to `out_ptr`. Returns 0,
    /// or [`crate::HostError::NotGranted`] (the worker has no `image` grant),
    /// [`crate::HostError::InvalidImage`], [`crate::HostError::NotFound`].
    pub const IMAGE_PROBE: &str = "image_probe";
    /// `image_transform(blob: i32, spec_ptr: i32, spec_len: i32) -> i32`: decodes the picture
    /// in the blob, resizes, crops and orients it, encodes it as the
    /// [`crate::image::TransformSpec`] says, and returns the handle of a new blob with the
    /// result. It runs on the host's image threads; its CPU time counts against the request's
    /// CPU budget (past it, the request ends with `cpu_budget_exceeded`). Errors:
    /// [`crate::HostError::NotGranted`], [`crate::HostError::InvalidImage`],
    /// [`crate::HostError::LimitExceeded`] (too many input pixels, an output over the cap, more
    /// image memory than the worker's limit), [`crate::HostError::InvalidArgument`] (a
    /// malformed spec), [`crate::HostError::NotFound`] (no such blob).
    pub const IMAGE_TRANSFORM: &str = "image_transform";

    /// Whether the host provides `module::name`: one of [`ALL`] from [`crate::IMPORT_MODULE`].
    pub fn provided(module: &str, name: &str) -> bool {
        module == crate::IMPORT_MODULE && ALL.contains(&name)
    }

    /// Every host function of this ABI version: a module importing anything else from
    /// [`crate::IMPORT_MODULE`] (or from another module) cannot be linked.
    pub const ALL: &[&str] = &[
        REQUEST_READ,
        LOG_WRITE,
        CLOCK_MONOTONIC,
        RANDOM_FILL,
        CONFIG_GET,
        CONFIG_ALL,
        CLOCK_WALL,
        JWS_VERIFY,
        JWT_CLAIMS,
        KV_GET,
        KV_GET_BATCH,
        KV_PUT,
        KV_PUT_BATCH,
        KV_DELETE,
        KV_INCR,
        KV_LIST,
        FETCH_START,
        FETCH_WAIT,
        REQUEST_HEAD,
        BLOB_LEN,
        BLOB_READ,
        IMAGE_PROBE,
        IMAGE_TRANSFORM,
    ];
}

/// The negative codes a host function returns on failure.
///
/// Codes are stable across ABI versions: new ones are added, none is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum HostError {
    /// The key, entry or resource does not exist.
    NotFound = -1,
    /// A pointer or length is outside guest memory, or a string is not UTF-8.
    InvalidArgument = -2,
    /// A per-request limit (size, count) would be exceeded.
    LimitExceeded = -3,
    /// The worker's configuration does not grant this capability or namespace.
    NotGranted = -4,
    /// The backing service is unavailable; the request may succeed later.
    Unavailable = -5,
    /// The operation did not complete in time.
    Timeout = -6,
    /// The key exists but is for another algorithm than the one asked for.
    AlgorithmMismatch = -7,
    /// The signature does not verify (including one of the wrong length, or an ECDSA signature
    /// whose r or s is out of range).
    BadSignature = -8,
    /// The stored value is not a decimal `i64`, or the result would overflow one
    /// (`kv_incr`).
    NotAnInteger = -9,
    /// The bytes are not a picture the host reads: corrupt, truncated, or another format.
    InvalidImage = -10,
}

impl HostError {
    /// The code as the `i32` a host function returns.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// Interprets a negative host function result; `None` for an unknown code.
    pub const fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            -1 => Self::NotFound,
            -2 => Self::InvalidArgument,
            -3 => Self::LimitExceeded,
            -4 => Self::NotGranted,
            -5 => Self::Unavailable,
            -6 => Self::Timeout,
            -7 => Self::AlgorithmMismatch,
            -8 => Self::BadSignature,
            -9 => Self::NotAnInteger,
            -10 => Self::InvalidImage,
            _ => return None,
        })
    }
}

/// The level of a message sent through [`imports::LOG_WRITE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i32)]
pub enum LogLevel {
    /// Something failed.
    Error = 1,
    /// Something looks wrong.
    Warn = 2,
    /// Normal operation.
    Info = 3,
    /// Detail for debugging.
    Debug = 4,
    /// Even more detail.
    Trace = 5,
}

impl LogLevel {
    /// Interprets the level argument of [`imports::LOG_WRITE`]; unknown levels read as `Info`.
    pub const fn from_code(code: i32) -> Self {
        match code {
            1 => Self::Error,
            2 => Self::Warn,
            4 => Self::Debug,
            5 => Self::Trace,
            _ => Self::Info,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_of_export_names() {
        assert_eq!(abi_version_of_export(EXPORT_HANDLE), Some(ABI_VERSION));
        assert_eq!(abi_version_of_export("edgegate_v2_handle"), Some(2));
        assert_eq!(abi_version_of_export("edgegate_v10_handle"), Some(10));
        assert_eq!(abi_version_of_export("edgegate_v_handle"), None);
        assert_eq!(abi_version_of_export("edgegate_v1_alloc"), None);
        assert_eq!(abi_version_of_export("edgegate_v+1_handle"), None);
        assert_eq!(abi_version_of_export("memory"), None);
    }

    #[test]
    fn entry_blocks_round_trip_and_refuse_truncation() {
        let block = encode_entries([(&b"a"[..], &b"1"[..]), (b"jwt.issuer", b"https://id")]);
        let parsed = HeaderBlock::parse_entries(&block).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed.get("jwt.issuer"), Some(&b"https://id"[..]));
        assert!(HeaderBlock::parse_entries(&[]).unwrap().is_empty());
        // A cut at an entry boundary is a shorter block; anywhere else it is refused.
        for cut in 1..block.len() {
            match cut {
                10 => assert_eq!(HeaderBlock::parse_entries(&block[..cut]).unwrap().len(), 1),
                _ => assert!(HeaderBlock::parse_entries(&block[..cut]).is_err(), "{cut}"),
            }
        }
    }

    #[test]
    fn outcome_packing_round_trips() {
        for (ptr, len) in [(0, 0), (1, 2), (u32::MAX, u32::MAX), (65536, 17)] {
            assert_eq!(unpack_outcome(pack_outcome(ptr, len)), (ptr, len));
        }
    }

    #[test]
    fn host_error_codes_round_trip() {
        for e in [
            HostError::NotFound,
            HostError::InvalidArgument,
            HostError::LimitExceeded,
            HostError::NotGranted,
            HostError::Unavailable,
            HostError::Timeout,
            HostError::AlgorithmMismatch,
            HostError::BadSignature,
            HostError::NotAnInteger,
        ] {
            assert!(e.code() < 0);
            assert_eq!(HostError::from_code(e.code()), Some(e));
        }
        assert_eq!(HostError::from_code(0), None);
        assert_eq!(HostError::from_code(-100), None);
    }
}
