//! AES-256 and XTS on AES-NI, x86_64 only: all of readpath's crypto `unsafe`.
//! A [`Keys`] value only
//! exists once `is_x86_feature_detected!("aes")` said yes, which is what
//! makes calling the `#[target_feature(enable = "aes")]` functions sound.

// Which intrinsics are safe functions in a matching target-feature
// context has changed between compiler versions; the bodies are
// wrapped in `unsafe` blocks either way.
#![allow(unused_unsafe)]

use core::arch::x86_64::{
    __m128i, _mm_add_epi64, _mm_aesdec_si128, _mm_aesdeclast_si128, _mm_aesenc_si128,
    _mm_aesenclast_si128, _mm_aesimc_si128, _mm_aeskeygenassist_si128, _mm_and_si128,
    _mm_cvtsi128_si64, _mm_loadu_si128, _mm_set_epi32, _mm_shuffle_epi32, _mm_slli_si128,
    _mm_srai_epi32, _mm_storeu_si128, _mm_unpackhi_epi64, _mm_xor_si128,
};

/// Blocks per iteration of the kernels.
const PAR: usize = 8;
/// Round keys of AES-256.
const RK: usize = 15;

#[derive(Clone, Copy)]
pub(super) struct Keys {
    /// Key1 schedule, for encryption.
    enc: [__m128i; RK],
    /// Key1 schedule for the equivalent inverse cipher (`aesdec`).
    dec: [__m128i; RK],
    /// Key2 schedule: encrypts the IV into T_0.
    tweak: [__m128i; RK],
}

impl Keys {
    /// `None` if the CPU lacks AES-NI.
    pub(super) fn new(key: &[u8; 64]) -> Option<Self> {
        if !std::arch::is_x86_feature_detected!("aes") {
            return None;
        }
        let (k1, k2) = key.split_at(32);
        let k1: &[u8; 32] = k1.try_into().expect("32 bytes");
        let k2: &[u8; 32] = k2.try_into().expect("32 bytes");
        // SAFETY: AES-NI is present (checked just above).
        unsafe {
            let enc = expand_key(k1);
            Some(Keys {
                enc,
                dec: inverse_keys(&enc),
                tweak: expand_key(k2),
            })
        }
    }

    pub(super) fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        check_len(buf.len());
        let p = buf.as_mut_ptr().cast();
        // SAFETY: a `Keys` exists only where AES-NI is present; the
        // kernel reads and writes `buf.len() / 16` blocks of `buf`, in place.
        unsafe { xts_encrypt(self, iv, p, p, buf.len() / 16) }
    }

    pub(super) fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        check_len(buf.len());
        let p = buf.as_mut_ptr().cast();
        // SAFETY: as in `encrypt`.
        unsafe { xts_decrypt(self, iv, p, p, buf.len() / 16) }
    }

    /// Decrypts `src` into `dst` (same length): out of place, at the
    /// speed of in place.
    pub(super) fn decrypt_from(&self, iv: &[u8; 16], src: &[u8], dst: &mut [u8]) {
        check_len(src.len());
        assert_eq!(
            src.len(),
            dst.len(),
            "XTS: source and destination lengths differ"
        );
        // SAFETY: as in `encrypt`; `src` and `dst` are a shared and a
        // mutable borrow, so they do not overlap.
        unsafe {
            xts_decrypt(
                self,
                iv,
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src.len() / 16,
            )
        }
    }

    /// Encrypts one block with Key1 (tests compare the schedule
    /// against FIPS-197 and the `aes` crate).
    #[cfg(test)]
    fn encrypt_block_key1(&self, block: &mut [u8; 16]) {
        // SAFETY: AES-NI is present; 16 bytes are read and written.
        unsafe {
            let b = encrypt_one(&self.enc, _mm_loadu_si128(block.as_ptr().cast()));
            _mm_storeu_si128(block.as_mut_ptr().cast(), b);
        }
    }
}

fn check_len(len: usize) {
    assert!(
        len.is_multiple_of(16),
        "XTS without ciphertext stealing: {len} bytes is not a whole number of blocks"
    );
}

