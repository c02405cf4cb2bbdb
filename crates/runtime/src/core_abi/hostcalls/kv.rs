//! The KV hostcalls: `kv_get`, `kv_get_batch`, `kv_put`, `kv_put_batch`, `kv_delete`,
//! `kv_incr`, `kv_list`, on the namespaces the worker is granted.
//!
//! Each is asynchronous (`func_wrap_async`): a call that waits on Redis or on a redb commit
//! suspends the guest's fiber instead of blocking the runtime thread, and the wait is not
//! charged to the CPU budget. Arguments are checked and copied out of guest memory before the
//! wait (the memory cannot be borrowed across it); an in-memory get copies its key onto the
//! stack and allocates nothing but the boxed future.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use edgegate_abi::kv::{ListBlock, MAX_KEY_LEN, MAX_LIST, NO_TTL};
use edgegate_abi::{HeaderBlock, HostError};
use edgegate_kv::metrics::Op;
use edgegate_kv::{Backend, KvError, Store};
use wasmtime::Caller;

use tracing::Instrument;

use super::{answer, enter, guest_try, hostcall_span, kept, slice, slice_mut};
use crate::core_abi::request::{KeptCall, RequestState};

type HostFuture<'a> = Box<dyn Future<Output = wasmtime::Result<i32>> + Send + 'a>;

/// `call`, boxed for Wasmtime, inside `span`.
fn traced<'a>(
    span: tracing::Span,
    call: impl Future<Output = wasmtime::Result<i32>> + Send + 'a,
) -> HostFuture<'a> {
    Box::new(call.instrument(span))
}

/// A key copied out of guest memory, on the stack.
struct Key {
    buf: [u8; MAX_KEY_LEN],
    len: usize,
}

