//! Two SHA-256 hashes at once, interleaved on the x86 SHA extensions: what
//! fs-verity does since Linux 6.18 ("fsverity: Use 2-way interleaved SHA-256
//! hashing when supported", `sha256_finup_2x` / `sha256_ni_finup2x`).
//!
//! One SHA-256 is a chain of dependent `sha256rnds2` instructions, so a
//! single stream leaves the SHA unit idle between rounds; two independent
//! messages fill those gaps. fs-verity hashes many equal-sized blocks from
//! the same salted starting state, which is exactly the shape this needs: a
//! [`Prefix`] (the state after the padded salt) and two equal-length
//! messages in, two digests out. Verification uses it for pairs of data
//! blocks; without the SHA extensions [`Sha256x2::detect`] says `None` and
//! callers hash one block at a time with the `sha2` crate. Exact results are
//! tested against `sha2` for every length around the block and padding edges.

/// The SHA-256 state after a whole number of 64-byte blocks (for fs-verity:
/// the padded salt, or nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    state: [u32; 8],
    /// Bytes already hashed (a multiple of 64).
    len: u64,
}

/// SHA-256 initial hash value (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

impl Prefix {
    /// The state after hashing `blocks`, whose length must be a multiple of
    /// 64 (panics otherwise).
    pub fn new(blocks: &[u8]) -> Prefix {
        assert!(
            blocks.len().is_multiple_of(64),
            "a SHA-256 prefix is whole 64-byte blocks"
        );
        let mut state = IV;
        let chunks: Vec<[u8; 64]> = blocks
            .chunks_exact(64)
            .map(|c| c.try_into().expect("64 bytes"))
            .collect();
        sha2::block_api::compress256(&mut state, &chunks);
        Prefix {
            state,
            len: blocks.len() as u64,
        }
    }
}

/// Proof that the CPU has the SHA extensions (and SSSE3, SSE4.1): only
/// [`Sha256x2::detect`] makes one, which is what makes the
/// `#[target_feature]` code behind [`Sha256x2::finup2`] sound to call.
#[derive(Debug, Clone, Copy)]
pub struct Sha256x2 {
    _proof: (),
}

impl Sha256x2 {
    /// `Some` where the CPU can hash two streams interleaved.
    pub fn detect() -> Option<Sha256x2> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("sha")
                && std::arch::is_x86_feature_detected!("ssse3")
                && std::arch::is_x86_feature_detected!("sse4.1")
            {
                return Some(Sha256x2 { _proof: () });
            }
        }
        None
    }

    /// SHA-256 of `prefix || a` and of `prefix || b`, computed together.
    /// `a` and `b` must have the same length (panics otherwise). No
    /// allocation.
    pub fn finup2(
        &self,
        prefix: &Prefix,
        a: &[u8],
        b: &[u8],
        out_a: &mut [u8; 32],
        out_b: &mut [u8; 32],
    ) {
        assert_eq!(a.len(), b.len(), "finup2 hashes equal-length messages");
        let full = a.len() / 64;
        let mut sa = prefix.state;
        let mut sb = prefix.state;
        if full > 0 {
            // SAFETY: `self` proves the CPU features; both pointers cover
            // `full` whole blocks of their slices.
            unsafe { compress2(&mut sa, &mut sb, a.as_ptr(), b.as_ptr(), full) };
        }
        // The tail and the padding: 0x80, zeros, the bit length (big endian)
        // in the last 8 bytes; one final block, or two when the tail leaves
        // fewer than 9 bytes.
        let tail = a.len() % 64;
        let nfinal = if tail + 9 <= 64 { 1 } else { 2 };
        let bits = (prefix.len + a.len() as u64) * 8;
        let mut fa = [0u8; 128];
        let mut fb = [0u8; 128];
        for (f, m) in [(&mut fa, a), (&mut fb, b)] {
            f[..tail].copy_from_slice(&m[full * 64..]);
            f[tail] = 0x80;
            f[nfinal * 64 - 8..nfinal * 64].copy_from_slice(&bits.to_be_bytes());
        }
        // SAFETY: as above; `fa`/`fb` hold `nfinal` blocks.
        unsafe { compress2(&mut sa, &mut sb, fa.as_ptr(), fb.as_ptr(), nfinal) };
        for (o, s) in [(out_a, sa), (out_b, sb)] {
            for (chunk, w) in o.chunks_exact_mut(4).zip(s) {
                chunk.copy_from_slice(&w.to_be_bytes());
            }
        }
    }
}

/// # Safety
///
/// The CPU must have the SHA extensions and SSE4.1, and `pa` and `pb`
/// must each point to `n` readable 64-byte blocks.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn compress2(_: &mut [u32; 8], _: &mut [u32; 8], _: *const u8, _: *const u8, _: usize) {
    unreachable!("Sha256x2::detect is None off x86_64")
}

/// SHA-256 round constants (FIPS 180-4, 4.2.2): the generic port's.
#[cfg(target_arch = "x86_64")]
use super::sha256_generic::K;

