#!/usr/bin/env bash
# What the explorer's timeline (`t`) costs its UI thread: the explorer at
# --fps 10 in a real pseudo-terminal (a private tmux server) of each size,
# its UI thread's (the main thread's) CPU time from the kernel
# (/proc/PID/task/PID/schedstat: ns on a CPU) over SECS seconds with the
# timeline closed, then open, then closed and open again, as % of one core.
# (The header's own `ui` figure drops first where the header is full.)
# Usage: bench/timeline-ui-cost.sh [seconds=12] [sizes="120x40 160x48"] [-- extra args]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-12}; SIZES=${2:-"120x40 160x48"}
shift $(( $# > 2 ? 2 : $# )); [ "${1:-}" = "--" ] && shift
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
TMP=$(mktemp -d); SOCK="$TMP/tmux.sock"
trap 'tmux -S "$SOCK" kill-server 2>/dev/null || true; rm -rf "$TMP"' EXIT
echo "# $(date -u) | kernel $(uname -r) | nproc $(nproc) | fps 10 | ${SECS}s a state | $*"
oncpu() { cut -d' ' -f1 "/proc/$PID/task/$PID/schedstat"; }
for size in $SIZES; do
  w=${size%x*}; h=${size#*x}
  tmux -S "$SOCK" new -d -s t -x "$w" -y "$h" "$BIN tui --fps 10 $*; sleep 5"
  sleep 6
  PID=$(pgrep -n -f "^$BIN tui --fps 10")
  line="$size:"
  for state in closed open closed open; do
    if [ "$state" = open ]; then tmux -S "$SOCK" send-keys -t t t; sleep 1; fi
    a=$(oncpu); sleep "$SECS"; b=$(oncpu)
    line="$line $state $(python3 -c "print(f'{($b-$a)/1e9/$SECS*100:.2f}%')") |"
    if [ "$state" = open ]; then tmux -S "$SOCK" send-keys -t t t; fi
  done
  echo "$line"
  tmux -S "$SOCK" send-keys -t t q q
  sleep 2
  tmux -S "$SOCK" kill-server 2>/dev/null || true
done
