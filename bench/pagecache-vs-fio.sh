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
# Prints IOPS of each, the ratio readpath/fio, and the cost ratio
# (readpath us per read / fio us per read = fio IOPS / readpath IOPS).
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
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
OFF=(--set pipeline.decrypt=false --set pipeline.verity=false --set workers.mode=inline)

# name | fio args | readpath args | which file | seconds
CASES=(
  "hit-psync|--ioengine=psync|--set workload.engine=sync --set workload.file_size=16M --set cache.size=16M|$SMALL|$HIT_S"
  "hit-uring-qd1|--ioengine=io_uring --iodepth=1|--set workload.engine=uring --set workload.file_size=16M --set cache.size=16M|$SMALL|$HIT_S"
  "miss-psync|--ioengine=psync --invalidate=1|--set workload.engine=sync --set workload.file_size=256M --set cache.size=256M --set cache.read_ahead=0|$BIG|$MISS_S"
  "miss-uring-qd1|--ioengine=io_uring --iodepth=1 --invalidate=1|--set workload.engine=uring --set workload.file_size=256M --set cache.size=256M --set cache.read_ahead=0|$BIG|$MISS_S"
)
cat "$SMALL" >/dev/null

# fio's own cost per I/O (its null engine: no kernel at all), to tell its
# bookkeeping from the kernel's work in the hit rows.
fio --name=null --ioengine=null --rw=randread --bs=4k --size=16M --runtime=2 --time_based \
    --norandommap --output-format=json 2>/dev/null | python3 -c '
import json, sys
f = json.load(sys.stdin)["jobs"][0]["read"]
iops = f["iops"]
print(f"fio null engine: {iops:.0f} IOPS = {1e6 / iops:.3f} us of fio per I/O")'
printf "%-16s %5s %10s %10s %8s %8s %8s\n" case round fio_iops rp_iops iops_x cost_x rp_hit%
for c in "${CASES[@]}"; do
  IFS='|' read -r name fioargs rpargs file secs <<<"$c"
  for r in $(seq 1 "$ROUNDS"); do
    case $name in hit-*) cat "$file" >/dev/null ;; esac
    fio --name=rp --filename="$file" --rw=randread --bs=4k --direct=0 $fioargs \
        --runtime="$secs" --time_based --norandommap --output-format=json >"$TMP/fio.json" 2>/dev/null
    # shellcheck disable=SC2086
    $BIN --data-dir "$DATA_DIR" run --duration "${secs}s" --interval 250ms --format json \
        --interval-log "$TMP/rp.jsonl" "${OFF[@]}" $rpargs >"$TMP/rp.json"
    python3 - "$TMP/fio.json" "$TMP/rp.json" "$TMP/rp.jsonl" "$name" "$r" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["jobs"][0]["read"]
r = json.load(open(sys.argv[2]))
name = sys.argv[4]
if name.startswith("hit"):
    # Only the intervals after the cache filled (no miss): the hit path.
    recs = [json.loads(l) for l in open(sys.argv[3])]
    recs = [x for x in recs if not x["paused"]]
    last_miss = max([i for i, x in enumerate(recs) if x["page_cache"]["misses"] > 0], default=-1)
    tail = recs[last_miss + 1:-1]
    secs = sum(x["interval_s"] for x in tail)
    ri = sum(x["reads"] for x in tail) / secs if secs > 0 else float("nan")
else:
    ri = r["iops"]
pc = r["page_cache"]
hit = pc["hit_pct"] or 0.0
fi = f["iops"]
print(f"{name:<16} {sys.argv[5]:>5} {fi:>10.0f} {ri:>10.0f} {ri/fi:>8.3f} {fi/ri:>8.3f} {hit:>8.1f}")
PY
  done
done
echo "iops_x = readpath/fio IOPS; cost_x = readpath cost per read / fio's (= fio IOPS / readpath IOPS): the target is 0.8..1.25"
echo "hit: readpath's IOPS over the intervals after its last miss; miss: the whole run from a cold cache (rp_hit% = readpath's page hit ratio over it)"
