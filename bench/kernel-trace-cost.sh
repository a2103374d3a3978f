#!/usr/bin/env bash
# What following the kernel's post-read workqueues costs: `readpath kernel
# check` reads its file back cold through the kernel's fscrypt, alternately
# without and with `readpath kernel trace` running, ROUNDS times each; the
# medians of the read-back throughput are compared. Root (a loop image).
# Usage: bench/kernel-trace-cost.sh [ROUNDS] [SIZE]
set -euo pipefail
ROUNDS=${1:-5}
SIZE=${2:-64M}
BIN=${BIN:-target/release/readpath}
DATA=$(mktemp -d)
trap 'rm -rf "$DATA"; "$BIN" kernel restore --data-dir "$DATA" >/dev/null 2>&1 || true' EXIT
rate() { "$BIN" kernel check --size "$SIZE" --data-dir "$DATA/c" | sed -n 's/.*read back cold: .* (\([0-9]*\) MiB\/s).*/\1/p' | head -1; }
off=(); on=()
for i in $(seq "$ROUNDS"); do
  off+=("$(rate)")
  "$BIN" kernel trace --duration 600s --data-dir "$DATA/t" > "$DATA/trace.out" &
  tp=$!
  while [ ! -e "/sys/kernel/tracing/instances/readpath-$tp/trace_pipe" ]; do sleep 0.05; done
  on+=("$(rate)")
  kill -INT "$tp"; wait "$tp" || true
  grep -o 'fscrypt_read_queue: [0-9]* items' "$DATA/trace.out" || echo "(no items traced)"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "read-back MiB/s without trace: ${off[*]} (median $(med "${off[@]}"))"
echo "read-back MiB/s with trace:    ${on[*]} (median $(med "${on[@]}"))"
awk -v a="$(med "${off[@]}")" -v b="$(med "${on[@]}")" 'BEGIN { printf "with / without: %.3f\n", b / a }'
