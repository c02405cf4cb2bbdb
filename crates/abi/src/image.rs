//! The image capability's two fixed layouts: what `image_probe` writes and what
//! `image_transform` reads (see [`crate::imports::IMAGE_PROBE`] and
//! [`crate::imports::IMAGE_TRANSFORM`]). Both are little-endian `u32`s.
//!
//! ```text
//! ImageInfo (16 bytes)          TransformSpec (48 bytes)
//! 0   format (Format)           0   width           0: from height and the aspect ratio
//! 4   width                     4   height          0: from width and the aspect ratio
//! 8   height                    8   fit (Fit)
//! 12  orientation (EXIF 1–8)    12  filter (Filter)
//!                               16  flags           bit 0: orient by EXIF; bit 1: crop
//!                               20  crop x          24  crop y
//!                               28  crop width      32  crop height
//!                               36  format (Format) of the output
//!                               40  quality         1–100 (JPEG)
//!                               44  background      0xRRGGBBAA, for `contain`'s bars
//! ```
//!
//! The crop is in the picture's coordinates as it is displayed (after EXIF orientation, when
//! that is asked for), and is applied before the resize.

use crate::DecodeError;
use crate::codec::Reader;
use alloc::vec::Vec;

/// A picture's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Format {
    /// JPEG (baseline or progressive).
    Jpeg = 1,
    /// PNG (8-bit RGBA out).
    Png = 2,
}

impl Format {
    fn from_code(code: u32) -> Result<Self, DecodeError> {
        match code {
            1 => Ok(Self::Jpeg),
            2 => Ok(Self::Png),
            _ => Err(DecodeError::BadValue),
        }
    }

    /// The media type, for `content-type`.
    pub const fn media_type(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
        }
    }
}

/// How the picture fills a `width`×`height` box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Fit {
    /// Stretch to exactly the box; the aspect ratio is not kept.
    Fill = 0,
    /// Keep the aspect ratio and fit inside the box; the rest of the box is `background`.
    Contain = 1,
    /// Keep the aspect ratio and cover the box; what overflows is cut off, evenly on both sides.
    Cover = 2,
}

impl Fit {
    fn from_code(code: u32) -> Result<Self, DecodeError> {
        match code {
            0 => Ok(Self::Fill),
            1 => Ok(Self::Contain),
            2 => Ok(Self::Cover),
            _ => Err(DecodeError::BadValue),
        }
    }
}

/// The resampling filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Filter {
    /// Nearest neighbour.
    Nearest = 0,
    /// Bilinear (triangle), sharp's `linear`.
    Bilinear = 1,
    /// Catmull-Rom bicubic, sharp's `cubic`.
    CatmullRom = 2,
    /// Mitchell-Netravali bicubic, sharp's `mitchell`.
    Mitchell = 3,
    /// Lanczos with a window of 3, sharp's default `lanczos3`.
    Lanczos3 = 4,
}

impl Filter {
    fn from_code(code: u32) -> Result<Self, DecodeError> {
        match code {
            0 => Ok(Self::Nearest),
            1 => Ok(Self::Bilinear),
            2 => Ok(Self::CatmullRom),
            3 => Ok(Self::Mitchell),
            4 => Ok(Self::Lanczos3),
            _ => Err(DecodeError::BadValue),
        }
    }
}

/// What `image_probe` writes: a picture's format, size and EXIF orientation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// Its encoding.
    pub format: Format,
    /// Width in pixels, as stored (before orientation).
    pub width: u32,
    /// Height in pixels, as stored.
    pub height: u32,
    /// The EXIF orientation, 1 (none) to 8; 1 when the picture has none.
    pub orientation: u32,
}

impl ImageInfo {
    /// The encoded length.
    pub const LEN: usize = 16;

    /// Encodes it.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        for (slot, value) in out.chunks_exact_mut(4).zip([
            self.format as u32,
            self.width,
            self.height,
            self.orientation,
        ]) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
        out
    }

    /// Decodes it.
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let info = Self {
            format: Format::from_code(r.u32()?)?,
            width: r.u32()?,
            height: r.u32()?,
            orientation: r.u32()?,
        };
        r.finish()?;
        Ok(info)
    }
}

