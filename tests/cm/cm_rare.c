/* SPDX-License-Identifier: MIT */
/*
 * cm_rare.c -- softrdma CM: the less travelled corners of librdmacm, each
 * as rdma-core's librdmacm and the kernel's rdma_cm/ucma answer it.
 *
 * - rdma_set_option: a NULL optval of a length is EFAULT (ucma_set_option
 *   copies it in with memdup_user), an unknown level or option ENOSYS
 *   (ucma_set_option_level, _id, _ib), a wrong length EINVAL; ACK_TIMEOUT
 *   only for RC ids (rdma_set_ack_timeout).
 * - rdma_event_str, rdma_get_src_port/dst_port and the addresses in each
 *   state, rdma_get_devices.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

/* set_fails -- rdma_set_option fails with errno e */
static int set_fails(struct rdma_cm_id *id, int level, int name, void *val,
		     size_t len, int e)
{
	errno = 0;
	return rdma_set_option(id, level, name, val, len) == -1 && errno == e;
}

/* test_options -- rdma_set_option's errors */
static void test_options(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *ud;
	uint8_t u8v = 1;
	int iv = 1;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP))
		bail_out("ids");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 1, EFAULT),
	   "TOS from NULL: EFAULT (memdup_user)");
	ok(set_fails(id, RDMA_OPTION_ID, 99, NULL, 0, ENOSYS),
	   "unknown option, no value: ENOSYS");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 0, EINVAL),
	   "TOS of no bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &iv, sizeof(iv),
		     EINVAL),
	   "TOS of 4 bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &u8v, 1,
		     EINVAL),
	   "REUSEADDR of 1 byte: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &u8v, 1,
		     EINVAL),
	   "AFONLY of 1 byte: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &iv,
		     sizeof(iv), EINVAL),
	   "ACK_TIMEOUT of 4 bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, 4, &u8v, 1, ENOSYS),
	   "option 4 of level ID: ENOSYS");
	ok(set_fails(id, 7, 0, &u8v, 1, ENOSYS), "level 7: ENOSYS");
	ok(set_fails(id, RDMA_OPTION_IB, 99, &u8v, 1, ENOSYS),
	   "IB option 99: ENOSYS");
	ok(set_fails(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8v, 1,
		     EINVAL),
	   "ACK_TIMEOUT of a UD id: EINVAL");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, 1),
	   "TOS of 1 byte");
	ok(!rdma_set_option(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, 1),
	   "TOS of a UD id");
	rdma_destroy_id(ud);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* test_misc -- rdma_event_str, ports in each state, rdma_get_devices */
static void test_misc(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_context **devs;
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *id;
	int i, n = -1, good = 1;

	for (i = RDMA_CM_EVENT_ADDR_RESOLVED; i <= RDMA_CM_EVENT_TIMEWAIT_EXIT;
	     i++) {
		const char *s = rdma_event_str((enum rdma_cm_event_type)i);

		if (!s || strncmp(s, "RDMA_CM_EVENT_", 14))
			good = 0;
	}
	ok(good, "rdma_event_str names every event");
	ok(!strcmp(rdma_event_str((enum rdma_cm_event_type)99),
		   "UNKNOWN EVENT"),
	   "rdma_event_str(99): UNKNOWN EVENT");
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("id");
	ok(rdma_get_src_port(id) == 0 && rdma_get_dst_port(id) == 0,
	   "idle: ports 0");
	ok(rdma_get_local_addr(id)->sa_family == 0, "idle: no local address");
	ok(!rdma_bind_addr(id, (struct sockaddr *)&sin), "bound");
	ok(rdma_get_src_port(id) != 0 && rdma_get_dst_port(id) == 0,
	   "bound: a source port, no destination port");
	ok(rdma_get_local_addr(id)->sa_family == AF_INET &&
		   rdma_get_peer_addr(id)->sa_family == 0,
	   "bound: local address AF_INET, no peer");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	devs = rdma_get_devices(&n);
	ok(devs && n >= 1 && devs[0] && !devs[n], "rdma_get_devices: %d", n);
	rdma_free_devices(devs);
	rdma_free_devices(NULL);
}

int main(void)
{
	setenv("SOFTRDMA_SHM_PREFIX", "cm-rare", 0);
	alarm(120); /* a wait that never ends fails the test */
	test_options();
	test_misc();
	return done_testing();
}
