#!/usr/bin/env bash
# The kernel's own fscrypt read path, as the yardstick for readpath's
# userspace ciphers: a throwaway ext4 image (mkfs.ext4 -O encrypt, 4 KiB
# blocks) on a loop device, a directory with an fscrypt v2 policy
# (contents AES-256-XTS, filenames AES-256-CTS, 64-byte random raw key), and
# a size_mib MiB file of random data in it plus a plain file of the same size
# next to it. Each round drops the page cache and times a cold
# `dd bs=1M of=/dev/null` of the encrypted file, then of the plain file
# (so the plain read is the same I/O without decryption). Prints per-round
# MB/s (10^6 bytes/s, from dd's byte count and seconds), then medians, the
# enc/plain ratio, and which crypto driver the kernel used for xts(aes)
# (fscrypt's "using implementation" dmesg line, else /proc/crypto).
# Usage: sudo bench/kernel-fscrypt.sh [size_mib=256] [rounds=3]
#   IMG_DIR=/dev/shm sudo bench/kernel-fscrypt.sh ...  puts the image on tmpfs,
#   so a "cold" read costs a memory copy instead of disk I/O and the gap
#   between the two files is mostly the decryption.
# Needs: root, ext4 with CONFIG_FS_ENCRYPTION, mkfs.ext4, losetup, and
# fscryptctl if installed, else python3 (a built-in stand-in that issues the
# same ioctls: Debian bookworm has no fscryptctl package).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-256}; ROUNDS=${2:-3}
case "$SIZE_MIB$ROUNDS" in *[!0-9]*|'') echo "usage: $0 [size_mib=256] [rounds=3]" >&2; exit 2;; esac
[ "$SIZE_MIB" -gt 0 ] && [ "$ROUNDS" -gt 0 ] || { echo "usage: $0 [size_mib=256] [rounds=3]" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
  echo "kernel-fscrypt: needs root (mkfs, losetup, mount, drop_caches, fscrypt key ioctls); run: sudo $0 $*" >&2
  exit 1
fi
for c in mkfs.ext4 losetup mount umount dd lsattr; do
  command -v "$c" >/dev/null || { echo "kernel-fscrypt: needs $c" >&2; exit 1; }
done
[ -e /sys/fs/ext4/features/encryption ] || { echo "kernel-fscrypt: this kernel's ext4 has no encryption support (CONFIG_FS_ENCRYPTION)" >&2; exit 1; }

umask 077
TMP=$(mktemp -d "${IMG_DIR:-${TMPDIR:-/tmp}}/kernel-fscrypt.XXXXXX")
IMG=$TMP/ext4.img; MNT=$TMP/mnt; KEY_ID=
cleanup() {
  local rc=$?
  set +e
  cd /
  if mountpoint -q "$MNT" 2>/dev/null; then
    [ -n "$KEY_ID" ] && $FSCRYPTCTL remove_key "$KEY_ID" "$MNT" >/dev/null 2>&1
    umount "$MNT" || umount -l "$MNT"
  fi
  for l in $(losetup -n -O NAME -j "$IMG" 2>/dev/null); do losetup -d "$l"; done
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM

if command -v fscryptctl >/dev/null; then
  FSCRYPTCTL=fscryptctl
else
  command -v python3 >/dev/null || { echo "kernel-fscrypt: needs fscryptctl or python3" >&2; exit 1; }
  # Stand-in for the fscryptctl subcommands used here, same arguments and
  # output; constants and layouts from include/uapi/linux/fscrypt.h.
  cat >"$TMP/fscryptctl.py" <<'PY'
import fcntl, os, struct, sys
def ioc(d, nr, size): return (d << 30) | (size << 16) | (ord('f') << 8) | nr
SET_POLICY = ioc(2, 19, 12)      # FS_IOC_SET_ENCRYPTION_POLICY (v1 size in the number; v2 accepted)
GET_POLICY_EX = ioc(3, 22, 9)    # FS_IOC_GET_ENCRYPTION_POLICY_EX
ADD_KEY = ioc(3, 23, 80)         # FS_IOC_ADD_ENCRYPTION_KEY
REMOVE_KEY = ioc(3, 24, 64)      # FS_IOC_REMOVE_ENCRYPTION_KEY
SPEC_IDENTIFIER = 2
MODES = {1: "AES-256-XTS", 4: "AES-256-CTS", 5: "AES-128-CBC", 6: "AES-128-CTS",
         7: "SM4-XTS", 8: "SM4-CTS", 9: "Adiantum", 10: "AES-256-HCTR2"}
BY_NAME = {v: k for k, v in MODES.items()}
def fd_of(path): return os.open(path, os.O_RDONLY)
cmd, args = sys.argv[1], sys.argv[2:]
opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--"))
args = [a for a in args if not a.startswith("--")]
if cmd == "add_key":
    raw = sys.stdin.buffer.read()
    buf = bytearray(struct.pack("<II32sII32s", SPEC_IDENTIFIER, 0, b"", len(raw), 0, b"") + raw)
    fcntl.ioctl(fd_of(args[0]), ADD_KEY, buf, True)
    print(bytes(buf[8:24]).hex())
elif cmd == "set_policy":
    ident = bytes.fromhex(args[0])
    pad = {4: 0, 8: 1, 16: 2, 32: 3}[int(opts.get("padding", 32))]
    pol = struct.pack("<BBBBB3s16s", 2, BY_NAME[opts.get("contents", "AES-256-XTS")],
                      BY_NAME[opts.get("filenames", "AES-256-CTS")], pad, 0, b"", ident)
    fcntl.ioctl(fd_of(args[1]), SET_POLICY, bytearray(pol), True)
elif cmd == "remove_key":
    buf = bytearray(struct.pack("<II32sI20s", SPEC_IDENTIFIER, 0, bytes.fromhex(args[0]), 0, b""))
    fcntl.ioctl(fd_of(args[1]), REMOVE_KEY, buf, True)
    flags = struct.unpack_from("<I", buf, 40)[0]
    if flags & 1: print("warning: some files are still in use", file=sys.stderr)
elif cmd == "get_policy":
    buf = bytearray(struct.pack("<Q", 24) + bytes(24))
    fcntl.ioctl(fd_of(args[0]), GET_POLICY_EX, buf, True)
    v, c, f, fl, lg = struct.unpack_from("<BBBBB", buf, 8)
    print(f"Encryption policy for {args[0]}:\n\tPolicy version: {v}\n"
          f"\tMaster key identifier: {bytes(buf[16:32]).hex()}\n"
          f"\tContents encryption mode: {MODES.get(c, c)}\n"
          f"\tFilenames encryption mode: {MODES.get(f, f)}\n"
          f"\tFlags: PAD_{4 << (fl & 3)}\n\tlog2_data_unit_size: {lg or 'default'}")
else:
    sys.exit(f"unknown subcommand {cmd}")
PY
  FSCRYPTCTL="python3 $TMP/fscryptctl.py"
fi

cpu=$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "# kernel-fscrypt: $(date -Is) | kernel $(uname -r) | CPU: ${cpu:-?} | nproc $(nproc)"
echo "# size ${SIZE_MIB} MiB, rounds ${ROUNDS}, image dir $(df --output=fstype "$TMP" | tail -1) ($TMP), tool: ${FSCRYPTCTL%% *}"

# 1. sparse image: both files + 64 MiB for ext4 metadata and the journal.
truncate -s $(( (2 * SIZE_MIB + 64) * 1024 * 1024 )) "$IMG"
mkfs.ext4 -q -F -b 4096 -O encrypt -E lazy_itable_init=0,lazy_journal_init=0 "$IMG"
LOOP=$(losetup --find --show "$IMG")
mkdir "$MNT"; mount -t ext4 "$LOOP" "$MNT"

# 2. key + v2 policy (dmesg snapshot first: fscrypt logs its cipher driver
# when it first sets up a key for a mode, once per boot).
DMESG_BEFORE=$( (dmesg 2>/dev/null || true) | wc -l)
head -c 64 /dev/urandom >"$TMP/key"
KEY_ID=$($FSCRYPTCTL add_key "$MNT" <"$TMP/key")
mkdir "$MNT/enc"
$FSCRYPTCTL set_policy --contents=AES-256-XTS --filenames=AES-256-CTS "$KEY_ID" "$MNT/enc"

# 3. the files.
ENC=$MNT/enc/data.bin; PLAIN=$MNT/plain.bin
dd if=/dev/urandom of="$ENC" bs=1M count="$SIZE_MIB" conv=fsync status=none
dd if=/dev/urandom of="$PLAIN" bs=1M count="$SIZE_MIB" conv=fsync status=none
sync
$FSCRYPTCTL get_policy "$ENC" | sed 's/^/# /'
lsattr "$ENC" | grep -q '^[^ ]*E' || { echo "kernel-fscrypt: $ENC is not flagged encrypted (lsattr)" >&2; exit 1; }

# 4. cold reads. Prints MB/s, from dd's own byte count and elapsed seconds.
cold_read() {
  sync; echo 3 >/proc/sys/vm/drop_caches
  LC_ALL=C dd if="$1" of=/dev/null bs=1M 2>&1 | awk '
    / copied, / { for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i-1); b = $1 }
    END { if (s > 0) printf "%.1f\n", b / s / 1e6; else { print "dd: no rate" > "/dev/stderr"; exit 1 } }'
}
printf "%5s %12s %12s %7s\n" round enc_MB/s plain_MB/s ratio
ENC_R=(); PLAIN_R=()
for r in $(seq 1 "$ROUNDS"); do
  e=$(cold_read "$ENC"); p=$(cold_read "$PLAIN")
  ENC_R+=("$e"); PLAIN_R+=("$p")
  printf "%5s %12s %12s %7s\n" "$r" "$e" "$p" "$(awk -v e="$e" -v p="$p" 'BEGIN{printf "%.3f", e/p}')"
done

# 5. which driver served xts(aes).
echo "# /proc/crypto xts(aes) (and cts(cbc(aes)), for filenames):"
awk -F': *' '
  /^name/ { n = $2 } /^driver/ { d = $2 } /^priority/ { p = $2 } /^selftest/ { s = $2 }
  /^$/ { if (n == "xts(aes)" || n == "cts(cbc(aes))") printf "#   name %-14s driver %-32s priority %-4s selftest %s\n", n, d, p, s; n = d = p = s = "" }
' /proc/crypto
NEW_DMESG=$(dmesg 2>/dev/null | tail -n +$((DMESG_BEFORE + 1)) | grep -i fscrypt || true)
if [ -n "$NEW_DMESG" ]; then
  echo "# new dmesg fscrypt lines:"; echo "$NEW_DMESG" | sed 's/^/#   /'
else
  echo "# no new dmesg fscrypt lines (fscrypt logs its driver once per boot); earlier ones:"
  dmesg 2>/dev/null | grep -i 'fscrypt.*using implementation' | sed 's/^/#   /' || echo "#   (none)"
fi
DRIVER=$(dmesg 2>/dev/null | grep -i 'fscrypt: AES-256-XTS using implementation' | tail -1 | sed 's/.*implementation "\(.*\)".*/\1/' || true)
[ -n "$DRIVER" ] || DRIVER=$(awk -F': *' '/^name/{n=$2} /^driver/{d=$2} /^priority/{if (n=="xts(aes)" && $2+0 > best) {best=$2+0; bd=d}} END{print bd" (highest priority in /proc/crypto)"}' /proc/crypto)

# 6. medians.
median() { printf "%s\n" "$@" | sort -g | awk '{a[NR]=$1} END{printf "%.1f", NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ME=$(median "${ENC_R[@]}"); MP=$(median "${PLAIN_R[@]}")
echo "median: encrypted ${ME} MB/s, plain ${MP} MB/s, ratio $(awk -v e="$ME" -v p="$MP" 'BEGIN{printf "%.3f", e/p}'), xts(aes) driver: $DRIVER"
