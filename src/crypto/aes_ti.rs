//! The Linux kernel's generic constant-time scalar AES (`lib/crypto/aes.c`
//! as of Linux 5.4 to 6.18, which `crypto/aes_ti.c`, driver
//! `aes-fixed-time`, calls), ported to Rust, and the kernel's generic
//! `xts(...)` template (`crypto/xts.c`) over it.
//!
//! This module exists so that the model can pay the algorithm a kernel
//! without AES instructions in its crypto drivers actually runs for fscrypt:
//! `/proc/crypto`'s best `xts(aes)` is then `xts(ecb(aes-fixed-time))`, and
//! its cost is several times the fixsliced software AES of
//! `aes-256-xts-soft`. The port keeps the kernel's data layout and work,
//! not a faster equivalent:
//! - the key schedule is `aes_expandkey`: 60 little-endian round-key words
//!   for encryption, and the Equivalent Inverse Cipher's decryption keys
//!   (reversed, `inv_mix_columns` on all but the first and last);
//! - each block is four little-endian column words; every round does the
//!   byte-wise S-box lookup with ShiftRows (`subshift` / `inv_subshift`,
//!   16 single-byte table loads), then `mix_columns` / `inv_mix_columns`
//!   computed arithmetically per column word, then the round key XOR; two
//!   rounds per loop iteration, as the C does;
//! - before the data-dependent lookups each block XORs into its state
//!   sixteen S-box bytes at fixed indexes that cancel out (the kernel's
//!   prefetch of the whole 256-byte S-box, its cache-timing hardening); the
//!   kernel keeps those loads by declaring the S-box `volatile`, the port by
//!   reading the table through [`std::hint::black_box`];
//! - XTS is `crypto/xts.c`'s order of operations: the tweak is encrypted
//!   once with the second key half, then one pass XORs every block with its
//!   tweak (`gf128mul_x_ble` between blocks), then the ECB pass en/decrypts
//!   every block, then a second pass recomputes the tweaks and XORs them
//!   again.
//!
//! What the port does not pay: `aesti_encrypt`/`aesti_decrypt`'s
//! `local_irq_save`/`restore` around each block and the `skcipher_walk` of
//! the three passes (user space can do neither). What it pays where the
//! running kernel does ([`kernel_return_thunk`]): the SRSO "Safe RET"
//! return thunk, under which every kernel `ret` mispredicts, 55 a block on
//! decryption (52 calls of an out-of-line `inv_mix_columns`, `aes_decrypt`,
//! `aesti_decrypt`, the retpoline of the ECB walk's indirect call), about
//! 14,000 a 4 KiB unit, which doubles the cost on such a machine: the port
//! makes the same calls and returns through the same thunk (docs/kernel.md).
//! Source read: `lib/crypto/aes.c` at
//! raspberrypi/linux 8bea97cf (the 6.12+ text, the same algorithm as 6.18;
//! torvalds/linux's stored copy, 1f2d69a3, is the later table-based rewrite
//! that is not in 6.18), `crypto/xts.c` of 5.x-6.x.
//!
//! Everything here is a pure function over byte slices, with no
//! allocation; the only assembly is the thunk and the function that
//! returns through it (x86-64 only).

/// The AES S-box (FIPS-197 figure 7), cache-line aligned as the kernel's.
#[repr(align(64))]
struct Table([u8; 256]);

static AES_SBOX: Table = Table([
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
    0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
    0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
    0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
    0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
    0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
    0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
    0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
    0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
    0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
    0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
    0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
    0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
    0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
    0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
]);

