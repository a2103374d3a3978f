#!/usr/bin/env bash
# The page-cache model's two paths against the kernel's, on the same machine
# and files, interleaved (fio, readpath, fio, readpath...), post-processing
# off (a plain file: the kernel's buffered read of it is the reference):
#   hit:  4 KiB random reads of a 16 MiB file held whole in the cache
#         (fio buffered, file cached; readpath cache.size = 16M, the
#         intervals after the last miss). CPU-bound: cost per read = 1/IOPS.
#   miss: 4 KiB random reads from a cold cache of the 256 MiB file, no
#         readahead (fio --invalidate=1 with its default POSIX_FADV_RANDOM;
#         readpath cache.size = 256M, read_ahead = 0, a new engine = a cold
#         cache), for the same short time, so both see the same hit ratio.
# For each: psync (fio) vs engine = sync, and io_uring QD1 vs engine = uring.
# Three references for "the kernel's cost": fio as is; fio less its own
# per-I/O bookkeeping (its null engine's cost); and, for psync, a bare pread
# loop (bench/kernel-read.c: the kernel's path plus two clock reads; an
# io_uring QD1 loop for the io_uring rows where liburing is installed).
# Prints the cost per read (hits) or per miss (cold runs) of each, and
# readpath's over each reference's.
# Usage: bench/pagecache-vs-fio.sh [rounds] [hit seconds] [miss seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
HIT_S=${2:-4}
MISS_S=${3:-2}
BIN=target/release/readpath
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
[ -x "$BIN" ] || cargo build --release
$BIN --data-dir "$DATA_DIR" prepare --size 16M >/dev/null
$BIN --data-dir "$DATA_DIR" prepare --size 256M >/dev/null
SMALL="$DATA_DIR/dataset-16777216/plain.bin"
BIG="$DATA_DIR/dataset-268435456/plain.bin"
# The miss rows' references read the ciphertext file (same size, same disk,
# incompressible too) so that their invalidation never drops the plaintext
# readpath copies from (a cold plaintext would make readpath read it in
# again before each run).
BIG_REF="$DATA_DIR/dataset-268435456/aes-256-xts.bin"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
OFF=(--set pipeline.decrypt=false --set pipeline.verity=false --set workers.mode=inline)

# name | fio args | readpath args | which file | seconds
CASES=(
  "hit-psync|--ioengine=psync|--set workload.engine=sync --set workload.file_size=16M --set cache.size=16M|$SMALL|$HIT_S"
  "hit-uring-qd1|--ioengine=io_uring --iodepth=1|--set workload.engine=uring --set workload.file_size=16M --set cache.size=16M|$SMALL|$HIT_S"
  "miss-psync|--ioengine=psync --invalidate=1|--set workload.engine=sync --set workload.file_size=256M --set cache.size=256M --set cache.read_ahead=0|$BIG_REF|$MISS_S"
  "miss-uring-qd1|--ioengine=io_uring --iodepth=1 --invalidate=1|--set workload.engine=uring --set workload.file_size=256M --set cache.size=256M --set cache.read_ahead=0|$BIG_REF|$MISS_S"
)
cat "$SMALL" >/dev/null

# The kernel's own cost per read with nothing of either tool around it: a
# pread loop (bench/kernel-read.c) with a clock read before and after each
# read, as both tools take. Interleaved with the two tools in every round.
# With liburing (Debian: liburing-dev) it also stands for the io_uring rows.
if echo '#include <liburing.h>' | cc -E - >/dev/null 2>&1; then
  cc -O2 -DWITH_LIBURING -o "$TMP/kernel-read" bench/kernel-read.c -luring
  URING_BARE=1
else
  cc -O2 -o "$TMP/kernel-read" bench/kernel-read.c
  URING_BARE=0
  echo "no liburing (apt-get install liburing-dev): no bare reference for the io_uring rows"
fi

