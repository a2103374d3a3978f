//! XTS (IEEE 1619-2007, NIST SP 800-38E) over a whole data unit, as pure
//! functions over byte slices.
//!
//! The data cipher is AES keyed with Key1 and the tweak cipher AES keyed with
//! Key2; `iv` is the 16-byte tweak value i (for fscrypt, the data unit index)
//! which is encrypted with Key2 to give T_0, and block j of the unit becomes
//! `C_j = E_K1(P_j ^ T_j) ^ T_j` with `T_j = T_0 * alpha^j` in GF(2^128).
//!
//! The buffer must be a whole number of 16-byte blocks: fscrypt data units
//! always are, so ciphertext stealing is not implemented (a trailing partial
//! block is a panic). There is no limit on the number of blocks.
//!
//! Three drivers share that definition:
//! - [`Aes256Xts`] on x86_64 with AES-NI: a hand-scheduled kernel, eight
//!   blocks per iteration (see its docs), which is what the hardware kind
//!   runs; it is about as fast as OpenSSL's `aes-256-xts`. Or
//!   ([`Aes256Xts::new_kernel_loop`]) a port of Linux 6.1's
//!   `xts-aes-aesni` loop, four blocks per iteration, which pays what the
//!   kernel's driver pays (`aes-256-xts-ni4`).
//! - [`encrypt`] / [`decrypt`], generic over the cipher 0.5 block ciphers
//!   (`aes::Aes256`): [`Aes256Xts`]'s fallback. They run inside the cipher's
//!   backend, eight blocks (its `ParBlocksSize`) at a time, computing each
//!   group's tweaks and XORing them in the same pass over the buffer, on the
//!   stack.
//! - [`encrypt_soft`] / [`decrypt_soft`], the same over the cipher 0.3 traits
//!   of `aes_soft` (aes 0.7 with `force-soft`, the fixsliced software AES).
//!
//! None of them allocates.

use aes::cipher::array::Array;
use aes::cipher::consts::U16;
use aes::cipher::{
    BlockCipherDecBackend, BlockCipherDecClosure, BlockCipherDecrypt, BlockCipherEncBackend,
    BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser, ParBlocksSizeUser,
};
/// An AES block as the cipher 0.5 traits take it.
type Block = Array<u8, U16>;

/// Multiplies a tweak by alpha (x) in GF(2^128) with IEEE 1619's
/// little-endian convention: the tweak's byte 0 is the least significant,
/// the value shifts left by one bit and, if bit 127 was set, 0x87 is XORed
/// into the low byte. Constant time.
#[inline(always)]
pub fn mul_alpha(t: u128) -> u128 {
    let carry = ((t as i128) >> 127) as u128; // all ones if bit 127 is set
    (t << 1) ^ (carry & 0x87)
}

#[inline(always)]
fn xor_block(block: &mut Block, t: u128) {
    block.0 = (u128::from_le_bytes(block.0) ^ t).to_le_bytes();
}

#[inline(always)]
fn blocks_of(buf: &mut [u8]) -> &mut [Block] {
    let (blocks, rest) = Array::<u8, U16>::slice_as_chunks_mut(buf);
    assert!(
        rest.is_empty(),
        "XTS without ciphertext stealing: {} bytes is not a whole number of blocks",
        blocks.len() * 16 + rest.len()
    );
    blocks
}

#[inline(always)]
fn first_tweak<T>(tweak_cipher: &T, iv: &[u8; 16]) -> u128
where
    T: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let mut t = Block::from(*iv);
    tweak_cipher.encrypt_block(&mut t);
    u128::from_le_bytes(t.0)
}