/// The inverse S-box (FIPS-197 figure 14).
static AES_INV_SBOX: Table = Table([
    0x52, 0x09, 0x6a, 0xd5, 0x30, 0x36, 0xa5, 0x38, 0xbf, 0x40, 0xa3, 0x9e, 0x81, 0xf3, 0xd7, 0xfb,
    0x7c, 0xe3, 0x39, 0x82, 0x9b, 0x2f, 0xff, 0x87, 0x34, 0x8e, 0x43, 0x44, 0xc4, 0xde, 0xe9, 0xcb,
    0x54, 0x7b, 0x94, 0x32, 0xa6, 0xc2, 0x23, 0x3d, 0xee, 0x4c, 0x95, 0x0b, 0x42, 0xfa, 0xc3, 0x4e,
    0x08, 0x2e, 0xa1, 0x66, 0x28, 0xd9, 0x24, 0xb2, 0x76, 0x5b, 0xa2, 0x49, 0x6d, 0x8b, 0xd1, 0x25,
    0x72, 0xf8, 0xf6, 0x64, 0x86, 0x68, 0x98, 0x16, 0xd4, 0xa4, 0x5c, 0xcc, 0x5d, 0x65, 0xb6, 0x92,
    0x6c, 0x70, 0x48, 0x50, 0xfd, 0xed, 0xb9, 0xda, 0x5e, 0x15, 0x46, 0x57, 0xa7, 0x8d, 0x9d, 0x84,
    0x90, 0xd8, 0xab, 0x00, 0x8c, 0xbc, 0xd3, 0x0a, 0xf7, 0xe4, 0x58, 0x05, 0xb8, 0xb3, 0x45, 0x06,
    0xd0, 0x2c, 0x1e, 0x8f, 0xca, 0x3f, 0x0f, 0x02, 0xc1, 0xaf, 0xbd, 0x03, 0x01, 0x13, 0x8a, 0x6b,
    0x3a, 0x91, 0x11, 0x41, 0x4f, 0x67, 0xdc, 0xea, 0x97, 0xf2, 0xcf, 0xce, 0xf0, 0xb4, 0xe6, 0x73,
    0x96, 0xac, 0x74, 0x22, 0xe7, 0xad, 0x35, 0x85, 0xe2, 0xf9, 0x37, 0xe8, 0x1c, 0x75, 0xdf, 0x6e,
    0x47, 0xf1, 0x1a, 0x71, 0x1d, 0x29, 0xc5, 0x89, 0x6f, 0xb7, 0x62, 0x0e, 0xaa, 0x18, 0xbe, 0x1b,
    0xfc, 0x56, 0x3e, 0x4b, 0xc6, 0xd2, 0x79, 0x20, 0x9a, 0xdb, 0xc0, 0xfe, 0x78, 0xcd, 0x5a, 0xf4,
    0x1f, 0xdd, 0xa8, 0x33, 0x88, 0x07, 0xc7, 0x31, 0xb1, 0x12, 0x10, 0x59, 0x27, 0x80, 0xec, 0x5f,
    0x60, 0x51, 0x7f, 0xa9, 0x19, 0xb5, 0x4a, 0x0d, 0x2d, 0xe5, 0x7a, 0x9f, 0x93, 0xc9, 0x9c, 0xef,
    0xa0, 0xe0, 0x3b, 0x4d, 0xae, 0x2a, 0xf5, 0xb0, 0xc8, 0xeb, 0xbb, 0x3c, 0x83, 0x53, 0x99, 0x61,
    0x17, 0x2b, 0x04, 0x7e, 0xba, 0x77, 0xd6, 0x26, 0xe1, 0x69, 0x14, 0x63, 0x55, 0x21, 0x0c, 0x7d,
]);