# fio's own cost per I/O (its null engine: no kernel at all), to tell its
# bookkeeping from the kernel's work: fio_net = fio's cost minus this.
NULL_US=$(fio --name=null --ioengine=null --rw=randread --bs=4k --size=16M --runtime=2 --time_based \
    --norandommap --output-format=json 2>/dev/null | python3 -c '
import json, sys
print(1e6 / json.load(sys.stdin)["jobs"][0]["read"]["iops"])')
echo "fio null engine: $NULL_US us of fio per I/O"
printf "%-16s %5s %8s %8s %8s %8s %8s %8s %7s\n" case round fio_us bare_us rp_us x_fio x_fionet x_bare rp_hit%
for c in "${CASES[@]}"; do
  IFS='|' read -r name fioargs rpargs file secs <<<"$c"
  for r in $(seq 1 "$ROUNDS"); do
    case $name in hit-*) cat "$file" >/dev/null ;; esac
    fio --name=rp --filename="$file" --rw=randread --bs=4k --direct=0 $fioargs \
        --runtime="$secs" --time_based --norandommap --output-format=json >"$TMP/fio.json" 2>/dev/null
    bare=""
    case $name in
      hit-psync) bare=$("$TMP/kernel-read" hit "$file" "$secs") ;;
      miss-psync) bare=$("$TMP/kernel-read" miss "$file" "$secs") ;;
      hit-uring-qd1) [ "$URING_BARE" = 1 ] && bare=$(ENGINE=uring "$TMP/kernel-read" hit "$file" "$secs") ;;
      miss-uring-qd1) [ "$URING_BARE" = 1 ] && bare=$(ENGINE=uring "$TMP/kernel-read" miss "$file" "$secs") ;;
    esac
    # shellcheck disable=SC2086
    $BIN --data-dir "$DATA_DIR" run --duration "${secs}s" --interval 250ms --format json \
        --interval-log "$TMP/rp.jsonl" "${OFF[@]}" $rpargs >"$TMP/rp.json"
    python3 - "$TMP/fio.json" "$TMP/rp.json" "$TMP/rp.jsonl" "$name" "$r" "$NULL_US" "$bare" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["jobs"][0]["read"]
r = json.load(open(sys.argv[2]))
name, rnd, null_us = sys.argv[4], sys.argv[5], float(sys.argv[6])
bare = sys.argv[7].split()
pc = r["page_cache"]
hit = pc["hit_pct"] or 0.0
if name.startswith("hit"):
    # Only the intervals after the cache filled (no miss): the hit path.
    # Cost per read = 1 / IOPS (CPU-bound, QD1).
    recs = [json.loads(l) for l in open(sys.argv[3])]
    recs = [x for x in recs if not x["paused"]]
    last_miss = max([i for i, x in enumerate(recs) if x["page_cache"]["misses"] > 0], default=-1)
    tail = recs[last_miss + 1:-1]
    secs = sum(x["interval_s"] for x in tail)
    rp_us = secs * 1e6 / sum(x["reads"] for x in tail) if secs > 0 else float("nan")
    fio_us = 1e6 / f["iops"]
    bare_us = 1e6 / float(bare[3]) if bare else None
    fio_net = fio_us - null_us
else:
    # A cold run's reads are not all misses: what was read once stays
    # cached (the whole file fits), more so for the faster tool. So compare
    # the cost per miss: the run's time over its misses (hits cost ~1 us
    # against ~60-100 us a miss). readpath counts its misses; fio and the
    # bare loop read uniformly at random (--norandommap, xorshift), so of n
    # reads of N pages, N * (1 - (1 - 1/N)^n) miss.
    N = 256 * 1024 * 1024 // 4096
    misses = lambda n: N * (1 - (1 - 1 / N) ** n)
    rp_us = r["duration_s"] * 1e6 / max(pc["misses"], 1)
    fio_us = f["runtime"] * 1e3 / misses(f["total_ios"])
    bare_us = float(bare[2]) * 1e6 / misses(int(bare[1])) if bare else None
    fio_net = fio_us - null_us
dash = lambda w: f"{'-':>{w}}"
bare_s = f"{bare_us:>8.2f}" if bare_us else dash(8)
x_bare = f"{rp_us / bare_us:>8.3f}" if bare_us else dash(8)
print(f"{name:<16} {rnd:>5} {fio_us:>8.2f} {bare_s} {rp_us:>8.2f} {rp_us / fio_us:>8.3f} {rp_us / fio_net:>8.3f} {x_bare} {hit:>7.1f}")
PY
  done
done | tee "$TMP/rows"
python3 - "$TMP/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("medians over rounds (x_fio x_fionet x_bare):")
for c in dict.fromkeys(r[0] for r in rows):
    m = []
    for col in (5, 6, 7):
        v = [float(r[col]) for r in rows if r[0] == c and r[col] != "-"]
        m.append(f"{statistics.median(v):.3f}" if v else "-")
    print(f"  {c:<16} {' '.join(f'{x:>8}' for x in m)}")
PY
echo "*_us: cost per read (hit rows: 1/IOPS) or per miss (miss rows: run time / misses); x_* = readpath's over the reference's; the target is 0.8..1.25"
echo "  x_fio: fio as is; x_fionet: fio less its own per-I/O cost (null engine); x_bare: bench/kernel-read.c"
echo "hit: readpath over the intervals after its last miss; miss: the whole run from a cold cache (rp_hit% = readpath's page hit ratio over it)"
