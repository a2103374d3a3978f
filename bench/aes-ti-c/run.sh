#!/usr/bin/env bash
# The kernel's aes-fixed-time decryption (lib/crypto/aes.c, inv_mix_columns
# out of line, an ECB loop through a function pointer, the XTS passes) in
# C, built twice: plain, and as a kernel with the SRSO "Safe RET" return
# thunk and retpolines is built (-mfunction-return=thunk-extern
# -mindirect-branch=thunk-extern, thunk.S). Alternates each with readpath's
# port (`aes-256-xts-ti`, which pays the thunk where the running kernel
# says Safe RET) in one run, so the three figures share the machine's
# state. Prints microseconds per 4096-byte unit.
# Usage: bench/aes-ti-c/run.sh [rounds=3]
set -euo pipefail
cd "$(dirname "$0")"
R=${1:-3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
gcc -O2 -o "$T/plain" aes.c
gcc -O2 -mfunction-return=thunk-extern -mindirect-branch=thunk-extern -o "$T/thunk" aes.c thunk.S
BIN=../../target/release/readpath
[ -x "$BIN" ] || (cd ../.. && cargo build --release)
echo "spec_rstack_overflow: $(cat /sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow 2>/dev/null || echo unknown)"
for i in $(seq "$R"); do
  p=$("$T/plain" | tail -1); t=$("$T/thunk" | tail -1)
  r=$("$BIN" bench crypto --seconds 1s --rounds 1 --format json | python3 -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    if r["name"] == "aes-256-xts-ti":
        print("%.2f us/unit" % (4096 / r["bytes_per_s"] * 1e6))')
  echo "round $i: C plain $p | C with thunks $t | readpath aes-256-xts-ti $r"
done
