#!/usr/bin/env bash
# The model against the running kernel (`readpath validate`) over a matrix
# of eight configurations: cold sequential 128 KiB and random 4 KiB reads,
# QD1 and QD8, 1 and 2 readers, affinity scope cache and cpu (the model's
# `workers.affinity_scope` and the kernel's `kernel.affinity_scope`
# together), 0 and 2 hogs. Each configuration runs model and kernel
# interleaved (`--rounds` x `--duration`), on like-for-like conditions
# (validate's: the kernel's device, the cipher nearest its driver, the
# kernel's cache held to cache.size), every switch cold (cache.cold_start).
# Prints one markdown table: per configuration and metric the ratio
# model/kernel, `*` where it is outside the tolerance, and how many of the
# measured metrics are within it. Needs root (the kernel target).
# Usage: bench/validate.sh [rounds=2] [seconds=3] [--set k=v ...] [--pair kernel,kernel]
# (extra arguments go to every validate; --pair kernel,kernel holds the
# kernel against itself: the A/A matrix, what 15% can resolve here)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}; SECS=${2:-3}; shift $(( $# >= 2 ? 2 : $# ))
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
OUT=${VALIDATE_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $(nproc) | rounds $ROUNDS x ${SECS}s"
COMMON=(--set workload.file_size=64M --set cache.cold_start=true "$@")
seq=(--set workload.pattern=sequential --set workload.block_size=128K)
rnd=(--set workload.pattern=random --set workload.block_size=4K)
cpu=(--set workers.affinity_scope=cpu --set kernel.affinity_scope=cpu)
declare -A CONF=(
  [1-seq128k-qd1]="${seq[*]}"
  [2-rand4k-qd1]="${rnd[*]}"
  [3-rand4k-qd8]="${rnd[*]} --set workload.queue_depth=8"
  [4-rand4k-2readers]="${rnd[*]} --set workload.readers=2"
  [5-rand4k-scope-cpu]="${rnd[*]} ${cpu[*]}"
  [6-rand4k-2hogs]="${rnd[*]} --set load.hogs=2"
  [7-seq128k-qd8-2readers]="${seq[*]} --set workload.queue_depth=8 --set workload.readers=2"
  [8-rand4k-qd8-2readers-cpu-2hogs]="${rnd[*]} --set workload.queue_depth=8 --set workload.readers=2 ${cpu[*]} --set load.hogs=2"
)
for name in $(printf '%s\n' "${!CONF[@]}" | sort); do
  # shellcheck disable=SC2086
  $BIN validate --rounds "$ROUNDS" --duration "${SECS}s" --warmup 1s \
    "${COMMON[@]}" ${CONF[$name]} --format json >"$OUT/$name.json"
  echo "done: $name" >&2
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
names = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json"))
first = json.load(open(f"{out}/{names[0]}.json"))
metrics = [r["label"] for r in first["rows"]]
tol = first["tolerance_pct"]
print(f"| configuration | {' | '.join(metrics)} | within {tol:.0f}% |")
print("|---" * (len(metrics) + 2) + "|")
good = 0
for n in names:
    v = json.load(open(f"{out}/{n}.json"))
    cells = []
    for r in v["rows"]:
        if r["verdict"] == "unmeasured":
            cells.append("-")
        elif r["ratio"] is None:
            # Both near 0: judged by points, not by a ratio.
            cells.append("n/a" + ("" if r["verdict"] == "within" else "*"))
        else:
            cells.append(f"{r['ratio']:.2f}" + ("" if r["verdict"] == "within" else "*"))
    judged = v["within"] + v["outside"]
    if v["outside"] == 0:
        good += 1
    print(f"| {n} | {' | '.join(cells)} | {v['within']}/{judged} |")
print(f"\nconfigurations with every measured metric within {tol:.0f}%: {good} of {len(names)}")
print("adjusted:", "; ".join(first["adjustments"]))
print(f"(JSON per configuration in {out})")
PY
