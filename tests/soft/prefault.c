/* SPDX-License-Identifier: MIT */
/*
 * prefault.c -- what softrdma sets up before the first message, as an HCA
 * has it ready when the verbs call returns, rather than in the middle of
 * the first traffic:
 *
 * - membarrier(2) is registered for the process when softrdma opens its
 *   first device (the biased context lock's revokers need it): a
 *   MEMBARRIER_CMD_PRIVATE_EXPEDITED is EPERM before and works after,
 *   with no hinted call made yet (registering with other threads alive
 *   costs the kernel an RCU grace period, 10-20 ms, which the first
 *   hinted lock used to pay with a message in flight).
 *
 * Skipped where the kernel has no private expedited membarrier.
 */
#include "config.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

int main(void)
{
	struct tctx t;
	long cmds;

	t_isolate("prefault");
	cmds = membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		skip_one("no private expedited membarrier (%ld)", cmds);
		skip_one("no private expedited membarrier");
		if (t_open(&t, 64))
			bail_out("open");
	} else {
		errno = 0;
		ok(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) < 0 &&
			   errno == EPERM,
		   "membarrier: not registered before softrdma opens");
		if (t_open(&t, 64))
			bail_out("open");
		ok(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0,
		   "membarrier: registered once it has, before any hint");
	}
	t_close(&t);
	return done_testing();
}
