/* SPDX-License-Identifier: MIT */
/*
 * mcast.c -- a market-data-like feed over an rdmamsg multicast group.
 *
 *   mcast -p [-g GROUP] [-n COUNT] [-r RATE] [-s SIZE] [-R WINDOW]
 *   mcast -l [-g GROUP] [-n COUNT] [-t SECONDS] [-R WINDOW]
 *
 * -R: reliable mode with that window (publisher and subscribers alike).
 *
 * The publisher sends COUNT ticks (a symbol, a price, a quantity, a time
 * stamp, padded to SIZE bytes) at up to RATE messages per second (0: as
 * fast as the send queue allows).  The subscriber prints, every second,
 * the message rate, the bytes, the messages reported lost and the gaps,
 * and a summary when it has accounted for COUNT messages (received +
 * lost) or after SECONDS.  Exit status 0 when every tick it received was
 * well formed and in order.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmamsg.h>

struct tick {
	char symbol[8];
	uint64_t seq;
	int64_t price; /* 1e-4 units */
	uint32_t qty;
	uint32_t check; /* seq ^ qty: a cheap consistency check */
	uint64_t ns;	/* publisher's CLOCK_MONOTONIC */
};

static const char *symbols[] = {"ACME", "INIT", "ZETA", "OMNI", "QBIT"};

struct app {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	int joined, closed, bad;
	uint64_t count, received, lost, gaps, bytes, next;
	uint64_t last_rx, last_lost, last_bytes;
	uint64_t lat_sum, lat_max; /* ns, publish to delivery (one host) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* run -- drive the context for at most ms (0: one pass) */
static void run(struct app *a, int ms)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(a->ctx, &pfd.fd);
	pfd.events = POLLIN;
	if (ms && rdmamsg_ctx_arm(a->ctx) == 0)
		poll(&pfd, 1, ms);
	rdmamsg_ctx_progress(a->ctx);
}

static void on_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct app *a = arg;

	(void)g;
	if (status)
		fprintf(stderr, "join failed: %s\n", rdmamsg_strerror(status));
	a->joined = status ? -1 : 1;
}

static void on_message(struct rdmamsg_group *g,
		       const struct rdmamsg_group_msg *m, void *arg)
{
	struct app *a = arg;
	struct tick t;

	(void)g;
	if (m->len < sizeof(t)) {
		a->bad++;
		return;
	}
	memcpy(&t, m->data, sizeof(t));
	if (t.seq != m->seq || t.check != ((uint32_t)t.seq ^ t.qty) ||
	    (a->received && m->seq < a->next))
		a->bad++;
	a->next = m->seq + 1;
	a->received++;
	a->bytes += m->len;
	if (now_ns() >= t.ns) {
		a->lat_sum += now_ns() - t.ns;
		if (now_ns() - t.ns > a->lat_max)
			a->lat_max = now_ns() - t.ns;
	}
}

static void on_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		    uint64_t count, void *arg)
{
	struct app *a = arg;

	(void)g;
	printf("lost %" PRIu64 " message(s) %" PRIu64 "..%" PRIu64
	       " of publisher %016" PRIx64 "\n",
	       count, first, first + count - 1, pub);
	a->lost += count;
	a->gaps++;
	a->next = first + count;
}

/* on_closed -- the group's last counters (it may still be queried) */
static void on_closed(struct rdmamsg_group *g, void *arg)
{
	struct rdmamsg_group_stats st;
	struct app *a = arg;

	if (!rdmamsg_group_query(g, &st))
		printf("counters: %" PRIu64 " datagrams sent, %" PRIu64
		       " received, %" PRIu64 " duplicates, %" PRIu64
		       " fragments of lost messages, %" PRIu64
		       " NAKs sent, %" PRIu64 " received, repairs %" PRIu64
		       " (%" PRIu64 " unicast, %" PRIu64 " multicast), %" PRIu64
		       " flow-control stalls, %" PRIu64
		       " published during repairs\n",
		       st.datagrams_sent, st.datagrams_received, st.duplicates,
		       st.lost_fragments, st.naks_sent, st.naks_received,
		       st.repairs, st.repairs_unicast, st.repairs_multicast,
		       st.flow_control_stalls, st.published_in_repair);
	a->closed = 1;
}

