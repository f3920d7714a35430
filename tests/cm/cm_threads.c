/* SPDX-License-Identifier: MIT */
/* cm_threads.c -- softrdma CM: concurrent connections, migrate_id */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "cm_util.h"

#define NCLIENTS 4

static int per_client;
static uint16_t port;
static struct rdma_event_channel *ch_listen, *ch_conn;
static atomic_int established, disconnected, client_ok, server_bad;

/* acceptor -- listener channel: migrate each request, accept it */
static void *acceptor(void *arg)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	uint8_t pd[56];
	int total = NCLIENTS * per_client, seen = 0;

	(void)arg;
	while (seen < total) {
		ev = cmt_wait(ch_listen, 20000);
		if (!ev)
			break;
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			server_bad++;
			rdma_ack_cm_event(ev);
			continue;
		}
		seen++;
		c = ev->id;
		memcpy(pd, ev->param.conn.private_data, sizeof(pd));
		rdma_ack_cm_event(ev);
		if (rdma_migrate_id(c, ch_conn)) {
			server_bad++;
			continue;
		}
		memset(&cp, 0, sizeof(cp));
		cp.private_data = pd;
		cp.private_data_len = sizeof(pd);
		cp.qp_num = 0x100;
		if (rdma_accept(c, &cp))
			server_bad++;
	}
	return NULL;
}

/* conn_events -- connection channel: established, disconnected */
static void *conn_events(void *arg)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	int total = NCLIENTS * per_client;

	(void)arg;
	while (disconnected < total) {
		ev = cmt_wait(ch_conn, 20000);
		if (!ev)
			break;
		c = ev->id;
		switch (ev->event) {
		case RDMA_CM_EVENT_ESTABLISHED:
			established++;
			rdma_ack_cm_event(ev);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			disconnected++;
			rdma_ack_cm_event(ev);
			if (rdma_destroy_id(c))
				server_bad++;
			break;
		default:
			server_bad++;
			rdma_ack_cm_event(ev);
			break;
		}
	}
	return NULL;
}

/* one_conn -- connect, check the echo, disconnect (own channel) */
static int one_conn(int k)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint8_t pd[56];
	int good = 0;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return 0;
	if (cmt_resolve(id, ch, port))
		goto out;
	memset(pd, k & 0xff, sizeof(pd));
	memcpy(pd, &k, sizeof(k));
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = sizeof(pd);
	cp.qp_num = 0x200;
	if (rdma_connect(id, &cp))
		goto out;
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 20000);
	if (!ev)
		goto out;
	good = !memcmp(ev->param.conn.private_data, pd, sizeof(pd));
	rdma_ack_cm_event(ev);
	if (!good || rdma_establish(id) || rdma_disconnect(id)) {
		good = 0;
		goto out;
	}
	ev = cmt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20000);
	good = ev != NULL;
	if (ev)
		rdma_ack_cm_event(ev);
out:
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return good;
}

/* client -- per_client connections one after the other */
static void *client(void *arg)
{
	int i, base = (int)(intptr_t)arg * 1000;

	for (i = 0; i < per_client; i++)
		if (one_conn(base + i))
			client_ok++;
	return NULL;
}

int main(void)
{
	struct sockaddr_in sin = cmt_sin(0);
	pthread_t acc, evt, cl[NCLIENTS];
	struct rdma_cm_id *l;
	long long t0;
	int i;

	per_client = tap_small() ? 5 : 50;
	alarm(200);
	ch_listen = rdma_create_event_channel();
	ch_conn = rdma_create_event_channel();
	if (!ch_listen || !ch_conn ||
	    rdma_create_id(ch_listen, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 64))
		bail_out("listener");
	port = ntohs(rdma_get_src_port(l));
	t0 = cmt_now_ms();
	pthread_create(&acc, NULL, acceptor, NULL);
	pthread_create(&evt, NULL, conn_events, NULL);
	for (i = 0; i < NCLIENTS; i++)
		pthread_create(&cl[i], NULL, client, (void *)(intptr_t)i);
	for (i = 0; i < NCLIENTS; i++)
		pthread_join(cl[i], NULL);
	pthread_join(acc, NULL);
	pthread_join(evt, NULL);
	diag("%d connections in %lld ms", NCLIENTS * per_client,
	     cmt_now_ms() - t0);
	is_int(client_ok, NCLIENTS * per_client,
	       "every client connected, saw its echo, disconnected");
	is_int(established, NCLIENTS * per_client,
	       "ESTABLISHED on the migrated channel for each");
	is_int(disconnected, NCLIENTS * per_client,
	       "DISCONNECTED on the migrated channel for each");
	is_int(server_bad, 0, "no unexpected event or failed call");
	ok(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch_listen);
	rdma_destroy_event_channel(ch_conn);
	return done_testing();
}
