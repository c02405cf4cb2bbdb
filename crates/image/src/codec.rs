//! Decoding and encoding: libjpeg-turbo (TurboJPEG 2 API) for JPEG, the `png` crate for PNG.

use turbojpeg::{Compressor, Decompressor, Image, PixelFormat, Subsamp};

use crate::{Error, Format, Pixels};

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

/// A JPEG's stored size, from its header alone.
pub(crate) fn jpeg_size(bytes: &[u8]) -> Result<(u32, u32), Error> {
    let header = Decompressor::new().map_err(invalid)?.read_header(bytes).map_err(invalid)?;
    let dim = |d: usize| u32::try_from(d).map_err(invalid);
    Ok((dim(header.width)?, dim(header.height)?))
}

/// Decodes a JPEG to RGBA at `size`, which must be its size scaled by one of libjpeg-turbo's
/// factors (see [`crate::plan::scaled`]): TurboJPEG then scales in the IDCT, which is where
/// most of a large picture's decoding time goes.
pub(crate) fn decode_jpeg(bytes: &[u8], size: (u32, u32)) -> Result<Pixels, Error> {
    let (width, height) = (size.0 as usize, size.1 as usize);
    let mut rgba = vec![0; width * height * 4];
    let image =
        Image { pixels: &mut rgba[..], width, pitch: width * 4, height, format: PixelFormat::RGBA };
    // A truncated or corrupt stream is an error, not a warning: TurboJPEG 2 reports warnings
    // (such as "premature end of data") as a failed call.
    Decompressor::new().map_err(invalid)?.decompress(bytes, image).map_err(invalid)?;
    Ok(Pixels { width: size.0, height: size.1, rgba })
}

/// Encodes RGBA pixels. JPEG drops the alpha channel and subsamples chroma 4:2:0, as sharp does
/// by default.
pub(crate) fn encode(pixels: &Pixels, format: Format, quality: u32) -> Result<Vec<u8>, Error> {
    let encode_failed = |e: &dyn std::fmt::Display| Error::Invalid(format!("encoding: {e}"));
    match format {
        Format::Jpeg => {
            let mut compressor = Compressor::new().map_err(|e| encode_failed(&e))?;
            compressor.set_quality(quality as i32);
            compressor.set_subsamp(Subsamp::Sub2x2);
            let image = Image {
                pixels: &pixels.rgba[..],
                width: pixels.width as usize,
                pitch: pixels.width as usize * 4,
                height: pixels.height as usize,
                format: PixelFormat::RGBA,
            };
            compressor.compress_to_vec(image).map_err(|e| encode_failed(&e))
        }
        Format::Png => {
            let mut out = Vec::new();
            let mut encoder = png::Encoder::new(&mut out, pixels.width, pixels.height);
            encoder.set_color(png::ColorType::Rgba);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.set_compression(png::Compression::Fast);
            let mut writer = encoder.write_header().map_err(|e| encode_failed(&e))?;
            writer.write_image_data(&pixels.rgba).map_err(|e| encode_failed(&e))?;
            writer.finish().map_err(|e| encode_failed(&e))?;
            Ok(out)
        }
    }
}