/// One step of the AES-256 key schedule: round key i from round key
/// i-2 (`prev`) and `aeskeygenassist` of round key i-1 (`assist`),
/// whose dword 3 (RotWord/SubWord/Rcon, even i: `SHUF` = 0xff) or
/// dword 2 (SubWord only, odd i: `SHUF` = 0xaa) is mixed in.
///
/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[inline]
#[target_feature(enable = "aes")]
unsafe fn expand_step<const SHUF: i32>(prev: __m128i, assist: __m128i) -> __m128i {
    // SAFETY: the caller runs on a CPU with AES-NI (this fn's contract); register-only intrinsics.
    unsafe {
        let assist = _mm_shuffle_epi32::<SHUF>(assist);
        let mut k = prev;
        let mut t = _mm_slli_si128::<4>(prev);
        k = _mm_xor_si128(k, t);
        t = _mm_slli_si128::<4>(t);
        k = _mm_xor_si128(k, t);
        t = _mm_slli_si128::<4>(t);
        k = _mm_xor_si128(k, t);
        _mm_xor_si128(k, assist)
    }
}

/// The AES-256 key schedule (FIPS-197 5.2) with `aeskeygenassist`.
///
/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[target_feature(enable = "aes")]
unsafe fn expand_key(key: &[u8; 32]) -> [__m128i; RK] {
    // SAFETY: the caller runs on a CPU with AES-NI; the two unaligned loads read the key's 32 bytes.
    unsafe {
        let mut rk = [_mm_set_epi32(0, 0, 0, 0); RK];
        rk[0] = _mm_loadu_si128(key.as_ptr().cast());
        rk[1] = _mm_loadu_si128(key.as_ptr().add(16).cast());
        macro_rules! pair {
            ($i:expr, $rcon:expr) => {
                rk[$i] =
                    expand_step::<0xff>(rk[$i - 2], _mm_aeskeygenassist_si128::<$rcon>(rk[$i - 1]));
                rk[$i + 1] =
                    expand_step::<0xaa>(rk[$i - 1], _mm_aeskeygenassist_si128::<0>(rk[$i]));
            };
        }
        pair!(2, 0x01);
        pair!(4, 0x02);
        pair!(6, 0x04);
        pair!(8, 0x08);
        pair!(10, 0x10);
        pair!(12, 0x20);
        rk[14] = expand_step::<0xff>(rk[12], _mm_aeskeygenassist_si128::<0x40>(rk[13]));
        rk
    }
}

/// Round keys of the equivalent inverse cipher, for `aesdec`.
///
/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[target_feature(enable = "aes")]
unsafe fn inverse_keys(enc: &[__m128i; RK]) -> [__m128i; RK] {
    // SAFETY: the caller runs on a CPU with AES-NI; register-only intrinsics on the given keys.
    unsafe {
        let mut dec = [enc[0]; RK];
        dec[0] = enc[RK - 1];
        for i in 1..RK - 1 {
            dec[i] = _mm_aesimc_si128(enc[RK - 1 - i]);
        }
        dec[RK - 1] = enc[0];
        dec
    }
}

/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[inline]
#[target_feature(enable = "aes")]
unsafe fn encrypt_one(rk: &[__m128i; RK], block: __m128i) -> __m128i {
    // SAFETY: the caller runs on a CPU with AES-NI; register-only intrinsics.
    unsafe {
        let mut b = _mm_xor_si128(block, rk[0]);
        for k in &rk[1..RK - 1] {
            b = _mm_aesenc_si128(b, *k);
        }
        _mm_aesenclast_si128(b, rk[RK - 1])
    }
}

/// T * alpha in GF(2^128), IEEE 1619 convention, in SSE2: double
/// both 64-bit halves, then put bit 63's carry into bit 64 and bit
/// 127's carry into the low byte as 0x87. `mask` is
/// `_mm_set_epi32(0, 1, 0, 0x87)`.
///
/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[inline]
#[target_feature(enable = "aes")]
unsafe fn mul_alpha(t: __m128i, mask: __m128i) -> __m128i {
    // SAFETY: the caller runs on a CPU with AES-NI; register-only SSE2 intrinsics.
    unsafe {
        // dword i of `signs` is all ones if dword i of t has its top bit set.
        let signs = _mm_srai_epi32::<31>(t);
        // Move dword 3's sign (bit 127) to dword 0 and dword 1's (bit 63) to dword 2.
        let carries = _mm_and_si128(_mm_shuffle_epi32::<0x13>(signs), mask);
        _mm_xor_si128(_mm_add_epi64(t, t), carries)
    }
}

