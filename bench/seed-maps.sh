#!/usr/bin/env bash
# The seed maps: each seed's A/B (its preset's [compare]) at every point of
# a grid of CPUs (workload.cpus) x background load (load.hogs), and for
# fscrypt CPUs x cipher speed, with `readpath sweep`; each map kept as JSON,
# text and a heat map (PNG) in OUT.
#
# Usage: bench/seed-maps.sh [OUT] ; environment:
#   CPUS      the CPU counts of the grid (default: 1 and every CPU here,
#             e.g. "2,4,8,16" on a 16-CPU machine)
#   HOGS      the hog counts of the fs-verity map (default "0,1,2,4,8,all")
#   ROUNDS    rounds per point (default 3)
#   DURATION  measured seconds per run (default 3s)
#   MAPS      which maps (default "fsverity app-cold-start fscrypt io_uring";
#             also "spare": readers x hogs on every CPU, "app-era": the
#             app start on the 2023 kernel's queues with one interrupt CPU)
#   BIN       the readpath binary (default target/release/readpath)
# Needs a release build; nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-seed-maps}
N=$(nproc)
CPUS=${CPUS:-$( [ "$N" -gt 1 ] && echo "1,$N" || echo 1 )}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
MAPS=${MAPS:-"fsverity app-cold-start fscrypt io_uring"}
HOGS=${HOGS:-0,1,2,4,8,all}
BIN=${BIN:-target/release/readpath}
[ -x "$BIN" ] || cargo build --release
mkdir -p "$OUT"
common=(--rounds "$ROUNDS" --duration "$DURATION")

sweep() { # name, then sweep's arguments
  local name=$1; shift
  local t0=$SECONDS
  "$BIN" sweep "${common[@]}" "$@" --out "$OUT/$name.json" >"$OUT/$name.txt"
  echo "$name: $((SECONDS - t0)) s" | tee -a "$OUT/times.txt"
  "$BIN" plot "$OUT/$name.json" --out "$OUT/$name.png" --size 1600x1000 >/dev/null || true
}

for m in $MAPS; do
  case $m in
    fsverity)
      sweep fsverity-cpus-hogs --preset fsverity-bound-vs-unbound \
        --across "workload.cpus=$CPUS" --across "load.hogs=$HOGS" ;;
    app-cold-start)
      sweep app-cold-start-cpus-hogs --preset app-cold-start \
        --across "workload.cpus=$CPUS" --across load.hogs=0,2,all ;;
    fscrypt)
      sweep fscrypt-cpus-cipher --preset fscrypt-slow-cipher \
        --across "workload.cpus=$CPUS" \
        --across pipeline.cipher=aes-256-xts-soft,adiantum,aes-256-xts ;;
    app-era)
      # The kernel of the 2023 measurement (Android 5.15: both queues
      # unbound, a pool per node) against 6.18, with a single completion
      # CPU as on UFS, over the load.
      sweep app-cold-start-era-hogs --preset app-cold-start \
        --set workload.completion=irq --set workload.irq_cpus=0 \
        --across workers.kernel_era=5.15-android,6.18 --across load.hogs=0,2,all ;;
    spare)
      # Readers and hogs against the CPUs: where unbound work finds an idle CPU.
      sweep fsverity-readers-hogs --preset fsverity-bound-vs-unbound \
        --across workload.readers=1,2,4 --across load.hogs=0,1,2 ;;
    io_uring)
      sweep io_uring-cpus-hogs --preset io_uring-qd1-iowait --vary workload.sleep=iowait,plain \
        --across "workload.cpus=$CPUS" --across load.hogs=0,all ;;
    *) echo "seed-maps: unknown map $m (fsverity, app-cold-start, app-era, fscrypt, io_uring, spare)" >&2; exit 2 ;;
  esac
done
echo "seed-maps: wrote $OUT/ ($(nproc) CPUs, $(uname -r))"
