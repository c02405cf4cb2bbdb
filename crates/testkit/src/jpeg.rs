//! Hand-made progressive JPEGs, for the tests of the image capability's limits: valid files
//! (libjpeg-turbo decodes them to a flat grey picture) with as many scans as asked for, of any
//! size, at a few bytes per scan.
//!
//! Every DCT coefficient is zero. The first scan codes the DC coefficients of every component
//! (one Huffman code a block); then, for each component and each AC coefficient in turn, a
//! first scan at successive-approximation bit 13 and its 13 refinements down to bit 0, each
//! one end-of-band run over all of the component's blocks. That is up to
//! `1 + components × 63 × 14` scans: 883 for a grey picture.

/// A progressive JPEG of `width`×`height` pixels: grey (one component) or, with `color`,
/// YCbCr at 4:4:4; coded in `scans` scans (at least 1, at most `1 + components × 882`).
pub fn progressive(width: u16, height: u16, color: bool, scans: usize) -> Vec<u8> {
    let components: u8 = if color { 3 } else { 1 };
    assert!(
        (1..=1 + usize::from(components) * 63 * 14).contains(&scans),
        "{scans} scans is more than a {components}-component picture can have"
    );
    let mut out = vec![0xFF, 0xD8];
    // One quantization table of ones.
    segment(&mut out, 0xDB, &[&[0][..], &[1; 64]].concat());
    // SOF2: progressive, 8-bit, each component sampled 1×1, table 0.
    let mut frame = vec![8];
    frame.extend_from_slice(&height.to_be_bytes());
    frame.extend_from_slice(&width.to_be_bytes());
    frame.push(components);
    for id in 1..=components {
        frame.extend_from_slice(&[id, 0x11, 0]);
    }
    segment(&mut out, 0xC2, &frame);
    // DC table 0: the one symbol 0 (no difference), code `0`. AC table 0: EOB runs EOB0 to
    // EOB14 (symbols 0x00, 0x10, …, 0xE0), four bits each.
    let mut dht = vec![0x00, 1];
    dht.extend_from_slice(&[0; 15]);
    dht.push(0);
    dht.push(0x10);
    dht.extend_from_slice(&[0, 0, 0, 15]);
    dht.extend_from_slice(&[0; 12]);
    dht.extend((0..15).map(|r| r << 4));
    segment(&mut out, 0xC4, &dht);

    let blocks = usize::from(width.div_ceil(8)) * usize::from(height.div_ceil(8));
    // The DC scan: every component, a zero difference per block.
    let ids: Vec<u8> = (1..=components).collect();
    scan(&mut out, &ids, (0, 0, 0, 0), |bits| {
        for _ in 0..blocks * usize::from(components) {
            bits.put(0, 1);
        }
    });
    let mut left = scans - 1;
    'all: for id in 1..=components {
        for k in 1..=63 {
            for (ah, al) in std::iter::once((0, 13)).chain((1..=13).rev().map(|ah| (ah, ah - 1))) {
                if left == 0 {
                    break 'all;
                }
                left -= 1;
                scan(&mut out, &[id], (k, k, ah, al), |bits| end_of_band(bits, blocks));
            }
        }
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

/// A marker segment: `FF marker`, its length, `body`.
fn segment(out: &mut Vec<u8>, marker: u8, body: &[u8]) {
    out.extend_from_slice(&[0xFF, marker]);
    out.extend_from_slice(&(body.len() as u16 + 2).to_be_bytes());
    out.extend_from_slice(body);
}

/// One scan of the components `ids` (DC table 0, AC table 0) over the spectral band and
/// successive-approximation bits `(ss, se, ah, al)`, its entropy-coded data written by `code`.
fn scan(
    out: &mut Vec<u8>,
    ids: &[u8],
    (ss, se, ah, al): (u8, u8, u8, u8),
    code: impl Fn(&mut Bits),
) {
    let mut header = vec![ids.len() as u8];
    for &id in ids {
        header.extend_from_slice(&[id, 0x00]);
    }
    header.extend_from_slice(&[ss, se, (ah << 4) | al]);
    segment(out, 0xDA, &header);
    let mut bits = Bits::default();
    code(&mut bits);
    out.extend_from_slice(&bits.finish());
}

/// `blocks` blocks with nothing in the band: end-of-band runs of at most 32767 blocks, each
/// the symbol `r << 4` (four bits: its index among the symbols) and `r` bits of run − 2^r.
fn end_of_band(bits: &mut Bits, blocks: usize) {
    let mut left = blocks;
    while left > 0 {
        let run = left.min(32_767);
        let r = usize::BITS - 1 - run.leading_zeros();
        bits.put(r, 4);
        bits.put((run - (1 << r)) as u32, r);
        left -= run;
    }
}

/// Entropy-coded bits, most significant first, with `FF` bytes stuffed.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    acc: u32,
    count: u32,
}

impl Bits {
    fn put(&mut self, value: u32, width: u32) {
        for i in (0..width).rev() {
            self.acc = (self.acc << 1) | ((value >> i) & 1);
            self.count += 1;
            if self.count == 8 {
                self.byte();
            }
        }
    }

    fn byte(&mut self) {
        let byte = self.acc as u8;
        self.bytes.push(byte);
        if byte == 0xFF {
            self.bytes.push(0);
        }
        self.acc = 0;
        self.count = 0;
    }

    /// The bytes, the last one padded with ones.
    fn finish(mut self) -> Vec<u8> {
        if self.count > 0 {
            let pad = 8 - self.count;
            self.acc = (self.acc << pad) | ((1 << pad) - 1);
            self.byte();
        }
        self.bytes
    }
}