/// The table as the compiler must load it: opaque, so that neither the
/// fixed-index prefetch XORs nor any lookup is folded away (the kernel's
/// `volatile const`).
#[inline(always)]
fn table(t: &'static Table) -> &'static [u8; 256] {
    std::hint::black_box(&t.0)
}

/// Multiplies each byte of `w` by x in GF(2^8).
#[inline]
fn mul_by_x(w: u32) -> u32 {
    let x = w & 0x7f7f_7f7f;
    let y = w & 0x8080_8080;
    (x << 1) ^ (y >> 7).wrapping_mul(0x1b)
}

/// Multiplies each byte of `w` by x^2 in GF(2^8).
#[inline]
fn mul_by_x2(w: u32) -> u32 {
    let x = w & 0x3f3f_3f3f;
    let y = w & 0x8080_8080;
    let z = w & 0x4040_4040;
    (x << 2) ^ (y >> 7).wrapping_mul(0x36) ^ (z >> 6).wrapping_mul(0x1b)
}

/// MixColumns of one column word (bytes little-endian: row 0 is the low
/// byte).
#[inline(always)]
fn mix_columns(x: u32) -> u32 {
    let y = mul_by_x(x) ^ x.rotate_right(16);
    y ^ (x ^ y).rotate_right(8)
}

/// InvMixColumns of one column word, as MixColumns of a cheaper product.
///
/// Out of line, as in the kernel this models: the C leaves the choice to
/// the compiler (`static`, not `inline`), and this kernel's build calls it
/// (`/proc/kallsyms` has a 112-byte `inv_mix_columns`, and `aes_decrypt`,
/// 1344 bytes, is smaller than `aes_encrypt`, 1600 bytes with
/// `mix_columns` inlined: it holds calls, not copies). `mix_columns` has
/// no symbol there: inlined, as here.
#[inline(never)]
fn inv_mix_columns(x: u32) -> u32 {
    let y = mul_by_x2(x);
    mix_columns(x ^ y ^ y.rotate_right(16))
}

/// SubBytes and ShiftRows for output column `pos`.
#[inline(always)]
fn subshift(sbox: &[u8; 256], s: &[u32; 4], pos: usize) -> u32 {
    u32::from(sbox[(s[pos] & 0xff) as usize])
        ^ (u32::from(sbox[((s[(pos + 1) % 4] >> 8) & 0xff) as usize]) << 8)
        ^ (u32::from(sbox[((s[(pos + 2) % 4] >> 16) & 0xff) as usize]) << 16)
        ^ (u32::from(sbox[((s[(pos + 3) % 4] >> 24) & 0xff) as usize]) << 24)
}

/// InvSubBytes and InvShiftRows for output column `pos`.
#[inline(always)]
fn inv_subshift(inv: &[u8; 256], s: &[u32; 4], pos: usize) -> u32 {
    u32::from(inv[(s[pos] & 0xff) as usize])
        ^ (u32::from(inv[((s[(pos + 3) % 4] >> 8) & 0xff) as usize]) << 8)
        ^ (u32::from(inv[((s[(pos + 2) % 4] >> 16) & 0xff) as usize]) << 16)
        ^ (u32::from(inv[((s[(pos + 1) % 4] >> 24) & 0xff) as usize]) << 24)
}

/// SubWord of the key schedule.
#[inline]
fn subw(sbox: &[u8; 256], w: u32) -> u32 {
    u32::from(sbox[(w & 0xff) as usize])
        ^ (u32::from(sbox[((w >> 8) & 0xff) as usize]) << 8)
        ^ (u32::from(sbox[((w >> 16) & 0xff) as usize]) << 16)
        ^ (u32::from(sbox[((w >> 24) & 0xff) as usize]) << 24)
}

#[inline(always)]
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Whether the running kernel returns from every function through a
/// return thunk that mispredicts on purpose: the SRSO mitigation "Safe
/// RET" (`/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow`
/// says `Safe RET`; AMD Zen). Its AES then pays one mispredicted return per
/// function return, 54 a block on decryption (52 `inv_mix_columns`, which
/// this kernel's build calls out of line, `aes_decrypt`, `aesti_decrypt`),
/// plus the retpoline of the ECB walk's indirect call: measured here, a
/// C build of the same algorithm with `-mfunction-return=thunk-extern
/// -mindirect-branch=thunk-extern` costs 110-120 us a 4 KiB unit, as the
/// kernel's work item, against 57 us without.
pub fn kernel_return_thunk() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow")
            .is_ok_and(|t| t.contains("Safe RET"))
    })
}

/// The SRSO "Safe RET" return thunk (`srso_return_thunk` /
/// `srso_safe_ret`, arch/x86/lib/retpoline.S): every kernel function
/// returns by jumping here. The call pushes an entry on the return stack
/// buffer that the `ret` then does not take: it drops that call's address
/// and returns to the function's caller, so the prediction is wrong, every
/// time.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
extern "C" fn srso_return_thunk() {
    std::arch::naked_asm!("call 2f", "int3", "2:", "lea rsp, [rsp + 8]", "ret", "int3",)
}

