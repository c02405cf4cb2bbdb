//! What a component holds in the host's memory on its requests' behalf, charged to the
//! worker's memory limit together with its linear memory.
//!
//! wasi-http keeps a component's `fields` (header maps), requests, responses, bodies and
//! pollables in the store's resource table, in host memory the linear-memory limit never
//! sees: a guest that builds hundreds of 120 KiB header maps would hold megabytes of the
//! host's. Three bounds apply:
//!
//! - each `fields` holds at most [`MAX_FIELDS_SIZE`] (wasi-http's own measure: names and
//!   values plus the map's overhead), and `get-random-bytes` returns at most [`MAX_RANDOM`]
//!   bytes a call;
//! - the table holds at most [`MAX_RESOURCES`] resources;
//! - what the table holds, counted as the header maps' sizes plus [`RESOURCE_COST`] for each
//!   resource, and the linear memory together stay within the worker's `memory` limit.
//!
//! Counting walks the table, so it is not done after every host call: a host call adds at most
//! about [`STEP`] (one header map at its cap), so the walk runs only once the calls since the
//! last one could have reached the limit. A request that holds little never walks it.

use wasmtime::component::ResourceTable;
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::p2::types::{
    HostIncomingResponse, HostOutgoingRequest, HostOutgoingResponse,
};

/// The most a `fields` resource may hold (wasi-http's default is 128 KiB; a request's
/// headers at the gateway are at most 16 KiB by default).
pub(crate) const MAX_FIELDS_SIZE: usize = 64 << 10;

/// The most resources a request's table holds at once.
pub(crate) const MAX_RESOURCES: usize = 4096;

/// The most bytes one `get-random-bytes` (or the insecure one) returns, as Web Crypto's
/// `getRandomValues` caps it.
pub(crate) const MAX_RANDOM: u64 = 64 << 10;

/// What a resource is counted as, besides the header map it may hold: its table entry and
/// its boxed state.
pub(crate) const RESOURCE_COST: u64 = 256;

/// The most one host call can add to what is held, as counted here.
const STEP: u64 = MAX_FIELDS_SIZE as u64 + RESOURCE_COST;

/// One request's count.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// What the last walk of the table found.
    counted: u64,
    /// Host calls since then.
    calls: u64,
}

impl Held {
    /// After a host call: whether the table may now hold more than `room` bytes, walking it
    /// only when the calls since the last walk could have brought it there. `Err` holds what
    /// the walk found.
    pub(crate) fn check(&mut self, table: &mut ResourceTable, room: u64) -> Result<(), u64> {
        self.calls += 1;
        if self.counted + self.calls * STEP <= room {
            return Ok(());
        }
        self.counted = count(table);
        self.calls = 0;
        if self.counted > room { Err(self.counted) } else { Ok(()) }
    }

    /// What the last walk found (a lower bound of what is held now).
    pub(crate) fn counted(&self) -> u64 {
        self.counted
    }
}

/// What `table` holds: each resource's cost, plus the header maps in it.
fn count(table: &mut ResourceTable) -> u64 {
    table
        .iter_mut()
        .map(|entry| {
            let fields = if let Some(fields) = entry.downcast_ref::<FieldMap>() {
                size(fields)
            } else if let Some(request) = entry.downcast_ref::<HostOutgoingRequest>() {
                size(&request.headers)
            } else if let Some(response) = entry.downcast_ref::<HostOutgoingResponse>() {
                size(&response.headers)
            } else if let Some(response) = entry.downcast_ref::<HostIncomingResponse>() {
                size(&response.headers)
            } else {
                0
            };
            RESOURCE_COST + fields
        })
        .sum()
}

/// A header map's names and values, and a map entry's overhead for each.
fn size(fields: &FieldMap) -> u64 {
    fields.iter().map(|(name, value)| (name.as_str().len() + value.len() + 64) as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(headers: usize, value: usize) -> FieldMap {
        let mut fields = FieldMap::new_mutable(usize::MAX);
        for i in 0..headers {
            let name = http::HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap();
            let value = http::HeaderValue::from_bytes(&vec![b'a'; value]).unwrap();
            fields.append_raw(name, value).unwrap();
        }
        fields
    }

    #[test]
    fn header_maps_and_resources_are_counted_when_they_may_be_over() {
        let mut table = ResourceTable::new();
        let mut held = Held::default();
        let room = 1 << 20;
        // Under the room: no walk.
        table.push(fields(1, 1000)).unwrap();
        assert_eq!(held.check(&mut table, room), Ok(()));
        assert_eq!(held.counted(), 0, "not walked");
        // Many maps of 60 KiB: refused once a walk finds them over.
        let mut refused = None;
        for _ in 0..40 {
            table.push(fields(6, 10_000)).unwrap();
            if let Err(found) = held.check(&mut table, room) {
                refused = Some(found);
                break;
            }
        }
        let found = refused.expect("refused");
        assert!(found > room && found < room + 2 * STEP, "{found}");
        // What is under the room passes a walk.
        let mut small = ResourceTable::new();
        for _ in 0..100 {
            small.push(fields(1, 10)).unwrap();
        }
        let mut held = Held { counted: 0, calls: 1000 };
        assert_eq!(held.check(&mut small, room), Ok(()));
        assert_eq!(held.counted(), 100 * (RESOURCE_COST + 3 + 10 + 64));
    }
}