/// The two 64-bit halves (low, high) of a vector.
///
/// # Safety
///
/// The CPU must have AES-NI: call only with a [`Keys`] in hand, which
/// exists only once `is_x86_feature_detected!("aes")` said yes.
#[inline]
#[target_feature(enable = "aes")]
unsafe fn halves(v: __m128i) -> (u64, u64) {
    // SAFETY: the caller runs on a CPU with AES-NI (SSE2 implied); register-only intrinsics.
    unsafe {
        (
            _mm_cvtsi128_si64(v) as u64,
            _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)) as u64,
        )
    }
}

// The eight-block loop is one `asm!` block per iteration. Written as
// intrinsics, the compiler reorders the rounds into per-block chains
// (to save registers), which serialises on the AES latency and costs
// over a third of the throughput; OpenSSL's six-block loop is
// latency-bound the same way on CPUs that issue two AES rounds per
// cycle with a 4-cycle latency, where eight blocks in flight are
// needed.
//
// Register use: {b0}..{b7} the blocks, {k} the round key, {klast}
// K_14 ^ K_0; {lo}/{hi} the running tweak T in general registers
// (its doublings then stay off the vector pipes that AES needs),
// {klo}/{khi} K_0, {s}/{c} and {x}/{y} scratch. Tweaks are stored XORed with
// round key 0, U_j = T_j ^ K_0, in two buffers of eight: {cur} for
// this iteration, {nxt} filled for the next. The whitening is then
// one XOR with U_j, and the last round runs with key K_14 ^ K_0 and
// XORs U_j after it, which gives `... ^ K_14 ^ T_j`.

/// Loads block `$j` (at byte `$off` of the source) and whitens it with U_j.
#[rustfmt::skip]
macro_rules! load_whiten {
    ($j:literal, $off:literal) => {
        concat!(
            "movdqu {b", $j, "}, xmmword ptr [{src} + ", $off, "]\n",
            "pxor {b", $j, "}, xmmword ptr [{cur} + ", $off, "]\n",
        )
    };
}

/// One middle round (key at byte `$off` of the schedule) over the
/// eight blocks, `$op` being aesenc or aesdec.
#[rustfmt::skip]
macro_rules! round8 {
    ($op:literal, $off:literal) => {
        concat!(
            "movdqa {k}, xmmword ptr [{rk} + ", $off, "]\n",
            $op, " {b0}, {k}\n", $op, " {b1}, {k}\n",
            $op, " {b2}, {k}\n", $op, " {b3}, {k}\n",
            $op, " {b4}, {k}\n", $op, " {b5}, {k}\n",
            $op, " {b6}, {k}\n", $op, " {b7}, {k}\n",
        )
    };
}

/// T = T * alpha on ({lo}, {hi}); then stores U = T ^ K_0 at byte
/// `$off` of {nxt}.
#[rustfmt::skip]
macro_rules! double_store {
    ($off:literal) => {
        concat!(
            "mov {s}, {hi}\n",
            "sar {s}, 63\n", // all ones if bit 127 is set
            "and {s}, 0x87\n",
            "mov {c}, {lo}\n",
            "shr {c}, 63\n", // bit 63, carried into bit 64
            "add {lo}, {lo}\n",
            "xor {lo}, {s}\n",
            "lea {hi}, [{c} + 2*{hi}]\n",
            // One 16-byte store, so that the next iteration's
            // 16-byte loads of it can be forwarded from it.
            "mov {s}, {lo}\n",
            "xor {s}, {klo}\n",
            "movq {x}, {s}\n",
            "mov {s}, {hi}\n",
            "xor {s}, {khi}\n",
            "movq {y}, {s}\n",
            "punpcklqdq {x}, {y}\n",
            "movdqa xmmword ptr [{nxt} + ", $off, "], {x}\n",
        )
    };
}