impl Key {
    fn read(data: &[u8], ptr: u32, len: u32) -> Result<Self, HostError> {
        if len as usize > MAX_KEY_LEN {
            return Err(HostError::LimitExceeded);
        }
        let bytes = slice(data, ptr, len).ok_or(HostError::InvalidArgument)?;
        let mut buf = [0; MAX_KEY_LEN];
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(Self { buf, len: bytes.len() })
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn code(error: &KvError) -> HostError {
    match error {
        KvError::NotAnInteger => HostError::NotAnInteger,
        KvError::Full { .. } => HostError::LimitExceeded,
        KvError::Unavailable(_) => HostError::Unavailable,
        KvError::Timeout(_) => HostError::Timeout,
    }
}

/// The guest's result for a failed store call; failures of the store itself are logged.
fn failed(state: &RequestState, ns: usize, error: &KvError) -> i32 {
    if matches!(error, KvError::Unavailable(_) | KvError::Timeout(_)) {
        tracing::warn!(
            worker = %state.worker.name,
            request_id = %state.request_id,
            namespace = %state.worker.kv[ns].name,
            "kv: {error}"
        );
    }
    code(error).code()
}

fn ttl(ttl_ms: i64) -> Result<Option<Duration>, HostError> {
    match ttl_ms {
        NO_TTL => Ok(None),
        ms if ms > 0 => Ok(Some(Duration::from_millis(ms as u64))),
        _ => Err(HostError::InvalidArgument),
    }
}

/// What each KV call does first: charge the host call, find the granted namespace, and
/// charge `ops` KV operations. The outer error is a trap (the host-call budget), the inner one
/// the guest's error code.
fn open(
    caller: &mut Caller<'_, RequestState>,
    ns_ptr: u32,
    ns_len: u32,
    ops: u32,
) -> wasmtime::Result<Result<usize, HostError>> {
    let Some((data, state)) = enter(caller)? else { return Ok(Err(HostError::InvalidArgument)) };
    let Some(name) = slice(data, ns_ptr, ns_len) else {
        return Ok(Err(HostError::InvalidArgument));
    };
    let Some(index) = state.worker.kv.iter().position(|ns| ns.name.as_bytes() == name) else {
        return Ok(Err(HostError::NotGranted));
    };
    if let Err(e) = state.charge_kv(ops) {
        return Ok(Err(e));
    }
    Ok(Ok(index))
}

/// The store of the worker's namespace `ns`, to hold across a wait.
fn store(caller: &Caller<'_, RequestState>, ns: usize) -> Store {
    caller.data().worker.kv[ns].store.clone()
}

/// `kv_get` on an in-memory namespace, answered in place: the key read straight from guest
/// memory, the store not cloned, nothing awaited. `None` for the other backends.
fn memory_get(
    caller: &mut Caller<'_, RequestState>,
    ns: usize,
    key_ptr: u32,
    key_len: u32,
) -> Option<Result<Option<Bytes>, HostError>> {
    let (data, state) = super::memory(caller)?;
    let Store::Memory(memory) = &state.worker.kv[ns].store else { return None };
    if key_len as usize > MAX_KEY_LEN {
        return Some(Err(HostError::LimitExceeded));
    }
    let found = slice(data, key_ptr, key_len).map(|key| memory.get_now(key));
    state.worker.kv[ns].store.count(Op::Get, found.is_some());
    Some(found.ok_or(HostError::InvalidArgument))
}

pub(super) fn kv_get<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, key_ptr, key_len, out_ptr, out_cap): (u32, u32, u32, u32, u32, u32),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "get"), async move {
        let is_same = |data: &[u8], call: &KeptCall| {
            call.matches(KeptCall::GET, slice(data, ns_ptr, ns_len), slice(data, key_ptr, key_len))
        };
        if let Some((call, value)) = kept(&mut caller, is_same) {
            caller.data_mut().charge_hostcall()?;
            return Ok(answer(&mut caller, |_, _| call, value, out_ptr, out_cap));
        }
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, 1)?);
        if let Some(found) = memory_get(&mut caller, ns, key_ptr, key_len) {
            let value = guest_try!(guest_try!(found), HostError::NotFound);
            let call = |data: &[u8], state: &RequestState| {
                let key = slice(data, key_ptr, key_len).unwrap_or_default();
                KeptCall::new(KeptCall::GET, &state.worker.kv[ns].name, key)
            };
            return Ok(answer(&mut caller, call, value, out_ptr, out_cap));
        }
        let store = store(&caller, ns);
        let key = guest_try!(Key::read(data(&mut caller), key_ptr, key_len));
        match store.observed(Op::Get, store.get(key.bytes())).await {
            Ok(Some(value)) => {
                let call = |_: &[u8], state: &RequestState| {
                    KeptCall::new(KeptCall::GET, &state.worker.kv[ns].name, key.bytes())
                };
                Ok(answer(&mut caller, call, value, out_ptr, out_cap))
            }
            Ok(None) => Ok(HostError::NotFound.code()),
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

/// The guest's memory, empty before it has one.
fn data<'c>(caller: &'c mut Caller<'_, RequestState>) -> &'c [u8] {
    super::memory(caller).map_or(&[], |(data, _)| &*data)
}

/// `[ptr, ptr + len)` of guest memory, copied (to outlive a wait).
fn copy(caller: &mut Caller<'_, RequestState>, ptr: u32, len: u32) -> Result<Vec<u8>, HostError> {
    slice(data(caller), ptr, len).map(<[u8]>::to_vec).ok_or(HostError::InvalidArgument)
}

pub(super) fn kv_get_batch<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, keys_ptr, keys_len, out_ptr, out_cap): (u32, u32, u32, u32, u32, u32),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "get_batch"), async move {
        let is_same = |data: &[u8], call: &KeptCall| {
            let keys = slice(data, keys_ptr, keys_len);
            call.matches(KeptCall::GET_BATCH, slice(data, ns_ptr, ns_len), keys)
        };
        if let Some((call, block)) = kept(&mut caller, is_same) {
            caller.data_mut().charge_hostcall()?;
            return Ok(answer(&mut caller, |_, _| call, block, out_ptr, out_cap));
        }
        let block = guest_try!(copy(&mut caller, keys_ptr, keys_len));
        let list = guest_try!(ListBlock::parse(&block).map_err(|_| HostError::InvalidArgument));
        let keys: Vec<&[u8]> = guest_try!(
            list.iter()
                .map(|key| key.filter(|k| k.len() <= MAX_KEY_LEN).ok_or(HostError::LimitExceeded))
                .collect()
        );
        let ops = keys.len().max(1) as u32;
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, ops)?);
        let store = store(&caller, ns);
        match store.observed(Op::GetBatch, store.get_many(&keys)).await {
            Ok(values) => {
                let mut out = Vec::with_capacity(edgegate_abi::kv::list_len(
                    values.iter().map(|v| v.as_deref()),
                ));
                for value in &values {
                    edgegate_abi::kv::push_item(&mut out, value.as_deref());
                }
                let call = |_: &[u8], state: &RequestState| {
                    KeptCall::new(KeptCall::GET_BATCH, &state.worker.kv[ns].name, &block)
                };
                Ok(answer(&mut caller, call, out.into(), out_ptr, out_cap))
            }
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

/// Checks a value against the worker's cap.
fn check_value(caller: &Caller<'_, RequestState>, len: usize) -> Result<(), HostError> {
    if len as u64 > caller.data().worker.limits.kv_value {
        return Err(HostError::LimitExceeded);
    }
    Ok(())
}

pub(super) fn kv_put<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, key_ptr, key_len, value_ptr, value_len, ttl_ms): (
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        i64,
    ),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "put"), async move {
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, 1)?);
        let store = store(&caller, ns);
        let ttl = guest_try!(ttl(ttl_ms));
        guest_try!(check_value(&caller, value_len as usize));
        let key = guest_try!(Key::read(data(&mut caller), key_ptr, key_len));
        let value = guest_try!(copy(&mut caller, value_ptr, value_len));
        match store.observed(Op::Put, store.put(key.bytes(), &value, ttl)).await {
            Ok(()) => Ok(0),
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

pub(super) fn kv_put_batch<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, entries_ptr, entries_len, ttl_ms): (u32, u32, u32, u32, i64),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "put_batch"), async move {
        let ttl = guest_try!(ttl(ttl_ms));
        let block = guest_try!(copy(&mut caller, entries_ptr, entries_len));
        let parsed =
            guest_try!(HeaderBlock::parse_entries(&block).map_err(|_| HostError::InvalidArgument));
        let entries: Vec<(&[u8], &[u8])> = parsed.iter().collect();
        for (key, value) in &entries {
            guest_try!(if key.len() > MAX_KEY_LEN, HostError::LimitExceeded);
            guest_try!(check_value(&caller, value.len()));
        }
        let ops = entries.len().max(1) as u32;
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, ops)?);
        let store = store(&caller, ns);
        match store.observed(Op::PutBatch, store.put_many(&entries, ttl)).await {
            Ok(()) => Ok(entries.len() as i32),
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

pub(super) fn kv_delete<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, key_ptr, key_len): (u32, u32, u32, u32),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "delete"), async move {
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, 1)?);
        let store = store(&caller, ns);
        let key = guest_try!(Key::read(data(&mut caller), key_ptr, key_len));
        match store.observed(Op::Delete, store.delete(key.bytes())).await {
            Ok(existed) => Ok(i32::from(existed)),
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

pub(super) fn kv_incr<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, key_ptr, key_len, delta, ttl_ms, out_ptr): (u32, u32, u32, u32, i64, i64, u32),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "incr"), async move {
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, 1)?);
        let store = store(&caller, ns);
        let ttl = guest_try!(ttl(ttl_ms));
        let key = guest_try!(Key::read(data(&mut caller), key_ptr, key_len));
        // Checked before the increment, so that a bad pointer cannot lose one.
        guest_try!(if slice(data(&mut caller), out_ptr, 8).is_none(), HostError::InvalidArgument);
        match store.observed(Op::Incr, store.incr(key.bytes(), delta, ttl)).await {
            Ok(sum) => {
                let (data, _) = guest_try!(super::memory(&mut caller), HostError::InvalidArgument);
                let out = guest_try!(slice_mut(data, out_ptr, 8), HostError::InvalidArgument);
                out.copy_from_slice(&sum.to_le_bytes());
                Ok(0)
            }
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}

