//! The raw host imports and the linker symbols: the only other place with `unsafe` besides
//! [`crate::arena`].
//!
//! On wasm32 these call into the gateway. Natively (unit tests of worker logic) they are inert:
//! no request to read, logs, random bytes and signature checks unavailable, no configuration,
//! and clocks from the standard library.

#[cfg(target_arch = "wasm32")]
mod imp {
    #[link(wasm_import_module = "edgegate_v1")]
    unsafe extern "C" {
        fn request_read(ptr: *mut u8, len: usize) -> i32;
        fn log_write(level: i32, ptr: *const u8, len: usize);
        fn clock_monotonic() -> u64;
        fn random_fill(ptr: *mut u8, len: usize) -> i32;
        fn config_get(key_ptr: *const u8, key_len: usize, out_ptr: *mut u8, out_cap: usize) -> i32;
        fn config_all(out_ptr: *mut u8, out_cap: usize) -> i32;
        fn clock_wall() -> i64;
        fn jws_verify(
            alg: i32,
            kid_ptr: *const u8,
            kid_len: usize,
            input_ptr: *const u8,
            input_len: usize,
            sig_ptr: *const u8,
            sig_len: usize,
        ) -> i32;
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
    use edgegate_abi::HostError;

    pub fn read_request(_buf: &mut [u8]) -> i32 {
        HostError::Unavailable.code()
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
}

pub use imp::*;
