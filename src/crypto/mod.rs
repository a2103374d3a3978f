//! fscrypt contents encryption model: the per-file key derivation and the
//! data-unit ciphers that the read path decrypts with.
//!
//! This module exists so that the rest of readpath can reproduce what the
//! kernel does between "the block came back from the device" and "the page is
//! uptodate": derive the fscrypt v2 per-file contents key from a master key and
//! the file's 16-byte nonce (HKDF-SHA512, as in `fs/crypto/hkdf.c` and
//! `keysetup.c`), then decrypt every data unit with the policy's contents mode
//! and the default IV policy (IV = data unit index, little-endian). Four
//! contents ciphers are modelled: AES-256-XTS on the CPU's AES instructions,
//! the same AES-256-XTS on a portable constant-time software AES (what a CPU
//! without AES instructions runs), the same AES-256-XTS on a port of the
//! kernel's own generic constant-time AES and `xts` template (what a kernel
//! whose crypto uses no AES instructions runs, [`aes_ti`]), and Adiantum (XChaCha12 + AES-256 +
//! NH/Poly1305). A fifth kind, `kernel`, hands each unit to the running
//! kernel's own `xts(aes)` through AF_ALG (`sys::AlgTfm`: one operation
//! socket per thread), so the model pays the driver the kernel's fscrypt
//! pays. Everything else here is a pure function over byte slices: no
//! threads, no files, no allocation on the encrypt/decrypt paths, and every
//! type is `Send + Sync` so one keyed cipher can be shared by worker threads.

use std::fmt;

use aes::cipher::KeyInit as _;

/// The data unit size readpath uses by default (fscrypt's usual 4096 bytes,
/// one page).
pub const DATA_UNIT_SIZE: usize = 4096;

/// The smallest data unit the ciphers accept (one AES block).
pub const MIN_UNIT_SIZE: usize = 16;

/// The largest data unit the ciphers accept (Adiantum's limit, and a page).
pub const MAX_UNIT_SIZE: usize = 4096;

crate::named_enum! {
    /// A contents encryption mode of an fscrypt policy.
    CipherKind {
        /// AES-256-XTS on the CPU's AES instructions (AES-NI, detected at run
        /// time); on a CPU without them, the `aes` crate's own fallback.
        Aes256Xts => "aes-256-xts",
        /// AES-256-XTS on the fixsliced constant-time software AES, whatever the
        /// CPU: the cost of XTS on a machine without AES instructions.
        Aes256XtsSoft => "aes-256-xts-soft",
        /// AES-256-XTS on the kernel's generic constant-time scalar AES
        /// (`lib/crypto/aes.c`, driver `aes-fixed-time`), ported, in the
        /// kernel's `xts` template's order of operations: the cost of the
        /// kernel's `xts(ecb(aes-fixed-time))` on a machine whose kernel
        /// uses no AES instructions.
        Aes256XtsTi => "aes-256-xts-ti",
        /// AES-256-XTS on AES-NI in the order of work of Linux 6.1's
        /// `xts-aes-aesni` driver (`aesni_xts_decrypt`, ported: four blocks
        /// an iteration, the tweaks doubled in SSE registers and stored
        /// through the destination, each round key loaded before its four
        /// rounds): the cost of that kernel's fscrypt cipher on this CPU.
        /// On a CPU without AES-NI, the `aes` crate's fallback.
        Aes256XtsNi4 => "aes-256-xts-ni4",
        /// Adiantum: XChaCha12, AES-256 and NH/Poly1305 (fscrypt mode 9).
        Adiantum => "adiantum",
        /// AES-256-XTS by the running kernel's own `xts(aes)` (the driver
        /// its fscrypt uses), through AF_ALG: the kernel's cost, paid per
        /// data unit with one `sendmsg` and one read.
        Kernel => "kernel",
    }
}

impl CipherKind {
    /// The size of the per-file key the cipher is keyed with, in bytes.
    pub fn key_size(self) -> usize {
        match self {
            CipherKind::Aes256Xts
            | CipherKind::Aes256XtsSoft
            | CipherKind::Aes256XtsTi
            | CipherKind::Aes256XtsNi4
            | CipherKind::Kernel => 64,
            CipherKind::Adiantum => 32,
        }
    }

    /// The size of the IV (tweak) fscrypt hands the cipher, in bytes.
    pub fn iv_size(self) -> usize {
        match self {
            CipherKind::Aes256Xts
            | CipherKind::Aes256XtsSoft
            | CipherKind::Aes256XtsTi
            | CipherKind::Aes256XtsNi4
            | CipherKind::Kernel => 16,
            CipherKind::Adiantum => 32,
        }
    }

    /// The fscrypt contents mode number (`FSCRYPT_MODE_*`).
    pub fn contents_mode(self) -> u8 {
        match self {
            // FSCRYPT_MODE_AES_256_XTS
            CipherKind::Aes256Xts
            | CipherKind::Aes256XtsSoft
            | CipherKind::Aes256XtsTi
            | CipherKind::Aes256XtsNi4
            | CipherKind::Kernel => 1,
            CipherKind::Adiantum => 9, // FSCRYPT_MODE_ADIANTUM
        }
    }

    /// Whether the two kinds turn the same key and plaintext into the same
    /// ciphertext (true for the four AES-256-XTS implementations, and for
    /// a kind with itself).
    pub fn same_ciphertext_as(self, other: CipherKind) -> bool {
        self.contents_mode() == other.contents_mode()
    }
}

/// Errors of keying a cipher or checking a data unit size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// The key is not the size the cipher needs.
    #[error("{kind} needs a {expected}-byte key, got {actual} bytes")]
    BadKeyLength {
        /// The cipher being keyed.
        kind: CipherKind,
        /// `kind.key_size()`.
        expected: usize,
        /// The length of the key given.
        actual: usize,
    },
    /// The data unit size is not a multiple of 16 in 16..=4096.
    #[error("data unit size {0} is not a multiple of 16 between 16 and 4096")]
    BadUnitSize(usize),
    /// The kernel's `xts(aes)` could not be had through AF_ALG.
    #[error("cipher = \"kernel\": {0}")]
    Kernel(String),
}

/// Checks that `unit_size` is a data unit size the ciphers accept: a multiple
/// of 16 between [`MIN_UNIT_SIZE`] and [`MAX_UNIT_SIZE`]. The en/decrypt
/// methods panic on other sizes; callers that take the size from input check
/// it here first.
pub fn check_unit_size(unit_size: usize) -> Result<(), CryptoError> {
    if (MIN_UNIT_SIZE..=MAX_UNIT_SIZE).contains(&unit_size) && unit_size.is_multiple_of(16) {
        Ok(())
    } else {
        Err(CryptoError::BadUnitSize(unit_size))
    }
}

/// Whether the hardware AES-256-XTS kind really runs on AES instructions on
/// this machine (`aes::hardware_accelerated()`).
pub fn aes_hardware_accelerated() -> bool {
    aes::hardware_accelerated()
}

