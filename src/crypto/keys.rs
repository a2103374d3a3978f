//! fscrypt v2 key derivation: the per-file contents key and the master
//! key's identifier, both HKDF-SHA512 of the master key as
//! `fs/crypto/hkdf.c` and `keysetup.c` compute them. Kept apart from the
//! ciphers so the kernel-facing code (adding a key, checking a file's
//! ciphertext) can name exactly what it derives.

use hkdf::Hkdf;
use sha2::Sha512;

/// fscrypt's `HKDF_CONTEXT_KEY_IDENTIFIER`.
const HKDF_CONTEXT_KEY_IDENTIFIER: u8 = 1;
/// fscrypt's `HKDF_CONTEXT_PER_FILE_ENC_KEY`.
const HKDF_CONTEXT_PER_FILE_ENC_KEY: u8 = 2;
/// The prefix fscrypt puts in front of every HKDF info string.
const HKDF_INFO_PREFIX: &[u8; 8] = b"fscrypt\0";

/// fscrypt v2 per-file key: HKDF-SHA512, unsalted extract over `master_key`,
/// expand with info = `b"fscrypt\0" || [2]` (`HKDF_CONTEXT_PER_FILE_ENC_KEY`)
/// `|| nonce`, output length `out.len()`.
///
/// # Panics
/// If `out` is longer than HKDF-SHA512 can expand to (255 * 64 bytes).
pub fn derive_file_key(master_key: &[u8], nonce: &[u8; 16], out: &mut [u8]) {
    Hkdf::<Sha512>::new(None, master_key)
        .expand_multi_info(
            &[HKDF_INFO_PREFIX, &[HKDF_CONTEXT_PER_FILE_ENC_KEY], nonce],
            out,
        )
        .expect("HKDF-SHA512 output of at most 255 * 64 bytes");
}

/// fscrypt v2 key identifier: HKDF-SHA512 with the same PRK as
/// [`derive_file_key`], info = `b"fscrypt\0" || [1]`, 16 bytes.
pub fn key_identifier(master_key: &[u8]) -> [u8; 16] {
    let mut id = [0u8; 16];
    Hkdf::<Sha512>::new(None, master_key)
        .expand_multi_info(&[HKDF_INFO_PREFIX, &[HKDF_CONTEXT_KEY_IDENTIFIER]], &mut id)
        .expect("16 bytes is a valid HKDF-SHA512 output length");
    id
}
