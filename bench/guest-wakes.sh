#!/usr/bin/env bash
# Where a lab guest's workers wait: boots the lab kernel (as `--remote vm:`
# boots it, 2 vCPUs, TCG) with a shell line that runs one `readpath run` of
# a preset on TARGET (kernel or model), records sched_wakeup/sched_switch
# and the workqueue tracepoints for 1 s of it (from its 3rd second) in the
# guest's top-level tracefs buffer, and keeps the trace and the run's JSON
# on the lab disk; then reads them back (loop-mounted read-only) and
# prints, for the verify/decrypt workers, every wake's wait (wakeup ->
# switch-in) grouped by who woke it, where, and on which CPU's task it
# waited (bench/wakes.py).
# Usage: bench/guest-wakes.sh TARGET [HOGS=2] [PRESET=fsverity-bound-vs-unbound] [extra --set ...]
# Needs root, the lab kernel (`readpath lab build --switches`) and an
# initramfs of this readpath (any `--remote vm:6.1-switches` run makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
T=$1; HOGS=${2:-2}; PRESET=${3:-fsverity-bound-vs-unbound}; shift $(( $# >= 3 ? 3 : $# ))
LAB=${LAB:-$HOME/.cache/readpath/lab}; K=${KERNEL:-6.1-switches}; OUT=${OUT:-held-maps}
INITRD=$(ls -t "$LAB"/initramfs-"$K"-*.cpio | head -1)
mkdir -p "$OUT"
EXTRA="$*"
LINE="T=/sys/kernel/tracing; echo 8192 > \$T/buffer_size_kb
for e in sched/sched_wakeup sched/sched_switch workqueue/workqueue_queue_work workqueue/workqueue_execute_start workqueue/workqueue_execute_end; do echo 1 > \$T/events/\$e/enable; done
echo 0 > \$T/tracing_on
/bin/readpath --data-dir=/lab/data run --preset $PRESET --set workload.target=$T --set workload.file_size=64M --set workers.kernel_era=6.1 --set pipeline.hash=kernel --set load.hogs=$HOGS --set kernel.dir=/lab/kernel $EXTRA --duration 5s --format json > /lab/wakes.json 2>/lab/wakes.err </dev/null &
sleep 3; echo 1 > \$T/tracing_on; sleep 1; echo 0 > \$T/tracing_on; wait
cat \$T/trace > /lab/wakes.trace"
qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot -monitor none \
  -accel tcg,thread=multi -cpu max -smp 2,sockets=1,cores=2,threads=1 -m 2048 \
  -kernel "$LAB/kernels/$K/vmlinuz" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 loglevel=4 delayacct readpath.cmd=$(printf '%s' "$LINE" | base64 -w0)" \
  -chardev file,id=console,path="$OUT/wakes-console.log" -serial chardev:console \
  -drive format=raw,file.driver=file,file.filename="$LAB/disk-$K.img",if=none,id=labdisk,cache=none \
  -device virtio-blk-pci,drive=labdisk,num-queues=2 -device virtio-serial-pci \
  -chardev null,id=agent -device virtserialport,chardev=agent,name=readpath.agent </dev/null
MNT=$(mktemp -d)
mount -o loop,ro "$LAB/disk-$K.img" "$MNT"
cp "$MNT/wakes.json" "$OUT/wakes-$T-h$HOGS.json"; cp "$MNT/wakes.trace" "$OUT/wakes-$T-h$HOGS.trace"
cat "$MNT/wakes.err" >&2 || true
umount "$MNT"; rmdir "$MNT"
jq -r '"\(.iops|floor) IOPS, workers run_delay \(.run_delay_ms_per_s|floor) ms/s, \(.workers.threads) threads, \(.workers.voluntary_switches) voluntary switches"' "$OUT/wakes-$T-h$HOGS.json"
python3 bench/wakes.py "$OUT/wakes-$T-h$HOGS.trace"
