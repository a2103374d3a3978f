//! Where a reader's reads go and when: its stream of offsets (random,
//! sequential or bursts, kept across restarts in the engine's [`Streams`]),
//! its rate schedule and the reads it corrupts on purpose. Apart from the
//! read loops so that what a reader reads is one thing, and the engine's
//! streams outlive every pipeline.

use std::sync::Arc;

use crate::metrics::{ThreadHandle, now_ns};
use crate::settings::{Pattern, Settings};

/// Where each reader's stream of offsets stood when its reader stopped,
/// kept for the engine's lifetime. A reader started again (a setting
/// changed, the next round of an A/B) goes on from there instead of
/// reading the same blocks again from the start: with the page cache kept
/// from the round before (the kernel's, or the model's), a stream that
/// started over would find every block it read last time still cached,
/// and each round after the first would read only page hits (seen on a lab
/// guest: 100% hits and no kernel item from the second round on). A run is
/// one stream per reader, as one fio job is, whatever is changed in it.
/// Touched once when a reader starts and once when it stops.
#[derive(Default)]
pub struct Streams(std::sync::Mutex<Vec<Option<Offsets>>>);

impl Streams {
    /// Reader `index`'s stream for `s`: where the last one stopped when it
    /// read the same file the same way, else a fresh one.
    fn resume(&self, s: &Settings, index: usize) -> Offsets {
        let fresh = Offsets::new(s, index);
        let saved = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match saved.get(index) {
            Some(Some(o)) if o.same_shape(&fresh) => o.clone(),
            _ => fresh,
        }
    }

    /// Keeps reader `index`'s stream where it stands.
    fn save(&self, index: usize, o: &Offsets) {
        let mut saved = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if saved.len() <= index {
            saved.resize(index + 1, None);
        }
        saved[index] = Some(o.clone());
    }
}

/// Where the next read goes.
#[derive(Clone)]
pub(super) struct Offsets {
    rng: u64,
    blocks: u64,
    block: u64,
    next_seq: u64,
    random: bool,
    /// Blocks of one burst (`pattern = "bursts"`; 0 otherwise) and how
    /// many of the current one are left.
    burst: u64,
    left: u64,
}

impl Offsets {
    /// True when `other` reads the same blocks the same way (a stream of
    /// one goes on as the other's would).
    fn same_shape(&self, other: &Offsets) -> bool {
        (self.blocks, self.block, self.random, self.burst)
            == (other.blocks, other.block, other.random, other.burst)
    }

    fn new(s: &Settings, index: usize) -> Offsets {
        let block = s.workload.block_size;
        let blocks = (s.workload.file_size / block).max(1);
        let readers = s.workload.readers as u64;
        Offsets {
            rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            blocks,
            block,
            next_seq: blocks * index as u64 / readers,
            random: s.workload.pattern == Pattern::Random,
            burst: if s.workload.pattern == Pattern::Bursts {
                s.workload.burst.div_ceil(block).max(1)
            } else {
                0
            },
            left: 0,
        }
    }

    /// A uniformly random block: xorshift64* then Lemire's range reduction.
    #[inline]
    fn random_block(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((r as u128 * self.blocks as u128) >> 64) as u64
    }

    #[inline]
    pub(super) fn next(&mut self) -> u64 {
        if self.burst > 0 && self.left == 0 {
            self.next_seq = self.random_block();
            self.left = self.burst;
        }
        self.left = self.left.saturating_sub(1);
        let b = if self.random {
            self.random_block()
        } else {
            let b = self.next_seq;
            self.next_seq = (self.next_seq + 1) % self.blocks;
            b
        };
        b * self.block
    }
}

/// Fixed issue schedule for `rate_iops` (None: unlimited). Latency is then
/// measured from the intended issue time, so a stalled device cannot hide
/// its stall by delaying the next issue (no coordinated omission).
pub(super) struct Schedule {
    period_ns: u64,
    pub(super) next_ns: u64,
}

impl Schedule {
    fn new(s: &Settings, index: usize) -> Option<Schedule> {
        let rate = s.workload.rate_iops;
        if rate == 0 {
            return None;
        }
        let readers = s.workload.readers as u64;
        let period_ns = (1_000_000_000u64 * readers / rate).max(1);
        Some(Schedule {
            period_ns,
            next_ns: now_ns() + period_ns * index as u64 / readers,
        })
    }