/// Last round of block `$j` with K_14 ^ K_0, then ^ U_j, and the store
/// (to the destination, which may be the source).
#[rustfmt::skip]
macro_rules! last_store {
    ($last:literal, $j:literal, $off:literal) => {
        concat!(
            $last, " {b", $j, "}, {klast}\n",
            "pxor {b", $j, "}, xmmword ptr [{cur} + ", $off, "]\n",
            "movdqu xmmword ptr [{p} + ", $off, "], {b", $j, "}\n",
        )
    };
}

/// One iteration over the eight blocks at `$src`, written to `$p`; the
/// doublings that make the next iteration's tweaks are interleaved with
/// rounds 1..=8.
#[rustfmt::skip]
macro_rules! xts8 {
    ($op:literal, $last:literal, $src:expr, $p:expr, $rk:expr, $cur:expr, $nxt:expr,
     $lo:expr, $hi:expr, $klo:expr, $khi:expr, $klast:expr) => {
        core::arch::asm!(
            load_whiten!(0, 0), load_whiten!(1, 16),
            load_whiten!(2, 32), load_whiten!(3, 48),
            load_whiten!(4, 64), load_whiten!(5, 80),
            load_whiten!(6, 96), load_whiten!(7, 112),
            round8!($op, 16), double_store!(0),
            round8!($op, 32), double_store!(16),
            round8!($op, 48), double_store!(32),
            round8!($op, 64), double_store!(48),
            round8!($op, 80), double_store!(64),
            round8!($op, 96), double_store!(80),
            round8!($op, 112), double_store!(96),
            round8!($op, 128), double_store!(112),
            round8!($op, 144), round8!($op, 160), round8!($op, 176),
            round8!($op, 192), round8!($op, 208),
            last_store!($last, 0, 0), last_store!($last, 1, 16),
            last_store!($last, 2, 32), last_store!($last, 3, 48),
            last_store!($last, 4, 64), last_store!($last, 5, 80),
            last_store!($last, 6, 96), last_store!($last, 7, 112),
            src = in(reg) $src,
            p = in(reg) $p,
            rk = in(reg) $rk.as_ptr(),
            cur = in(reg) $cur,
            nxt = in(reg) $nxt,
            lo = inout(reg) $lo,
            hi = inout(reg) $hi,
            klo = in(reg) $klo,
            khi = in(reg) $khi,
            s = out(reg) _,
            c = out(reg) _,
            klast = in(xmm_reg) $klast,
            k = out(xmm_reg) _,
            x = out(xmm_reg) _,
            y = out(xmm_reg) _,
            b0 = out(xmm_reg) _,
            b1 = out(xmm_reg) _,
            b2 = out(xmm_reg) _,
            b3 = out(xmm_reg) _,
            b4 = out(xmm_reg) _,
            b5 = out(xmm_reg) _,
            b6 = out(xmm_reg) _,
            b7 = out(xmm_reg) _,
            options(nostack),
        )
    };
}