/// A rectangle of a picture, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// What `image_transform` does to a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformSpec {
    /// The box's width; 0: from `height` and the (cropped) picture's aspect ratio.
    pub width: u32,
    /// The box's height; 0: from `width` and the aspect ratio. Both 0: the picture's own size.
    pub height: u32,
    /// How the picture fills the box.
    pub fit: Fit,
    /// The resampling filter.
    pub filter: Filter,
    /// Turn the picture upright by its EXIF orientation first.
    pub orient: bool,
    /// Cut this rectangle out first (in displayed coordinates).
    pub crop: Option<Rect>,
    /// The output's encoding.
    pub format: Format,
    /// JPEG quality, 1 to 100.
    pub quality: u32,
    /// `contain`'s bars, `0xRRGGBBAA`.
    pub background: u32,
}

impl Default for TransformSpec {
    fn default() -> Self {
        Self {
            width: 0,
            height: 0,
            fit: Fit::Fill,
            filter: Filter::Bilinear,
            orient: true,
            crop: None,
            format: Format::Jpeg,
            quality: 80,
            background: 0x0000_00ff,
        }
    }
}

const FLAG_ORIENT: u32 = 1;
const FLAG_CROP: u32 = 2;

impl TransformSpec {
    /// The encoded length.
    pub const LEN: usize = 48;

    /// Encodes it.
    pub fn encode(&self) -> Vec<u8> {
        let crop = self.crop.unwrap_or(Rect { x: 0, y: 0, width: 0, height: 0 });
        let flags = if self.orient { FLAG_ORIENT } else { 0 }
            | if self.crop.is_some() { FLAG_CROP } else { 0 };
        [
            self.width,
            self.height,
            self.fit as u32,
            self.filter as u32,
            flags,
            crop.x,
            crop.y,
            crop.width,
            crop.height,
            self.format as u32,
            self.quality,
            self.background,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }

    /// Decodes and checks it: known codes, a quality of 1 to 100, a crop of at least one pixel,
    /// no flag this version does not know.
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let (width, height) = (r.u32()?, r.u32()?);
        let fit = Fit::from_code(r.u32()?)?;
        let filter = Filter::from_code(r.u32()?)?;
        let flags = r.u32()?;
        let crop = Rect { x: r.u32()?, y: r.u32()?, width: r.u32()?, height: r.u32()? };
        let format = Format::from_code(r.u32()?)?;
        let quality = r.u32()?;
        let background = r.u32()?;
        r.finish()?;
        let has_crop = flags & FLAG_CROP != 0;
        if flags & !(FLAG_ORIENT | FLAG_CROP) != 0
            || !(1..=100).contains(&quality)
            || (has_crop && (crop.width == 0 || crop.height == 0))
        {
            return Err(DecodeError::BadValue);
        }
        Ok(Self {
            width,
            height,
            fit,
            filter,
            orient: flags & FLAG_ORIENT != 0,
            crop: has_crop.then_some(crop),
            format,
            quality,
            background,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_round_trip() {
        let info = ImageInfo { format: Format::Jpeg, width: 1600, height: 1200, orientation: 6 };
        assert_eq!(ImageInfo::parse(&info.encode()), Ok(info));
        assert!(ImageInfo::parse(&info.encode()[..15]).is_err());
    }

    #[test]
    fn spec_round_trip_and_checks() {
        let spec = TransformSpec {
            width: 640,
            height: 0,
            fit: Fit::Cover,
            filter: Filter::Lanczos3,
            orient: false,
            crop: Some(Rect { x: 1, y: 2, width: 3, height: 4 }),
            format: Format::Png,
            quality: 90,
            background: 0xffff_ffff,
        };
        let bytes = spec.encode();
        assert_eq!(bytes.len(), TransformSpec::LEN);
        assert_eq!(TransformSpec::parse(&bytes), Ok(spec));
        assert_eq!(TransformSpec::parse(&TransformSpec::default().encode()).unwrap().crop, None);
        let bad = |at: usize, value: u32| {
            let mut b = bytes.clone();
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
            TransformSpec::parse(&b)
        };
        assert!(bad(8, 3).is_err(), "unknown fit");
        assert!(bad(12, 5).is_err(), "unknown filter");
        assert!(bad(16, 4 | 2).is_err(), "unknown flag");
        assert!(bad(28, 0).is_err(), "empty crop");
        assert!(bad(36, 9).is_err(), "unknown format");
        assert!(bad(40, 0).is_err() && bad(40, 101).is_err(), "quality");
        assert!(TransformSpec::parse(&bytes[..47]).is_err(), "truncated");
    }
}
