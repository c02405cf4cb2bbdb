//! A JPEG's structure from its markers, read in Rust before libjpeg-turbo sees the file: the
//! frame (baseline or progressive, the components' sampling) and the number of scans.
//!
//! libjpeg-turbo 2.1 has no scan limit: a progressive picture with hundreds of valid scans
//! decodes for seconds, inside one call that cannot be interrupted. Counting the scans first
//! (a pass over the bytes, which stops at the limit) lets such a picture be refused before any
//! decoding. A progressive decode also holds the whole picture's DCT coefficients at once
//! (two bytes each, 64 a block), which [`Frame::coefficients`] sizes for the plan, and its
//! time grows with the blocks each scan covers, which [`Frame::block_scans`] counts.
//!
//! ```text
//!  FFD8 ─▶ segments (FFxx + length) ─▶ SOFn: sizes, sampling ─▶ FFDA (a scan) + entropy data ─▶ …
//!          entropy data ends at the first FF that is neither FF00 (stuffing) nor a restart
//! ```

use crate::Error;

/// What the markers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) progressive: bool,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Each component's horizontal and vertical sampling factors.
    pub(crate) sampling: Vec<(u32, u32)>,
    /// Each component's id, in the order of `sampling`.
    ids: Vec<u8>,
    /// How many scans the picture has.
    pub(crate) scans: u32,
    /// The blocks its scans cover, each scan's components' blocks added up.
    pub(crate) block_scans: u64,
}

fn invalid(what: &str) -> Error {
    Error::Invalid(format!("JPEG markers: {what}"))
}

/// Walks `bytes` marker by marker, counting scans up to `max_scans + 1`; refuses a picture
/// with more scans than `max_scans`.
pub(crate) fn read(bytes: &[u8], max_scans: u32) -> Result<Frame, Error> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err(invalid("no start of image"));
    }
    let mut frame = None;
    let mut scans = 0u32;
    let mut at = 2;
    loop {
        // A marker, after any fill bytes.
        if bytes.get(at) != Some(&0xFF) {
            return Err(invalid("a marker was expected"));
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&marker) = bytes.get(at) else { break };
        at += 1;
        match marker {
            // End of image.
            0xD9 => break,
            // Markers without a length.
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let len = match bytes.get(at..at + 2) {
            Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => break,
        };
        if len < 2 {
            return Err(invalid("a segment shorter than its length field"));
        }
        let body = bytes.get(at + 2..at + len).ok_or_else(|| invalid("a truncated segment"))?;
        at += len;
        match marker {
            // Start of frame; not DHT (C4), JPG (C8) or DAC (CC).
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                if frame.is_some() {
                    return Err(invalid("two frames"));
                }
                frame = Some(parse_frame(marker, body)?);
            }
            0xDA => {
                scans += 1;
                let Some(frame) = frame.as_mut() else {
                    return Err(invalid("a scan before the frame"));
                };
                if scans > max_scans {
                    return Err(Error::TooManyScans {
                        limit: max_scans,
                        progressive: frame.progressive,
                    });
                }
                frame.block_scans += frame.scan_blocks(body);
                at = end_of_entropy_data(bytes, at);
            }
            _ => {}
        }
    }
    let mut frame = frame.ok_or_else(|| invalid("no frame"))?;
    frame.scans = scans;
    Ok(frame)
}

fn parse_frame(marker: u8, body: &[u8]) -> Result<Frame, Error> {
    let [_precision, h0, h1, w0, w1, count, rest @ ..] = body else {
        return Err(invalid("a short frame header"));
    };
    let count = usize::from(*count);
    if count == 0 || rest.len() < 3 * count {
        return Err(invalid("a frame without its components"));
    }
    let components = rest.chunks_exact(3).take(count);
    let sampling = components
        .clone()
        .map(|c| (u32::from(c[1] >> 4), u32::from(c[1] & 0x0F)))
        .collect::<Vec<_>>();
    let ids = components.map(|c| c[0]).collect();
    if sampling.iter().any(|&(h, v)| !(1..=4).contains(&h) || !(1..=4).contains(&v)) {
        return Err(invalid("a sampling factor outside 1 to 4"));
    }
    Ok(Frame {
        // SOF2, SOF6, SOF10, SOF14.
        progressive: matches!(marker, 0xC2 | 0xC6 | 0xCA | 0xCE),
        width: u32::from(u16::from_be_bytes([*w0, *w1])),
        height: u32::from(u16::from_be_bytes([*h0, *h1])),
        sampling,
        ids,
        scans: 0,
        block_scans: 0,
    })
}

