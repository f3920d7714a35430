/* SPDX-License-Identifier: MIT */
/*
 * cm_storm.c -- a connect storm against a raw rdma_cm listener with a
 * small backlog (issue 9): 200 clients (4 processes of 50 ids) connect at
 * once, 10 cycles.  As on hardware, requests beyond the backlog wait (the
 * active CM resends its REQ): every connect succeeds, none is REJECTED
 * (above all not with reason 8, "nobody listens").
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "../tap.h"
#include "cm_util.h"

#define PROCS	4
#define PER	50
#define CYCLES	(tap_small() ? 2 : 10)
#define BACKLOG 16

/* client -- PER ids connect at once, CYCLES times; exit status: 0 if all
 * connected and none was rejected */
static int client(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *ids[PER];
	int cycles = CYCLES;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	uint16_t port;
	int c, i, n, good = 0, rejected = 0, other = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(pfd, &port, sizeof(port)) != sizeof(port) || !ch)
		return 1;
	for (c = 0; c < cycles; c++) {
		for (i = 0; i < PER; i++)
			if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP) ||
			    cmt_resolve(ids[i], ch, port))
				return 2;
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x777;
		for (i = 0; i < PER; i++)
			if (rdma_connect(ids[i], &cp))
				return 3;
		for (n = 0; n < PER; n++) {
			ev = cmt_wait(ch, 60000);
			if (!ev)
				return 4;
			if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
				good++;
				rdma_establish(ev->id);
			} else if (ev->event == RDMA_CM_EVENT_REJECTED) {
				rejected++;
				fprintf(stderr, "# REJECTED, status %d\n",
					ev->status);
			} else {
				other++;
				fprintf(stderr, "# %s, status %d\n",
					rdma_event_str(ev->event), ev->status);
			}
			rdma_ack_cm_event(ev);
		}
		for (i = 0; i < PER; i++)
			rdma_destroy_id(ids[i]); /* DREQ; no wait */
	}
	rdma_destroy_event_channel(ch);
	fprintf(stderr, "# client %d: %d connected, %d rejected, %d other\n",
		(int)getpid(), good, rejected, other);
	return good == PER * cycles && !rejected && !other ? 0 : 5;
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	int p[2], i, st, requests = 0, established = 0, left = PROCS, bad = 0;
	long long t0;
	pid_t pids[PROCS];
	uint16_t port;

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) ||
	    rdma_listen(l, BACKLOG))
		bail_out("listener");
	port = ntohs(rdma_get_src_port(l));
	for (i = 0; i < PROCS; i++) {
		if (pipe(p))
			bail_out("pipe");
		pids[i] = fork();
		if (pids[i] < 0)
			bail_out("fork");
		if (!pids[i]) {
			close(p[1]);
			_exit(client(p[0]));
		}
		close(p[0]);
		if (write(p[1], &port, sizeof(port)) != sizeof(port))
			bail_out("write");
		close(p[1]);
	}
	t0 = cmt_now_ms();
	while (left && cmt_now_ms() - t0 < 240000) {
		ev = cmt_wait(ch, 100);
		if (ev) {
			struct rdma_cm_id *id = ev->id;
			enum rdma_cm_event_type t = ev->event;

			rdma_ack_cm_event(ev);
			if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
				requests++;
				/* a slow server: the backlog fills up */
				if (!(requests % 8))
					usleep(2000);
				memset(&cp, 0, sizeof(cp));
				cp.qp_num = 0x888;
				if (rdma_accept(id, &cp)) {
					bad++;
					rdma_destroy_id(id);
				}
			} else if (t == RDMA_CM_EVENT_ESTABLISHED) {
				established++;
			} else if (t == RDMA_CM_EVENT_DISCONNECTED ||
				   t == RDMA_CM_EVENT_REJECTED ||
				   t == RDMA_CM_EVENT_UNREACHABLE) {
				rdma_destroy_id(id);
			}
		}
		for (i = 0; i < PROCS; i++) {
			if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) > 0) {
				pids[i] = 0;
				left--;
				ok(WIFEXITED(st) && !WEXITSTATUS(st),
				   "client process %d: %d connects, none "
				   "rejected (status %d)",
				   i, PER * CYCLES,
				   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
			}
		}
	}
	for (i = 0; i < PROCS; i++)
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			ok(0, "client process %d finished in time", i);
		}
	is_int(requests, PROCS * PER * CYCLES,
	       "every request reached the listener once");
	is_int(bad, 0, "every accept succeeded");
	diag("%d ESTABLISHED in %lld ms", established, cmt_now_ms() - t0);
	/* drain the last DISCONNECTEDs so that every child id goes */
	while ((ev = cmt_wait(ch, 1500))) {
		struct rdma_cm_id *id = ev->id;
		enum rdma_cm_event_type t = ev->event;

		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_DISCONNECTED)
			rdma_destroy_id(id);
	}
	ok(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch);
	return done_testing();
}
