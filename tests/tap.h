/* SPDX-License-Identifier: MIT */
/* tap.h -- a minimal TAP producer for the C tests */
#ifndef RDMAMSG_TAP_H
#define RDMAMSG_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n;
static int tap_failed;

/* tap_ok -- report one assertion; returns cond so callers can bail out */
static inline __attribute__((format(printf, 4, 5))) int tap_ok(
	int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, name)                                          \
	do {                                                             \
		long long g_ = (long long)(got), w_ = (long long)(want); \
		if (!ok(g_ == w_, "%s", name))                           \
			printf("#   got %lld, want %lld\n", g_, w_);     \
	} while (0)
#define diag(...)                    \
	do {                         \
		printf("# ");        \
		printf(__VA_ARGS__); \
		printf("\n");        \
		fflush(stdout);      \
	} while (0)
#define bail_out(...)                 \
	do {                          \
		printf("Bail out! "); \
		printf(__VA_ARGS__);  \
		printf("\n");         \
		exit(1);              \
	} while (0)
#define skip_all(...)                   \
	do {                            \
		printf("1..0 # SKIP "); \
		printf(__VA_ARGS__);    \
		printf("\n");           \
		exit(0);                \
	} while (0)

/* skip_one -- one check not run, with the reason */
#define skip_one(...)                             \
	do {                                      \
		printf("ok %d # SKIP ", ++tap_n); \
		printf(__VA_ARGS__);              \
		printf("\n");                     \
		fflush(stdout);                   \
	} while (0)

/* done_testing -- print the plan and the exit status for the driver */
static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* tap_small -- true when the run asks for shortened loops (valgrind) */
static inline int tap_small(void)
{
	const char *s = getenv("RDMAMSG_TEST_SCALE");

	return s && !strcmp(s, "small");
}

#endif /* RDMAMSG_TAP_H */
