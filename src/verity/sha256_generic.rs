//! A port of Linux's generic C SHA-256 (`lib/crypto/sha256.c`, the crypto
//! API's `sha256-generic`), so that the model's verification can cost what
//! a kernel without SHA instructions' drivers pays for it.
//!
//! A lab guest's kernel (and any x86 kernel built without
//! `CRYPTO_SHA256_SSSE3`, or an arm64 one without `CRYPTO_SHA2_ARM64_CE`)
//! hashes fs-verity's blocks with this code. The model could call it
//! through AF_ALG (`pipeline.hash = "kernel"`), but that adds a `sendmsg`
//! and a `read` per block that the kernel's work item does not pay (in a
//! TCG guest some 70 us of a 4 KiB block's 180), and the `sha2` crate is a
//! different implementation (its software rounds are written after the SHA
//! extensions' instructions). This is the same algorithm written the same
//! way: the message schedule expanded first, eight rounds a loop
//! iteration with the registers renamed, `W` zeroed after every update
//! (`memzero_explicit`), the partial block buffered as `sha256_update`
//! does, and the salted state imported before each block as fs-verity's
//! `crypto_ahash_import` of its `hashstate` does. It gives the same bytes
//! as every SHA-256 (the tests hold it to FIPS 180-2's vectors and to the
//! `sha2` crate); what it is for is its cost.

/// `SHA256_K`: the round constants (FIPS 180-4, 4.2.2), also the
/// SHA-NI path's (`super::sha256x2`), which loads them 16 bytes at a time.
pub(crate) static K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// `SHA256_H0`..`H7`.
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

#[inline(always)]
fn ch(x: u32, y: u32, z: u32) -> u32 {
    z ^ (x & (y ^ z))
}

#[inline(always)]
fn maj(x: u32, y: u32, z: u32) -> u32 {
    (x & y) | (z & (x | y))
}

#[inline(always)]
fn e0(x: u32) -> u32 {
    x.rotate_right(2) ^ x.rotate_right(13) ^ x.rotate_right(22)
}

#[inline(always)]
fn e1(x: u32) -> u32 {
    x.rotate_right(6) ^ x.rotate_right(11) ^ x.rotate_right(25)
}

#[inline(always)]
fn s0(x: u32) -> u32 {
    x.rotate_right(7) ^ x.rotate_right(18) ^ (x >> 3)
}

#[inline(always)]
fn s1(x: u32) -> u32 {
    x.rotate_right(17) ^ x.rotate_right(19) ^ (x >> 10)
}

/// `get_unaligned_be32`: a load and a byte swap, one word at a time. On
/// x86-64 the swap is an opaque `bswap`, so that the compiler does not
/// vectorise the sixteen loads into SSE shuffles: the kernel is built
/// without SSE, and under QEMU's TCG (where lab guests run) the shuffles
/// are helper calls that made this port 1.8x the kernel's C (80 against
/// 44 us a 4 KiB block under `qemu-x86_64`; the same natively).
#[inline(always)]
fn load_be32(input: &[u8; 64], at: usize) -> u32 {
    let v = u32::from_ne_bytes(input[at..at + 4].try_into().expect("4 bytes"));
    #[cfg(target_arch = "x86_64")]
    {
        let mut v = v;
        // SAFETY: a register-only byte swap.
        unsafe {
            std::arch::asm!("bswap {v:e}", v = inout(reg) v, options(pure, nomem, nostack, preserves_flags));
        }
        v
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        u32::from_be(v)
    }
}

/// `SHA256_ROUND`: one round, the registers named by the caller.
macro_rules! round {
    ($w:ident, $i:expr, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident) => {{
        let t1 = $h
            .wrapping_add(e1($e))
            .wrapping_add(ch($e, $f, $g))
            .wrapping_add(K[$i])
            .wrapping_add($w[$i]);
        let t2 = e0($a).wrapping_add(maj($a, $b, $c));
        $d = $d.wrapping_add(t1);
        $h = t1.wrapping_add(t2);
    }};
}