/// The XTS pass over all blocks of a unit, run inside the cipher's
/// backend (so with its target features enabled). `crypt_par` and
/// `crypt_one` are the backend's parallel and single-block functions.
#[inline(always)]
fn xts_pass<B, P, O>(blocks: &mut [Block], mut t: u128, crypt_par: P, crypt_one: O)
where
    B: ParBlocksSizeUser + BlockSizeUser<BlockSize = U16>,
    P: Fn(&mut Array<Block, B::ParBlocksSize>),
    O: Fn(&mut Block),
{
    let (chunks, tail) = Array::<Block, B::ParBlocksSize>::slice_as_chunks_mut(blocks);
    for chunk in chunks {
        let mut tweaks = Array::<u128, B::ParBlocksSize>::default();
        for (block, tw) in chunk.iter_mut().zip(tweaks.iter_mut()) {
            *tw = t;
            xor_block(block, t);
            t = mul_alpha(t);
        }
        crypt_par(chunk);
        for (block, tw) in chunk.iter_mut().zip(tweaks.iter()) {
            xor_block(block, *tw);
        }
    }
    for block in tail {
        xor_block(block, t);
        crypt_one(block);
        xor_block(block, t);
        t = mul_alpha(t);
    }
}

struct XtsCtx<'a> {
    blocks: &'a mut [Block],
    tweak: u128,
}

impl BlockSizeUser for XtsCtx<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for XtsCtx<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        xts_pass::<B, _, _>(
            self.blocks,
            self.tweak,
            |par| backend.encrypt_par_blocks_inplace(par),
            |one| backend.encrypt_block_inplace(one),
        );
    }
}

impl BlockCipherDecClosure for XtsCtx<'_> {
    #[inline(always)]
    fn call<B: BlockCipherDecBackend<BlockSize = U16>>(self, backend: &B) {
        xts_pass::<B, _, _>(
            self.blocks,
            self.tweak,
            |par| backend.decrypt_par_blocks_inplace(par),
            |one| backend.decrypt_block_inplace(one),
        );
    }
}

/// XTS-encrypts `buf` in place with a cipher 0.5 block cipher (e.g.
/// `aes::Aes256`).
///
/// # Panics
/// If `buf.len()` is not a multiple of 16.
pub fn encrypt<C, T>(data_cipher: &C, tweak_cipher: &T, iv: &[u8; 16], buf: &mut [u8])
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
    T: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let blocks = blocks_of(buf);
    let tweak = first_tweak(tweak_cipher, iv);
    data_cipher.encrypt_with_backend(XtsCtx { blocks, tweak });
}

/// XTS-decrypts `buf` in place with a cipher 0.5 block cipher; the
/// tweak cipher encrypts, as in encryption.
///
/// # Panics
/// If `buf.len()` is not a multiple of 16.
pub fn decrypt<C, T>(data_cipher: &C, tweak_cipher: &T, iv: &[u8; 16], buf: &mut [u8])
where
    C: BlockCipherDecrypt + BlockSizeUser<BlockSize = U16>,
    T: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let blocks = blocks_of(buf);
    let tweak = first_tweak(tweak_cipher, iv);
    data_cipher.decrypt_with_backend(XtsCtx { blocks, tweak });
}

/// AES-256-XTS keyed with a 64-byte key (Key1 || Key2): on the CPU's
/// AES-NI instructions through the hand-scheduled kernel of this module
/// where the CPU has them, else through [`encrypt`] / [`decrypt`] over
/// the `aes` crate (which then picks its own backend).
///
/// The `aes` crate's own eight-block `decrypt_blocks` peaks at about
/// 0.8x of OpenSSL's `aes-256-xts` on the development machine (an AMD
/// EPYC with AES-NI and VAES) before any tweak work, because the compiler
/// splits its eight-block rounds into pairs, and its VAES backends need a
/// `--cfg` flag. So the AES-NI path runs its own loop: eight blocks per
/// iteration in one `asm!` block, every round over all eight, the next
/// eight tweaks doubled in general registers between the rounds, and the
/// tweaks folded into the first and last round keys. On one core of
/// the development machine that measured 0.95x to 1.1x of OpenSSL 3.0's
/// `aes-256-xts` (sustained medians on a shared machine to best short
/// runs; OpenSSL's six-block loop is latency-bound there).
#[derive(Clone)]
pub struct Aes256Xts {
    imp: Imp,
}

