#!/usr/bin/env bash
# Two builds of readpath on every read loop, interleaved (old, new, old,
# new... per case and round), as ratios new/old within one run: a change
# to the hot path must not make it slower. The cases are one per loop and
# engine: direct reads (io_uring QD1 and QD32 4K O_DIRECT, pread 4K
# O_DIRECT), and the page-cache model (io_uring and pread from the disk,
# io_uring from memory with every read a miss: the miss path at the CPU's
# limit, and completions on the irq threads). Post-processing stays on
# where the case is about the loop's handoff to the workers.
# Usage: bench/builds.sh OLD_BINARY NEW_BINARY [rounds=5] [seconds=3]
# (ONLY=REGEX runs the cases whose name matches.)
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/builds.sh OLD_BINARY NEW_BINARY [rounds] [seconds]}
NEW=${2:?usage: bench/builds.sh OLD_BINARY NEW_BINARY [rounds] [seconds]}
ROUNDS=${3:-5}; SECS=${4:-3}
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
NCPU=$(nproc)
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $NCPU"
echo "# old $OLD ($(sha256sum "$OLD" | cut -c1-12)), new $NEW ($(sha256sum "$NEW" | cut -c1-12)), $ROUNDS rounds x ${SECS}s"
G=(--data-dir "$DATA_DIR")
"$NEW" "${G[@]}" prepare --size 256M >/dev/null
# name | --set arguments
CASES=(
  "direct-uring-qd1|workload.direct=true workload.engine=uring workload.block_size=4K workload.queue_depth=1 workers.mode=inline pipeline.verity=false"
  "direct-uring-qd32|workload.direct=true workload.engine=uring workload.block_size=4K workload.queue_depth=32"
  "direct-sync|workload.direct=true workload.engine=sync workload.block_size=4K"
  "cache-uring-disk|workload.direct=false workload.engine=uring cache.device=disk"
  "cache-sync-disk|workload.direct=false workload.engine=sync cache.device=disk"
  "cache-uring-memory-miss|workload.direct=false workload.engine=uring cache.device=memory cache.size=16M workload.pattern=sequential workload.block_size=128K workload.queue_depth=32 workload.readers=$NCPU"
  "cache-uring-irq|workload.direct=false workload.engine=uring cache.device=disk workload.completion=irq"
)
if [ -n "${ONLY:-}" ]; then
  kept=(); for c in "${CASES[@]}"; do [[ ${c%%|*} =~ $ONLY ]] && kept+=("$c"); done
  CASES=("${kept[@]}")
fi
for c in "${CASES[@]}"; do
  IFS='|' read -r name sets <<<"$c"
  args=(); for kv in $sets; do args+=(--set "$kv"); done
  "$NEW" "${G[@]}" run --duration 1s "${args[@]}" --format json >/dev/null   # warm
  for r in $(seq 1 "$ROUNDS"); do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      "$bin" "${G[@]}" run --duration "${SECS}s" "${args[@]}" --format json >"$TMP/$name-$b-$r.json"
    done
  done
done
python3 - "$TMP" "$ROUNDS" "${CASES[@]}" <<'PY'
import json, sys, statistics as st
tmp, rounds, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'case':26} {'old IOPS':>10} {'new IOPS':>10} {'new/old':>8} {'rounds new/old':>28} {'old p50':>8} {'new p50':>8} {'cpu% o/n':>11}")
for c in cases:
    name = c.split("|")[0]
    get = lambda b, r: json.load(open(f"{tmp}/{name}-{b}-{r}.json"))
    old = [get("old", r) for r in range(1, rounds + 1)]
    new = [get("new", r) for r in range(1, rounds + 1)]
    ratios = [n["iops"] / o["iops"] for o, n in zip(old, new)]
    med = lambda xs, k: st.median(x[k] for x in xs)
    p50 = lambda xs: st.median(x["latency_us"]["p50"] for x in xs)
    print(f"{name:26} {med(old,'iops'):10.0f} {med(new,'iops'):10.0f} {st.median(ratios):8.3f} "
          f"{' '.join(f'{x:.2f}' for x in ratios):>28} {p50(old):8.0f} {p50(new):8.0f} "
          f"{med(old,'process_cpu_pct'):5.0f}/{med(new,'process_cpu_pct'):<5.0f}")
PY