/// The Adiantum instantiation fscrypt uses: XChaCha12 and AES-256.
pub type AdiantumCipher = adiantum::Cipher<chacha20::XChaCha12, aes::Aes256>;

// One per keyed cipher, shared behind an `Arc`: the size difference of the
// variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Xts(xts::Aes256Xts),
    XtsSoft {
        data: aes_soft::Aes256,
        tweak: aes_soft::Aes256,
    },
    /// The kernel's `aes-fixed-time` AES in `xts`, ported.
    XtsTi(aes_ti::XtsTi),
    Adiantum(AdiantumCipher),
    /// The kernel's `xts(aes)`, keyed; each thread its own op socket.
    Kernel(crate::sys::AlgTfm),
}

/// A contents cipher keyed with a per-file key; encrypts and decrypts whole
/// data units in place.
pub struct ContentsCipher {
    kind: CipherKind,
    inner: Inner,
}

impl fmt::Debug for ContentsCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.debug_struct("ContentsCipher")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

// The workers share one keyed cipher through an `Arc`.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ContentsCipher>();
    send_sync::<CipherKind>();
    send_sync::<CryptoError>();
};

impl ContentsCipher {
    /// Keys a cipher of `kind` with a per-file key of `kind.key_size()` bytes.
    /// For the XTS kinds the first 32 bytes are the data key and the last 32
    /// the tweak key (IEEE 1619 Key1 || Key2, as the kernel's `xts(aes)`).
    pub fn new(kind: CipherKind, key: &[u8]) -> Result<Self, CryptoError> {
        if key.len() != kind.key_size() {
            return Err(CryptoError::BadKeyLength {
                kind,
                expected: kind.key_size(),
                actual: key.len(),
            });
        }
        let inner = match kind {
            CipherKind::Aes256Xts => {
                Inner::Xts(xts::Aes256Xts::new(key.try_into().expect("64-byte key")))
            }
            CipherKind::Aes256XtsNi4 => Inner::Xts(xts::Aes256Xts::new_kernel_loop(
                key.try_into().expect("64-byte key"),
            )),
            CipherKind::Aes256XtsSoft => {
                use aes_soft::NewBlockCipher as _;
                let (k1, k2) = key.split_at(32);
                Inner::XtsSoft {
                    data: aes_soft::Aes256::new_from_slice(k1).expect("32-byte key"),
                    tweak: aes_soft::Aes256::new_from_slice(k2).expect("32-byte key"),
                }
            }
            CipherKind::Aes256XtsTi => {
                Inner::XtsTi(aes_ti::XtsTi::new(key.try_into().expect("64-byte key")))
            }
            CipherKind::Adiantum => {
                Inner::Adiantum(AdiantumCipher::new_from_slice(key).expect("32-byte key"))
            }
            CipherKind::Kernel => {
                let tfm = crate::sys::AlgTfm::bind("skcipher", KERNEL_XTS)
                    .and_then(|t| t.set_key(key).map(|()| t))
                    .map_err(|e| CryptoError::Kernel(e.to_string()))?;
                // The first op socket now, so that a refusal is an error
                // here rather than a panic on the first unit.
                tfm.with_op(|_| Ok(()))
                    .map_err(|e| CryptoError::Kernel(e.to_string()))?;
                Inner::Kernel(tfm)
            }
        };
        Ok(ContentsCipher { kind, inner })
    }

    /// The kind this cipher was keyed as.
    pub fn kind(&self) -> CipherKind {
        self.kind
    }

    /// What actually runs the cipher on this machine, for reports:
    /// `"aes-ni"`, `"aes crate"` (the hardware kind without AES-NI),
    /// `"fixsliced software aes"`, `"kernel aes-fixed-time port"`,
    /// `"adiantum crate"` or `"kernel xts(aes)
    /// via AF_ALG"` (which driver: `/proc/crypto`, see
    /// `kernel::crypto_driver`).
    pub fn backend(&self) -> &'static str {
        match &self.inner {
            Inner::Xts(c) if c.uses_kernel_loop() => "aes-ni, linux 6.1 xts-aes-aesni port",
            Inner::Xts(c) if c.uses_aesni() => "aes-ni",
            Inner::Xts(_) => "aes crate",
            Inner::XtsSoft { .. } => "fixsliced software aes",
            Inner::XtsTi(_) => "kernel aes-fixed-time port",
            Inner::Adiantum(_) => "adiantum crate",
            Inner::Kernel(_) => "kernel xts(aes) via AF_ALG",
        }
    }

    /// Encrypts one data unit in place. `unit_index` is the zero-based data
    /// unit index; the IV is fscrypt's default one: `unit_index` as le64 in
    /// bytes 0..8, the rest zero (16 bytes for XTS, 32 for Adiantum).
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16 between 16 and 4096.
    pub fn encrypt_unit(&self, unit_index: u64, buf: &mut [u8]) {
        assert_unit_size(buf.len());
        match &self.inner {
            Inner::Xts(c) => c.encrypt(&xts_iv(unit_index), buf),
            Inner::XtsSoft { data, tweak } => {
                xts::encrypt_soft(data, tweak, &xts_iv(unit_index), buf)
            }
            Inner::XtsTi(c) => c.encrypt(&xts_iv(unit_index), buf),
            Inner::Adiantum(c) => c.encrypt(buf, &adiantum_iv(unit_index)),
            Inner::Kernel(t) => kernel_op(t.with_op(|op| op.encrypt(&xts_iv(unit_index), buf))),
        }
    }

    /// Decrypts one data unit in place; the inverse of [`Self::encrypt_unit`].
    ///
    /// # Panics
    /// If `buf.len()` is not a multiple of 16 between 16 and 4096.
    pub fn decrypt_unit(&self, unit_index: u64, buf: &mut [u8]) {
        assert_unit_size(buf.len());
        match &self.inner {
            Inner::Xts(c) => c.decrypt(&xts_iv(unit_index), buf),
            Inner::XtsSoft { data, tweak } => {
                xts::decrypt_soft(data, tweak, &xts_iv(unit_index), buf)
            }
            Inner::XtsTi(c) => c.decrypt(&xts_iv(unit_index), buf),
            Inner::Adiantum(c) => c.decrypt(buf, &adiantum_iv(unit_index)),
            Inner::Kernel(t) => kernel_op(t.with_op(|op| op.decrypt(&xts_iv(unit_index), buf))),
        }
    }

    /// Encrypts consecutive data units of `unit_size` bytes in place, the
    /// first one being unit `first_unit` (indices wrap at `u64::MAX`).
    ///
    /// # Panics
    /// If `unit_size` fails [`check_unit_size`] or `buf.len()` is not a
    /// multiple of `unit_size`.
    pub fn encrypt_units(&self, first_unit: u64, unit_size: usize, buf: &mut [u8]) {
        assert_units(unit_size, buf.len());
        for (i, unit) in buf.chunks_exact_mut(unit_size).enumerate() {
            self.encrypt_unit(first_unit.wrapping_add(i as u64), unit);
        }
    }

    /// Decrypts consecutive data units of `unit_size` bytes in place; the
    /// inverse of [`Self::encrypt_units`].
    ///
    /// # Panics
    /// If `unit_size` fails [`check_unit_size`] or `buf.len()` is not a
    /// multiple of `unit_size`.
    pub fn decrypt_units(&self, first_unit: u64, unit_size: usize, buf: &mut [u8]) {
        assert_units(unit_size, buf.len());
        for (i, unit) in buf.chunks_exact_mut(unit_size).enumerate() {
            self.decrypt_unit(first_unit.wrapping_add(i as u64), unit);
        }
    }

    /// Decrypts the data units of `src` into `dst` (the same length): what
    /// [`Self::decrypt_units`] leaves in a buffer holding `src`. AES-XTS on
    /// AES instructions reads `src` and writes `dst` in one pass (the
    /// memory device's bio lands in its page as it is decrypted: no copy);
    /// every other cipher copies, then decrypts in place.
    ///
    /// # Panics
    /// As [`Self::decrypt_units`], or if the lengths differ.
    pub fn decrypt_units_from(
        &self,
        first_unit: u64,
        unit_size: usize,
        src: &[u8],
        dst: &mut [u8],
    ) {
        assert_units(unit_size, src.len());
        assert_eq!(
            src.len(),
            dst.len(),
            "source and destination lengths differ"
        );
        match &self.inner {
            Inner::Xts(c) => {
                for (i, (s, d)) in src
                    .chunks_exact(unit_size)
                    .zip(dst.chunks_exact_mut(unit_size))
                    .enumerate()
                {
                    c.decrypt_from(&xts_iv(first_unit.wrapping_add(i as u64)), s, d);
                }
            }
            _ => {
                dst.copy_from_slice(src);
                self.decrypt_units(first_unit, unit_size, dst);
            }
        }
    }
}