/// Where the entropy-coded data that starts at `at` ends: at its first `FF` followed by a
/// byte that is neither `00` (a stuffed `FF`) nor a restart marker (or the end of `bytes`).
fn end_of_entropy_data(bytes: &[u8], mut at: usize) -> usize {
    while let Some(found) = memchr::memchr(0xFF, &bytes[at.min(bytes.len())..]) {
        let ff = at + found;
        match bytes.get(ff + 1) {
            Some(0x00 | 0xD0..=0xD7) => at = ff + 2,
            // Fill bytes before a marker: the marker starts here.
            Some(_) | None => return ff,
        }
    }
    bytes.len()
}

impl Frame {
    /// Each component's blocks, rounded up to whole sampling units as libjpeg allocates
    /// them.
    fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let h_max = self.sampling.iter().map(|s| s.0).max().unwrap_or(1);
        let v_max = self.sampling.iter().map(|s| s.1).max().unwrap_or(1);
        let blocks = |size: u32, factor: u32, max: u32| {
            let samples = (u64::from(size) * u64::from(factor)).div_ceil(u64::from(max));
            samples.div_ceil(8).next_multiple_of(u64::from(factor))
        };
        self.sampling
            .iter()
            .map(move |&(h, v)| blocks(self.width, h, h_max) * blocks(self.height, v, v_max))
    }

    /// The blocks the scan whose header is `header` covers: those of the components it
    /// names.
    fn scan_blocks(&self, header: &[u8]) -> u64 {
        let count = header.first().map_or(0, |&n| usize::from(n));
        let named: Vec<u8> =
            header.get(1..).unwrap_or_default().chunks_exact(2).take(count).map(|c| c[0]).collect();
        self.blocks().zip(&self.ids).filter(|(_, id)| named.contains(id)).map(|(b, _)| b).sum()
    }

    /// Bytes of DCT coefficients the decode holds at once when the picture has several scans
    /// (progressive, or sequential with a scan per component), as libjpeg then buffers the
    /// whole picture; none for one scan, decoded a row of blocks at a time. For each
    /// component: its blocks, rounded up to whole sampling units as libjpeg allocates them,
    /// 64 coefficients of two bytes each.
    pub(crate) fn coefficients(&self) -> u64 {
        if !self.progressive && self.scans <= 1 {
            return 0;
        }
        self.blocks().map(|blocks| blocks * 128).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_testkit::jpeg::progressive;

    #[test]
    fn scans_are_counted_and_refused_past_the_limit() {
        let jpeg = progressive(64, 48, false, 20);
        let frame = read(&jpeg, 100).unwrap();
        assert_eq!((frame.progressive, frame.width, frame.height), (true, 64, 48));
        assert_eq!((frame.scans, frame.sampling.clone()), (20, vec![(1, 1)]));
        assert_eq!(read(&jpeg, 20).map(|f| f.scans), Ok(20));
        assert_eq!(read(&jpeg, 19), Err(Error::TooManyScans { limit: 19, progressive: true }));
        let color = read(&progressive(64, 48, true, 200), 1000).unwrap();
        assert_eq!((color.scans, color.sampling.len()), (200, 3));
        // 8×6 blocks a component: the DC scan covers all three, the others one each.
        assert_eq!(color.block_scans, 3 * 48 + 199 * 48);
    }

    #[test]
    fn a_progressive_decode_holds_every_coefficient() {
        let grey = read(&progressive(6320, 6320, false, 2), 100).unwrap();
        assert_eq!(grey.coefficients(), 790 * 790 * 128);
        // 4:2:0 at 17×17: luma 3×3 blocks rounded to 4×4, chroma 2×2 each.
        let frame = Frame {
            progressive: true,
            width: 17,
            height: 17,
            sampling: vec![(2, 2), (1, 1), (1, 1)],
            ids: vec![1, 2, 3],
            scans: 1,
            block_scans: 0,
        };
        assert_eq!(frame.scan_blocks(&[1, 2, 0]), 4, "Cb alone");
        assert_eq!(frame.scan_blocks(&[3, 1, 0, 2, 0, 3, 0]), 16 + 4 + 4, "all three");
        assert_eq!(frame.coefficients(), (16 + 4 + 4) * 128);
        let sequential = Frame { progressive: false, ..frame };
        assert_eq!(sequential.coefficients(), 0, "one scan: a row of blocks at a time");
        assert_eq!(Frame { scans: 3, ..sequential }.coefficients(), (16 + 4 + 4) * 128);
    }

    #[test]
    fn broken_structures_are_invalid() {
        let jpeg = progressive(16, 16, false, 3);
        for (name, bytes) in [
            ("empty", &b""[..]),
            ("not a jpeg", b"GIF89a"),
            ("no marker", &[0xFF, 0xD8, 0x00][..]),
            ("a truncated segment", &jpeg[..10]),
        ] {
            assert!(matches!(read(bytes, 100), Err(Error::Invalid(_))), "{name}");
        }
        // Every prefix is either refused or read without a panic.
        for end in 0..jpeg.len() {
            let _ = read(&jpeg[..end], 100);
        }
    }
}
