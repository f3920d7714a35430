/* SPDX-License-Identifier: MIT */
/* log.c -- logging through a user function; the library never prints */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

int rdmamsg__log_level = RDMAMSG_LOG_WARNING;
static void (*log_fn)(int level, const char *func, const char *msg, void *arg);
static void *log_arg;

/* rdmamsg_log_set_function -- route log messages to fn (NULL: none) */
RDMAMSG_EXPORT int rdmamsg_log_set_function(
	void (*fn)(int level, const char *func, const char *msg, void *arg),
	void *arg)
{
	__atomic_store_n(&log_arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
	return 0;
}

/* rdmamsg_log_set_level -- the most verbose level passed on */
RDMAMSG_EXPORT int rdmamsg_log_set_level(int level)
{
	if (level < RDMAMSG_LOG_DISABLED || level > RDMAMSG_LOG_DEBUG)
		return -EINVAL;
	__atomic_store_n(&rdmamsg__log_level, level, __ATOMIC_RELAXED);
	return 0;
}

/* rdmamsg_log_get_level -- the current level */
RDMAMSG_EXPORT int rdmamsg_log_get_level(int *level)
{
	if (!level)
		return -EINVAL;
	*level = __atomic_load_n(&rdmamsg__log_level, __ATOMIC_RELAXED);
	return 0;
}

/* rdmamsg__log -- format and hand one message to the user's function */
void rdmamsg__log(int level, const char *func, const char *fmt, ...)
{
	void (*fn)(int, const char *, const char *, void *);
	char msg[512];
	va_list ap;

	fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(level, func, msg, __atomic_load_n(&log_arg, __ATOMIC_RELAXED));
}