#[allow(clippy::type_complexity, reason = "the ABI's nine arguments, as Wasmtime passes them")]
pub(super) fn kv_list<'a>(
    mut caller: Caller<'a, RequestState>,
    (ns_ptr, ns_len, prefix_ptr, prefix_len, after_ptr, after_len, limit, out_ptr, out_cap): (
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
    ),
) -> HostFuture<'a> {
    traced(hostcall_span!("kv", "list"), async move {
        // The call's arguments, unambiguously: the prefix's length first.
        let input = |data: &[u8]| -> Option<Vec<u8>> {
            let prefix = slice(data, prefix_ptr, prefix_len)?;
            let after = slice(data, after_ptr, after_len)?;
            Some([&prefix_len.to_le_bytes(), prefix, after, &limit.to_le_bytes()].concat())
        };
        let is_same = |data: &[u8], call: &KeptCall| {
            call.matches(KeptCall::LIST, slice(data, ns_ptr, ns_len), input(data).as_deref())
        };
        if let Some((call, block)) = kept(&mut caller, is_same) {
            caller.data_mut().charge_hostcall()?;
            return Ok(answer(&mut caller, |_, _| call, block, out_ptr, out_cap));
        }
        let ns = guest_try!(open(&mut caller, ns_ptr, ns_len, 1)?);
        let store = store(&caller, ns);
        guest_try!(if limit > MAX_LIST, HostError::LimitExceeded);
        let prefix = guest_try!(Key::read(data(&mut caller), prefix_ptr, prefix_len));
        let after = guest_try!(Key::read(data(&mut caller), after_ptr, after_len));
        let fingerprint = guest_try!(input(data(&mut caller)), HostError::InvalidArgument);
        match store
            .observed(Op::List, store.list(prefix.bytes(), after.bytes(), limit as usize))
            .await
        {
            Ok(keys) => {
                let mut out = Vec::with_capacity(edgegate_abi::kv::list_len(
                    keys.iter().map(|k| Some(&k[..])),
                ));
                for key in &keys {
                    edgegate_abi::kv::push_item(&mut out, Some(key));
                }
                let call = |_: &[u8], state: &RequestState| {
                    KeptCall::new(KeptCall::LIST, &state.worker.kv[ns].name, &fingerprint)
                };
                Ok(answer(&mut caller, call, out.into(), out_ptr, out_cap))
            }
            Err(e) => Ok(failed(caller.data(), ns, &e)),
        }
    })
}