/// A function that returns at once, through [`srso_return_thunk`]: a
/// kernel function's return where no work is left to model (`aes_decrypt`,
/// `aesti_decrypt`, and the retpoline of the ECB walk's indirect call).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
extern "C" fn thunked_return() {
    std::arch::naked_asm!("jmp {t}", t = sym srso_return_thunk)
}

/// [`inv_mix_columns`] as a kernel built with the return thunk runs it: one
/// call, the same arithmetic (gcc -O2's code for the C), and its return
/// through [`srso_return_thunk`]. One real call and one thunked return per
/// column, as in the kernel, and nothing else: an extra call after a
/// normal return cost 25 us more a 4 KiB unit than a C build with the
/// kernel's thunks (128 against 102 us).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
extern "C" fn inv_mix_columns_thunked(x: u32) -> u32 {
    std::arch::naked_asm!(
        "mov edx, edi",
        "mov ecx, edi",
        "mov eax, edi",
        "shr edx, 7",
        "shr ecx, 6",
        "and edx, 0x01010101",
        "and ecx, 0x01010101",
        "imul edx, edx, 0x36",
        "lea ecx, [rcx + rcx * 2]",
        "lea ecx, [rcx + rcx * 8]",
        "xor edx, ecx",
        "lea ecx, [rdi * 4]",
        "and ecx, 0xfcfcfcfc",
        "xor edx, ecx",
        "xor eax, edx",
        "rol edx, 16",
        "xor eax, edx",
        "lea edx, [rax + rax]",
        "mov ecx, eax",
        "rol ecx, 16",
        "and edx, 0xfefefefe",
        "xor edx, ecx",
        "mov ecx, eax",
        "shr ecx, 7",
        "and ecx, 0x01010101",
        "lea ecx, [rcx + rcx * 2]",
        "lea ecx, [rcx + rcx * 8]",
        "xor edx, ecx",
        "xor eax, edx",
        "ror eax, 8",
        "xor eax, edx",
        "jmp {t}",
        t = sym srso_return_thunk,
    )
}

/// Elsewhere there is no such thunk to model.
#[cfg(not(target_arch = "x86_64"))]
fn inv_mix_columns_thunked(x: u32) -> u32 {
    inv_mix_columns(x)
}

#[cfg(not(target_arch = "x86_64"))]
fn thunked_return() {}

/// An expanded AES key: the kernel's `struct crypto_aes_ctx`.
#[derive(Clone)]
pub struct AesTi {
    key_enc: [u32; 60],
    key_dec: [u32; 60],
    /// 16, 24 or 32.
    key_length: usize,
    /// Pay the kernel's return thunk ([`kernel_return_thunk`]).
    thunk: bool,
}

impl AesTi {
    /// `aes_expandkey`. Returns `None` unless `key` is 16, 24 or 32 bytes.
    pub fn new(key: &[u8]) -> Option<Self> {
        let key_len = key.len();
        if !matches!(key_len, 16 | 24 | 32) {
            return None;
        }
        let sbox = table(&AES_SBOX);
        let kwords = key_len / 4;
        let mut ke = [0u32; 60];
        for (i, w) in ke.iter_mut().take(kwords).enumerate() {
            *w = le32(&key[i * 4..]);
        }
        let mut rc = 1u32;
        for i in 0..10 {
            let rki = i * kwords;
            let rko = rki + kwords;
            ke[rko] = subw(sbox, ke[rki + kwords - 1]).rotate_right(8) ^ rc ^ ke[rki];
            ke[rko + 1] = ke[rko] ^ ke[rki + 1];
            ke[rko + 2] = ke[rko + 1] ^ ke[rki + 2];
            ke[rko + 3] = ke[rko + 2] ^ ke[rki + 3];
            if key_len == 24 {
                if i >= 7 {
                    break;
                }
                ke[rko + 4] = ke[rko + 3] ^ ke[rki + 4];
                ke[rko + 5] = ke[rko + 4] ^ ke[rki + 5];
            } else if key_len == 32 {
                if i >= 6 {
                    break;
                }
                ke[rko + 4] = subw(sbox, ke[rko + 3]) ^ ke[rki + 4];
                ke[rko + 5] = ke[rko + 4] ^ ke[rki + 5];
                ke[rko + 6] = ke[rko + 5] ^ ke[rki + 6];
                ke[rko + 7] = ke[rko + 6] ^ ke[rki + 7];
            }
            rc = mul_by_x(rc);
        }
        // The Equivalent Inverse Cipher's keys: reversed, InvMixColumns on
        // all but the first and the last.
        let mut kd = [0u32; 60];
        kd[..4].copy_from_slice(&ke[key_len + 24..key_len + 28]);
        let mut i = 4;
        let mut j = key_len + 20;
        while j > 0 {
            for k in 0..4 {
                kd[i + k] = inv_mix_columns(ke[j + k]);
            }
            i += 4;
            j -= 4;
        }
        kd[i..i + 4].copy_from_slice(&ke[..4]);
        Some(AesTi {
            key_enc: ke,
            key_dec: kd,
            key_length: key_len,
            thunk: false,
        })
    }

