/*
 * slowflush: a library the system benchmark preloads into a private
 * Postgres (LD_PRELOAD) so that every fsync and fdatasync first sleeps
 * HOOKGATE_BENCH_FLUSH_DELAY_US microseconds: a disk whose flush is slow,
 * on any machine, for the benchmark's slow-flush cluster. Nothing else
 * changes; reads and writes run at the machine's own speed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static int delay_us = -1;

static void delay(void) {
	if (delay_us < 0) {
		const char *v = getenv("HOOKGATE_BENCH_FLUSH_DELAY_US");
		delay_us = v ? atoi(v) : 0;
	}
	if (delay_us > 0)
		usleep(delay_us);
}

int fdatasync(int fd) {
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	delay();
	return real(fd);
}

int fsync(int fd) {
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	delay();
	return real(fd);
}
