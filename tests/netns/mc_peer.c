/* SPDX-License-Identifier: MIT */
/*
 * mc_peer.c -- one member of an rdmamsg multicast group on a host of the
 * namespace fabric (tests/netns/mcast-hosts.sh runs one per role and host).
 *
 *   mc_peer sub GROUP BIND COUNT WINDOW
 *	subscribes (bound to BIND, this host's fabric address), says
 *	"joined" on stdout, then takes messages until it has accounted for
 *	COUNT (received + reported lost).  Every message is checked: one
 *	publisher, sequence numbers consecutive from 0 (a loss report covers
 *	exactly the gap), the size and the contents that sequence number
 *	has.  With WINDOW (reliable mode) nothing may be lost.  Ends with
 *	"received R lost L bad B naks N duplicates D gaps G ms T datagrams
 *	DG malformed M publishers P first F" (T: from the first message to
 *	the last; DG, M, P: the group's counters, and F: ms from "joined"
 *	to the first message, for the log of a failure); exit 0 when all
 *	held.
 *
 *   mc_peer pub GROUP BIND COUNT WINDOW NSUBS STOPFILE
 *	publishes COUNT messages of mixed sizes (8 B .. 64 KiB: fragmented
 *	ones too); in reliable mode it first waits until it has heard the
 *	status messages of NSUBS subscribers, in the default mode until it
 *	has sent 10 heartbeats (a subscriber that missed message 0 still
 *	starts there).  Then it stays in the group (repairs) until STOPFILE
 *	exists, and ends with "repairs R unicast U multicast M naks N
 *	heartbeats H datagrams DG".
 *	Exit 0 when every publish completed once and with success.
 *
 * MC_PEER_MIX=small (both roles): a market-data-like mix instead, mostly
 * small: 90% 8 .. 255 B, 9% 256 B .. 4 KiB, 1% 4 .. 20 KiB, 0.1% 64 KiB
 * (about 500 B on average).
 *
 * Deadlines are generous (minutes): the test, not this program, decides
 * what is too slow; SIGTERM ends either role at once.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmamsg.h>

#define MAXMSG (64u << 10)

static int small_mix; /* MC_PEER_MIX=small */

/* msg_size -- the size of message seq: 8 B .. 64 KiB, fragmented often
 * (or mostly small) */
static size_t msg_size(uint64_t seq)
{
	/* 4065 .. 4096: one bare datagram each (lib/proto.h) */
	static const size_t sz[] = {8,	  64,	200, 1000, 4063,  4064, 4065,
				    4096, 9000, 8,   333,  20000, 8128};

	if (small_mix) {
		if (seq % 1000 == 7)
			return MAXMSG;
		if (seq % 100 == 3)
			return 4065 + (size_t)(seq * 37 % 16000);
		if (seq % 10 == 1)
			return 256 + (size_t)(seq * 13 % 3841);
		return 8 + (size_t)(seq * 7 % 248);
	}
	if (seq % 97 == 13)
		return MAXMSG;
	return sz[seq % (sizeof(sz) / sizeof(sz[0]))];
}

/* fill -- the contents of message seq */
static void fill(uint64_t seq, unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 131 + i * 7 + (i >> 8));
	if (len >= 8)
		memcpy(p, &seq, 8);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* run_until -- drive ctx until *flag or ms elapse (fd mode, no busy loop) */
static void run_until(struct rdmamsg_ctx *ctx, volatile int *flag, int ms)
{
	long long end = now_ms() + ms;
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	while (!*flag && now_ms() < end) {
		long long left = end - now_ms();

		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&pfd, 1, left > 0 ? (int)left : 0);
		rdmamsg_ctx_progress(ctx);
	}
}

struct peer {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	int joined, closed, done;
	uint64_t count;
	/* subscriber */
	uint64_t pub, next, received, lost, bad;
	long long first_ms, last_ms;
	unsigned char *buf;
	/* publisher */
	uint64_t completed, failed, order, next_done;
};

static void on_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct peer *p = arg;

	(void)g;
	p->joined = status ? -1 : 1;
	if (status)
		fprintf(stderr, "mc_peer: join: %s\n",
			rdmamsg_strerror(status));
}

