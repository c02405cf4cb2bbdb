//! The raw host imports and the linker symbols: the only other place with `unsafe` besides
//! [`crate::arena`].
//!
//! On wasm32 these call into the gateway. Natively (unit tests of worker logic) they are inert:
//! no request to read, logs, random bytes and signature checks unavailable, no configuration,
//! no KV namespace, fetch or image work granted, no blobs, and clocks from the standard
//! library.

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::KvRead;

    #[link(wasm_import_module = "edgegate_v1")]
    unsafe extern "C" {
        fn request_read(ptr: *mut u8, len: usize) -> i32;
        fn log_write(level: i32, ptr: *const u8, len: usize);
        fn clock_monotonic() -> u64;
        fn random_fill(ptr: *mut u8, len: usize) -> i32;
        fn config_get(key_ptr: *const u8, key_len: usize, out_ptr: *mut u8, out_cap: usize) -> i32;
        fn config_all(out_ptr: *mut u8, out_cap: usize) -> i32;
        fn clock_wall() -> i64;
        fn jwt_claims(names: *const u8, names_len: usize, out: *mut u8, cap: usize) -> i32;
        fn jws_verify(
            alg: i32,
            kid_ptr: *const u8,
            kid_len: usize,
            input_ptr: *const u8,
            input_len: usize,
            sig_ptr: *const u8,
            sig_len: usize,
        ) -> i32;
        fn kv_get(
            ns: *const u8,
            ns_len: usize,
            key: *const u8,
            key_len: usize,
            out: *mut u8,
            cap: usize,
        ) -> i32;
        fn kv_get_batch(
            ns: *const u8,
            ns_len: usize,
            keys: *const u8,
            keys_len: usize,
            out: *mut u8,
            cap: usize,
        ) -> i32;
        fn kv_put(
            ns: *const u8,
            ns_len: usize,
            key: *const u8,
            key_len: usize,
            value: *const u8,
            value_len: usize,
            ttl_ms: i64,
        ) -> i32;
        fn kv_put_batch(
            ns: *const u8,
            ns_len: usize,
            entries: *const u8,
            entries_len: usize,
            ttl_ms: i64,
        ) -> i32;
        fn kv_delete(ns: *const u8, ns_len: usize, key: *const u8, key_len: usize) -> i32;
        fn kv_incr(
            ns: *const u8,
            ns_len: usize,
            key: *const u8,
            key_len: usize,
            delta: i64,
            ttl_ms: i64,
            out: *mut i64,
        ) -> i32;
        fn kv_list(
            ns: *const u8,
            ns_len: usize,
            prefix: *const u8,
            prefix_len: usize,
            after: *const u8,
            after_len: usize,
            limit: u32,
            out: *mut u8,
            cap: usize,
        ) -> i32;
        fn fetch_start(req: *const u8, req_len: usize) -> i32;
        fn fetch_wait(handle: i32, out: *mut u8, cap: usize) -> i32;
        fn request_head(out: *mut u8, cap: usize) -> i32;
        fn blob_len(blob: u32) -> i64;
        fn blob_read(blob: u32, offset: u32, out: *mut u8, len: usize) -> i32;
        fn image_probe(blob: u32, out: *mut u8) -> i32;
        fn image_transform(blob: u32, spec: *const u8, spec_len: usize) -> i32;
    }

    // Not in the block above: that one's `wasm_import_module` would make it a host import.
    unsafe extern "C" {
        static __heap_base: u8;
    }

    /// The first address past the stack and static data: where the arena starts. The linker
    /// defines the symbol; only its address is taken, never its value.
    pub fn heap_base() -> usize {
        (&raw const __heap_base) as usize
    }

    pub fn read_request(buf: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `buf.len()` bytes into `buf`, which is valid for
        // writes of that length.
        unsafe { request_read(buf.as_mut_ptr(), buf.len()) }
    }

    pub fn read_head(buf: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `buf.len()` bytes into `buf`.
        unsafe { request_head(buf.as_mut_ptr(), buf.len()) }
    }

    pub fn blob_size(blob: u32) -> i64 {
        // SAFETY: takes no pointers.
        unsafe { blob_len(blob) }
    }

    pub fn read_blob(blob: u32, offset: u32, out: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `out.len()` bytes into `out`.
        unsafe { blob_read(blob, offset, out.as_mut_ptr(), out.len()) }
    }

    pub fn probe_image(blob: u32, out: &mut [u8; edgegate_abi::image::ImageInfo::LEN]) -> i32 {
        // SAFETY: the host writes exactly `ImageInfo::LEN` bytes into `out`.
        unsafe { image_probe(blob, out.as_mut_ptr()) }
    }

    pub fn transform_image(blob: u32, spec: &[u8]) -> i32 {
        // SAFETY: the host only reads `spec`, which is valid for its length.
        unsafe { image_transform(blob, spec.as_ptr(), spec.len()) }
    }

    pub fn log(level: i32, message: &[u8]) {
        // SAFETY: the host only reads `message`, which is valid for its length.
        unsafe { log_write(level, message.as_ptr(), message.len()) }
    }

    pub fn monotonic_now() -> u64 {
        // SAFETY: takes no pointers.
        unsafe { clock_monotonic() }
    }

    pub fn fill_random(buf: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `buf.len()` bytes into `buf`.
        unsafe { random_fill(buf.as_mut_ptr(), buf.len()) }
    }

    pub fn config(key: &[u8], out: &mut [u8]) -> i32 {
        // SAFETY: the host reads `key` and writes at most `out.len()` bytes into `out`.
        unsafe { config_get(key.as_ptr(), key.len(), out.as_mut_ptr(), out.len()) }
    }

    pub fn config_table(out: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `out.len()` bytes into `out`.
        unsafe { config_all(out.as_mut_ptr(), out.len()) }
    }

    pub fn wall_now() -> i64 {
        // SAFETY: takes no pointers.
        unsafe { clock_wall() }
    }

    /// A KV call with a namespace and one byte argument (`KvCall`), writing into `out`.
    pub fn kv_read(call: KvRead<'_>, out: &mut [u8]) -> i32 {
        let (o, cap) = (out.as_mut_ptr(), out.len());
        // SAFETY: the host reads the namespace and argument buffers, each valid for its length,
        // and writes at most `cap` bytes into `out`.
        unsafe {
            match call {
                KvRead::Get { ns, key } => {
                    kv_get(ns.as_ptr(), ns.len(), key.as_ptr(), key.len(), o, cap)
                }
                KvRead::GetBatch { ns, keys } => {
                    kv_get_batch(ns.as_ptr(), ns.len(), keys.as_ptr(), keys.len(), o, cap)
                }
                KvRead::List { ns, prefix, after, limit } => kv_list(
                    ns.as_ptr(),
                    ns.len(),
                    prefix.as_ptr(),
                    prefix.len(),
                    after.as_ptr(),
                    after.len(),
                    limit,
                    o,
                    cap,
                ),
            }
        }
    }

    pub fn kv_write(ns: &[u8], key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        // SAFETY: the host only reads the three buffers, each valid for its length.
        unsafe {
            kv_put(
                ns.as_ptr(),
                ns.len(),
                key.as_ptr(),
                key.len(),
                value.as_ptr(),
                value.len(),
                ttl_ms,
            )
        }
    }

    pub fn kv_write_batch(ns: &[u8], entries: &[u8], ttl_ms: i64) -> i32 {
        // SAFETY: the host only reads the two buffers, each valid for its length.
        unsafe { kv_put_batch(ns.as_ptr(), ns.len(), entries.as_ptr(), entries.len(), ttl_ms) }
    }

    pub fn kv_remove(ns: &[u8], key: &[u8]) -> i32 {
        // SAFETY: the host only reads the two buffers, each valid for its length.
        unsafe { kv_delete(ns.as_ptr(), ns.len(), key.as_ptr(), key.len()) }
    }

    pub fn kv_add(ns: &[u8], key: &[u8], delta: i64, ttl_ms: i64, out: &mut i64) -> i32 {
        // SAFETY: the host reads the two buffers and writes 8 bytes to `out`, a valid i64.
        unsafe { kv_incr(ns.as_ptr(), ns.len(), key.as_ptr(), key.len(), delta, ttl_ms, out) }
    }

    pub fn fetch_begin(request: &[u8]) -> i32 {
        // SAFETY: the host only reads `request`, valid for its length.
        unsafe { fetch_start(request.as_ptr(), request.len()) }
    }

    pub fn fetch_end(handle: i32, out: &mut [u8]) -> i32 {
        // SAFETY: the host writes at most `out.len()` bytes into `out`.
        unsafe { fetch_wait(handle, out.as_mut_ptr(), out.len()) }
    }

    pub fn verified_claims(names: &[u8], out: &mut [u8]) -> i32 {
        // SAFETY: the host reads `names` and writes at most `out.len()` bytes into `out`.
        unsafe { jwt_claims(names.as_ptr(), names.len(), out.as_mut_ptr(), out.len()) }
    }

    pub fn verify_jws(alg: i32, kid: Option<&[u8]>, input: &[u8], signature: &[u8]) -> i32 {
        let (kid_ptr, kid_len) = match kid {
            Some(kid) => (kid.as_ptr(), kid.len()),
            None => (core::ptr::null(), edgegate_abi::jws::NO_KID as usize),
        };
        // SAFETY: the host only reads the three buffers, each valid for its length; with
        // `NO_KID` it does not read `kid_ptr` at all.
        unsafe {
            jws_verify(
                alg,
                kid_ptr,
                kid_len,
                input.as_ptr(),
                input.len(),
                signature.as_ptr(),
                signature.len(),
            )
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    extern crate std;
    use super::KvRead;
    use edgegate_abi::HostError;

    pub fn kv_read(_call: KvRead<'_>, _out: &mut [u8]) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn kv_write(_ns: &[u8], _key: &[u8], _value: &[u8], _ttl_ms: i64) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn kv_write_batch(_ns: &[u8], _entries: &[u8], _ttl_ms: i64) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn kv_remove(_ns: &[u8], _key: &[u8]) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn kv_add(_ns: &[u8], _key: &[u8], _delta: i64, _ttl_ms: i64, _out: &mut i64) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn fetch_begin(_request: &[u8]) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn fetch_end(_handle: i32, _out: &mut [u8]) -> i32 {
        HostError::InvalidArgument.code()
    }

    pub fn read_request(_buf: &mut [u8]) -> i32 {
        HostError::Unavailable.code()
    }

    pub fn read_head(_buf: &mut [u8]) -> i32 {
        HostError::Unavailable.code()
    }

    pub fn blob_size(_blob: u32) -> i64 {
        HostError::NotFound.code().into()
    }

    pub fn read_blob(_blob: u32, _offset: u32, _out: &mut [u8]) -> i32 {
        HostError::NotFound.code()
    }

    pub fn probe_image(_blob: u32, _out: &mut [u8; edgegate_abi::image::ImageInfo::LEN]) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn transform_image(_blob: u32, _spec: &[u8]) -> i32 {
        HostError::NotGranted.code()
    }

    pub fn log(_level: i32, _message: &[u8]) {}

    pub fn monotonic_now() -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }

    pub fn fill_random(_buf: &mut [u8]) -> i32 {
        HostError::Unavailable.code()
    }

    pub fn config(_key: &[u8], _out: &mut [u8]) -> i32 {
        HostError::NotFound.code()
    }

    pub fn config_table(_out: &mut [u8]) -> i32 {
        0
    }

    pub fn wall_now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }

    pub fn verify_jws(_alg: i32, _kid: Option<&[u8]>, _input: &[u8], _signature: &[u8]) -> i32 {
        HostError::Unavailable.code()
    }

    pub fn verified_claims(_names: &[u8], _out: &mut [u8]) -> i32 {
        HostError::NotGranted.code()
    }
}

/// The KV calls that answer into a buffer.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(target_arch = "wasm32"),
    allow(
        dead_code,
        reason = "only the wasm32 imports read the arguments; natively nothing is granted"
    )
)]
pub enum KvRead<'a> {
    Get { ns: &'a [u8], key: &'a [u8] },
    GetBatch { ns: &'a [u8], keys: &'a [u8] },
    List { ns: &'a [u8], prefix: &'a [u8], after: &'a [u8], limit: u32 },
}

pub use imp::*;