// One per keyed cipher, shared behind an `Arc`: the size difference of
// the variants does not matter, and boxing would add an indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Imp {
    #[cfg(target_arch = "x86_64")]
    AesNi(aesni::Keys),
    /// AES-NI in Linux 6.1's `xts-aes-aesni` order of work (four blocks
    /// an iteration, the tweaks doubled in SSE registers and stored
    /// through the destination).
    #[cfg(target_arch = "x86_64")]
    AesNi4(aesni::Keys),
    Crate(aes::Aes256, aes::Aes256Enc),
}

impl std::fmt::Debug for Aes256Xts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("Aes256Xts")
            .field("aesni", &self.uses_aesni())
            .finish_non_exhaustive()
    }
}

impl Aes256Xts {
    /// Keys the cipher; AES-NI if the CPU has it.
    pub fn new(key: &[u8; 64]) -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(keys) = aesni::Keys::new(key) {
            return Aes256Xts {
                imp: Imp::AesNi(keys),
            };
        }
        Self::new_portable(key)
    }

    /// Keys the cipher on the port of Linux 6.1's `xts-aes-aesni` loop
    /// (`aesni_xts_encrypt` / `aesni_xts_decrypt`: four blocks an
    /// iteration) if the CPU has AES-NI, else as [`Self::new_portable`].
    pub fn new_kernel_loop(key: &[u8; 64]) -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(keys) = aesni::Keys::new(key) {
            return Aes256Xts {
                imp: Imp::AesNi4(keys),
            };
        }
        Self::new_portable(key)
    }

    /// Whether this instance runs the port of the kernel's four-block loop.
    pub fn uses_kernel_loop(&self) -> bool {
        match self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi4(_) => true,
            _ => false,
        }
    }

    /// Keys the cipher on the generic XTS code over the `aes` crate,
    /// whatever the CPU (the fallback path, for tests and comparisons).
    pub fn new_portable(key: &[u8; 64]) -> Self {
        use aes::cipher::KeyInit;
        let (k1, k2) = key.split_at(32);
        Aes256Xts {
            imp: Imp::Crate(
                aes::Aes256::new_from_slice(k1).expect("32-byte key"),
                aes::Aes256Enc::new_from_slice(k2).expect("32-byte key"),
            ),
        }
    }

    /// Whether this instance runs the AES-NI kernel.
    pub fn uses_aesni(&self) -> bool {
        match self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi(_) | Imp::AesNi4(_) => true,
            Imp::Crate(..) => false,
        }
    }

    /// XTS-encrypts `buf` in place with tweak value `iv`.
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16.
    pub fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        match &self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi(keys) => keys.encrypt(iv, buf),
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi4(keys) => keys.encrypt4(iv, buf),
            Imp::Crate(data, tweak) => encrypt(data, tweak, iv, buf),
        }
    }

    /// XTS-decrypts `buf` in place with tweak value `iv`.
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16.
    pub fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        match &self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi(keys) => keys.decrypt(iv, buf),
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi4(keys) => keys.decrypt4(iv, buf),
            Imp::Crate(data, tweak) => decrypt(data, tweak, iv, buf),
        }
    }

    /// XTS-decrypts `src` into `dst` (the same length): with AES-NI in one
    /// pass, reading `src` and writing `dst`; otherwise a copy, then in place.
    ///
    /// # Panics
    /// If the lengths differ or are not a multiple of 16.
    pub fn decrypt_from(&self, iv: &[u8; 16], src: &[u8], dst: &mut [u8]) {
        match &self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi(keys) => keys.decrypt_from(iv, src, dst),
            #[cfg(target_arch = "x86_64")]
            Imp::AesNi4(keys) => keys.decrypt4_from(iv, src, dst),
            Imp::Crate(data, tweak) => {
                dst.copy_from_slice(src);
                decrypt(data, tweak, iv, dst)
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod aesni;

pub use soft::{decrypt_soft, encrypt_soft};

mod soft;
