/* SPDX-License-Identifier: MIT */
/* log.c -- the log function and level: messages arrive at or below the
 * level, none when disabled, none when no function is set */
#include "config.h"

#include <errno.h>

#include "../tap.h"
#include "rdmamsg.h"

static int calls, last_level;
static char last[512];

/* fn -- log function: remember the last message */
static void fn(int level, const char *func, const char *msg, void *arg)
{
	(void)func;
	calls++;
	last_level = level;
	snprintf(last, sizeof(last), "%s", msg);
	*(int *)arg = 1;
}

int main(void)
{
	struct rdmamsg_ctx *ctx = NULL;
	int seen = 0, level;

	setenv("RDMAMSG_FABRIC", "nonsense", 1);
	rdmamsg_log_set_function(fn, &seen);
	is_int(rdmamsg_log_set_level(RDMAMSG_LOG_ERROR), 0, "level ERROR");
	is_int(rdmamsg_ctx_create(NULL, &ctx), -ENOTSUP, "bad fabric");
	is_int(calls, 1, "one message");
	is_int(last_level, RDMAMSG_LOG_ERROR, "at ERROR");
	ok(strstr(last, "RDMAMSG_FABRIC") != NULL, "it names the cause: %s",
	   last);
	ok(seen, "the user argument is passed");

	/* softrdma cannot be found: -ENODEV, and the log says where */
	setenv("RDMAMSG_FABRIC", "soft", 1);
	setenv("RDMAMSG_SOFTRDMA_PATH", "/nonexistent/libsoftrdma.so", 1);
	is_int(rdmamsg_ctx_create(NULL, &ctx), -ENODEV,
	       "no softrdma library: -ENODEV");
	ok(strstr(last, "/nonexistent/libsoftrdma.so") != NULL,
	   "the log names the path: %s", last);
	setenv("RDMAMSG_FABRIC", "nonsense", 1);
	calls = 1;

	rdmamsg_log_set_level(RDMAMSG_LOG_DISABLED);
	rdmamsg_log_get_level(&level);
	is_int(level, RDMAMSG_LOG_DISABLED, "level DISABLED");
	rdmamsg_ctx_create(NULL, &ctx);
	is_int(calls, 1, "disabled: nothing");

	rdmamsg_log_set_level(RDMAMSG_LOG_DEBUG);
	rdmamsg_log_set_function(NULL, NULL);
	rdmamsg_ctx_create(NULL, &ctx);
	is_int(calls, 1, "no function: nothing (and no printing)");
	ok(ctx == NULL, "no context came out");
	return done_testing();
}