    /// `aes_encrypt`: one 16-byte block, `input` to `out`.
    #[inline]
    pub fn encrypt_block(&self, out: &mut [u8; 16], input: &[u8; 16]) {
        let sbox = table(&AES_SBOX);
        let ke = &self.key_enc;
        let rounds = 6 + self.key_length / 4;
        let mut st0 = [
            ke[0] ^ le32(&input[0..]),
            ke[1] ^ le32(&input[4..]),
            ke[2] ^ le32(&input[8..]),
            ke[3] ^ le32(&input[12..]),
        ];
        // Data-independent S-box loads that add up to zero: they pull the
        // whole S-box into the D-cache before the data-dependent lookups.
        st0[0] ^= u32::from(sbox[0] ^ sbox[64] ^ sbox[134] ^ sbox[195]);
        st0[1] ^= u32::from(sbox[16] ^ sbox[82] ^ sbox[158] ^ sbox[221]);
        st0[2] ^= u32::from(sbox[32] ^ sbox[96] ^ sbox[160] ^ sbox[234]);
        st0[3] ^= u32::from(sbox[48] ^ sbox[112] ^ sbox[186] ^ sbox[241]);
        let mut st1 = [0u32; 4];
        let mut rkp = 4;
        let mut round = 0;
        loop {
            for c in 0..4 {
                st1[c] = mix_columns(subshift(sbox, &st0, c)) ^ ke[rkp + c];
            }
            if round == rounds - 2 {
                break;
            }
            for c in 0..4 {
                st0[c] = mix_columns(subshift(sbox, &st1, c)) ^ ke[rkp + 4 + c];
            }
            round += 2;
            rkp += 8;
        }
        for c in 0..4 {
            let w = subshift(sbox, &st1, c) ^ ke[rkp + 4 + c];
            out[c * 4..c * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
    }

    /// `aes_decrypt`: one 16-byte block, `input` to `out`.
    #[inline]
    pub fn decrypt_block(&self, out: &mut [u8; 16], input: &[u8; 16]) {
        if self.thunk {
            self.decrypt_block_as::<true>(out, input);
        } else {
            self.decrypt_block_as::<false>(out, input);
        }
    }

    /// [`Self::decrypt_block`], paying the kernel's return thunk or not.
    #[inline]
    fn decrypt_block_as<const THUNK: bool>(&self, out: &mut [u8; 16], input: &[u8; 16]) {
        let inv = table(&AES_INV_SBOX);
        let kd = &self.key_dec;
        let rounds = 6 + self.key_length / 4;
        let mut st0 = [
            kd[0] ^ le32(&input[0..]),
            kd[1] ^ le32(&input[4..]),
            kd[2] ^ le32(&input[8..]),
            kd[3] ^ le32(&input[12..]),
        ];
        st0[0] ^= u32::from(inv[0] ^ inv[64] ^ inv[129] ^ inv[200]);
        st0[1] ^= u32::from(inv[16] ^ inv[83] ^ inv[150] ^ inv[212]);
        st0[2] ^= u32::from(inv[32] ^ inv[96] ^ inv[160] ^ inv[236]);
        st0[3] ^= u32::from(inv[48] ^ inv[112] ^ inv[187] ^ inv[247]);
        let mut st1 = [0u32; 4];
        let mut rkp = 4;
        let mut round = 0;
        let imc = |x| {
            if THUNK {
                inv_mix_columns_thunked(x)
            } else {
                inv_mix_columns(x)
            }
        };
        loop {
            for c in 0..4 {
                st1[c] = imc(inv_subshift(inv, &st0, c)) ^ kd[rkp + c];
            }
            if round == rounds - 2 {
                break;
            }
            for c in 0..4 {
                st0[c] = imc(inv_subshift(inv, &st1, c)) ^ kd[rkp + 4 + c];
            }
            round += 2;
            rkp += 8;
        }
        for c in 0..4 {
            let w = inv_subshift(inv, &st1, c) ^ kd[rkp + 4 + c];
            out[c * 4..c * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        // aes_decrypt's and aesti_decrypt's returns, and the ECB walk's
        // indirect call (a retpoline).
        if THUNK {
            for _ in 0..3 {
                thunked_return();
            }
        }
    }
}

/// `gf128mul_x_ble`: the tweak times x, on the kernel's `le128` halves
/// (`lo` is bytes 0..8).
#[inline]
fn gf128mul_x_ble(lo: u64, hi: u64) -> (u64, u64) {
    let tt = (((hi as i64) >> 63) as u64) & 0x87;
    ((lo << 1) ^ tt, (hi << 1) | (lo >> 63))
}

/// `xts_xor_tweak`: XORs every block of `buf` with its tweak, starting from
/// `t` (one of the two passes around the ECB pass).
#[inline]
fn xor_tweak(buf: &mut [u8], t: (u64, u64)) {
    let (mut lo, mut hi) = t;
    for b in buf.chunks_exact_mut(16) {
        let a = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) ^ lo;
        let c = u64::from_le_bytes(b[8..].try_into().expect("8 bytes")) ^ hi;
        b[..8].copy_from_slice(&a.to_le_bytes());
        b[8..].copy_from_slice(&c.to_le_bytes());
        (lo, hi) = gf128mul_x_ble(lo, hi);
    }
}

/// `xts(ecb(aes-fixed-time))` keyed with a 64-byte AES-256-XTS key (Key1,
/// the data key, then Key2, the tweak key).
#[derive(Clone)]
pub struct XtsTi {
    data: AesTi,
    tweak: AesTi,
}

impl XtsTi {
    /// Keys both halves (`xts_setkey`).
    pub fn new(key: &[u8; 64]) -> Self {
        Self::with_thunk(key, kernel_return_thunk())
    }

    /// [`Self::new`], paying the kernel's return thunk on decryption or not.
    pub fn with_thunk(key: &[u8; 64], thunk: bool) -> Self {
        let (k1, k2) = key.split_at(32);
        let mut data = AesTi::new(k1).expect("32-byte key");
        data.thunk = thunk;
        XtsTi {
            data,
            tweak: AesTi::new(k2).expect("32-byte key"),
        }
    }

    fn first_tweak(&self, iv: &[u8; 16]) -> (u64, u64) {
        let mut t = [0u8; 16];
        self.tweak.encrypt_block(&mut t, iv);
        (
            u64::from_le_bytes(t[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(t[8..].try_into().expect("8 bytes")),
        )
    }

    fn check(buf: &[u8]) {
        assert!(
            buf.len().is_multiple_of(16),
            "XTS without ciphertext stealing: {} bytes is not a whole number of blocks",
            buf.len()
        );
    }

    /// XTS-encrypts `buf` in place (`xts_encrypt`).
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16.
    pub fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        Self::check(buf);
        let t = self.first_tweak(iv);
        xor_tweak(buf, t);
        for b in buf.chunks_exact_mut(16) {
            let input: [u8; 16] = (&*b).try_into().expect("16-byte block");
            let out: &mut [u8; 16] = b.try_into().expect("16-byte block");
            self.data.encrypt_block(out, &input);
        }
        xor_tweak(buf, t);
    }

    /// XTS-decrypts `buf` in place (`xts_decrypt`).
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16.
    pub fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        Self::check(buf);
        let t = self.first_tweak(iv);
        xor_tweak(buf, t);
        for b in buf.chunks_exact_mut(16) {
            let input: [u8; 16] = (&*b).try_into().expect("16-byte block");
            let out: &mut [u8; 16] = b.try_into().expect("16-byte block");
            self.data.decrypt_block(out, &input);
        }
        xor_tweak(buf, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn the_return_thunk_changes_the_cost_not_the_bytes() {
        let key: [u8; 64] = std::array::from_fn(|i| (i * 7 + 3) as u8);
        let iv = [9u8; 16];
        let mut a: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        let plain = a.clone();
        XtsTi::with_thunk(&key, false).encrypt(&iv, &mut a);
        let mut b = a.clone();
        XtsTi::with_thunk(&key, false).decrypt(&iv, &mut a);
        XtsTi::with_thunk(&key, true).decrypt(&iv, &mut b);
        assert_eq!(a, plain);
        assert_eq!(b, plain);
    }

    // FIPS-197 appendix C.3 (AES-256).
    #[test]
    fn fips197_c3_aes256_block() {
        let key = unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
        let pt: [u8; 16] = unhex("00112233445566778899aabbccddeeff")
            .try_into()
            .unwrap();
        let ct: [u8; 16] = unhex("8ea2b7ca516745bfeafc49904b496089")
            .try_into()
            .unwrap();
        let c = AesTi::new(&key).unwrap();
        let mut out = [0u8; 16];
        c.encrypt_block(&mut out, &pt);
        assert_eq!(out, ct);
        let mut back = [0u8; 16];
        c.decrypt_block(&mut back, &ct);
        assert_eq!(back, pt);
    }

    // FIPS-197 appendix C.1 and C.2: the key schedule's 128- and 192-bit
    // branches, which the kernel's code shares.
    #[test]
    fn fips197_c1_c2_aes128_aes192_blocks() {
        let pt: [u8; 16] = unhex("00112233445566778899aabbccddeeff")
            .try_into()
            .unwrap();
        for (key, ct) in [
            (
                "000102030405060708090a0b0c0d0e0f",
                "69c4e0d86a7b0430d8cdb78070b4c55a",
            ),
            (
                "000102030405060708090a0b0c0d0e0f1011121314151617",
                "dda97ca4864cdfe06eaf70a0ec0d7191",
            ),
        ] {
            let c = AesTi::new(&unhex(key)).unwrap();
            let mut out = [0u8; 16];
            c.encrypt_block(&mut out, &pt);
            assert_eq!(hex::encode(out), ct, "key {key}");
            let mut back = [0u8; 16];
            c.decrypt_block(&mut back, &out);
            assert_eq!(back, pt, "key {key}");
        }
        assert!(AesTi::new(&[0u8; 20]).is_none());
    }

    #[test]
    fn the_prefetch_xors_cancel_out() {
        let s = &AES_SBOX.0;
        let i = &AES_INV_SBOX.0;
        for idx in [
            [0, 64, 134, 195],
            [16, 82, 158, 221],
            [32, 96, 160, 234],
            [48, 112, 186, 241],
        ] {
            assert_eq!(idx.iter().fold(0, |a, &k| a ^ s[k]), 0, "{idx:?}");
        }
        for idx in [
            [0, 64, 129, 200],
            [16, 83, 150, 212],
            [32, 96, 160, 236],
            [48, 112, 187, 247],
        ] {
            assert_eq!(idx.iter().fold(0, |a, &k| a ^ i[k]), 0, "{idx:?}");
        }
    }

    #[test]
    fn tweak_doubling_equals_mul_alpha() {
        let mut x = 0x8000_0000_0000_0000_0123_4567_89ab_cdefu128;
        for _ in 0..300 {
            let (lo, hi) = gf128mul_x_ble(x as u64, (x >> 64) as u64);
            let want = super::super::xts::mul_alpha(x);
            assert_eq!(u128::from(lo) | (u128::from(hi) << 64), want);
            x = want ^ 0x8000_0000_0000_0000_0000_0000_0000_0000;
        }
    }
}
