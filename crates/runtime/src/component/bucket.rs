//! What `wasi:keyvalue`'s bindings hold for a component: an open bucket, a resource in its
//! table, and a failed call. A leaf: the bindings name these types, and the interface's
//! implementation ([`keyvalue`](super::keyvalue)) uses both.

use bytes::Bytes;

/// An open bucket: the index of its namespace among the worker's, and the key each cursor it
/// handed out continues after.
pub struct Bucket {
    ns: usize,
    cursors: Vec<Bytes>,
}

impl Bucket {
    pub(super) fn new(ns: usize) -> Self {
        Self { ns, cursors: Vec::new() }
    }

    /// The namespace's index among the worker's.
    pub(super) fn ns(&self) -> usize {
        self.ns
    }

    /// The key `cursor` continues after, if this bucket handed it out (cursors count from 1).
    pub(super) fn after(&self, cursor: u64) -> Option<Bytes> {
        let index = usize::try_from(cursor).ok()?.checked_sub(1)?;
        self.cursors.get(index).cloned()
    }

    /// A cursor for the page after `last`.
    pub(super) fn continue_after(&mut self, last: Bytes) -> u64 {
        self.cursors.push(last);
        self.cursors.len() as u64
    }
}

/// A failed call: `wasi:keyvalue`'s `error::other` with a message for the guest, or a trap.
pub enum KvFailure {
    Guest(String),
    Trap(wasmtime::Error),
}

impl From<wasmtime::component::ResourceTableError> for KvFailure {
    fn from(error: wasmtime::component::ResourceTableError) -> Self {
        Self::Trap(error.into())
    }
}
