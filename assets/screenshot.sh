#!/usr/bin/env bash
# screenshot.sh - take a real PNG screenshot of a full-screen terminal (TUI) program.
#
# Why: so the README can show a picture made from the real app rather than a mock-up.
# It runs COMMAND in an xterm (DejaVu Sans Mono, which has Braille U+2800-U+28FF and box
# drawing; dark background; TERM=xterm-256color; truecolor) on a private Xvfb display,
# optionally types keys into it, grabs just the xterm window and cleans everything up.
#
# Needs (Debian): xvfb xterm xdotool imagemagick fonts-dejavu-core x11-utils fontconfig
#
# Usage: assets/screenshot.sh [--cols 160] [--rows 48] [--wait 8] [--keys "KEYS"]
#          [--key-gap 1] [--keys-wait 3] --out FILE.png -- COMMAND [ARGS...]
#   --keys is typed one character at a time, --key-gap seconds apart; times in seconds.
set -euo pipefail

COLS=160 ROWS=48 WAIT=8 KEYS="" KEY_GAP=1 KEYS_WAIT=3 OUT=""
usage() { sed -n '11,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cols) COLS=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --keys-wait) KEYS_WAIT=$2; shift 2 ;;
    --key-gap) KEY_GAP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ -n "$OUT" && $# -gt 0 ]] || usage

# Check tools (this script installs nothing).
missing=()
for t in Xvfb:xvfb xterm:xterm xdotool:xdotool import:imagemagick xwininfo:x11-utils fc-list:fontconfig; do
  command -v "${t%%:*}" >/dev/null || missing+=("${t#*:}")
done
if command -v fc-list >/dev/null && [[ -z "$(fc-list 'DejaVu Sans Mono')" ]]; then missing+=(fonts-dejavu-core); fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "screenshot.sh: missing tools; install with: apt-get install -y ${missing[*]}" >&2
  exit 1
fi

TMP=$(mktemp -d)
XVFB_PID="" XTERM_PID=""
descendants() { local c; for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do descendants "$c"; echo "$c"; done; }
cleanup() {
  local pids=()
  [[ -n "$XTERM_PID" ]] && pids+=($(descendants "$XTERM_PID") "$XTERM_PID")
  [[ -n "$XVFB_PID" ]] && pids+=("$XVFB_PID")
  if [[ ${#pids[@]} -gt 0 ]]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "${pids[@]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Private X server; -displayfd makes Xvfb pick a free display number itself.
Xvfb -displayfd 3 -screen 0 3840x2160x24 -dpi 96 -nolisten tcp 3>"$TMP/display" 2>"$TMP/xvfb.log" &
XVFB_PID=$!
for _ in $(seq 100); do [[ -s "$TMP/display" ]] && break; sleep 0.1; done
[[ -s "$TMP/display" ]] || { echo "screenshot.sh: Xvfb did not start:" >&2; cat "$TMP/xvfb.log" >&2; exit 1; }
export DISPLAY=":$(head -n1 "$TMP/display")"

xterm -name rpshot -geometry "${COLS}x${ROWS}+0+0" -fa 'DejaVu Sans Mono' -fs 11 \
  -bg '#1c1c1c' -fg '#d0d0d0' -cr '#d0d0d0' -bw 0 -b 4 +sb -tn xterm-256color \
  -xrm 'XTerm*directColor: true' -xrm 'XTerm*utf8: 1' -xrm 'XTerm*forceBoxChars: true' -xrm 'XTerm*locale: false' \
  -e env TERM=xterm-256color COLORTERM=truecolor LANG=C.UTF-8 LC_ALL=C.UTF-8 "$@" \
  2>"$TMP/xterm.log" &
XTERM_PID=$!

WID=""
for _ in $(seq 150); do
  kill -0 "$XTERM_PID" 2>/dev/null || { echo "screenshot.sh: xterm/COMMAND exited early:" >&2; cat "$TMP/xterm.log" >&2; exit 1; }
  WID=$(xdotool search --classname rpshot 2>/dev/null | head -n1) || true
  [[ -n "$WID" ]] && break; sleep 0.1
done
[[ -n "$WID" ]] || { echo "screenshot.sh: xterm window did not appear" >&2; exit 1; }
# No window manager: focus explicitly, so keys typed via XTEST reach xterm (it ignores
# SendEvent keys) and the capture looks the same with or without --keys.
# The window may not be mapped yet (BadMatch from X_SetInputFocus): retry.
for _ in $(seq 50); do xdotool windowfocus --sync "$WID" 2>/dev/null && break; sleep 0.1; done
sleep "$WAIT"

if [[ -n "$KEYS" ]]; then
  # One key at a time, KEY_GAP seconds apart (e.g. "bw": baseline, then a change).
  for ((i = 0; i < ${#KEYS}; i++)); do
    ((i > 0)) && sleep "$KEY_GAP"
    xdotool type -- "${KEYS:i:1}"
  done
  sleep "$KEYS_WAIT"
fi

kill -0 "$XTERM_PID" 2>/dev/null || { echo "screenshot.sh: COMMAND exited before the capture" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
import -window "$WID" "png:$OUT"
echo "screenshot.sh: wrote $OUT ($(xwininfo -id "$WID" | awk '/Width:/{w=$2} /Height:/{h=$2} END{print w "x" h}') px, ${COLS}x${ROWS} cells)"