static void on_message(struct rdmamsg_group *g,
		       const struct rdmamsg_group_msg *m, void *arg)
{
	struct peer *p = arg;

	(void)g;
	if (!p->pub)
		p->pub = m->publisher;
	if (m->publisher != p->pub || m->seq != p->next ||
	    m->len != msg_size(m->seq)) {
		if (p->bad++ < 5)
			fprintf(stderr,
				"mc_peer: message seq %llu (expected %llu), "
				"%zu B\n",
				(unsigned long long)m->seq,
				(unsigned long long)p->next, m->len);
	} else {
		fill(m->seq, p->buf, m->len);
		if (memcmp(p->buf, m->data, m->len) && p->bad++ < 5)
			fprintf(stderr, "mc_peer: message %llu: bad contents\n",
				(unsigned long long)m->seq);
	}
	p->next = m->seq + 1;
	p->received++;
	p->done = p->received + p->lost >= p->count;
	if (!p->first_ms)
		p->first_ms = now_ms();
	if (p->done)
		p->last_ms = now_ms();
}

static void on_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		    uint64_t count, void *arg)
{
	struct peer *p = arg;

	(void)g;
	if (!p->pub)
		p->pub = pub;
	if (pub != p->pub || first != p->next || !count)
		p->bad++;
	if (p->lost < 1000)
		fprintf(stderr, "mc_peer: lost %llu from %llu\n",
			(unsigned long long)count, (unsigned long long)first);
	p->next = first + count;
	p->lost += count;
	p->done = p->received + p->lost >= p->count;
	if (!p->first_ms)
		p->first_ms = now_ms();
	if (p->done)
		p->last_ms = now_ms();
}

static void on_publish(struct rdmamsg_group *g, void *op_ctx, int status,
		       void *arg)
{
	struct peer *p = arg;

	(void)g;
	if ((uint64_t)(uintptr_t)op_ctx != p->next_done)
		p->order++;
	p->next_done = (uint64_t)(uintptr_t)op_ctx + 1;
	if (status)
		p->failed++;
	p->completed++;
	p->done = p->completed >= p->count;
}

static void on_closed(struct rdmamsg_group *g, void *arg)
{
	struct peer *p = arg;

	(void)g;
	p->closed = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: mc_peer sub GROUP BIND COUNT WINDOW\n"
			"       mc_peer pub GROUP BIND COUNT WINDOW NSUBS "
			"STOPFILE\n");
	return 2;
}

/* number -- a decimal argument, or -1 */
static long long number(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return -1;
	return v;
}

static int subscribe(struct peer *p, uint32_t window)
{
	struct rdmamsg_group_stats st;
	uint64_t seen = 0;
	long long idle = now_ms(), joined = idle;

	printf("joined\n");
	fflush(stdout);
	/* until all is accounted for, or nothing new for 120 s */
	while (!p->done && now_ms() - idle < 120000) {
		run_until(p->ctx, &p->done, 1000);
		if (p->received + p->lost != seen) {
			seen = p->received + p->lost;
			idle = now_ms();
		}
	}
	memset(&st, 0, sizeof(st));
	rdmamsg_group_query(p->g, &st);
	printf("received %llu lost %llu bad %llu naks %llu duplicates %llu "
	       "gaps %llu ms %lld datagrams %llu malformed %llu publishers "
	       "%llu first %lld\n",
	       (unsigned long long)p->received, (unsigned long long)p->lost,
	       (unsigned long long)p->bad, (unsigned long long)st.naks_sent,
	       (unsigned long long)st.duplicates, (unsigned long long)st.gaps,
	       p->last_ms - p->first_ms,
	       (unsigned long long)st.datagrams_received,
	       (unsigned long long)st.malformed,
	       (unsigned long long)st.publishers,
	       p->first_ms ? p->first_ms - joined : -1);
	fflush(stdout);
	return !p->done || p->bad || (window && p->lost) ||
	       st.msgs_received != p->received;
}