macro_rules! xts_kernel {
    ($name:ident, $keys:ident, $op:literal, $lastop:literal, $round:ident, $last:ident) => {
        /// XTS over the `n` blocks at `src`, written to `dst` (the same
        /// blocks, or `n` others that do not overlap them), with the
        /// `$keys` schedule of Key1; T_0 = E_K2(iv).
        ///
        /// # Safety
        ///
        /// The CPU must have AES-NI (the caller holds `keys`, which exists only
        /// once it was detected); `src` is readable and `dst` writable for
        /// `n` 16-byte blocks, and they are equal or do not overlap.
        #[target_feature(enable = "aes")]
        unsafe fn $name(
            keys: &Keys,
            iv: &[u8; 16],
            src: *const __m128i,
            p: *mut __m128i,
            n: usize,
        ) {
            // SAFETY: the caller runs on a CPU with AES-NI; every
            // load and store is at a block index below `n`, inside
            // `src` and `dst`.
            unsafe {
                let rk = &keys.$keys;
                let mask = _mm_set_epi32(0, 1, 0, 0x87);
                let mut t = encrypt_one(&keys.tweak, _mm_loadu_si128(iv.as_ptr().cast()));
                let mut i = 0;
                if n >= PAR {
                    let k0 = rk[0];
                    let (klo, khi) = halves(k0);
                    let klast = _mm_xor_si128(rk[RK - 1], k0);
                    // U_j of the first eight blocks; T_7 into (lo, hi).
                    let mut bufs = [[k0; PAR]; 2];
                    for (j, u) in bufs[0].iter_mut().enumerate() {
                        *u = _mm_xor_si128(t, k0);
                        if j + 1 < PAR {
                            t = mul_alpha(t, mask);
                        }
                    }
                    let (mut lo, mut hi) = halves(t);
                    let base: *mut [__m128i; PAR] = bufs.as_mut_ptr();
                    let mut cur: *mut __m128i = base.cast();
                    let mut nxt: *mut __m128i = base.add(1).cast();
                    loop {
                        // SAFETY: blocks i..i + 8 are in `buf`; `rk`
                        // is a 16-byte aligned [__m128i; 15]; `cur`
                        // and `nxt` are the two distinct, aligned
                        // halves of `bufs`.
                        xts8!(
                            $op,
                            $lastop,
                            src.add(i),
                            p.add(i),
                            rk,
                            cur,
                            nxt,
                            lo,
                            hi,
                            klo,
                            khi,
                            klast
                        );
                        core::mem::swap(&mut cur, &mut nxt);
                        i += PAR;
                        if i + PAR > n {
                            break;
                        }
                    }
                    // The tweak of block i.
                    t = _mm_xor_si128(*cur, k0);
                }
                while i < n {
                    let mut b = _mm_xor_si128(_mm_loadu_si128(src.add(i)), t);
                    b = _mm_xor_si128(b, rk[0]);
                    for k in &rk[1..RK - 1] {
                        b = $round(b, *k);
                    }
                    b = $last(b, _mm_xor_si128(rk[RK - 1], t));
                    _mm_storeu_si128(p.add(i), b);
                    t = mul_alpha(t, mask);
                    i += 1;
                }
            }
        }
    };
}

xts_kernel!(
    xts_encrypt,
    enc,
    "aesenc",
    "aesenclast",
    _mm_aesenc_si128,
    _mm_aesenclast_si128
);
xts_kernel!(
    xts_decrypt,
    dec,
    "aesdec",
    "aesdeclast",
    _mm_aesdec_si128,
    _mm_aesdeclast_si128
);

// Linux 6.1's `xts-aes-aesni` loop, ported: `aesni_xts_encrypt` /
// `aesni_xts_decrypt` (arch/x86/crypto/aesni-intel_asm.S) as the driver's
// `xts_crypt` calls them, after `aesni_enc` made T_0 from the IV. Four
// blocks per iteration: each block's tweak is XORed in, stored through
// the destination and doubled in the SSE registers
// (`_aesni_gf128mul_x_ble`: pshufd, paddq, psrad, pand, pxor); the four
// blocks go through `_aesni_enc4` / `_aesni_dec4`, which loads each round
// key from the schedule in memory (movaps) before its four rounds; the
// tweaks are read back from the destination and XORed in; the tweak is
// doubled once more for the next four. Fewer than four blocks left go one
// at a time (`.Lxts_dec_loop1`). Register names follow the kernel's:
// {st1}..{st4} STATE1..4, {inb} IN, {key} KEY, {iv} IV, {mask}
// GF128MUL_MASK. `_aesni_dec4` is a `call` there; here it is inline.

/// `_aesni_gf128mul_x_ble()`: IV = IV * alpha, with {key} as scratch.
#[rustfmt::skip]
macro_rules! gf128mul_x_ble {
    () => {
        concat!(
            "pshufd {key}, {iv}, 0x13\n",
            "paddq {iv}, {iv}\n",
            "psrad {key}, 31\n",
            "pand {key}, {mask}\n",
            "pxor {iv}, {key}\n",
        )
    };
}

