//! `jwt_claims`: the request's bearer token verified whole in the host, with the worker's keys
//! and policy, answering the claims the guest names (crate::capability::token).

use edgegate_abi::HostError;
use edgegate_abi::jws::REFUSED;
use edgegate_abi::kv::ListBlock;
use edgegate_sdk::jwt;
use wasmtime::Caller;

use super::{answer, guest_try, hostcall_span, kept, memory, slice};
use crate::core_abi::request::{KeptCall, RequestState};

/// A list of claim names longer than this is refused: names are short, and a token's claims
/// are bounded by its policy's size cap anyway.
const MAX_NAMES: u32 = 4 << 10;

pub(super) fn jwt_claims(
    mut caller: Caller<'_, RequestState>,
    names_ptr: u32,
    names_len: u32,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let _span = hostcall_span!("jwt", "claims").entered();
    caller.data_mut().charge_hostcall()?;
    let is_same = |data: &[u8], call: &KeptCall| {
        call.matches(KeptCall::CLAIMS, Some(b""), slice(data, names_ptr, names_len))
    };
    if let Some((call, claims)) = kept(&mut caller, is_same) {
        return Ok(answer(&mut caller, |_, _| call, claims, out_ptr, out_cap));
    }
    let (data, state) = guest_try!(memory(&mut caller), HostError::InvalidArgument);
    guest_try!(if names_len > MAX_NAMES, HostError::LimitExceeded);
    let names = guest_try!(slice(data, names_ptr, names_len), HostError::InvalidArgument);
    let list = guest_try!(ListBlock::parse(names).ok(), HostError::InvalidArgument);
    let names = list.iter().map(|name| std::str::from_utf8(name?).ok());
    let names = guest_try!(names.collect::<Option<Vec<_>>>(), HostError::InvalidArgument);
    let keys = guest_try!(&state.worker.keys, HostError::NotGranted);
    let now = (state.worker.wall_clock)();
    let (headers, policy) = (&state.request.headers, &state.worker.jwt);
    let claims = match crate::capability::token::claims(headers, keys, policy, now, &names) {
        Ok(claims) => claims.into(),
        Err(jwt::Error::KeysUnavailable) => return Ok(HostError::Unavailable.code()),
        Err(jwt::Error::NotConfigured) => return Ok(HostError::NotGranted.code()),
        Err(refusal) => return Ok(REFUSED - refusal.number() as i32),
    };
    let call = |data: &[u8], _: &RequestState| {
        KeptCall::new(KeptCall::CLAIMS, "", slice(data, names_ptr, names_len).unwrap_or_default())
    };
    Ok(answer(&mut caller, call, claims, out_ptr, out_cap))
}
