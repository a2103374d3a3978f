#!/usr/bin/env bash
# Holds a shipped preset's model against a lab guest's kernel across a map:
# `readpath sweep --remote vm:KERNEL --preset PRESET --across
# workload.target=model,kernel --across AXIS`, every point's A/B on both
# targets in one boot, made like for like (the kernel's era, its device,
# its cipher). Keeps the sweep's JSON and text in OUT, and the map the
# explorer's help quotes in assets/held/PRESET-NAME.json (the report's
# agreement, machine and grid, with the date and the command).
# Usage: bench/held.sh PRESET NAME AXIS [KERNEL=6.1-switches] [extra sweep args...]
#   e.g. bench/held.sh fsverity-bound-vs-unbound hogs load.hogs=0,1,2,all
# Environment: ROUNDS (5), DURATION (3s), OUT (held-maps). Needs root and
# the lab kernel (`readpath lab build --switches`); 8 points take about
# 6.5 minutes under TCG on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=$1; NAME=$2; AXIS=$3; KERNEL=${4:-6.1-switches}; shift $(( $# >= 4 ? 4 : 3 ))
ROUNDS=${ROUNDS:-5}; DURATION=${DURATION:-3s}; OUT=${OUT:-held-maps}
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
mkdir -p "$OUT" assets/held
ARGS=(sweep --remote "vm:$KERNEL" --preset "$PRESET" --across workload.target=model,kernel
  --across "$AXIS" --rounds "$ROUNDS" --duration "$DURATION" --set workload.file_size=64M "$@")
$BIN "${ARGS[@]}" --out "$OUT/$PRESET-$NAME.json" | tee "$OUT/$PRESET-$NAME.txt"
# The settings the extra arguments hold fixed (`--set K=V`), kept beside the grid.
SETS=(); prev=""
for a in "$@"; do [ "$prev" = "--set" ] && SETS+=("$a"); prev=$a; done
jq --arg when "$(date -u +%F)" --arg cmd "readpath ${ARGS[*]}" \
  --argjson set "$(printf '%s\n' "${SETS[@]}" | jq -R 'select(. != "")' | jq -s .)" \
  '{measured: $when, command: $cmd, preset, rounds, duration_s, across, set: $set, machine, agreement}' \
  "$OUT/$PRESET-$NAME.json" > "assets/held/$PRESET-$NAME.json"
echo "wrote assets/held/$PRESET-$NAME.json" >&2