/// Block `$j` (at byte `$off`): STATEj = IV ^ in; the tweak stored
/// through the destination.
#[rustfmt::skip]
macro_rules! tweak_in {
    ($j:literal, $off:literal) => {
        concat!(
            "movdqa {st", $j, "}, {iv}\n",
            "movdqu {inb}, xmmword ptr [{src} + ", $off, "]\n",
            "pxor {st", $j, "}, {inb}\n",
            "movdqu xmmword ptr [{dst} + ", $off, "], {iv}\n",
        )
    };
}

/// One round of `_aesni_enc4` / `_aesni_dec4`: the round key at byte
/// `$off` of the schedule, then `$op` on the four states.
#[rustfmt::skip]
macro_rules! round4 {
    ($op:literal, $off:literal) => {
        concat!(
            "movaps {key}, xmmword ptr [{rk} + ", $off, "]\n",
            $op, " {st1}, {key}\n", $op, " {st2}, {key}\n",
            $op, " {st3}, {key}\n", $op, " {st4}, {key}\n",
        )
    };
}

/// Block `$j`: its tweak read back from the destination, XORed in, stored.
#[rustfmt::skip]
macro_rules! tweak_out {
    ($j:literal, $off:literal) => {
        concat!(
            "movdqu {inb}, xmmword ptr [{dst} + ", $off, "]\n",
            "pxor {st", $j, "}, {inb}\n",
            "movdqu xmmword ptr [{dst} + ", $off, "], {st", $j, "}\n",
        )
    };
}

/// One iteration of `.Lxts_enc_loop4` / `.Lxts_dec_loop4`.
#[rustfmt::skip]
macro_rules! xts4 {
    ($op:literal, $last:literal, $src:expr, $dst:expr, $rk:expr, $iv:expr, $mask:expr) => {
        core::arch::asm!(
            tweak_in!(1, 0), gf128mul_x_ble!(),
            tweak_in!(2, 16), gf128mul_x_ble!(),
            tweak_in!(3, 32), gf128mul_x_ble!(),
            tweak_in!(4, 48),
            "movaps {key}, xmmword ptr [{rk}]\n",
            "pxor {st1}, {key}\n", "pxor {st2}, {key}\n",
            "pxor {st3}, {key}\n", "pxor {st4}, {key}\n",
            round4!($op, 16), round4!($op, 32), round4!($op, 48),
            round4!($op, 64), round4!($op, 80), round4!($op, 96),
            round4!($op, 112), round4!($op, 128), round4!($op, 144),
            round4!($op, 160), round4!($op, 176), round4!($op, 192),
            round4!($op, 208), round4!($last, 224),
            tweak_out!(1, 0), tweak_out!(2, 16),
            tweak_out!(3, 32), tweak_out!(4, 48),
            gf128mul_x_ble!(),
            src = in(reg) $src,
            dst = in(reg) $dst,
            rk = in(reg) $rk.as_ptr(),
            iv = inout(xmm_reg) $iv,
            mask = in(xmm_reg) $mask,
            key = out(xmm_reg) _,
            inb = out(xmm_reg) _,
            st1 = out(xmm_reg) _,
            st2 = out(xmm_reg) _,
            st3 = out(xmm_reg) _,
            st4 = out(xmm_reg) _,
            options(nostack),
        )
    };
}

macro_rules! xts_kernel4 {
    ($name:ident, $keys:ident, $op:literal, $lastop:literal, $round:ident, $last:ident) => {
        /// XTS over the `n` blocks at `src`, written to `dst`, in Linux
        /// 6.1's `xts-aes-aesni` order of work (above), with the `$keys`
        /// schedule of Key1; T_0 = E_K2(iv).
        ///
        /// # Safety
        ///
        /// As the eight-block kernels': AES-NI present (the caller holds
        /// `keys`); `src` readable and `dst` writable for `n` blocks,
        /// equal or not overlapping.
        #[target_feature(enable = "aes")]
        unsafe fn $name(
            keys: &Keys,
            iv: &[u8; 16],
            src: *const __m128i,
            dst: *mut __m128i,
            n: usize,
        ) {
            // SAFETY: AES-NI is present (the contract); every load and
            // store is at a block index below `n`; the schedule is a
            // 16-byte aligned [__m128i; 15], as movaps needs.
            unsafe {
                let rk = &keys.$keys;
                let mask = _mm_set_epi32(0, 1, 0, 0x87);
                let mut iv = encrypt_one(&keys.tweak, _mm_loadu_si128(iv.as_ptr().cast()));
                let mut i = 0;
                while i + 4 <= n {
                    xts4!($op, $lastop, src.add(i), dst.add(i), rk, iv, mask);
                    i += 4;
                }
                // `.Lxts_*_loop1`: one block at a time.
                while i < n {
                    let mut b = _mm_xor_si128(_mm_loadu_si128(src.add(i)), iv);
                    b = _mm_xor_si128(b, rk[0]);
                    for k in &rk[1..RK - 1] {
                        b = $round(b, *k);
                    }
                    b = _mm_xor_si128($last(b, rk[RK - 1]), iv);
                    iv = mul_alpha(iv, mask);
                    _mm_storeu_si128(dst.add(i), b);
                    i += 1;
                }
            }
        }
    };
}

