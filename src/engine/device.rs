//! The model reading the kernel's own blocks (`cache.device = "target"`).
//!
//! To hold the model against the kernel on the same device, the model's
//! bios must read what the kernel's bios read: the ciphertext blocks the
//! kernel target's file occupies on its block device (the loop device of
//! readpath's image, or the disk under `kernel.dir`). [`DeviceMap`] is
//! that file's extent map (FIEMAP), taken once when the pipeline starts:
//! a bio's file offset becomes a device offset by a search of a few
//! extents (no allocation, no lock), and a bio never spans two extents,
//! as ext4's `ext4_mpage_readpages` submits a new bio where the blocks
//! stop being contiguous. The data is the kernel's ciphertext, keyed with
//! the kernel file's own nonce, so its cipher is derived from that nonce
//! (the dataset's master key is the one the kernel was given).

use std::fs::File;
use std::io;
use std::path::Path;

use crate::sys::fscrypt::{self, Extent};

/// Where a file's bytes lie on its block device.
#[derive(Debug, Clone)]
pub struct DeviceMap {
    /// The file's extents, by logical offset, covering it whole.
    extents: Vec<Extent>,
    /// The block device node they are on.
    pub device: std::path::PathBuf,
    /// The file's fscrypt nonce (None: not encrypted).
    pub nonce: Option<[u8; 16]>,
    /// The file's path (for messages).
    pub file: std::path::PathBuf,
}

impl DeviceMap {
    /// The map of `path` (a regular file of `size` bytes, every byte
    /// allocated: a hole or an unwritten extent is refused, since the
    /// kernel would not read the device there), and its nonce when
    /// `encrypted`.
    pub fn of(path: &Path, size: u64, encrypted: bool) -> io::Result<DeviceMap> {
        let f = File::open(path)?;
        let mut extents = fscrypt::extents(&f)?;
        extents.sort_by_key(|e| e.logical);
        let mut at = 0u64;
        for e in &extents {
            if e.logical > at && at < size {
                return Err(io::Error::other(format!(
                    "{}: a hole at byte {at}: not every block is on the device",
                    path.display()
                )));
            }
            // FIEMAP_EXTENT_UNWRITTEN (0x800), _UNKNOWN (0x2), _DELALLOC (0x4),
            // _ENCODED (0x8), _DATA_INLINE (0x200): not plain blocks.
            if e.flags & 0xa0e != 0 && e.logical < size {
                return Err(io::Error::other(format!(
                    "{}: extent at byte {} has FIEMAP flags {:#x}: not plain blocks on the device",
                    path.display(),
                    e.logical,
                    e.flags
                )));
            }
            at = at.max(e.logical + e.length);
        }
        if at < size {
            return Err(io::Error::other(format!(
                "{}: only {at} of {size} bytes are mapped on the device",
                path.display()
            )));
        }
        let nonce = if encrypted {
            Some(fscrypt::nonce(&f)?)
        } else {
            None
        };
        Ok(DeviceMap {
            extents,
            device: crate::kernel::block_device_path(path)?,
            nonce,
            file: path.to_path_buf(),
        })
    }

    /// A map of given extents (tests).
    #[cfg(test)]
    pub fn from_extents(extents: Vec<Extent>) -> DeviceMap {
        DeviceMap {
            extents,
            device: "/dev/null".into(),
            nonce: None,
            file: "test".into(),
        }
    }

    fn extent_of(&self, off: u64) -> Option<&Extent> {
        let i = self.extents.partition_point(|e| e.logical <= off);
        let e = self.extents.get(i.checked_sub(1)?)?;
        (off < e.logical + e.length).then_some(e)
    }

    /// The device offset of file offset `off` (u64::MAX outside the file:
    /// the read fails, as it must).
    #[inline]
    pub fn device_offset(&self, off: u64) -> u64 {
        self.extent_of(off)
            .map_or(u64::MAX, |e| e.physical + (off - e.logical))
    }

    /// Bytes from `off` to the end of its extent (0 outside the file).
    #[inline]
    pub fn contiguous(&self, off: u64) -> u64 {
        self.extent_of(off)
            .map_or(0, |e| e.logical + e.length - off)
    }

    /// Extents in the map.
    pub fn extents(&self) -> usize {
        self.extents.len()
    }
}

impl super::Engine {
    /// With `cache.device = "target"`: opens the kernel target (as the
    /// kernel target does, but neither traced nor with any knob turned),
    /// makes sure its file of `eff`'s decryption is written, and opens the
    /// block device under it, O_DIRECT, with the file's map.
    pub(super) fn target_device(
        &mut self,
        eff: &super::Effective,
        progress: crate::dataset::Progress<'_>,
    ) -> Result<super::OpenFile, super::EngineError> {
        // What the kernel target runs for it: the resolver's.
        let k = eff.for_target_device(self.features.kernel_verity);
        let path = self.kernel_file(&k, progress)?;
        if let Some(run) = self.kernel.as_mut() {
            // Not the kernel target's run: its file is not what is read.
            run.file = None;
        }
        let kerr = |source: io::Error| {
            super::EngineError::from(super::KernelError::DeviceMap {
                path: path.to_path_buf(),
                source,
            })
        };
        let map =
            DeviceMap::of(&path, self.dataset.file_size(), eff.pipeline.decrypt).map_err(kerr)?;
        let mut f = super::OpenFile::open(&map.device, true)?;
        self.sink().push(format!(
            "cache.device = target: bios read {} ({} extent{}) on {}, O_DIRECT",
            map.file.display(),
            map.extents(),
            if map.extents() == 1 { "" } else { "s" },
            map.device.display()
        ));
        f.map = Some(std::sync::Arc::new(map));
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(logical: u64, physical: u64, length: u64) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: 0,
        }
    }

    #[test]
    fn offsets_map_inside_their_extent_and_bios_stop_at_its_end() {
        let m = DeviceMap::from_extents(vec![ext(0, 1 << 20, 8192), ext(8192, 4 << 20, 4096)]);
        assert_eq!(m.device_offset(0), 1 << 20);
        assert_eq!(m.device_offset(4096), (1 << 20) + 4096);
        assert_eq!(m.device_offset(8192), 4 << 20);
        assert_eq!(m.device_offset(12288), u64::MAX);
        assert_eq!(m.contiguous(4096), 4096);
        assert_eq!(m.contiguous(8192), 4096);
        assert_eq!(m.contiguous(12288), 0);
    }
}
