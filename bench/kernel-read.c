/*
 * kernel-read: the kernel's own cost of a 4 KiB random read, with nothing of
 * readpath or fio around it. It is the reference the page-cache benchmarks
 * hold readpath's hit and miss paths against: a pread loop that does what
 * any measuring tool must (a random offset, a clock read before and after
 * each read, as readpath and fio do for their latency figures) and nothing
 * else, so its cost per read is the kernel's path plus the least a tool can
 * add.
 *
 *   kernel-read hit  FILE SECONDS   buffered reads (the file must be cached)
 *   kernel-read miss FILE SECONDS   buffered reads from a cold cache:
 *                                   POSIX_FADV_DONTNEED first, then
 *                                   POSIX_FADV_RANDOM (no readahead), as
 *                                   fio --invalidate=1 with its default
 *                                   fadvise_hint for random reads
 *   kernel-read dio  FILE SECONDS   O_DIRECT reads (each one io_schedule()s)
 *
 * With ENGINE=uring in the environment (built with -DWITH_LIBURING -luring)
 * each read is one io_uring read at queue depth 1 instead of a pread: the
 * SQE prepared, submitted and waited for with one io_uring_enter, the CQE
 * reaped, as fio's io_uring engine at iodepth=1 does.
 *
 * Prints one line: "<mode> <reads> <seconds> <iops> <ns per read>".
 * Built by the bench scripts with `cc -O2` (and liburing where installed).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef WITH_LIBURING
#include <liburing.h>
#endif

#define BS 4096

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s hit|miss|dio FILE SECONDS\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1];
	int direct = !strcmp(mode, "dio");
	int miss = !strcmp(mode, "miss");
	if (!direct && !miss && strcmp(mode, "hit")) {
		fprintf(stderr, "mode must be hit, miss or dio, not %s\n", mode);
		return 2;
	}
	double secs = atof(argv[3]);
	if (!(secs > 0 && secs <= 3600)) {
		fprintf(stderr, "SECONDS must be in (0, 3600], not %s\n", argv[3]);
		return 2;
	}
	int fd = open(argv[2], O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	off_t size = lseek(fd, 0, SEEK_END);
	uint64_t blocks = (uint64_t)size / BS;
	if (blocks == 0) {
		fprintf(stderr, "%s: smaller than one block\n", argv[2]);
		return 1;
	}
	if (miss) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	}
	void *buf;
	if (posix_memalign(&buf, BS, BS))
		return 1;
	const char *engine = getenv("ENGINE");
	int uring = engine && !strcmp(engine, "uring");
#ifdef WITH_LIBURING
	struct io_uring ring;
	if (uring && io_uring_queue_init(8, &ring, 0) < 0) {
		fprintf(stderr, "io_uring_queue_init failed\n");
		return 1;
	}
#else
	if (uring) {
		fprintf(stderr, "built without liburing: ENGINE=uring needs -DWITH_LIBURING -luring\n");
		return 2;
	}
#endif
	uint64_t x = 88172645463325252ull, reads = 0, lat = 0;
	uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9), t = start;
	while (t < end) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off_t off = (off_t)((x % blocks) * BS);
		uint64_t t0 = now_ns();
		ssize_t got;
#ifdef WITH_LIBURING
		if (uring) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			struct io_uring_cqe *cqe;
			io_uring_prep_read(sqe, fd, buf, BS, off);
			if (io_uring_submit_and_wait(&ring, 1) < 0 ||
			    io_uring_peek_cqe(&ring, &cqe) < 0) {
				fprintf(stderr, "io_uring wait failed\n");
				return 1;
			}
			got = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
		} else
#endif
			got = pread(fd, buf, BS, off);
		if (got != BS) {
			fprintf(stderr, "read at %lld: %zd\n", (long long)off, got);
			return 1;
		}
		t = now_ns();
		lat += t - t0;
		reads++;
	}
	double el = (double)(t - start) / 1e9;
	printf("%s %llu %.3f %.0f %.1f\n", mode, (unsigned long long)reads, el,
	       (double)reads / el, (double)lat / (double)reads);
	return 0;
}