xts_kernel4!(
    xts4_encrypt,
    enc,
    "aesenc",
    "aesenclast",
    _mm_aesenc_si128,
    _mm_aesenclast_si128
);
xts_kernel4!(
    xts4_decrypt,
    dec,
    "aesdec",
    "aesdeclast",
    _mm_aesdec_si128,
    _mm_aesdeclast_si128
);

impl Keys {
    /// [`Self::encrypt`] in Linux 6.1's `xts-aes-aesni` order of work.
    pub(super) fn encrypt4(&self, iv: &[u8; 16], buf: &mut [u8]) {
        check_len(buf.len());
        let p = buf.as_mut_ptr().cast();
        // SAFETY: as in `encrypt`.
        unsafe { xts4_encrypt(self, iv, p, p, buf.len() / 16) }
    }

    /// [`Self::decrypt`] in Linux 6.1's `xts-aes-aesni` order of work.
    pub(super) fn decrypt4(&self, iv: &[u8; 16], buf: &mut [u8]) {
        check_len(buf.len());
        let p = buf.as_mut_ptr().cast();
        // SAFETY: as in `encrypt`.
        unsafe { xts4_decrypt(self, iv, p, p, buf.len() / 16) }
    }

    /// [`Self::decrypt_from`] in Linux 6.1's `xts-aes-aesni` order of work
    /// (the kernel's driver also takes a source and a destination).
    pub(super) fn decrypt4_from(&self, iv: &[u8; 16], src: &[u8], dst: &mut [u8]) {
        check_len(src.len());
        assert_eq!(
            src.len(),
            dst.len(),
            "XTS: source and destination lengths differ"
        );
        // SAFETY: as in `decrypt_from`.
        unsafe {
            xts4_decrypt(
                self,
                iv,
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src.len() / 16,
            )
        }
    }
}

/// FIPS-197 appendix C.3 (AES-256) through the AES-NI key schedule,
/// and that schedule against the `aes` crate's for a few keys.
#[cfg(test)]
#[test]
fn key_schedule() {
    use aes::cipher::{BlockCipherEncrypt, KeyInit};
    let mut key = [0u8; 64];
    for (i, b) in key.iter_mut().enumerate() {
        *b = if i < 32 { i as u8 } else { 0xa5 };
    }
    let Some(keys) = Keys::new(&key) else {
        eprintln!("no AES-NI on this CPU: skipped");
        return;
    };
    let mut block: [u8; 16] = hex::decode("00112233445566778899aabbccddeeff")
        .unwrap()
        .try_into()
        .unwrap();
    keys.encrypt_block_key1(&mut block);
    assert_eq!(hex::encode(block), "8ea2b7ca516745bfeafc49904b496089");
    for seed in 1..=16u8 {
        for (i, b) in key.iter_mut().enumerate() {
            *b = (i as u8)
                .wrapping_mul(seed)
                .wrapping_add(seed.rotate_left(3));
        }
        let keys = Keys::new(&key).unwrap();
        let reference = aes::Aes256::new_from_slice(&key[..32]).unwrap();
        let mut a = [seed; 16];
        let mut b = aes::Block::from(a);
        keys.encrypt_block_key1(&mut a);
        reference.encrypt_block(&mut b);
        assert_eq!(a, b.0, "seed {seed}");
    }
}