    /// The intended issue time of the next read if it is due.
    #[inline]
    pub(super) fn due(&mut self, now: u64) -> Option<u64> {
        if self.next_ns <= now {
            let t = self.next_ns;
            self.next_ns += self.period_ns;
            Some(t)
        } else {
            None
        }
    }
}

/// Where a reader's reads go, when, and which it corrupts on purpose.
/// Its stream of offsets is kept in the engine's [`Streams`] when it is
/// dropped.
pub(super) struct Source {
    pub(super) offsets: Offsets,
    streams: Arc<Streams>,
    index: usize,
    pub(super) schedule: Option<Schedule>,
    pub(super) corrupt: Corruptor,
    /// The first failed read was reported (one notice per reader).
    pub(super) io_error_noticed: bool,
}

impl Source {
    pub(super) fn new(s: &Settings, index: usize, streams: &Arc<Streams>) -> Source {
        Source {
            offsets: streams.resume(s, index),
            streams: streams.clone(),
            index,
            schedule: Schedule::new(s, index),
            corrupt: Corruptor::new(s.pipeline.corrupt_every),
            io_error_noticed: false,
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.streams.save(self.index, &self.offsets);
    }
}

/// Flips one byte of every Nth read (`pipeline.corrupt_every`).
pub(super) struct Corruptor {
    every: u64,
    n: u64,
}

impl Corruptor {
    /// Flips a byte in every `every`th buffer (0: never).
    pub(super) fn new(every: u64) -> Corruptor {
        Corruptor { every, n: 0 }
    }

    #[inline]
    pub(super) fn apply(&mut self, buf: &mut [u8], h: &mut ThreadHandle) {
        if self.every == 0 {
            return;
        }
        self.n += 1;
        if self.n.is_multiple_of(self.every) {
            let pos = (self.n.wrapping_mul(7919) as usize) % buf.len();
            buf[pos] ^= 0x5a;
            h.rec.counters.corrupted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_started_again_goes_on_where_its_stream_stopped() {
        let mut s = Settings::default();
        s.set("workload.file_size", "16M").unwrap();
        let streams = Arc::new(Streams::default());
        // What one reader would read without a restart.
        let mut whole = Offsets::new(&s, 1);
        let want: Vec<u64> = (0..200).map(|_| whole.next()).collect();
        let mut got = Vec::new();
        for _ in 0..2 {
            let mut src = Source::new(&s, 1, &streams);
            got.extend((0..100).map(|_| src.offsets.next()));
        }
        assert_eq!(
            got, want,
            "the second start reads on, not the same blocks again"
        );
        // Another reader's stream is its own.
        let mut other = Source::new(&s, 0, &streams);
        assert_eq!(other.offsets.next(), Offsets::new(&s, 0).next());
        drop(other);
        // Read another way (a block size changed), a stream starts afresh.
        s.set("workload.block_size", "16K").unwrap();
        let mut src = Source::new(&s, 1, &streams);
        assert_eq!(src.offsets.next(), Offsets::new(&s, 1).next());
        // Sequential: the next start reads the block after the last one.
        s.set("workload.pattern", "sequential").unwrap();
        let streams = Arc::new(Streams::default());
        let first = Source::new(&s, 0, &streams).offsets.next();
        let mut src = Source::new(&s, 0, &streams);
        assert_eq!(src.offsets.next(), first + (16 << 10));
    }

    #[test]
    fn bursts_are_runs_of_the_burst_size_from_random_blocks() {
        let mut s = Settings::default();
        s.set("workload.file_size", "64M").unwrap();
        s.set("workload.pattern", "bursts").unwrap();
        s.set("workload.block_size", "16K").unwrap();
        // 100K rounds up to 7 reads of 16K.
        s.set("workload.burst", "100K").unwrap();
        let mut o = Offsets::new(&s, 0);
        let blocks = (64 << 20) / (16 << 10);
        let mut starts = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let first = o.next();
            assert_eq!(first % (16 << 10), 0);
            starts.insert(first);
            let mut prev = first / (16 << 10);
            for _ in 1..7 {
                let b = o.next() / (16 << 10);
                assert_eq!(b, (prev + 1) % blocks, "consecutive within a burst");
                prev = b;
            }
        }
        assert!(starts.len() > 40, "random starts: {}", starts.len());
    }
}
