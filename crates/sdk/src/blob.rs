//! Bytes the host holds for the request: the body of a worker exported with
//! `export!(handler, body = host)`, and what image transforms produce.

use alloc::vec;
use alloc::vec::Vec;

use edgegate_abi::HostError;

/// A handle to bytes the host holds for this request. It is only good for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blob(u32);

impl Blob {
    /// The request's body.
    pub const BODY: Blob = Blob(0);

    pub(crate) fn from_code(code: i32) -> Result<Self, HostError> {
        u32::try_from(code).map(Blob).map_err(|_| error(code))
    }

    pub(crate) fn handle(self) -> u32 {
        self.0
    }

    /// Its length in bytes.
    pub fn len(self) -> Result<u64, HostError> {
        let n = crate::sys::blob_size(self.0);
        u64::try_from(n).map_err(|_| error(i32::try_from(n).unwrap_or(i32::MIN)))
    }

    /// Whether it is empty.
    pub fn is_empty(self) -> Result<bool, HostError> {
        self.len().map(|n| n == 0)
    }

    /// Copies bytes from `offset` into `buf`; returns how many (0 at the end).
    pub fn read_at(self, offset: u32, buf: &mut [u8]) -> Result<usize, HostError> {
        let n = crate::sys::read_blob(self.0, offset, buf);
        usize::try_from(n).map_err(|_| error(n))
    }

    /// Copies all of it into the worker's memory.
    pub fn read(self) -> Result<Vec<u8>, HostError> {
        let len = usize::try_from(self.len()?).map_err(|_| HostError::LimitExceeded)?;
        let mut bytes = vec![0; len];
        let mut at = 0;
        while at < len {
            match self.read_at(at as u32, &mut bytes[at..])? {
                0 => break,
                n => at += n,
            }
        }
        bytes.truncate(at);
        Ok(bytes)
    }
}

/// The error a negative host call result stands for.
pub(crate) fn error(code: i32) -> HostError {
    HostError::from_code(code).unwrap_or(HostError::InvalidArgument)
}