static int publish(struct peer *p, uint32_t window, uint64_t nsubs,
		   const char *stop)
{
	struct rdmamsg_group_stats st;
	unsigned char *buf = malloc(MAXMSG);
	volatile int never = 0;
	long long end;
	uint64_t i;
	int ret;

	if (!buf)
		return 1;
	if (!window) {
		/* subscribers learn of us from a heartbeat naming message 0
		 * (10 of them: on a lossy link one gets through) */
		end = now_ms() + 60000;
		do {
			run_until(p->ctx, &never, 10);
			rdmamsg_group_query(p->g, &st);
		} while (st.heartbeats_sent < 10 && now_ms() < end);
	} else {
		/* the subscribers it waits for, heard (60 s at most) */
		end = now_ms() + 60000;
		do {
			run_until(p->ctx, &never, 10);
			rdmamsg_group_query(p->g, &st);
		} while (st.receivers < nsubs && now_ms() < end);
		if (st.receivers < nsubs) {
			fprintf(stderr,
				"mc_peer: heard %llu of %llu subscribers\n",
				(unsigned long long)st.receivers,
				(unsigned long long)nsubs);
			free(buf);
			return 1;
		}
	}
	printf("publishing\n");
	fflush(stdout);
	for (i = 0; i < p->count;) {
		size_t len = msg_size(i);

		fill(i, buf, len);
		ret = rdmamsg_group_publish(p->g, buf, len,
					    (void *)(uintptr_t)i);
		if (ret == -EAGAIN) {
			run_until(p->ctx, &never, 1);
			continue;
		}
		if (ret) {
			fprintf(stderr, "mc_peer: publish %llu: %s\n",
				(unsigned long long)i, rdmamsg_strerror(ret));
			free(buf);
			return 1;
		}
		i++;
	}
	free(buf);
	run_until(p->ctx, &p->done, 600000);
	printf("published %llu, completed %llu, failed %llu\n",
	       (unsigned long long)p->count, (unsigned long long)p->completed,
	       (unsigned long long)p->failed);
	fflush(stdout);
	/* stay for repairs until the test says all subscribers are done */
	end = now_ms() + 600000;
	while (access(stop, F_OK) && now_ms() < end)
		run_until(p->ctx, &never, 20);
	rdmamsg_group_query(p->g, &st);
	printf("repairs %llu unicast %llu multicast %llu naks %llu "
	       "heartbeats %llu datagrams %llu\n",
	       (unsigned long long)st.repairs,
	       (unsigned long long)st.repairs_unicast,
	       (unsigned long long)st.repairs_multicast,
	       (unsigned long long)st.naks_received,
	       (unsigned long long)st.heartbeats_sent,
	       (unsigned long long)st.datagrams_sent);
	fflush(stdout);
	return p->completed != p->count || p->failed || p->order;
}

int main(int argc, char **argv)
{
	static const struct rdmamsg_group_cbs cbs = {.on_join = on_join,
						     .on_message = on_message,
						     .on_loss = on_loss,
						     .on_publish = on_publish};
	struct rdmamsg_group_attr *a = NULL;
	struct peer p;
	long long count, window, nsubs = 0;
	int sub, rc;

	if (argc < 6)
		return usage();
	sub = !strcmp(argv[1], "sub");
	if ((!sub && strcmp(argv[1], "pub")) || argc != (sub ? 6 : 8))
		return usage();
	count = number(argv[4]);
	window = number(argv[5]);
	if (!sub)
		nsubs = number(argv[6]);
	if (count <= 0 || window < 0 || window > 65536 || nsubs < 0)
		return usage();
	small_mix = getenv("MC_PEER_MIX") &&
		    !strcmp(getenv("MC_PEER_MIX"), "small");
	memset(&p, 0, sizeof(p));
	p.count = (uint64_t)count;
	p.buf = malloc(MAXMSG);
	if (!p.buf)
		return 1;
	rc = rdmamsg_ctx_create(NULL, &p.ctx);
	if (rc) {
		fprintf(stderr, "mc_peer: no context: %s\n",
			rdmamsg_strerror(rc));
		return 1;
	}
	if (rdmamsg_group_attr_new(&a) ||
	    rdmamsg_group_attr_set_role(a, sub ? RDMAMSG_GROUP_SUBSCRIBER
					       : RDMAMSG_GROUP_PUBLISHER) ||
	    rdmamsg_group_attr_set_bind_addr(a, argv[3]) ||
	    rdmamsg_group_attr_set_max_msg_size(a, MAXMSG) ||
	    rdmamsg_group_attr_set_recv_depth(a, 4096) ||
	    rdmamsg_group_attr_set_heartbeat(a, 20) ||
	    rdmamsg_group_attr_set_reliable(a, (uint32_t)window)) {
		fprintf(stderr, "mc_peer: bad group attributes\n");
		return 1;
	}
	rc = rdmamsg_group_join(p.ctx, argv[2], a, &cbs, &p, &p.g);
	rdmamsg_group_attr_delete(&a);
	if (rc) {
		fprintf(stderr, "mc_peer: join %s: %s\n", argv[2],
			rdmamsg_strerror(rc));
		return 1;
	}
	run_until(p.ctx, &p.joined, 60000);
	if (p.joined != 1) {
		fprintf(stderr, "mc_peer: not joined\n");
		return 1;
	}
	rc = sub ? subscribe(&p, (uint32_t)window)
		 : publish(&p, (uint32_t)window, (uint64_t)nsubs, argv[7]);
	if (rdmamsg_group_close(p.g, on_closed) == 0)
		run_until(p.ctx, &p.closed, 60000);
	if (!p.closed)
		rc = 1;
	if (rdmamsg_ctx_destroy(&p.ctx))
		rc = 1;
	free(p.buf);
	return rc;
}
