/* SPDX-License-Identifier: MIT */
/*
 * cm_destroy_wait.c -- destroying an event channel while another thread is
 * blocked in rdma_get_cm_event() on it (rping's CM thread at exit) must not
 * crash or wake that thread with garbage: as with librdmacm, whose waiter
 * stays blocked in the kernel, the waiter simply never returns.
 *
 * Destroying a channel with ids still on it (rdma_destroy_event_channel(3)
 * wants them destroyed first) is served as the kernel serves it: the ids
 * are destroyed with the channel.  A listener and a connection it accepted
 * whose REP was never answered (its REP timeout still to come) are on the
 * channel: the peer is rejected then (not at the REP timeout, 120 s
 * here), the timeout is gone with the id (it used to post to the freed
 * channel: cm_flood crashed once in CI), and a later rdma_destroy_id of
 * such an id only frees it.
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
#include "cm_util.h"

static _Atomic int waiting, returned; /* the waiter thread's marks */

/* waiter -- block on the channel; record it if the call ever returns */
static void *waiter(void *arg)
{
	struct rdma_cm_event *ev;

	waiting = 1;
	rdma_get_cm_event(arg, &ev);
	returned = 1;
	return NULL;
}

/* orphans -- a channel destroyed with a listener and an accepted id on it */
static void orphans(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l = NULL, *a = NULL, *c = NULL;
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	int ok_setup;

	ok_setup = sch && cch && !rdma_create_id(sch, &l, NULL, RDMA_PS_TCP) &&
		   !rdma_bind_addr(l, (struct sockaddr *)&sin) &&
		   !rdma_listen(l, 4) &&
		   !rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) &&
		   !cmt_resolve(c, cch, ntohs(rdma_get_src_port(l)));
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x1234; /* no QP: the client gets CONNECT_RESPONSE */
	ok_setup = ok_setup && !rdma_connect(c, &cp);
	ev = ok_setup ? cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 30000)
		      : NULL;
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	ok_setup = a && !rdma_accept(a, &cp);
	ev = ok_setup ? cmt_expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, 30000)
		      : NULL;
	if (!ok(ev != NULL,
		"orphans: an accepted connection waits for its RTU"))
		return;
	rdma_ack_cm_event(ev);
	/* the accepted id's REP timeout (SOFTRDMA_CM_TIMEOUT_MS, 120 s)
	 * and the listener are still pending when their channel goes */
	rdma_destroy_event_channel(sch);
	ev = cmt_wait(cch, 60000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED,
	   "orphans: the peer is rejected when the channel goes (%s)",
	   ev ? rdma_event_str(ev->event) : "nothing");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(a), "orphans: destroy the accepted id afterwards");
	ok(!rdma_destroy_id(l), "orphans: destroy the listener afterwards");
	ok(!rdma_destroy_id(c), "orphans: the client id");
	rdma_destroy_event_channel(cch);
}

int main(void)
{
	struct rdma_event_channel *ch, *ch2;
	struct rdma_cm_id *id;
	pthread_t t;
	int i;

	setenv("SOFTRDMA_SHM_PREFIX", "cm-destroy-wait", 0);
	setenv("SOFTRDMA_CM_TIMEOUT_MS", "120000", 1);
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
	orphans();
	return done_testing();
}
