#!/usr/bin/env bash
# What the live explorer costs the workload it shows: the same workload run
# headless (`readpath run`) and in the TUI (`readpath tui`, drawing in a real
# 220x48 pseudo-terminal, wide enough for the header to show the UI
# thread's figures: a private tmux server), interleaved (headless, tui,
# headless, tui...), same settings, same dataset. Prints per round and as
# medians: MiB/s, process CPU, CPU ms per MiB read, and the UI thread's own
# CPU and time per frame as the TUI's header shows them (sampled ~3s before
# the end, while it still draws), with tui/headless ratios (medians of the
# per-round ratios, each round being a headless/tui pair).
# Usage: bench/tui-cost.sh [rounds=3] [seconds=20] [fps=10] [-- extra args]
#   extra args go to both commands, e.g.
#   bench/tui-cost.sh 3 20 10 -- --set workload.direct=false --set workload.queue_depth=32
# READPATH_DATA_DIR, if set, is passed to both as --data-dir (else the default).
# Needs: tmux, python3, a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
POS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do POS+=("$1"); shift; done
[ $# -gt 0 ] && shift   # the "--"
EXTRA=("$@")
ROUNDS=${POS[0]:-3}; SECS=${POS[1]:-20}; FPS=${POS[2]:-10}
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
command -v tmux >/dev/null || { echo "tui-cost: needs tmux" >&2; exit 1; }
GLOBAL=(); [ -n "${READPATH_DATA_DIR:-}" ] && GLOBAL=(--data-dir "$READPATH_DATA_DIR")

TMP=$(mktemp -d)
HEADLESS_PID=; PANE_PID=
cleanup() {
  [ -n "$HEADLESS_PID" ] && kill "$HEADLESS_PID" 2>/dev/null || true
  # Stop the TUI (by its parent, the pane's bash) while its terminal still exists.
  if [ -n "$PANE_PID" ]; then
    pkill -TERM -P "$PANE_PID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do pgrep -P "$PANE_PID" >/dev/null || break; sleep 0.2; done
    pkill -KILL -P "$PANE_PID" 2>/dev/null || true
  fi
  tmux -S "$TMP/tmux.sock" kill-server 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
printf 'set -g history-limit 10000\nset -g status off\n' >"$TMP/tmux.conf"
# A private tmux server (its socket in $TMP): never touches the user's.
T() { tmux -S "$TMP/tmux.sock" -f "$TMP/tmux.conf" "$@"; }

echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $(nproc)"
echo "# rounds=$ROUNDS seconds=$SECS fps=$FPS tty=160x48 data_dir=${READPATH_DATA_DIR:-default} extra: ${EXTRA[*]:-(none)}"

# Parses the text summary (the same for `run` and `tui`):
#   "  read: IOPS=4.7k, BW=18.4MiB/s (19.3MB/s), 36.4MiB in 2.0s, 9328 reads"
#   "  cpu: process 29.0% of one CPU"
# plus, for the TUI, the header sample "ui 0.8% cpu 1.5ms/frame ≤10Hz".
# Appends one tab-separated record to $TMP/results.
parse() {  # kind round summary_file [header_sample_file]
  python3 - "$@" >>"$TMP/results" <<'PY'
import re, sys
kind, rnd, summ = sys.argv[1:4]
text = open(summ, errors="replace").read()
m = re.search(r"read: IOPS=\S+, BW=([\d.]+)MiB/s .* in ([\d.]+)s, (\d+) reads", text)
c = re.search(r"cpu: process ([\d.]+)% of one CPU", text)
if not (m and c):
    sys.exit(f"tui-cost: no summary in the {kind} output of round {rnd}:\n{text[-3000:]}")
ui_cpu = ui_ms = "nan"
if len(sys.argv) > 4:
    u = re.search(r"ui ([\d.]+)% (?:cpu )?([\d.]+)ms", open(sys.argv[4], errors="replace").read())
    if u:
        ui_cpu, ui_ms = u.groups()
print("\t".join([kind, rnd, m.group(1), m.group(2), m.group(3), c.group(1), ui_cpu, ui_ms]))
PY
}

# Warm-up (not counted): prepares the dataset if needed and warms the caches,
# so that round 1's headless run does not pay for it.
"$BIN" "${GLOBAL[@]}" run --duration "$(( SECS < 2 ? SECS : 2 ))s" "${EXTRA[@]}" >/dev/null

TUI_CMD="$(printf '%q ' "$BIN" "${GLOBAL[@]}" tui --duration "${SECS}s" --fps "$FPS" "${EXTRA[@]}")"
PANE_CMD="$TUI_CMD; echo __DONE__ rc=\$?; sleep 600"
SAMPLE_AT=$(( SECS > 4 ? SECS - 3 : 1 ))   # seconds after start: still drawing
: >"$TMP/results"
for r in $(seq 1 "$ROUNDS"); do
  # headless
  "$BIN" "${GLOBAL[@]}" run --duration "${SECS}s" "${EXTRA[@]}" >"$TMP/headless.txt" &
  HEADLESS_PID=$!; wait "$HEADLESS_PID"; HEADLESS_PID=
  parse headless "$r" "$TMP/headless.txt"

  # tui, in a real pty
  S=r$r
  T new-session -d -s "$S" -x 220 -y 48 -c "$PWD" bash -c "$PANE_CMD"
  PANE_PID=$(T display-message -p -t "$S" '#{pane_pid}')
  t0=$SECONDS; : >"$TMP/header.txt"; done_=
  while :; do
    sleep 0.5
    now=$(( SECONDS - t0 ))
    T capture-pane -p -J -S -10000 -t "$S" >"$TMP/pane.txt" 2>/dev/null || { echo "tui-cost: tmux session died" >&2; exit 1; }
    if grep -q '^__DONE__' "$TMP/pane.txt"; then done_=1; break; fi
    if [ ! -s "$TMP/header.txt" ] && [ "$now" -ge "$SAMPLE_AT" ]; then
      grep -m1 -oE 'ui [0-9.]+% cpu [0-9.]+ms/frame' "$TMP/pane.txt" >"$TMP/header.txt" || true
    fi
    [ "$now" -gt $(( SECS + 120 )) ] && break
  done
  # (cleanup ends a TUI that did not finish: killing its pty first would leave it spinning)
  [ -n "$done_" ] || { echo "tui-cost: the TUI did not finish in round $r; pane:" >&2; cat "$TMP/pane.txt" >&2; exit 1; }
  T kill-session -t "$S" 2>/dev/null || true; PANE_PID=
  rc=$(sed -n 's/^__DONE__ rc=//p' "$TMP/pane.txt")
  [ "$rc" = 0 ] || { echo "tui-cost: the TUI exited with $rc in round $r; pane:" >&2; cat "$TMP/pane.txt" >&2; exit 1; }
  [ -s "$TMP/header.txt" ] || echo "tui-cost: round $r: no 'ui X% cpu Yms/frame' in the header at ${SAMPLE_AT}s" >&2
  parse tui "$r" "$TMP/pane.txt" "$TMP/header.txt"
done

python3 - "$TMP/results" <<'PY'
import math, statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
R = {}
for kind, rnd, mib, secs, reads, cpu, ui_cpu, ui_ms in rows:
    mib, cpu = float(mib), float(cpu)
    R.setdefault(int(rnd), {})[kind] = dict(
        mib=mib, secs=float(secs), reads=int(reads), cpu=cpu,
        cpu_ms_mib=cpu * 10 / mib if mib else math.nan,   # (cpu% / 100) s per s, / MiB per s, in ms
        ui_cpu=float(ui_cpu), ui_ms=float(ui_ms))
f = lambda x, w=9, p=1: f"{x:>{w}.{p}f}" if not math.isnan(x) else f"{'-':>{w}}"
print(f"{'round':>5} {'kind':<8} {'MiB/s':>9} {'secs':>6} {'reads':>10} {'cpu%':>7} {'cpu_ms/MiB':>10} {'ui_cpu%':>8} {'ui_ms/fr':>8} {'MiB/s_x':>8}")
for r in sorted(R):
    h = R[r]["headless"]
    for kind in ("headless", "tui"):
        x = R[r][kind]
        print(f"{r:>5} {kind:<8} {f(x['mib'])} {f(x['secs'],6)} {x['reads']:>10} {f(x['cpu'],7)} {f(x['cpu_ms_mib'],10,2)} "
              f"{f(x['ui_cpu'],8)} {f(x['ui_ms'],8,2)} {f(x['mib']/h['mib'],8,3)}")
med = lambda k, kind: st.median([R[r][kind][k] for r in R])
def medx(k):
    v = [R[r]["tui"][k] / R[r]["headless"][k] for r in R if R[r]["headless"][k]]
    return st.median(v) if v else math.nan
def nanmed(k):
    v = [R[r]["tui"][k] for r in R if not math.isnan(R[r]["tui"][k])]
    return st.median(v) if v else math.nan
print(f"\nmedians over {len(R)} rounds {'headless':>10} {'tui':>10} {'tui/headless':>13}")
for label, k, p in (("MiB/s", "mib", 1), ("process CPU %", "cpu", 1), ("CPU ms per MiB", "cpu_ms_mib", 2)):
    print(f"{label:<24} {f(med(k,'headless'),10,p)} {f(med(k,'tui'),10,p)} {f(medx(k),13,3)}")
print(f"{'UI thread CPU %':<24} {'-':>10} {f(nanmed('ui_cpu'),10,1)}")
print(f"{'UI ms per frame':<24} {'-':>10} {f(nanmed('ui_ms'),10,2)}")
PY
echo "MiB/s_x and tui/headless: per round tui/headless, paired within the round; ratios are medians of those."
echo "cpu% = the whole process, % of one CPU; ui_* = the TUI header's own UI-thread figures, sampled at ${SAMPLE_AT}s of ${SECS}s."
