#!/usr/bin/env bash
# What a recording costs on disk and to load.
#
# 1. Records the default preset for SECS seconds three ways, one after the
#    other: gzip-compressed (`--record X.rec`, the default form), plain JSON
#    lines (`--record X.jsonl`) and, when OLD_BIN names a readpath from
#    before recording format 2, the old form (histograms as value/count
#    pairs). Prints bytes, bytes per interval and per hour.
# 2. Builds a one-hour recording from the compressed one (its intervals
#    repeated, renumbered, re-timed) and a one-hour version-1 recording from
#    a shipped demo recording (pairs), and times loading each
#    (`readpath plot --format csv --out /dev/null`: read, range-check,
#    decode every histogram, write the series), median of 3.
# Usage: bench/recording-size.sh [seconds=10]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $(nproc)"
$BIN run --duration 2s --format json >/dev/null   # the dataset, made once
$BIN run --duration "${SECS}s" --record "$TMP/run.rec" --format json >/dev/null
$BIN run --duration "${SECS}s" --record "$TMP/run.jsonl" --format json >/dev/null
[ -n "${OLD_BIN:-}" ] && "$OLD_BIN" run --duration "${SECS}s" --record "$TMP/old.jsonl" --format json >/dev/null
python3 - "$TMP" "$SECS" assets/demo-fsverity-bound-vs-unbound.jsonl <<'PY'
import gzip, json, os, sys
tmp, secs, v1 = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def lines(p):
    raw = open(p, 'rb').read()
    if raw[:2] == b'\x1f\x8b':
        raw = gzip.decompress(raw)
    return raw.decode().splitlines()
print(f"{'form':<34} {'bytes':>9} {'intervals':>9} {'B/interval':>10} {'MB/hour':>8}")
for name, p in [("gzip, HdrHistogram (.rec)", "run.rec"), ("plain, HdrHistogram (.jsonl)", "run.jsonl"),
                ("version 1: plain, pairs", "old.jsonl")]:
    p = os.path.join(tmp, p)
    if not os.path.exists(p):
        continue
    n = len(lines(p)) - 1
    size = os.path.getsize(p)
    print(f"{name:<34} {size:>9} {n:>9} {size / n:>10.0f} {size / secs * 3600 / 1e6:>8.1f}")
# One hour of each form: intervals repeated, renumbered and re-timed.
def hour(src, dst, compress):
    ls = lines(src)
    head, body = ls[0], [json.loads(l) for l in ls[1:] if l.strip()]
    body = [b for b in body if b["interval"]["interval_s"] > 0]
    step = body[0]["interval"]["interval_s"]
    out = [head]
    n = int(3600 / step)
    for i in range(n):
        rec = dict(body[i % len(body)]["interval"])
        rec["seq"], rec["t_s"], rec["events"], rec["notices"] = i, (i + 1) * step, [], []
        out.append(json.dumps({"interval": rec}, separators=(",", ":")))
    data = ("\n".join(out) + "\n").encode()
    open(dst, "wb").write(gzip.compress(data, 6) if compress else data)
    return n
n2 = hour(os.path.join(tmp, "run.jsonl"), os.path.join(tmp, "hour.rec"), True)
n1 = hour(v1, os.path.join(tmp, "hour-v1.jsonl"), False)
print(f"one hour: {n2} intervals, version 2 gzip {os.path.getsize(os.path.join(tmp, 'hour.rec'))/1e6:.1f} MB; "
      f"version 1 {os.path.getsize(os.path.join(tmp, 'hour-v1.jsonl'))/1e6:.1f} MB ({n1} intervals)")
PY
for f in hour.rec hour-v1.jsonl; do
  ts=()
  for _ in 1 2 3; do
    s=$(date +%s.%N); $BIN plot "$TMP/$f" --format csv --out /dev/null >/dev/null; e=$(date +%s.%N)
    ts+=("$(echo "$e - $s" | bc)")
  done
  printf 'load one hour (%s): %s s (median of %s)\n' "$f" "$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p)" "${ts[*]}"
done