/// The crypto API name the kernel kind binds (what fscrypt allocates for
/// `FSCRYPT_MODE_AES_256_XTS`).
pub const KERNEL_XTS: &str = "xts(aes)";

/// An AF_ALG operation that failed after the socket was bound, keyed and
/// accepted: the kernel refused a unit it took a moment ago (out of
/// memory, descriptors); the unit cannot be left undecrypted silently.
#[inline]
fn kernel_op(r: std::io::Result<()>) {
    if let Err(e) = r {
        panic!("cipher = \"kernel\": {e}");
    }
}

#[inline]
fn assert_unit_size(len: usize) {
    assert!(
        check_unit_size(len).is_ok(),
        "data unit of {len} bytes: must be a multiple of 16 between 16 and 4096"
    );
}

#[inline]
fn assert_units(unit_size: usize, len: usize) {
    assert_unit_size(unit_size);
    assert!(
        len.is_multiple_of(unit_size),
        "buffer of {len} bytes is not a whole number of {unit_size}-byte data units"
    );
}

/// fscrypt's default IV for XTS: the data unit index as le64, then zeros.
#[inline]
fn xts_iv(unit_index: u64) -> [u8; 16] {
    u128::from(unit_index).to_le_bytes()
}

/// fscrypt's default IV for Adiantum: the data unit index as le64, then zeros
/// up to `FSCRYPT_MAX_IV_SIZE` (32); Adiantum hashes the whole 32 bytes.
#[inline]
fn adiantum_iv(unit_index: u64) -> [u8; 32] {
    let mut iv = [0u8; 32];
    iv[..8].copy_from_slice(&unit_index.to_le_bytes());
    iv
}

pub(crate) mod aes_ti;
pub(crate) mod keys;
pub(crate) mod xts;

