//! Why a picture was not transformed.

use std::time::Duration;

/// Why a picture was not probed or transformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not a picture this host reads: corrupt, truncated, or not a JPEG.
    #[error("not a picture this host reads: {0}")]
    Invalid(String),
    /// The input, or the output asked for, has more pixels than the limit.
    #[error("{width}×{height} is more than the limit of {limit} pixels")]
    TooManyPixels {
        /// Its width.
        width: u64,
        /// Its height.
        height: u64,
        /// The limit.
        limit: u64,
    },
    /// The encoded output is larger than the limit.
    #[error("the output is {size} bytes, more than the limit of {limit}")]
    OutputTooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The crop rectangle is not inside the picture.
    #[error("crop {0:?} is not inside the {1}×{2} picture")]
    BadCrop(edgegate_abi::image::Rect, u32, u32),
    /// The request's CPU budget was spent before the transform ended.
    #[error("CPU budget spent: {used:?} of {budget:?}")]
    OverBudget {
        /// What the transform used.
        used: Duration,
        /// What it had.
        budget: Duration,
    },
    /// The request's deadline passed before the transform ended.
    #[error("the request's deadline passed")]
    Deadline,
}