static int publisher(struct app *a, double rate, size_t size)
{
	uint64_t start = now_ns(), i = 0;
	char *buf = calloc(1, size);
	struct tick t;
	int ret;

	if (!buf)
		return 1;
	while (i < a->count) {
		if (rate > 0 &&
		    (double)(now_ns() - start) * rate / 1e9 < (double)i) {
			run(a, 0);
			continue;
		}
		memset(&t, 0, sizeof(t));
		strcpy(t.symbol, symbols[i % 5]);
		t.seq = i;
		t.price = 1000000 + (int64_t)(i % 977) * 25;
		t.qty = (uint32_t)(100 + i % 50);
		t.check = (uint32_t)i ^ t.qty;
		t.ns = now_ns();
		memcpy(buf, &t, sizeof(t));
		ret = rdmamsg_group_publish(a->g, buf, size, NULL);
		if (ret == -EAGAIN) {
			run(a, 1);
			continue;
		}
		if (ret) {
			fprintf(stderr, "publish: %s\n", rdmamsg_strerror(ret));
			free(buf);
			return 1;
		}
		i++;
	}
	printf("published %" PRIu64 " messages of %zu bytes in %.3f s\n", i,
	       size, (double)(now_ns() - start) / 1e9);
	free(buf);
	return 0;
}

static int subscriber(struct app *a, int seconds)
{
	uint64_t start = now_ns(), tick = start;
	uint64_t end = start + (uint64_t)seconds * 1000000000ull;

	while (a->received + a->lost < a->count && now_ns() < end) {
		run(a, 100);
		if (now_ns() - tick >= 1000000000ull) {
			printf("%" PRIu64 " msg/s, %.1f MB/s, %" PRIu64
			       " lost, %" PRIu64 " gaps\n",
			       a->received - a->last_rx,
			       (double)(a->bytes - a->last_bytes) / 1e6,
			       a->lost - a->last_lost, a->gaps);
			a->last_rx = a->received;
			a->last_lost = a->lost;
			a->last_bytes = a->bytes;
			tick = now_ns();
		}
	}
	printf("received %" PRIu64 ", lost %" PRIu64 " in %" PRIu64
	       " gaps, %d bad, latency us avg %.1f max %.1f\n",
	       a->received, a->lost, a->gaps, a->bad,
	       a->received ? (double)a->lat_sum / (double)a->received / 1e3
			   : 0.0,
	       (double)a->lat_max / 1e3);
	return a->bad || a->received + a->lost < a->count;
}

int main(int argc, char **argv)
{
	struct rdmamsg_group_cbs cbs = {.on_join = on_join,
					.on_message = on_message,
					.on_loss = on_loss};
	struct rdmamsg_group_attr *attr;
	const char *group = "239.1.2.3";
	struct app a;
	int pub = -1, c, seconds = 30, rc, i;
	double rate = 0;
	uint32_t window = 0;
	size_t size = sizeof(struct tick);

	memset(&a, 0, sizeof(a));
	a.count = 100000;
	while ((c = getopt(argc, argv, "plg:n:r:s:t:R:")) != -1) {
		switch (c) {
		case 'p':
			pub = 1;
			break;
		case 'l':
			pub = 0;
			break;
		case 'g':
			group = optarg;
			break;
		case 'n':
			a.count = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			rate = atof(optarg);
			break;
		case 's':
			size = strtoul(optarg, NULL, 10);
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		case 'R':
			window = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		default:
			pub = -1;
			optind = argc + 1;
		}
	}
	if (pub < 0 || size < sizeof(struct tick) || size > (64u << 10)) {
		fprintf(stderr,
			"usage: %s -p [-g GROUP] [-n COUNT] [-r RATE] [-s "
			"SIZE] [-R WINDOW]\n       %s -l [-g GROUP] [-n COUNT] "
			"[-t SECONDS] [-R WINDOW]\n(SIZE: %zu .. 65536)\n",
			argv[0], argv[0], sizeof(struct tick));
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = rdmamsg_ctx_create(NULL, &a.ctx);
	if (rc) {
		fprintf(stderr, "context: %s\n", rdmamsg_strerror(rc));
		return 1;
	}
	rdmamsg_group_attr_new(&attr);
	rdmamsg_group_attr_set_role(attr, pub ? RDMAMSG_GROUP_PUBLISHER
					      : RDMAMSG_GROUP_SUBSCRIBER);
	if (!pub)
		rdmamsg_group_attr_set_recv_depth(attr, 4096);
	if (rdmamsg_group_attr_set_reliable(attr, window)) {
		fprintf(stderr, "bad window %u\n", window);
		return 2;
	}
	rc = rdmamsg_group_join(a.ctx, group, attr, &cbs, &a, &a.g);
	rdmamsg_group_attr_delete(&attr);
	if (rc) {
		fprintf(stderr, "join %s: %s\n", group, rdmamsg_strerror(rc));
		rdmamsg_ctx_destroy(&a.ctx);
		return 1;
	}
	for (i = 0; i < 100 && !a.joined; i++)
		run(&a, 100);
	if (a.joined != 1) {
		rc = 1;
	} else {
		printf("%s %s\n", pub ? "publishing to" : "subscribed to",
		       group);
		rc = pub ? publisher(&a, rate, size) : subscriber(&a, seconds);
	}
	rdmamsg_group_close(a.g, on_closed);
	while (!a.closed)
		run(&a, 100);
	rdmamsg_ctx_destroy(&a.ctx);
	return rc;
}