/// Compresses `n` 64-byte blocks at `pa` into `sa` and `n` at `pb` into
/// `sb`, the two chains interleaved instruction by instruction.
///
/// # Safety
/// The CPU must have SHA, SSSE3 and SSE4.1; `pa` and `pb` must each point
/// to `n * 64` readable bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
unsafe fn compress2(sa: &mut [u32; 8], sb: &mut [u32; 8], pa: *const u8, pb: *const u8, n: usize) {
    // Which intrinsics are safe functions in a matching target-feature
    // context has changed between compiler versions; wrap them all.
    #![allow(unused_unsafe)]
    use core::arch::x86_64::*;

    // Message words are big endian.
    let mask = _mm_set_epi64x(
        0x0C0D_0E0F_0809_0A0Bu64 as i64,
        0x0405_0607_0001_0203u64 as i64,
    );
    let kp: *const __m128i = K.as_ptr().cast();

    /// State words (a..h) to the (ABEF, CDGH) register pair `sha256rnds2` uses.
    ///
    /// # Safety
    ///
    /// The CPU must have the SHA extensions and SSE4.1 (checked once by the
    /// caller before any of these runs).
    #[inline]
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn load(s: &[u32; 8]) -> (__m128i, __m128i) {
        let p: *const __m128i = s.as_ptr().cast();
        // SAFETY: 32 readable bytes; the caller has the CPU features.
        unsafe {
            let (dcba, hgfe) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
            let cdab = _mm_shuffle_epi32(dcba, 0xB1);
            let efgh = _mm_shuffle_epi32(hgfe, 0x1B);
            (
                _mm_alignr_epi8(cdab, efgh, 8),
                _mm_blend_epi16(efgh, cdab, 0xF0),
            )
        }
    }
    /// # Safety
    ///
    /// The CPU must have the SHA extensions and SSE4.1 (checked once by the
    /// caller before any of these runs).
    #[inline]
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn store(s: &mut [u32; 8], abef: __m128i, cdgh: __m128i) {
        let p: *mut __m128i = s.as_mut_ptr().cast();
        // SAFETY: 32 writable bytes; the caller has the CPU features.
        unsafe {
            let feba = _mm_shuffle_epi32(abef, 0x1B);
            let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
            _mm_storeu_si128(p, _mm_blend_epi16(feba, dchg, 0xF0));
            _mm_storeu_si128(p.add(1), _mm_alignr_epi8(dchg, feba, 8));
        }
    }
    /// The next four message words from the previous sixteen.
    ///
    /// # Safety
    ///
    /// The CPU must have the SHA extensions and SSE4.1 (checked once by the
    /// caller before any of these runs).
    #[inline]
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn schedule(w0: __m128i, w1: __m128i, w2: __m128i, w3: __m128i) -> __m128i {
        // SAFETY: the caller has the CPU features.
        unsafe {
            let t = _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4));
            _mm_sha256msg2_epu32(t, w3)
        }
    }

    // Four rounds of both streams with message words $wa / $wb.
    macro_rules! rounds4 {
        ($i:expr, $abef_a:ident, $cdgh_a:ident, $wa:expr, $abef_b:ident, $cdgh_b:ident, $wb:expr) => {{
            // SAFETY: $i < 16, inside the 64-word table.
            let k = unsafe { _mm_loadu_si128(kp.add($i)) };
            let ta = _mm_add_epi32($wa, k);
            let tb = _mm_add_epi32($wb, k);
            $cdgh_a = _mm_sha256rnds2_epu32($cdgh_a, $abef_a, ta);
            $cdgh_b = _mm_sha256rnds2_epu32($cdgh_b, $abef_b, tb);
            $abef_a = _mm_sha256rnds2_epu32($abef_a, $cdgh_a, _mm_shuffle_epi32(ta, 0x0E));
            $abef_b = _mm_sha256rnds2_epu32($abef_b, $cdgh_b, _mm_shuffle_epi32(tb, 0x0E));
        }};
    }

    // SAFETY: the caller guarantees the CPU features and that both
    // pointers cover `n` blocks (the whole body relies on this).
    unsafe {
        let (mut abef_a, mut cdgh_a) = load(sa);
        let (mut abef_b, mut cdgh_b) = load(sb);
        for blk in 0..n {
            let (save_abef_a, save_cdgh_a) = (abef_a, cdgh_a);
            let (save_abef_b, save_cdgh_b) = (abef_b, cdgh_b);
            let qa: *const __m128i = pa.add(blk * 64).cast();
            let qb: *const __m128i = pb.add(blk * 64).cast();
            let mut a0 = _mm_shuffle_epi8(_mm_loadu_si128(qa), mask);
            let mut a1 = _mm_shuffle_epi8(_mm_loadu_si128(qa.add(1)), mask);
            let mut a2 = _mm_shuffle_epi8(_mm_loadu_si128(qa.add(2)), mask);
            let mut a3 = _mm_shuffle_epi8(_mm_loadu_si128(qa.add(3)), mask);
            let mut b0 = _mm_shuffle_epi8(_mm_loadu_si128(qb), mask);
            let mut b1 = _mm_shuffle_epi8(_mm_loadu_si128(qb.add(1)), mask);
            let mut b2 = _mm_shuffle_epi8(_mm_loadu_si128(qb.add(2)), mask);
            let mut b3 = _mm_shuffle_epi8(_mm_loadu_si128(qb.add(3)), mask);
            rounds4!(0, abef_a, cdgh_a, a0, abef_b, cdgh_b, b0);
            rounds4!(1, abef_a, cdgh_a, a1, abef_b, cdgh_b, b1);
            rounds4!(2, abef_a, cdgh_a, a2, abef_b, cdgh_b, b2);
            rounds4!(3, abef_a, cdgh_a, a3, abef_b, cdgh_b, b3);
            // Rounds 16..63: word group i from groups i-4..i-1, in a ring of
            // four registers per stream (group i replaces group i-4).
            macro_rules! next4 {
                ($i:expr, $a0:ident, $a1:ident, $a2:ident, $a3:ident, $b0:ident, $b1:ident, $b2:ident, $b3:ident) => {{
                    $a0 = schedule($a0, $a1, $a2, $a3);
                    $b0 = schedule($b0, $b1, $b2, $b3);
                    rounds4!($i, abef_a, cdgh_a, $a0, abef_b, cdgh_b, $b0);
                }};
            }
            next4!(4, a0, a1, a2, a3, b0, b1, b2, b3);
            next4!(5, a1, a2, a3, a0, b1, b2, b3, b0);
            next4!(6, a2, a3, a0, a1, b2, b3, b0, b1);
            next4!(7, a3, a0, a1, a2, b3, b0, b1, b2);
            next4!(8, a0, a1, a2, a3, b0, b1, b2, b3);
            next4!(9, a1, a2, a3, a0, b1, b2, b3, b0);
            next4!(10, a2, a3, a0, a1, b2, b3, b0, b1);
            next4!(11, a3, a0, a1, a2, b3, b0, b1, b2);
            next4!(12, a0, a1, a2, a3, b0, b1, b2, b3);
            next4!(13, a1, a2, a3, a0, b1, b2, b3, b0);
            next4!(14, a2, a3, a0, a1, b2, b3, b0, b1);
            next4!(15, a3, a0, a1, a2, b3, b0, b1, b2);
            abef_a = _mm_add_epi32(abef_a, save_abef_a);
            cdgh_a = _mm_add_epi32(cdgh_a, save_cdgh_a);
            abef_b = _mm_add_epi32(abef_b, save_abef_b);
            cdgh_b = _mm_add_epi32(cdgh_b, save_cdgh_b);
        }
        store(sa, abef_a, cdgh_a);
        store(sb, abef_b, cdgh_b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn reference(prefix: &[u8], m: &[u8]) -> [u8; 32] {
        Sha256::new()
            .chain_update(prefix)
            .chain_update(m)
            .finalize()
            .into()
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn matches_sha2_for_every_length_around_the_edges() {
        let Some(x2) = Sha256x2::detect() else {
            println!("skipped: this CPU has no SHA extensions");
            return;
        };
        let lengths = (0..=200).chain([4096 - 1, 4096, 4096 + 1, 4096 + 55, 4096 + 56, 65536]);
        for salt in [Vec::new(), {
            let mut s = vec![0u8; 64];
            s[..8].copy_from_slice(b"saltsalt");
            s
        }] {
            let p = Prefix::new(&salt);
            for len in lengths.clone() {
                let (a, b) = (bytes(len, 1), bytes(len, 7));
                let (mut ha, mut hb) = ([0u8; 32], [0u8; 32]);
                x2.finup2(&p, &a, &b, &mut ha, &mut hb);
                assert_eq!(ha, reference(&salt, &a), "len {len} salt {}", salt.len());
                assert_eq!(hb, reference(&salt, &b), "len {len} salt {}", salt.len());
            }
        }
    }

    #[test]
    fn published_vectors() {
        // FIPS 180-2 appendix B.1 ("abc") and the empty message.
        let Some(x2) = Sha256x2::detect() else {
            println!("skipped: this CPU has no SHA extensions");
            return;
        };
        let (mut ha, mut hb) = ([0u8; 32], [0u8; 32]);
        x2.finup2(&Prefix::new(&[]), b"abc", b"xyz", &mut ha, &mut hb);
        assert_eq!(
            hex::encode(ha),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        x2.finup2(&Prefix::new(&[]), b"", b"", &mut ha, &mut hb);
        assert_eq!(
            hex::encode(hb),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    #[should_panic(expected = "equal-length")]
    fn unequal_lengths_are_refused() {
        let Some(x2) = Sha256x2::detect() else {
            panic!("equal-length (skipped: no SHA extensions)");
        };
        let (mut ha, mut hb) = ([0u8; 32], [0u8; 32]);
        x2.finup2(&Prefix::new(&[]), b"a", b"ab", &mut ha, &mut hb);
    }
}
