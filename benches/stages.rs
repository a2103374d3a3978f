//! CPU cost of the pure per-block stages of the read post-processing path, each
//! over one 4096-byte data unit, with no I/O, queues or threads: decrypting a unit
//! with each contents cipher, one SHA-256 (and two interleaved, where the CPU has
//! the SHA extensions), and fs-verity verification of one block (and of a pair)
//! (warm: the leaf hash block is already verified, so it is one data-block hash and
//! a compare; cold: the cache is cleared first, so the walk rehashes the tree blocks
//! up to the root). These are the floors the engine's per-block numbers sit on.
//! Run with `cargo bench --bench stages` (criterion; add e.g.
//! `-- --warm-up-time 1 --measurement-time 3` for a quick pass).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use readpath::crypto::{CipherKind, ContentsCipher, DATA_UNIT_SIZE};
use readpath::verity::merkle::{MerkleParams, MerkleTree};
use readpath::verity::sha256x2::{Prefix, Sha256x2};
use sha2::{Digest, Sha256};

fn data(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8)
        .collect()
}

fn decrypt(c: &mut Criterion) {
    let mut g = c.benchmark_group("decrypt");
    g.throughput(Throughput::Bytes(DATA_UNIT_SIZE as u64));
    for kind in CipherKind::ALL {
        let key = data(kind.key_size());
        let cipher = ContentsCipher::new(kind, &key).expect("key of key_size() bytes");
        let mut buf = data(DATA_UNIT_SIZE);
        g.bench_function(kind.name(), |b| {
            b.iter(|| cipher.decrypt_unit(black_box(7), black_box(&mut buf[..])))
        });
    }
    g.finish();
}

fn sha256(c: &mut Criterion) {
    let mut g = c.benchmark_group("sha256");
    g.throughput(Throughput::Bytes(DATA_UNIT_SIZE as u64));
    let buf = data(DATA_UNIT_SIZE);
    g.bench_function("4096", |b| b.iter(|| Sha256::digest(black_box(&buf[..]))));
    g.finish();
    // Two units hashed together (interleaved SHA-NI), where the CPU can.
    if let Some(x2) = Sha256x2::detect() {
        let mut g = c.benchmark_group("sha256-2x");
        g.throughput(Throughput::Bytes(2 * DATA_UNIT_SIZE as u64));
        let other = data(DATA_UNIT_SIZE + 1);
        let prefix = Prefix::new(&[]);
        let (mut ha, mut hb) = ([0u8; 32], [0u8; 32]);
        g.bench_function("2x4096", |b| {
            b.iter(|| {
                x2.finup2(
                    &prefix,
                    black_box(&buf[..]),
                    black_box(&other[1..]),
                    &mut ha,
                    &mut hb,
                )
            })
        });
        g.finish();
    }
}

fn verify(c: &mut Criterion) {
    const BS: usize = 4096;
    let file = data(4 << 20);
    let params = MerkleParams::new(BS, &[]).expect("valid params");
    let tree = MerkleTree::build(params, &file);
    let cache = tree.new_cache();
    for (i, block) in file.chunks(BS).enumerate() {
        tree.verify_block(&cache, i as u64, block)
            .expect("good data");
    }
    let idx = 300;
    let block = &file[idx * BS..(idx + 1) * BS];
    let warm = tree
        .verify_block(&cache, idx as u64, block)
        .expect("good data");
    assert!(warm.cache_hit && warm.hashes == 1, "{warm:?}");

    let mut g = c.benchmark_group("verify");
    g.throughput(Throughput::Bytes(BS as u64));
    g.bench_function("block", |b| {
        b.iter(|| tree.verify_block(&cache, black_box(idx as u64), black_box(block)))
    });
    // Cold: clearing is one store here (9 hash blocks); the walk hashes the leaf
    // hash block and the top one, then the data block (3 SHA-256s).
    g.bench_function("block-cold", |b| {
        b.iter(|| {
            cache.clear();
            tree.verify_block(&cache, black_box(idx as u64), black_box(block))
        })
    });
    g.finish();
    let next = &file[(idx + 1) * BS..(idx + 2) * BS];
    let mut g = c.benchmark_group("verify-pair");
    g.throughput(Throughput::Bytes(2 * BS as u64));
    g.bench_function("2 blocks", |b| {
        b.iter(|| {
            tree.verify_block_pair(
                &cache,
                black_box([idx as u64, idx as u64 + 1]),
                black_box([block, next]),
            )
        })
    });
    g.finish();
}

criterion_group!(stages, decrypt, sha256, verify);
criterion_main!(stages);
