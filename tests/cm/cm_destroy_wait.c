/* SPDX-License-Identifier: MIT */
/*
 * cm_destroy_wait.c -- destroying an event channel while another thread is
 * blocked in rdma_get_cm_event() on it (rping's CM thread at exit) must not
 * crash or wake that thread with garbage: as with librdmacm, whose waiter
 * stays blocked in the kernel, the waiter simply never returns.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "../tap.h"

static volatile int waiting, returned;

/* waiter -- block on the channel; record it if the call ever returns */
static void *waiter(void *arg)
{
	struct rdma_cm_event *ev;

	waiting = 1;
	rdma_get_cm_event(arg, &ev);
	returned = 1;
	return NULL;
}

int main(void)
{
	struct rdma_event_channel *ch, *ch2;
	struct rdma_cm_id *id;
	pthread_t t;
	int i;

	setenv("SOFTRDMA_SHM_PREFIX", "cm-destroy-wait", 0);
	ch = rdma_create_event_channel();
	if (!ok(ch != NULL, "event channel"))
		return done_testing();
	ok(!pthread_create(&t, NULL, waiter, ch), "waiter thread");
	pthread_detach(t);
	for (i = 0; i < 1000 && !waiting; i++)
		usleep(1000);
	usleep(50000); /* let it block in poll() */
	rdma_destroy_event_channel(ch);

	/* The rest of the process carries on: a new channel and id work
	 * while the old waiter stays where it is. */
	ch2 = rdma_create_event_channel();
	ok(ch2 != NULL, "a new channel after the destroy");
	ok(ch2 && !rdma_create_id(ch2, &id, NULL, RDMA_PS_TCP),
	   "an id on the new channel");
	usleep(100000);
	ok(!returned, "the waiter on the destroyed channel did not return");
	if (ch2) {
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch2);
	}
	return done_testing();
}
