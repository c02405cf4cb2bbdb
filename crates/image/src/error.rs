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
    /// The picture has more scans than the limit: a progressive picture with hundreds of
    /// scans takes seconds to decode.
    #[error("more than {limit} scans (progressive: {progressive})")]
    TooManyScans {
        /// The limit.
        limit: u32,
        /// Whether the picture is progressive.
        progressive: bool,
    },
    /// Decoding the picture alone would take longer than the CPU time or the time to the
    /// deadline the request has left.
    #[error("decoding it takes at least {least:?}, more than the {left:?} left")]
    TooMuchWork {
        /// The least time its decoding takes.
        least: Duration,
        /// What the request had left.
        left: Duration,
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
