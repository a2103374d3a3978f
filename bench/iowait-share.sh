#!/usr/bin/env bash
# How much of a reader's sleep the kernel counts as iowait, for readpath's
# page wait next to the kernel's own io_schedule(), interleaved, in rounds.
# Per-task delay accounting (kernel.task_delayacct, switched on for the run
# and put back on exit) gives each task's iowait sleep (block-I/O delay,
# /proc/<tid>/stat field 42); its sleep is wall time less its run time and
# its run-queue wait (/proc/<tid>/schedstat). Cases:
#   kernel-dio     bench/kernel-read.c: O_DIRECT 4 KiB preads, each one the
#                  kernel's io_schedule() (blk_io_schedule in iomap's dio):
#                  what the kernel itself counts of a sleep that is iowait
#                  throughout (in_iowait set for all of it)
#   page-wait      readpath's reader waiting for the post-read work of its
#                  bio (memory device, software AES: the wait is for the
#                  workers), workload.sleep = iowait
#   page-wait-plain  the same with sleep = plain (IORING_ENTER_NO_IOWAIT)
#   device-wait    readpath's raw O_DIRECT io_uring reader, QD1, sleep = iowait
# Needs root (the sysctl). Usage: bench/iowait-share.sh [rounds] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-2}
BIN=target/release/readpath
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
KNOB=/proc/sys/kernel/task_delayacct
[ -x "$BIN" ] || cargo build --release
[ -w "$KNOB" ] || { echo "needs root to switch on $KNOB" >&2; exit 2; }
$BIN --data-dir "$DATA_DIR" prepare --size 16M >/dev/null
TMP=$(mktemp -d)
BEFORE=$(cat "$KNOB")
trap 'echo "$BEFORE" > "$KNOB"; rm -rf "$TMP"' EXIT
echo 1 > "$KNOB"
cc -O2 -o "$TMP/kernel-read" bench/kernel-read.c
DIO_FILE="$DATA_DIR/dataset-16777216/aes-256-xts.bin"
PAGE_WAIT=(--set workload.file_size=16M --set cache.size=0 --set cache.device=memory
  --set cache.read_ahead=0 --set workload.block_size=64K --set pipeline.cipher=aes-256-xts-soft
  --set pipeline.verity=false --set workers.max_active=1)
DEVICE_WAIT=(--set workload.file_size=16M --set workload.direct=true --set pipeline.decrypt=false
  --set pipeline.verity=false --set workload.engine=uring --set workload.sleep=iowait)

# share DIR: "<sleep s> <iowait s>" of the task at /proc/.../DIR over SECS.
share() {
  local d=$1 a b
  snap() { local s r; s=$(cat "$d/stat"); r=${s##*) }; set -- $r; echo "$(date +%s%N) ${40} $(cat "$d/schedstat")"; }
  a=$(snap); sleep "$SECS"; b=$(snap)
  python3 - "$a" "$b" <<'PY'
import sys
a = [int(x) for x in sys.argv[1].split()]
b = [int(x) for x in sys.argv[2].split()]
wall, ex, rd = (b[0] - a[0]) / 1e9, (b[2] - a[2]) / 1e9, (b[3] - a[3]) / 1e9
print(f"{wall - ex - rd:.3f} {(b[1] - a[1]) / 100:.3f}")
PY
}

# reader_dir PID: the /proc dir of readpath's first reader thread.
reader_dir() {
  local t
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = reader-0 ] && { echo "$t"; return; }
  done
}

run_case() {
  local name=$1 pid dir out
  case $name in
    kernel-dio)
      "$TMP/kernel-read" dio "$DIO_FILE" "$((SECS + 1))" >/dev/null & pid=$!
      sleep 0.5; dir=/proc/$pid ;;
    *)
      local args=()
      case $name in
        page-wait) args=("${PAGE_WAIT[@]}" --set workload.sleep=iowait) ;;
        page-wait-plain) args=("${PAGE_WAIT[@]}" --set workload.sleep=plain) ;;
        device-wait) args=("${DEVICE_WAIT[@]}") ;;
      esac
      $BIN --data-dir "$DATA_DIR" run --duration "$((SECS + 1))s" "${args[@]}" >/dev/null & pid=$!
      sleep 0.5; dir=$(reader_dir "$pid") ;;
  esac
  out=$(share "$dir")
  wait "$pid"
  echo "$name $out"
}

CASES=(kernel-dio page-wait page-wait-plain device-wait)
for r in $(seq 1 "$ROUNDS"); do
  for c in "${CASES[@]}"; do
    echo "$r $(run_case "$c")"
  done
done | tee "$TMP/all" | awk '{printf "round %s %-16s sleep %6.3f s  iowait %6.3f s  %5.1f%%\n", $1, $2, $3, $4, ($3 > 0 ? 100 * $4 / $3 : 0)}'
python3 - "$TMP/all" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("median iowait share of the sleep, per case:")
for c in dict.fromkeys(r[1] for r in rows):
    v = [100 * float(r[3]) / float(r[2]) for r in rows if r[1] == c and float(r[2]) > 0]
    print(f"  {c:<16} {statistics.median(v):5.1f}%  (rounds: {', '.join(f'{x:.0f}' for x in v)})")
PY