pub use keys::{derive_file_key, key_identifier};

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        hex::decode(s).expect("test hex")
    }

    /// Whether this kernel gives `xts(aes)` through AF_ALG (kernels without
    /// `CONFIG_CRYPTO_USER_API_SKCIPHER` refuse the socket).
    fn kernel_xts() -> Result<(), String> {
        crate::sys::afalg_probe("skcipher", KERNEL_XTS).map_err(|e| e.to_string())
    }

    /// Every kind this machine can key: `kernel` only where AF_ALG works.
    fn kinds() -> Vec<CipherKind> {
        CipherKind::ALL
            .into_iter()
            .filter(|k| *k != CipherKind::Kernel || kernel_xts().is_ok())
            .collect()
    }

    /// The plaintext of the openssl-generated vectors.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 31 + 7) ^ (i >> 8)) as u8).collect()
    }

    /// Deterministic filler that differs per seed.
    fn filler(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Every AES-256-XTS implementation: the two kinds, plus the portable
    /// driver over the `aes` crate that the hardware kind falls back to.
    #[allow(clippy::large_enum_variant)]
    enum Xts {
        Kind(ContentsCipher),
        Portable(xts::Aes256Xts),
    }

    impl Xts {
        fn all(key: &[u8]) -> Vec<(String, Xts)> {
            let key64: &[u8; 64] = key.try_into().unwrap();
            let mut v: Vec<(String, Xts)> = kinds()
                .into_iter()
                .filter(|k| *k != CipherKind::Adiantum)
                .map(|k| {
                    let c = ContentsCipher::new(k, key).unwrap();
                    (format!("{k} ({})", c.backend()), Xts::Kind(c))
                })
                .collect();
            v.push((
                "portable".into(),
                Xts::Portable(xts::Aes256Xts::new_portable(key64)),
            ));
            v
        }

        fn encrypt(&self, unit: u64, buf: &mut [u8]) {
            match self {
                Xts::Kind(c) => c.encrypt_unit(unit, buf),
                Xts::Portable(c) => c.encrypt(&u128::from(unit).to_le_bytes(), buf),
            }
        }

        fn decrypt(&self, unit: u64, buf: &mut [u8]) {
            match self {
                Xts::Kind(c) => c.decrypt_unit(unit, buf),
                Xts::Portable(c) => c.decrypt(&u128::from(unit).to_le_bytes(), buf),
            }
        }
    }

    /// Out of place (the memory device's bio decrypted into its page) is
    /// exactly in place, for every kind and unit size, including the
    /// AES-NI loop's eight-block body and one-block tail.
    #[test]
    fn decrypting_out_of_place_equals_in_place() {
        let key = filler(64, 3);
        for kind in kinds() {
            let key = &key[..kind.key_size()];
            let c = ContentsCipher::new(kind, key).unwrap();
            for unit in [16usize, 128, 512, 4096] {
                if check_unit_size(unit).is_err() || (kind == CipherKind::Adiantum && unit < 32) {
                    continue;
                }
                let src = filler(3 * unit, unit as u64);
                let mut want = src.clone();
                c.decrypt_units(41, unit, &mut want);
                let mut got = vec![0u8; src.len()];
                c.decrypt_units_from(41, unit, &src, &mut got);
                assert_eq!(got, want, "{kind} ({}), {unit}-byte units", c.backend());
            }
        }
    }

    #[test]
    fn kind_names_parse_display_serde() {
        for kind in CipherKind::ALL {
            assert_eq!(kind.name().parse::<CipherKind>().unwrap(), kind);
            assert_eq!(kind.to_string(), kind.name());
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<CipherKind>(&json).unwrap(), kind);
        }
        assert_eq!(
            CipherKind::ALL.map(CipherKind::name),
            [
                "aes-256-xts",
                "aes-256-xts-soft",
                "aes-256-xts-ti",
                "aes-256-xts-ni4",
                "adiantum",
                "kernel"
            ]
        );
    }

    #[test]
    fn unknown_kind_error_lists_allowed_values() {
        let msg = "aes-128-cbc".parse::<CipherKind>().unwrap_err().to_string();
        for kind in CipherKind::ALL {
            assert!(msg.contains(kind.name()), "{msg}");
        }
        assert!(msg.contains("aes-128-cbc"), "{msg}");
    }

    #[test]
    fn kind_properties() {
        use CipherKind::*;
        // Every kind, in its declared order.
        assert_eq!(
            CipherKind::ALL,
            [
                Aes256Xts,
                Aes256XtsSoft,
                Aes256XtsTi,
                Aes256XtsNi4,
                Adiantum,
                Kernel
            ]
        );
        assert_eq!(
            CipherKind::ALL.map(|k| k.key_size()),
            [64, 64, 64, 64, 32, 64]
        );
        assert_eq!(
            CipherKind::ALL.map(|k| k.iv_size()),
            [16, 16, 16, 16, 32, 16]
        );
        assert_eq!(
            CipherKind::ALL.map(|k| k.contents_mode()),
            [1, 1, 1, 1, 9, 1]
        );
        assert!(Kernel.same_ciphertext_as(Aes256Xts));
        assert!(!Kernel.same_ciphertext_as(Adiantum));
        assert!(Aes256Xts.same_ciphertext_as(Aes256XtsSoft));
        assert!(Aes256XtsSoft.same_ciphertext_as(Aes256Xts));
        assert!(Aes256XtsTi.same_ciphertext_as(Aes256Xts));
        assert!(!Aes256XtsTi.same_ciphertext_as(Adiantum));
        assert!(Aes256XtsNi4.same_ciphertext_as(Aes256Xts));
        assert!(Adiantum.same_ciphertext_as(Adiantum));
        assert!(!Adiantum.same_ciphertext_as(Aes256Xts));
        assert!(!Aes256XtsSoft.same_ciphertext_as(Adiantum));
    }

    // Expected values computed independently with python3's hmac/hashlib,
    // HKDF-SHA512 (RFC 5869) written out by hand:
    //   prk = HMAC-SHA512(key=b"\0"*64, msg=master_key)
    //   T(i) = HMAC-SHA512(prk, T(i-1) || info || [i]), output = T(1) || T(2) ...
    // with master_key = bytes(range(0x00, 0x40)), nonce = bytes(range(0x10, 0x20)),
    // info = b"fscrypt\0" + b"\x02" + nonce (file key), b"fscrypt\0" + b"\x01" (identifier).
    const MASTER_KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\
                                  202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f";
    const NONCE: [u8; 16] = [
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e,
        0x1f,
    ];

    #[test]
    fn derive_file_key_matches_reference() {
        let mk = unhex(MASTER_KEY_HEX);
        let mut key64 = [0u8; 64];
        derive_file_key(&mk, &NONCE, &mut key64);
        assert_eq!(
            hex::encode(key64),
            "661abec4a365fe5730e9781264d00a9816f0b5f50e41e49f3200b78ed390ed41\
             0be87de1011e6342781b08ab011f12107a4c08eb07a5d9e0b6cce65d31463010"
        );
        let mut key32 = [0u8; 32];
        derive_file_key(&mk, &NONCE, &mut key32);
        assert_eq!(
            hex::encode(key32),
            "661abec4a365fe5730e9781264d00a9816f0b5f50e41e49f3200b78ed390ed41"
        );
        let mut other = [0u8; 64];
        let mut nonce2 = NONCE;
        nonce2[15] ^= 1;
        derive_file_key(&mk, &nonce2, &mut other);
        assert_ne!(other, key64);
    }

    #[test]
    fn key_identifier_matches_reference() {
        let mk = unhex(MASTER_KEY_HEX);
        assert_eq!(
            hex::encode(key_identifier(&mk)),
            "8699c2c53707405da5aba5ae4d8583c0"
        );
    }

    #[test]
    fn bad_key_length_is_reported() {
        for kind in kinds() {
            for len in [0, 16, 31, 33, 48, 63, 65, 128] {
                if len == kind.key_size() {
                    continue;
                }
                let err = ContentsCipher::new(kind, &vec![7u8; len]).unwrap_err();
                assert_eq!(
                    err,
                    CryptoError::BadKeyLength {
                        kind,
                        expected: kind.key_size(),
                        actual: len
                    }
                );
                assert!(err.to_string().contains(&len.to_string()));
            }
            let c = ContentsCipher::new(kind, &vec![7u8; kind.key_size()]).unwrap();
            assert_eq!(c.kind(), kind);
            assert!(!format!("{c:?}").contains("07"));
        }
    }

    #[test]
    fn unit_size_check() {
        for ok in [16, 32, 512, 1024, 4080, 4096] {
            assert_eq!(check_unit_size(ok), Ok(()));
        }
        for bad in [0, 8, 17, 100, 4097, 4112, 8192] {
            assert_eq!(check_unit_size(bad), Err(CryptoError::BadUnitSize(bad)));
        }
    }

    #[test]
    #[should_panic(expected = "data unit of 4112 bytes")]
    fn oversized_unit_panics() {
        let c = ContentsCipher::new(CipherKind::Aes256Xts, &[1u8; 64]).unwrap();
        c.decrypt_unit(0, &mut [0u8; 4112]);
    }

    #[test]
    #[should_panic(expected = "data unit of 20 bytes")]
    fn partial_block_unit_panics() {
        let c = ContentsCipher::new(CipherKind::Adiantum, &[1u8; 32]).unwrap();
        c.encrypt_unit(0, &mut [0u8; 20]);
    }

    #[test]
    #[should_panic(expected = "not a whole number of 512-byte data units")]
    fn ragged_units_panic() {
        let c = ContentsCipher::new(CipherKind::Aes256XtsSoft, &[1u8; 64]).unwrap();
        c.decrypt_units(0, 512, &mut [0u8; 1536 + 16]);
    }

    #[test]
    fn mul_alpha_convention() {
        use xts::mul_alpha;
        assert_eq!(mul_alpha(1), 2);
        assert_eq!(mul_alpha(1 << 126), 1 << 127);
        assert_eq!(mul_alpha(1 << 127), 0x87);
        assert_eq!(mul_alpha(u128::MAX), (u128::MAX << 1) ^ 0x87);
        // IEEE 1619 5.2 on bytes: a[0] is the least significant byte.
        let mut bytes = [0u8; 16];
        bytes[15] = 0x80;
        bytes[0] = 0x01;
        let t = u128::from_le_bytes(bytes);
        let mut want = [0u8; 16];
        want[0] = 0x02 ^ 0x87;
        assert_eq!(mul_alpha(t).to_le_bytes(), want);
    }

    // IEEE Std 1619-2007, Annex B, XTS-AES-256 vectors 10..=14: Key1 and Key2
    // below, plaintext 00 01 .. ff twice (512 bytes), data unit sequence
    // number as given. Checked against the standard's published ciphertexts
    // and against OpenSSL's aes-256-xts (through python3 `cryptography`).
    const IEEE_KEY: &str = "2718281828459045235360287471352662497757247093699959574966967627\
                            3141592653589793238462643383279502884197169399375105820974944592";
    const IEEE_VECTORS: [(u64, &str); 5] = [
        (
            0xff,
            "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b
             5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd
             5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0
             c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca
             2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0
             b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f
             93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec
             583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a
             84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1
             505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae
             9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29
             a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac
             6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f
             645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed4385
             1ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa
             773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151",
        ),
        (
            0xffff,
            "77a31251618a15e6b92d1d66dffe7b50b50bad552305ba0217a610688eff7e11
             e1d0225438e093242d6db274fde801d4cae06f2092c728b2478559df58e837c2
             469ee4a4fa794e4bbc7f39bc026e3cb72c33b0888f25b4acf56a2a9804f1ce6d
             3d6e1dc6ca181d4b546179d55544aa7760c40d06741539c7e3cd9d2f6650b201
             3fd0eeb8c2b8e3d8d240ccae2d4c98320a7442e1c8d75a42d6e6cfa4c2eca179
             8d158c7aecdf82490f24bb9b38e108bcda12c3faf9a21141c3613b58367f922a
             aa26cd22f23d708dae699ad7cb40a8ad0b6e2784973dcb605684c08b8d6998c6
             9aac049921871ebb65301a4619ca80ecb485a31d744223ce8ddc2394828d6a80
             470c092f5ba413c3378fa6054255c6f9df4495862bbb3287681f931b687c888a
             bf844dfc8fc28331e579928cd12bd2390ae123cf03818d14dedde5c0c24c8ab0
             18bfca75ca096f2d531f3d1619e785f1ada437cab92e980558b3dce1474afb75
             bfedbf8ff54cb2618e0244c9ac0d3c66fb51598cd2db11f9be39791abe447c63
             094f7c453b7ff87cb5bb36b7c79efb0872d17058b83b15ab0866ad8a58656c5a
             7e20dbdf308b2461d97c0ec0024a2715055249cf3b478ddd4740de654f75ca68
             6e0d7345c69ed50cdc2a8b332b1f8824108ac937eb050585608ee734097fc090
             54fbff89eeaeea791f4a7ab1f9868294a4f9e27b42af8100cb9d59cef9645803",
        ),
        (
            0xff_ffff,
            "e387aaa58ba483afa7e8eb469778317ecf4cf573aa9d4eac23f2cdf914e4e200
             a8b490e42ee646802dc6ee2b471b278195d60918ececb44bf79966f83faba049
             9298ebc699c0c8634715a320bb4f075d622e74c8c932004f25b41e361025b5a8
             7815391f6108fc4afa6a05d9303c6ba68a128a55705d415985832fdeaae6c8e1
             9110e84d1b1f199a2692119edc96132658f09da7c623efcec712537a3d94c0bf
             5d7e352ec94ae5797fdb377dc1551150721adf15bd26a8efc2fcaad56881fa9e
             62462c28f30ae1ceaca93c345cf243b73f542e2074a705bd2643bb9f7cc79bb6
             e7091ea6e232df0f9ad0d6cf502327876d82207abf2115cdacf6d5a48f6c1879
             a65b115f0f8b3cb3c59d15dd8c769bc014795a1837f3901b5845eb491adfefe0
             97b1fa30a12fc1f65ba22905031539971a10f2f36c321bb51331cdefb39e3964
             c7ef079994f5b69b2edd83a71ef549971ee93f44eac3938fcdd61d01fa71799d
             a3a8091c4c48aa9ed263ff0749df95d44fef6a0bb578ec69456aa5408ae32c7a
             f08ad7ba8921287e3bbee31b767be06a0e705c864a769137df28292283ea81a2
             480241b44d9921cdbec1bc28dc1fda114bd8e5217ac9d8ebafa720e9da4f9ace
             231cc949e5b96fe76ffc21063fddc83a6b8679c00d35e09576a875305bed5f36
             ed242c8900dd1fa965bc950dfce09b132263a1eef52dd6888c309f5a7d712826",
        ),
        (
            0xffff_ffff,
            "bf53d2dade78e822a4d949a9bc6766b01b06a8ef70d26748c6a7fc36d80ae4c5
             520f7c4ab0ac8544424fa405162fef5a6b7f229498063618d39f0003cb5fb8d1
             c86b643497da1ff945c8d3bedeca4f479702a7a735f043ddb1d6aaade3c4a0ac
             7ca7f3fa5279bef56f82cd7a2f38672e824814e10700300a055e1630b8f1cb0e
             919f5e942010a416e2bf48cb46993d3cb6a51c19bacf864785a00bc2ecff15d3
             50875b246ed53e68be6f55bd7e05cfc2b2ed6432198a6444b6d8c247fab941f5
             69768b5c429366f1d3f00f0345b96123d56204c01c63b22ce78baf116e525ed9
             0fdea39fa469494d3866c31e05f295ff21fea8d4e6e13d67e47ce722e9698a1c
             1048d68ebcde76b86fcf976eab8aa9790268b7068e017a8b9b749409514f1053
             027fd16c3786ea1bac5f15cb79711ee2abe82f5cf8b13ae73030ef5b9e4457e7
             5d1304f988d62dd6fc4b94ed38ba831da4b7634971b6cd8ec325d9c61c00f1df
             73627ed3745a5e8489f3a95c69639c32cd6e1d537a85f75cc844726e8a72fc00
             77ad22000f1d5078f6b866318c668f1ad03d5a5fced5219f2eabbd0aa5c0f460
             d183f04404a0d6f469558e81fab24a167905ab4c7878502ad3e38fdbe62a4155
             6cec37325759533ce8f25f367c87bb5578d667ae93f9e2fd99bcbc5f2fbba88c
             f6516139420fcff3b7361d86322c4bd84c82f335abb152c4a93411373aaa8220",
        ),
        (
            0xff_ffff_ffff,
            "64497e5a831e4a932c09be3e5393376daa599548b816031d224bbf50a818ed23
             50eae7e96087c8a0db51ad290bd00c1ac1620857635bf246c176ab463be30b80
             8da548081ac847b158e1264be25bb0910bbc92647108089415d45fab1b3d2604
             e8a8eff1ae4020cfa39936b66827b23f371b92200be90251e6d73c5f86de5fd4
             a950781933d79a28272b782a2ec313efdfcc0628f43d744c2dc2ff3dcb66999b
             50c7ca895b0c64791eeaa5f29499fb1c026f84ce5b5c72ba1083cddb5ce45434
             631665c333b60b11593fb253c5179a2c8db813782a004856a1653011e93fb6d8
             76c18366dd8683f53412c0c180f9c848592d593f8609ca736317d356e13e2bff
             3a9f59cd9aeb19cd482593d8c46128bb32423b37a9adfb482b99453fbe25a41b
             f6feb4aa0bef5ed24bf73c762978025482c13115e4015aac992e5613a3b5c2f6
             85b84795cb6e9b2656d8c88157e52c42f978d8634c43d06fea928f2822e465aa
             6576e9bf419384506cc3ce3c54ac1a6f67dc66f3b30191e698380bc999b05abc
             e19dc0c6dcc2dd001ec535ba18deb2df1a101023108318c75dc98611a09dc48a
             0acdec676fabdf222f07e026f059b672b56e5cbc8e1d21bbd867dd9272120546
             81d70ea737134cdfce93b6f82ae22423274e58a0821cc5502e2d0ab4585e94de
             6975be5e0b4efce51cd3e70c25a1fbbbd609d273ad5b0d59631c531f6a0a57b9",
        ),
    ];

    fn ieee_plaintext() -> Vec<u8> {
        (0..512).map(|i| i as u8).collect()
    }

    #[test]
    fn ieee1619_xts_aes256_vectors_10_to_14() {
        for (name, x) in Xts::all(&unhex(IEEE_KEY)) {
            for (dusn, ct_hex) in IEEE_VECTORS {
                let ct = unhex(ct_hex);
                let mut buf = ieee_plaintext();
                x.encrypt(dusn, &mut buf);
                assert_eq!(
                    hex::encode(&buf),
                    hex::encode(&ct),
                    "{name} encrypt dusn {dusn:#x}"
                );
                x.decrypt(dusn, &mut buf);
                assert_eq!(buf, ieee_plaintext(), "{name} decrypt dusn {dusn:#x}");
            }
        }
    }

    #[test]
    fn ieee1619_vectors_through_xts_functions() {
        use aes::cipher::KeyInit;
        let key = unhex(IEEE_KEY);
        let k1 = aes::Aes256::new_from_slice(&key[..32]).unwrap();
        let k2 = aes::Aes256::new_from_slice(&key[32..]).unwrap();
        let (dusn, ct_hex) = IEEE_VECTORS[0];
        let iv = u128::from(dusn).to_le_bytes();
        let mut buf = ieee_plaintext();
        xts::encrypt(&k1, &k2, &iv, &mut buf);
        assert_eq!(buf, unhex(ct_hex));
        xts::decrypt(&k1, &k2, &iv, &mut buf);
        assert_eq!(buf, ieee_plaintext());
    }

    // Produced on the development machine with python3 `cryptography` 48
    // (OpenSSL's EVP aes-256-xts underneath) -- `openssl enc` refuses XTS:
    //   rng = random.Random(1619); key = rng.randbytes(64) per vector (in order)
    //   pt[i] = ((i * 31 + 7) ^ (i >> 8)) & 0xff
    //   ct = Cipher(AES(key), XTS(unit.to_bytes(16, 'little'))).encryptor().update(pt)
    // and recorded as (size, unit, key, first 16 ciphertext bytes, SHA-256 of ciphertext).
    const OPENSSL_VECTORS: [(usize, u64, &str, &str, &str); 8] = [
        (
            4096,
            0x0,
            "5b37e50cb1834e3710320f4c4abcf6405b143c98fd7d203b8e9f9e83c0a1e5b0abf52419ff16f18c419df3c66ca594383b2582f4e1027769d4fb81010d18fd7e",
            "7db4245df031a12ee98310f3e685d272",
            "45bd00960d6561df148f23740b4b812a30cf9f91ec7008be3850a5d96ca88178",
        ),
        (
            4096,
            0x1,
            "52d742279d00bce89dcff28f9757dcbe116667136cfed6d0c8a638f23f459b97759fc1776d5bc38f78ffdd23e331402b66950bd3696adeaf0e5858a069699a6e",
            "4991b01a2f9bffd1aabb9b57ea1b197b",
            "2755b9dfa6210b8d1b3ba7ed0fac2468af7744a0400ffa28b73d564271ff0811",
        ),
        (
            4096,
            0x1234_5678_9abc_def0,
            "97d23b6f92624cd3076838645a43f5becc7144e7b46b33fce35f454830e1cd7d7ff350b79cccaf25bf359c936a5f2208a69c44b5973172719ca1cc8c5ee57a14",
            "3bae57ced441506fd926360c6b30b0e2",
            "c363416c129d1f63577ba928591272ca36db7901ac462ee7735d7b64eb1d0540",
        ),
        (
            4096,
            u64::MAX,
            "be5efed039339603f2f7b145f346556ab81afdc5340ab93519b5a2f4369661ab1b2f5449cc49f8e32e233053ae6515d8ee247e3bde3a0abc0f9ee07dbc9349a0",
            "59af972cc6aabf669e73367e89bb62ea",
            "a76ae3462e6cfd4a651635e4f7eb18400c020c758ace61b6d6857c6d01e44398",
        ),
        (
            16,
            0x7,
            "84f1965a9c10b90106d28deba9d590c44d75f847a7e5d9e81436e37cbc77f7022f21c1790f6af48fc5ab091c76b51e2b3965089a347d59d7d68fe19e0b1621d6",
            "56c1ee9eb483c8e27b3bf6bc6192b5ac",
            "81dad56d8e26796ae0762dc1c24d8364c3083f2a9949c3efead4e6ce93cad344",
        ),
        (
            48,
            0x3e8,
            "36286feda1ab395ada0f6ede8a3c55d3d591e1e09c930031003d755777bf0073a70441d4f469c5fa4b978d000f27694b37de272ae19bbc9e3a388dbd7ff15f9a",
            "1ddd3de68423670371f6330b8b1147ce",
            "a0f46a8119c508708f602510ea8da3237a1c1c43022425dba750e4d5a5726466",
        ),
        (
            512,
            0xfe_dcba,
            "eff240a1439f757588e52949c05ccc8ad5489fabc1ac1d21fb5e3dc2f9632e73b3338ba9434bcdeaab36658957198efc03a8bd4d1543e8a4a96d48e59b500756",
            "f80ae9f820efe48d8f531298acfcc87f",
            "9973aac6eedfbfdfea63f854f28c1f9c5a3d268d167428abc2ec48b3b1879637",
        ),
        (
            4080,
            0x3,
            "da115a057a53f600a525b8bddad9e69aa158ef72df84afdc2b2e45851a1c202037ca72f3c0376ea82ee78b9ba8ee903880ef4b8b20d740a2478906755025e804",
            "8913a09fbc7d4d520f40ad91807166f8",
            "670f3052b0a1b3b04807c8594cad8320d8a3d93da78223d4de9af04cadac26a7",
        ),
    ];

    #[test]
    fn xts_matches_openssl() {
        for (size, unit, key, head, digest) in OPENSSL_VECTORS {
            for (name, x) in Xts::all(&unhex(key)) {
                let mut buf = pattern(size);
                x.encrypt(unit, &mut buf);
                assert_eq!(
                    hex::encode(&buf[..16]),
                    head,
                    "{name} size {size} unit {unit:#x}"
                );
                assert_eq!(
                    hex::encode(Sha256::digest(&buf)),
                    digest,
                    "{name} size {size}"
                );
                x.decrypt(unit, &mut buf);
                assert_eq!(buf, pattern(size), "{name} size {size} unit {unit:#x}");
            }
        }
    }

    #[test]
    fn round_trip_4096_all_kinds() {
        for kind in kinds() {
            let key = filler(kind.key_size(), 99);
            let c = ContentsCipher::new(kind, &key).unwrap();
            for unit in [0u64, 1, 2, 255, 256, 1 << 32, u64::MAX - 1, u64::MAX] {
                let plain = filler(DATA_UNIT_SIZE, unit ^ 0x5555);
                let mut buf = plain.clone();
                c.encrypt_unit(unit, &mut buf);
                assert_ne!(buf, plain, "{kind} unit {unit}");
                let mut other = plain.clone();
                c.encrypt_unit(unit.wrapping_add(1), &mut other);
                assert_ne!(
                    buf, other,
                    "{kind}: the unit index must change the ciphertext"
                );
                c.decrypt_unit(unit, &mut buf);
                assert_eq!(buf, plain, "{kind} unit {unit}");
            }
        }
    }

    #[test]
    fn round_trip_every_unit_size() {
        for kind in kinds() {
            let c = ContentsCipher::new(kind, &filler(kind.key_size(), 5)).unwrap();
            for size in (16..=4096).step_by(16) {
                let plain = filler(size, size as u64);
                let mut buf = plain.clone();
                c.encrypt_unit(size as u64, &mut buf);
                assert_ne!(buf, plain);
                c.decrypt_unit(size as u64, &mut buf);
                assert_eq!(buf, plain, "{kind} size {size}");
            }
        }
    }

    #[test]
    fn all_xts_implementations_agree() {
        let key = filler(64, 2024);
        let impls = Xts::all(&key);
        for size in (16..=4096).step_by(16) {
            for unit in [size as u64, u64::MAX - size as u64] {
                let plain = filler(size, unit);
                let mut want = plain.clone();
                impls[0].1.encrypt(unit, &mut want);
                for (name, x) in &impls[1..] {
                    let mut buf = plain.clone();
                    x.encrypt(unit, &mut buf);
                    assert_eq!(buf, want, "{name} encrypt size {size} unit {unit}");
                    x.decrypt(unit, &mut buf);
                    assert_eq!(buf, plain, "{name} decrypt size {size} unit {unit}");
                }
            }
        }
        // More than 256 blocks (not a fscrypt unit, but the xts functions take it).
        let plain = filler(3 * 4096 + 48, 1);
        let iv = u128::from(9u64).to_le_bytes();
        let mut want = plain.clone();
        xts::Aes256Xts::new_portable(&key.clone().try_into().unwrap()).encrypt(&iv, &mut want);
        let mut buf = plain.clone();
        xts::Aes256Xts::new(&key.clone().try_into().unwrap()).encrypt(&iv, &mut buf);
        assert_eq!(buf, want, "long buffer");
        {
            use aes_soft::NewBlockCipher;
            let k1 = aes_soft::Aes256::new_from_slice(&key[..32]).unwrap();
            let k2 = aes_soft::Aes256::new_from_slice(&key[32..]).unwrap();
            let mut buf = plain.clone();
            xts::encrypt_soft(&k1, &k2, &iv, &mut buf);
            assert_eq!(buf, want, "soft long buffer");
            xts::decrypt_soft(&k1, &k2, &iv, &mut buf);
            assert_eq!(buf, plain, "soft long buffer");
        }
    }

    #[test]
    fn hardware_kind_uses_aesni_where_available() {
        let c = ContentsCipher::new(CipherKind::Aes256Xts, &[3u8; 64]).unwrap();
        let want = if cfg!(target_arch = "x86_64") && aes_hardware_accelerated() {
            "aes-ni"
        } else {
            "aes crate"
        };
        assert_eq!(c.backend(), want);
        let soft = ContentsCipher::new(CipherKind::Aes256XtsSoft, &[3u8; 64]).unwrap();
        assert_eq!(soft.backend(), "fixsliced software aes");
        let ti = ContentsCipher::new(CipherKind::Aes256XtsTi, &[3u8; 64]).unwrap();
        assert_eq!(ti.backend(), "kernel aes-fixed-time port");
        let ni4 = ContentsCipher::new(CipherKind::Aes256XtsNi4, &[3u8; 64]).unwrap();
        let want4 = if cfg!(target_arch = "x86_64") && aes_hardware_accelerated() {
            "aes-ni, linux 6.1 xts-aes-aesni port"
        } else {
            "aes crate"
        };
        assert_eq!(ni4.backend(), want4);
        assert!(!xts::Aes256Xts::new_portable(&[3u8; 64]).uses_aesni());
    }

    #[test]
    fn soft_kind_is_the_software_aes() {
        // With `force-soft`, aes 0.7 exports its fixsliced `soft` module's
        // types and compiles out the AES-NI autodetection.
        let name = std::any::type_name::<aes_soft::Aes256>();
        assert!(name.contains("soft"), "{name}");
        assert!(!name.contains("autodetect"), "{name}");
    }

    #[test]
    fn multi_unit_calls_equal_single_unit_calls() {
        for kind in kinds() {
            let c = ContentsCipher::new(kind, &filler(kind.key_size(), 17)).unwrap();
            for (unit_size, n, first) in [
                (4096usize, 8usize, 1000u64),
                (512, 9, 0),
                (1024, 3, u64::MAX - 1),
            ] {
                let plain = filler(unit_size * n, first);
                let mut many = plain.clone();
                c.encrypt_units(first, unit_size, &mut many);
                let mut one = plain.clone();
                for (i, unit) in one.chunks_exact_mut(unit_size).enumerate() {
                    c.encrypt_unit(first.wrapping_add(i as u64), unit);
                }
                assert_eq!(many, one, "{kind} encrypt_units");
                let mut dec_one = many.clone();
                for (i, unit) in dec_one.chunks_exact_mut(unit_size).enumerate() {
                    c.decrypt_unit(first.wrapping_add(i as u64), unit);
                }
                c.decrypt_units(first, unit_size, &mut many);
                assert_eq!(many, dec_one, "{kind} decrypt_units");
                assert_eq!(many, plain, "{kind}");
            }
        }
    }

    // Adiantum_XChaCha12_32_AES256.json, entry 140 ("Random ( 1)", 128-byte
    // message, 32-byte tweak), from the test data shipped in the `adiantum`
    // 0.2.0 crate (src/test_data/), which are the reference vectors of the
    // Adiantum authors.
    const ADIANTUM_KEY: &str = "a52824341a3cd8f705918fee851f357f803dfc9b94f6fc9e190900a904314f11";
    const ADIANTUM_TWEAK: &str = "a1ba4995ff346db8cd875d5efdea85db8a7b5eb25d57dd62aca98c41429475b7";
    const ADIANTUM_PT: &str = "69b4e88c37e86782f1ec5d04e5149113dff2871b69811d71709e9c3bde497011\
                               a0a3db0d544f6669d7db80a7709268ce81042cc6abaee56015e96fefaa8fa7a7\
                               638ff2f077f1a8eae1b71f9eab9e4b3f07875b6fcda8afb9fa700b52b8a8a79e\
                               075fa60eb39b791379c33e8d1c2c68c8511d3c7b7d79772a5665c5542328b003";
    const ADIANTUM_CT: &str = "9e16abed4ba7425ac6fb4e76ffbe03a00fe3adbae4982b0e2148a0b865482748\
                               845454b29a947be64b29e9cf0591801a3af34196851d9f74515663fa7c288549\
                               f72ff9f21846f53380a33cceb25793f5aebda9f57b30c49366e0307716e4a031\
                               ba70bc6813f5b09ac1fc7efe55805c4874a6aaa3acdcc2f58dde34867860758d";

    #[test]
    fn adiantum_reference_vector() {
        use aes::cipher::KeyInit;
        let c = AdiantumCipher::new_from_slice(&unhex(ADIANTUM_KEY)).unwrap();
        let tweak = unhex(ADIANTUM_TWEAK);
        let mut buf = unhex(ADIANTUM_PT);
        c.encrypt(&mut buf, &tweak);
        assert_eq!(hex::encode(&buf), ADIANTUM_CT);
        c.decrypt(&mut buf, &tweak);
        assert_eq!(hex::encode(&buf), ADIANTUM_PT);
    }

    #[test]
    fn adiantum_unit_uses_fscrypt_32_byte_iv() {
        use aes::cipher::KeyInit;
        let key = filler(32, 3);
        let c = ContentsCipher::new(CipherKind::Adiantum, &key).unwrap();
        let raw = AdiantumCipher::new_from_slice(&key).unwrap();
        let unit = 0x0102_0304_0506_0708u64;
        let mut tweak = [0u8; 32];
        tweak[..8].copy_from_slice(&unit.to_le_bytes());
        let plain = filler(4096, 4);
        let mut a = plain.clone();
        let mut b = plain.clone();
        c.encrypt_unit(unit, &mut a);
        raw.encrypt(&mut b, &tweak);
        assert_eq!(a, b);
        // A 16-byte IV (the XTS layout) would give different ciphertext.
        let mut d = plain.clone();
        raw.encrypt(&mut d, &tweak[..16]);
        assert_ne!(a, d);
    }

    #[test]
    fn file_key_drives_every_kind() {
        let mk = unhex(MASTER_KEY_HEX);
        for kind in kinds() {
            let mut key = vec![0u8; kind.key_size()];
            derive_file_key(&mk, &NONCE, &mut key);
            let c = ContentsCipher::new(kind, &key).unwrap();
            let plain = pattern(DATA_UNIT_SIZE);
            let mut buf = plain.clone();
            c.encrypt_unit(42, &mut buf);
            c.decrypt_unit(42, &mut buf);
            assert_eq!(buf, plain);
        }
    }

    #[test]
    fn kernel_kind_without_af_alg_is_an_error_naming_why() {
        let Err(why) = kernel_xts() else {
            eprintln!("AF_ALG xts(aes) is available here: the refusal is not testable");
            return;
        };
        let err = ContentsCipher::new(CipherKind::Kernel, &[1u8; 64]).unwrap_err();
        let CryptoError::Kernel(msg) = &err else {
            panic!("{err:?}");
        };
        assert!(msg.contains("AF_ALG skcipher xts(aes)"), "{msg}");
        assert_eq!(*msg, why);
        assert!(
            err.to_string().starts_with("cipher = \"kernel\": "),
            "{err}"
        );
    }

    /// The kernel kind against readpath's own AES-256-XTS: every unit size,
    /// the IEEE and OpenSSL vectors (through `Xts::all`, which holds it where
    /// AF_ALG works), and several threads each on its own op socket.
    #[test]
    fn kernel_kind_equals_software_xts_bit_for_bit() {
        if let Err(why) = kernel_xts() {
            eprintln!("SKIPPED kernel_kind_equals_software_xts_bit_for_bit: {why}");
            return;
        }
        let key = filler(64, 27);
        let k = std::sync::Arc::new(ContentsCipher::new(CipherKind::Kernel, &key).unwrap());
        let ours = std::sync::Arc::new(ContentsCipher::new(CipherKind::Aes256Xts, &key).unwrap());
        assert_eq!(k.backend(), "kernel xts(aes) via AF_ALG");
        // The IEEE 1619 vector 10, exact bytes, decrypted by the kernel.
        let ieee = ContentsCipher::new(CipherKind::Kernel, &unhex(IEEE_KEY)).unwrap();
        let (dusn, ct_hex) = IEEE_VECTORS[0];
        let mut buf = unhex(ct_hex);
        ieee.decrypt_unit(dusn, &mut buf);
        assert_eq!(buf, ieee_plaintext());
        for size in (16..=4096).step_by(16) {
            let unit = u64::MAX - size as u64;
            let plain = filler(size, unit);
            let mut ct = plain.clone();
            ours.encrypt_unit(unit, &mut ct);
            let mut a = ct.clone();
            k.decrypt_unit(unit, &mut a);
            assert_eq!(a, plain, "size {size}");
            let mut b = plain.clone();
            k.encrypt_unit(unit, &mut b);
            assert_eq!(b, ct, "size {size}");
        }
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (k, ours) = (k.clone(), ours.clone());
                std::thread::spawn(move || {
                    for i in 0..64u64 {
                        let unit = t * 1000 + i;
                        let plain = filler(32 * 1024, unit);
                        let mut ct = plain.clone();
                        ours.encrypt_units(unit, DATA_UNIT_SIZE, &mut ct);
                        k.decrypt_units(unit, DATA_UNIT_SIZE, &mut ct);
                        assert_eq!(ct, plain, "thread {t} unit {unit}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
