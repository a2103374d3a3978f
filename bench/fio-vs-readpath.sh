#!/usr/bin/env bash
# Raw engine vs fio on the same file and settings, interleaved (fio, readpath,
# fio, readpath...), post-processing off, inline. Prints IOPS, p50 and p99 of
# each and the ratios. Usage: bench/fio-vs-readpath.sh [rounds] [seconds]
# Needs: fio, a release build (cargo build --release), jq-free (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
BIN=target/release/readpath
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
[ -x "$BIN" ] || cargo build --release
$BIN --data-dir "$DATA_DIR" prepare --size 256M >/dev/null
FILE="$DATA_DIR/dataset-268435456/plain.bin"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# name | fio args | readpath --set args
CASES=(
  "qd1-randread-4k-direct-uring|--rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=1|workload.engine=uring workload.direct=true workload.pattern=random workload.block_size=4K workload.queue_depth=1"
  "qd32-randread-4k-direct-uring|--rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32|workload.engine=uring workload.direct=true workload.pattern=random workload.block_size=4K workload.queue_depth=32 workload.submit_batch=1"
  "qd1-randread-4k-direct-psync|--rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1|workload.engine=sync workload.direct=true workload.pattern=random workload.block_size=4K workload.queue_depth=1"
  "seq-128k-buffered-cached-uring|--rw=read --bs=128k --direct=0 --ioengine=io_uring --iodepth=8|workload.engine=uring workload.direct=false workload.pattern=sequential workload.block_size=128K workload.queue_depth=8"
)
# Warm the page cache for the buffered case.
cat "$FILE" >/dev/null

printf "%-32s %5s %9s %8s %8s %8s %9s %8s %8s %7s %7s %7s %7s %7s\n" case round fio_iops clat50 lat50 lat99 rp_iops dev50 dev99 iops_x clat_x lat_x fio_dev rp_dev
for c in "${CASES[@]}"; do
  IFS='|' read -r name fioargs rpargs <<<"$c"
  sets=(); for kv in $rpargs; do sets+=(--set "$kv"); done
  for r in $(seq 1 "$ROUNDS"); do
    fio --name=rp --filename="$FILE" $fioargs --runtime="$SECS" --time_based --norandommap --invalidate=0 --lat_percentiles=1 \
        --output-format=json >"$TMP/fio.json" 2>/dev/null
    $BIN --data-dir "$DATA_DIR" run --duration "${SECS}s" --format json \
        --set pipeline.decrypt=false --set pipeline.verity=false --set workers.mode=inline \
        "${sets[@]}" >"$TMP/rp.json"
    python3 - "$TMP/fio.json" "$TMP/rp.json" "$name" "$r" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["jobs"][0]["read"]
r = json.load(open(sys.argv[2]))
pct = lambda k, p: f[k]["percentile"][p] / 1e3
fi, fc50 = f["iops"], pct("clat_ns", "50.000000")
fl50, fl99 = pct("lat_ns", "50.000000"), pct("lat_ns", "99.000000")
ri, rp50, rp99 = r["iops"], r["stages_us"]["device"]["p50"], r["stages_us"]["device"]["p99"]
# Reads in the device on average (Little's law: mean latency x IOPS).
fdev, rdev = f["clat_ns"]["mean"] / 1e9 * fi, r["stages_us"]["device"]["mean"] / 1e6 * ri
print(f"{sys.argv[3]:<32} {sys.argv[4]:>5} {fi:>9.0f} {fc50:>8.1f} {fl50:>8.1f} {fl99:>8.1f} {ri:>9.0f} {rp50:>8.1f} {rp99:>8.1f} {ri/fi:>7.3f} {rp50/fc50:>7.3f} {rp50/fl50:>7.3f} {fdev:>7.2f} {rdev:>7.2f}")
PY
  done
done
echo "fio: clat = submitted->complete, lat = slat+clat (issue->complete); readpath dev = submitted (after io_uring_enter returned; pread start for psync) -> reaped, i.e. fio's clat"
echo "iops_x = readpath/fio IOPS; clat_x = readpath dev p50 / fio clat p50; lat_x = readpath dev p50 / fio lat p50"
echo "fio_dev / rp_dev = reads in the device on average (mean clat or device latency x IOPS, Little's law): equal when both tools keep the device equally busy"
