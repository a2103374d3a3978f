//! XTS over the cipher 0.3 traits of aes 0.7 (the software AES).

// generic-array 0.14, which cipher 0.3 is built on, marks itself
// deprecated in favour of 1.x; aes 0.7 cannot move to it.
#![allow(deprecated)]

use super::mul_alpha;
use aes_soft::cipher as cipher03;

type SoftBlock = cipher03::generic_array::GenericArray<u8, cipher03::consts::U16>;
type SoftParBlocks<C> = cipher03::ParBlocks<C>;

#[inline(always)]
fn soft_pass<C, P, O>(buf: &mut [u8], mut t: u128, crypt_par: P, crypt_one: O)
where
    C: cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
    P: Fn(&mut SoftParBlocks<C>),
    O: Fn(&mut SoftBlock),
{
    assert!(
        buf.len().is_multiple_of(16),
        "XTS without ciphertext stealing: {} bytes is not a whole number of blocks",
        buf.len()
    );
    let par_bytes = 16 * <C::ParBlocks as cipher03::generic_array::typenum::Unsigned>::USIZE;
    // The tweaks of one parallel group live in a 16-entry array.
    assert!(par_bytes <= 16 * 16, "more than 16 parallel blocks");
    let mut chunks = buf.chunks_exact_mut(par_bytes);
    for chunk in &mut chunks {
        // The software cipher wants its own array type: copy the blocks
        // in with the tweak applied, and out with it applied again.
        let mut par = SoftParBlocks::<C>::default();
        let mut tweaks = [0u128; 16];
        for ((dst, src), tw) in par.iter_mut().zip(chunk.chunks_exact(16)).zip(&mut tweaks) {
            *tw = t;
            let b = u128::from_le_bytes(src.try_into().expect("16-byte block")) ^ t;
            dst.copy_from_slice(&b.to_le_bytes());
            t = mul_alpha(t);
        }
        crypt_par(&mut par);
        for ((src, dst), tw) in par.iter().zip(chunk.chunks_exact_mut(16)).zip(&tweaks) {
            let b = u128::from_le_bytes(src.as_slice().try_into().expect("16-byte block"));
            dst.copy_from_slice(&(b ^ tw).to_le_bytes());
        }
    }
    for dst in chunks.into_remainder().chunks_exact_mut(16) {
        let b = u128::from_le_bytes((&*dst).try_into().expect("16-byte block")) ^ t;
        let mut block = SoftBlock::from(b.to_le_bytes());
        crypt_one(&mut block);
        let b = u128::from_le_bytes(block.into()) ^ t;
        dst.copy_from_slice(&b.to_le_bytes());
        t = mul_alpha(t);
    }
}

#[inline(always)]
fn soft_first_tweak<T>(tweak_cipher: &T, iv: &[u8; 16]) -> u128
where
    T: cipher03::BlockEncrypt + cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
{
    let mut t = SoftBlock::from(*iv);
    tweak_cipher.encrypt_block(&mut t);
    u128::from_le_bytes(t.into())
}

/// XTS-encrypts `buf` in place with a cipher 0.3 block cipher (the
/// software `aes_soft::Aes256`).
///
/// # Panics
/// If `buf.len()` is not a multiple of 16.
pub fn encrypt_soft<C, T>(data_cipher: &C, tweak_cipher: &T, iv: &[u8; 16], buf: &mut [u8])
where
    C: cipher03::BlockEncrypt + cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
    T: cipher03::BlockEncrypt + cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
{
    let t = soft_first_tweak(tweak_cipher, iv);
    soft_pass::<C, _, _>(
        buf,
        t,
        |par| data_cipher.encrypt_par_blocks(par),
        |one| data_cipher.encrypt_block(one),
    );
}

/// XTS-decrypts `buf` in place with a cipher 0.3 block cipher.
///
/// # Panics
/// If `buf.len()` is not a multiple of 16.
pub fn decrypt_soft<C, T>(data_cipher: &C, tweak_cipher: &T, iv: &[u8; 16], buf: &mut [u8])
where
    C: cipher03::BlockDecrypt + cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
    T: cipher03::BlockEncrypt + cipher03::BlockCipher<BlockSize = cipher03::consts::U16>,
{
    let t = soft_first_tweak(tweak_cipher, iv);
    soft_pass::<C, _, _>(
        buf,
        t,
        |par| data_cipher.decrypt_par_blocks(par),
        |one| data_cipher.decrypt_block(one),
    );
}