/// `sha256_transform`: one 64-byte block into `state`, `w` the caller's
/// schedule (zeroed by the caller after its last block, as the kernel's
/// `sha256_update` does).
#[inline(never)]
#[allow(clippy::needless_range_loop)] // indexed as the C is: W[I] = f(W[I-2], ...)
fn transform(state: &mut [u32; 8], input: &[u8; 64], w: &mut [u32; 64]) {
    // LOAD_OP, eight a loop iteration.
    let mut i = 0;
    while i < 16 {
        for j in i..i + 8 {
            w[j] = load_be32(input, 4 * j);
        }
        i += 8;
    }
    // BLEND_OP, eight a loop iteration.
    while i < 64 {
        for j in i..i + 8 {
            w[j] = s1(w[j - 2])
                .wrapping_add(w[j - 7])
                .wrapping_add(s0(w[j - 15]))
                .wrapping_add(w[j - 16]);
        }
        i += 8;
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    let mut i = 0;
    while i < 64 {
        round!(w, i, a, b, c, d, e, f, g, h);
        round!(w, i + 1, h, a, b, c, d, e, f, g);
        round!(w, i + 2, g, h, a, b, c, d, e, f);
        round!(w, i + 3, f, g, h, a, b, c, d, e);
        round!(w, i + 4, e, f, g, h, a, b, c, d);
        round!(w, i + 5, d, e, f, g, h, a, b, c);
        round!(w, i + 6, c, d, e, f, g, h, a, b);
        round!(w, i + 7, b, c, d, e, f, g, h, a);
        i += 8;
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.wrapping_add(v);
    }
}

/// `struct sha256_state`: the chaining state, the bytes hashed so far and
/// the partial block.
#[derive(Clone)]
pub struct Sha256Generic {
    state: [u32; 8],
    count: u64,
    buf: [u8; 64],
}

impl Default for Sha256Generic {
    fn default() -> Self {
        Self::new()
    }
}

impl Sha256Generic {
    /// `sha256_init`.
    pub fn new() -> Self {
        Sha256Generic {
            state: H0,
            count: 0,
            buf: [0; 64],
        }
    }

    /// `sha256_update`: whole blocks straight from `data`, a partial one
    /// through the buffer. No allocation.
    pub fn update(&mut self, data: &[u8]) {
        let partial = (self.count & 0x3f) as usize;
        self.count += data.len() as u64;
        let mut done = 0usize;
        if partial + data.len() > 63 {
            let mut w = [0u32; 64];
            if partial > 0 {
                let take = 64 - partial;
                self.buf[partial..].copy_from_slice(&data[..take]);
                let block = self.buf;
                transform(&mut self.state, &block, &mut w);
                done = take;
            }
            while done + 63 < data.len() {
                let block: &[u8; 64] = data[done..done + 64].try_into().expect("64 bytes");
                transform(&mut self.state, block, &mut w);
                done += 64;
            }
            // memzero_explicit(W, sizeof(W)): a store the compiler keeps.
            w.fill(0);
            std::hint::black_box(&mut w);
            self.buf[..data.len() - done].copy_from_slice(&data[done..]);
        } else {
            self.buf[partial..partial + data.len()].copy_from_slice(data);
        }
    }

    /// `sha256_final`: the padding and the length through `update`, then
    /// the state as big-endian words.
    pub fn finalize_into(mut self, out: &mut [u8; 32]) {
        const PADDING: [u8; 64] = {
            let mut p = [0u8; 64];
            p[0] = 0x80;
            p
        };
        let bits = (self.count << 3).to_be_bytes();
        let index = (self.count & 0x3f) as usize;
        let pad_len = if index < 56 {
            56 - index
        } else {
            64 + 56 - index
        };
        self.update(&PADDING[..pad_len]);
        self.update(&bits);
        for (o, s) in out.chunks_exact_mut(4).zip(self.state) {
            o.copy_from_slice(&s.to_be_bytes());
        }
    }

    /// The SHA-256 of `data` in one call (`sha256()`).
    pub fn digest(data: &[u8]) -> [u8; 32] {
        let mut h = Self::new();
        h.update(data);
        let mut out = [0u8; 32];
        h.finalize_into(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Sha256Generic;
    use sha2::{Digest, Sha256};

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn it_gives_fips_180_2s_digests() {
        assert_eq!(
            hex(&Sha256Generic::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&Sha256Generic::digest(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(&Sha256Generic::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let million = vec![b'a'; 1_000_000];
        assert_eq!(
            hex(&Sha256Generic::digest(&million)),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn it_gives_the_sha2_crates_digest_for_every_length_and_split() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..data.len() {
            let want: [u8; 32] = Sha256::digest(&data[..len]).into();
            assert_eq!(Sha256Generic::digest(&data[..len]), want, "len {len}");
            // Split anywhere: the partial block goes through the buffer.
            for cut in [1, 17, 63, 64, 65, 130] {
                if cut > len {
                    continue;
                }
                let mut h = Sha256Generic::new();
                h.update(&data[..cut]);
                h.update(&data[cut..len]);
                let mut out = [0u8; 32];
                h.finalize_into(&mut out);
                assert_eq!(out, want, "len {len} cut {cut}");
            }
        }
    }
}
