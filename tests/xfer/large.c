/* SPDX-License-Identifier: MIT */
/*
 * large.c -- large messages by rendezvous between processes.
 *
 * A: 1 GiB client -> server, zero-copy from a registration
 *    (rdmamsg_send_mr), landing in the library's memory; checksummed.
 * B: 1 GiB server -> client, copied once (rdmamsg_send, by rendezvous above
 *    its threshold), landing where the client's allocation callback puts
 *    it (above the maximum message it is a large message); checksummed.
 * C: on a second connection whose large maximum is small: several large
 *    messages in flight at once with a stream of small messages echoed
 *    meanwhile (they keep flowing), receive memory bounded by the large
 *    maximum, and a message above it refused (-EMSGSIZE at the sender).
 * D: closing with large messages in flight: each on_send once, with
 *    -ECANCELED; the receiver frees what it was pulling.
 * Sizes shrink under valgrind (tap_small) and AddressSanitizer.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

static size_t big;	  /* A and B */
static size_t cmax, cmsg; /* C: large maximum, message size */
#define CN	6	  /* C: large messages */
#define SMALL_N 200	  /* C: small messages at least */

/* fill -- a pattern that differs per seed and per word */
static void fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	size_t i, n = len / 8;

	for (i = 0; i < n; i++)
		w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
	for (i = n * 8; i < len; i++)
		((char *)p)[i] = (char)(i ^ seed);
}

/* checksum -- FNV-style over 64-bit words */
static uint64_t checksum(const void *p, size_t len)
{
	const uint64_t *w = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i, n = len / 8;

	for (i = 0; i < n; i++)
		h = (h ^ w[i]) * 0x100000001b3ull;
	for (i = n * 8; i < len; i++)
		h = (h ^ (unsigned char)((const char *)p)[i]) *
		    0x100000001b3ull;
	return h ^ len;
}

/* pattern_sum -- checksum(fill(len, seed)) without the memory */
static uint64_t pattern_sum(size_t len, uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i, n = len / 8;

	for (i = 0; i < n; i++)
		h = (h ^ ((i * 0x9E3779B97F4A7C15ull) ^ seed)) *
		    0x100000001b3ull;
	for (i = n * 8; i < len; i++)
		h = (h ^ (unsigned char)(char)(i ^ seed)) * 0x100000001b3ull;
	return h ^ len;
}

struct reply {
	uint64_t kind, len, sum;
};

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep_attr *attr_a, *attr_c;
	int nconn, nclosed, lclosed, failures;
	size_t live, peak; /* C: receive memory the callback handed out */
	int large_c;
};

struct cbuf {
	struct rdmamsg_mr *mr;
	void *mem;
	size_t len;
};

static struct srv S;

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	S.nclosed++;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_closed);
}

/* srv_alloc_c -- C: count the memory in flight (the bound under test) */
static struct cbuf cbufs[CN + 2];
static int srv_alloc_c(struct rdmamsg_ep *ep, size_t len, void **data,
		       struct rdmamsg_mr **mr, void *arg)
{
	int i;

	(void)ep;
	(void)arg;
	for (i = 0; i < CN + 2; i++)
		if (!cbufs[i].mem)
			break;
	if (i == CN + 2)
		return -ENOMEM;
	cbufs[i].mem = malloc(len);
	if (!cbufs[i].mem ||
	    rdmamsg_mr_reg(S.ctx, cbufs[i].mem, len, 0, &cbufs[i].mr)) {
		free(cbufs[i].mem);
		cbufs[i].mem = NULL;
		return -ENOMEM;
	}
	cbufs[i].len = len;
	S.live += len;
	if (S.live > S.peak)
		S.peak = S.live;
	*data = cbufs[i].mem;
	*mr = cbufs[i].mr;
	return 0;
}

/* srv_recv -- checksum large messages, echo small ones, run phase B */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct reply r;
	int i, ret;

	(void)imm;
	(void)arg;
	if (flags & RDMAMSG_RECV_LARGE) {
		r.kind = 1;
		r.len = len;
		r.sum = checksum(data, len);
		if (rdmamsg_send(ep, &r, sizeof(r), NULL))
			S.failures++;
		/* C: our callback's memory is ours to free */
		for (i = 0; i < CN + 2; i++)
			if (cbufs[i].mem == data) {
				rdmamsg_mr_dereg(&cbufs[i].mr);
				free(cbufs[i].mem);
				cbufs[i].mem = NULL;
				S.live -= cbufs[i].len;
				S.large_c++;
			}
		return;
	}
	if (len == 1 && *(char *)data == 'B') {
		/* B: one copy, so the buffer may go at once */
		char *p = malloc(big);

		if (!p) {
			S.failures++;
			return;
		}
		fill(p, big, 0xB);
		ret = rdmamsg_send(ep, p, big, (void *)(uintptr_t)0xB);
		if (ret) {
			printf("# server: sending B: %d\n", ret);
			S.failures++;
		}
		free(p);
		return;
	}
	if (len == 1 && *(char *)data == 'P') {
		/* C: report the peak of receive memory */
		r.kind = 3;
		r.len = S.peak;
		r.sum = (uint64_t)S.large_c;
		if (rdmamsg_send(ep, &r, sizeof(r), NULL))
			S.failures++;
		return;
	}
	if (rdmamsg_send(ep, data, len, NULL)) /* echo */
		S.failures++;
}

/* srv_sent -- B's completion must be a success (the others may be
 * cancelled by a close) */
static void srv_sent(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	(void)ep;
	(void)arg;
	if (op_ctx == (void *)(uintptr_t)0xB && status) {
		printf("# server: B completed with %d\n", status);
		S.failures++;
	}
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_send = srv_sent,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep *ep;
	int c = len == 1 && *(const char *)pdata == 'C';

	(void)lst;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, c ? S.attr_c : S.attr_a, &srv_cbs,
				    NULL, &ep))
		S.failures++;
	S.nconn++;
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	S.lclosed = 1;
}

static int server(int wfd, void *arg)
{
	int done = 0;

	(void)arg;
	if (rdmamsg_ctx_create(NULL, &S.ctx))
		return 10;
	rdmamsg_ep_attr_new(&S.attr_a);
	rdmamsg_ep_attr_new(&S.attr_c);
	/* a side fills, copies and registers up to 1 GiB inside a callback,
	 * its loop stalled for seconds (far longer on a loaded machine): the
	 * peer's silence is not what this test is about */
	if (rdmamsg_ep_attr_set_peer_timeout(S.attr_a, 300000) ||
	    rdmamsg_ep_attr_set_max_large_size(S.attr_a, big) ||
	    rdmamsg_ep_attr_set_max_large_size(S.attr_c, cmax) ||
	    rdmamsg_ep_attr_set_recv_alloc(S.attr_c, srv_alloc_c))
		return 11;
	if (test_listen_report(S.ctx, srv_req, NULL, &S.lst, wfd))
		return 12;
	while (!done) {
		test_run_until(S.ctx, &done, 100);
		done = S.nconn == 3 && S.nclosed == 3;
	}
	rdmamsg_listener_close(S.lst, lst_closed);
	test_run_until(S.ctx, &S.lclosed, 60000);
	rdmamsg_ep_attr_delete(&S.attr_a);
	rdmamsg_ep_attr_delete(&S.attr_c);
	if (rdmamsg_ctx_destroy(&S.ctx)) {
		size_t reg = 0, use = 0;

		rdmamsg_ctx_query_pool(S.ctx, &reg, &use);
		printf("# server: context busy, pool in use %zu\n", use);
		return 13;
	}
	return S.failures ? 14 : 0;
}

/* ---- client -------------------------------------------------------- */

static struct rdmamsg_ctx *ctx;
static struct rdmamsg_ep *ep_a, *ep_c, *ep_d;
static int d_calls[3], d_status[3], connected_d;
static int connected_a, connected_c, status_a, status_c;
static struct reply last;
static int replies, sends_done, send_status[CN + 4], send_errors;
static void *b_mem;		   /* B: where the callback put the message */
static int alloc_calls, alloc_err; /* the allocation callback's */
static struct rdmamsg_mr *b_mr;
static size_t b_len;
static int b_got, b_flags_ok, closed;
static uint64_t b_sum;
static long long small_echoes, small_sent, echoes_during, max_gap_ms,
	last_echo_ms;
static int large_pending, peak_got;
static struct reply peak;

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (ep == ep_a) {
		connected_a = 1;
		status_a = status;
	} else if (ep == ep_d) {
		connected_d = 1;
	} else {
		connected_c = 1;
		status_c = status;
	}
}

/* small_more -- C: keep 16 small messages in flight */
static void small_more(void)
{
	while (small_sent - small_echoes < 16) {
		uint64_t v = (uint64_t)small_sent;

		if (rdmamsg_send(ep_c, &v, sizeof(v), NULL))
			return;
		small_sent++;
	}
}

static int cli_alloc(struct rdmamsg_ep *ep, size_t len, void **data,
		     struct rdmamsg_mr **mr, void *arg)
{
	(void)ep;
	(void)arg;
	int ret;

	alloc_calls++;
	if (b_mem) {
		alloc_err = -EBUSY;
		return -EBUSY;
	}
	b_mem = malloc(len);
	if (!b_mem) {
		alloc_err = -ENOMEM;
		return -ENOMEM;
	}
	ret = rdmamsg_mr_reg(ctx, b_mem, len, 0, &b_mr);
	if (ret) {
		alloc_err = ret;
		free(b_mem);
		b_mem = NULL;
		return -ENOMEM;
	}
	*data = b_mem;
	*mr = b_mr;
	return 0;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)imm;
	(void)arg;
	if (flags & RDMAMSG_RECV_LARGE) {
		/* B: the data is in our own buffer, which we keep */
		b_got = 1;
		b_len = len;
		b_flags_ok = data == b_mem;
		b_sum = checksum(data, len);
		return;
	}
	if (len == sizeof(struct reply)) {
		memcpy(&last, data, sizeof(last));
		if (last.kind == 3) {
			peak = last;
			peak_got = 1;
		} else {
			replies++;
		}
		return;
	}
	if (ep == ep_c && len == 8) {
		long long now = test_now_ms();

		small_echoes++;
		if (large_pending) {
			echoes_during++;
			if (last_echo_ms && now - last_echo_ms > max_gap_ms)
				max_gap_ms = now - last_echo_ms;
			last_echo_ms = now;
		}
		small_more();
	}
}

static void cli_send(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	int i = (int)(uintptr_t)op_ctx;

	(void)arg;
	if (ep == ep_d) {
		if (i >= 1 && i <= 2) {
			d_calls[i]++;
			d_status[i] = status;
		}
		return;
	}
	if (i <= 0)
		return; /* small ones */
	if (i < CN + 4)
		send_status[i] = status;
	if (status && i != CN + 3)
		send_errors++;
	sends_done++;
	if (i > 100)
		large_pending--;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	closed++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_send = cli_send,
};

static void run(volatile int *flag, int ms)
{
	test_run_until(ctx, flag, ms);
}

int main(void)
{
	struct rdmamsg_ep_attr *attr;
	struct rdmamsg_mr *mr = NULL;
	char addr[64];
	void *mem;
	uint64_t want;
	long long t0, t1;
	int rfd, i, flag;
	pid_t pid;

	test_setup("large");
	big = (size_t)1 << 30;
	cmax = (size_t)32 << 20;
	cmsg = (size_t)24 << 20;
	if (tap_small()) {
		big = (size_t)32 << 20;
		cmax = (size_t)4 << 20;
		cmsg = (size_t)3 << 20;
		diag("valgrind: 32 MiB instead of 1 GiB each way");
	} else if (ASAN) {
		big = (size_t)256 << 20;
		diag("AddressSanitizer: 256 MiB instead of 1 GiB each way");
	}
	ctx = test_ctx();
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));

	rdmamsg_ep_attr_new(&attr);
	is_int(rdmamsg_ep_attr_set_max_large_size(attr, 100), -EINVAL,
	       "large maximum below 4096: -EINVAL");
	is_int(rdmamsg_ep_attr_set_max_large_size(attr, (size_t)1 << 41),
	       -EINVAL, "large maximum above 2^40: -EINVAL");
	is_int(rdmamsg_ep_attr_set_peer_timeout(attr, 300000), 0,
	       "peer timeout 300 s (see the server's)");
	is_int(rdmamsg_ep_attr_set_max_large_size(attr, big), 0,
	       "large maximum");
	is_int(rdmamsg_ep_attr_set_recv_alloc(attr, cli_alloc), 0,
	       "allocation callback");
	is_int(rdmamsg_connect(ctx, addr, attr, &cli_cbs, NULL, &ep_a), 0,
	       "connect A");
	run(&connected_a, 60000);
	is_int(status_a, 0, "connected");

	/* A: zero copy, client -> server */
	mem = malloc(big);
	if (!mem)
		bail_out("no memory for %zu bytes", big);
	fill(mem, big, 0xA);
	want = pattern_sum(big, 0xA);
	is_int(rdmamsg_mr_reg(ctx, mem, big, RDMAMSG_ACCESS_REMOTE_READ, &mr),
	       0, "register the source");
	is_int(rdmamsg_send_mr(ep_a, mr, 1, big, NULL), -ERANGE,
	       "send_mr past the region: -ERANGE");
	is_int(rdmamsg_send_mr(NULL, mr, 0, big, NULL), -EINVAL,
	       "send_mr(NULL): -EINVAL");
	t0 = test_now_ms();
	is_int(rdmamsg_send_mr(ep_a, mr, 0, big, (void *)(uintptr_t)1), 0,
	       "send_mr");
	is_int(rdmamsg_mr_dereg(&mr), -EBUSY, "source busy until on_send");
	flag = 0;
	while (!(sends_done == 1 && replies == 1) &&
	       test_now_ms() - t0 < 240000)
		run(&flag, 20);
	t1 = test_now_ms();
	is_int(send_status[1], 0, "on_send(0): the receiver has the data");
	is_int(last.len, big, "receiver got the whole length");
	ok(last.sum == want, "checksum matches (client -> server)");
	diag("A: %zu MiB zero-copy in %lld ms (send to checksum reply)",
	     big >> 20, t1 - t0);
	is_int(rdmamsg_mr_dereg(&mr), 0, "source released");
	free(mem);

	/* B: server -> client, copied once, into our callback's memory */
	t0 = test_now_ms();
	is_int(rdmamsg_send(ep_a, "B", 1, NULL), 0, "ask for B");
	run(&b_got, 240000);
	t1 = test_now_ms();
	ok(b_got && b_len == big, "received %zu bytes", b_len);
	if (!b_got)
		diag("allocation callback: %d calls, last error %d",
		     alloc_calls, alloc_err);
	ok(b_flags_ok, "into the buffer the allocation callback chose");
	ok(b_sum == pattern_sum(big, 0xB),
	   "checksum matches (server -> client)");
	diag("B: %zu MiB with one copy, ask to delivery %lld ms (includes the "
	     "server's fill)",
	     big >> 20, t1 - t0);
	rdmamsg_mr_dereg(&b_mr);
	free(b_mem);
	b_mem = NULL;

	/* C: a second connection whose peer bounds large receives */
	rdmamsg_ep_attr_set_private_data(attr, "C", 1);
	is_int(rdmamsg_connect(ctx, addr, attr, &cli_cbs, NULL, &ep_c), 0,
	       "connect C");
	run(&connected_c, 60000);
	is_int(status_c, 0, "connected");
	mem = malloc(cmax + 4096);
	fill(mem, cmax + 4096, 0xC);
	is_int(rdmamsg_mr_reg(ctx, mem, cmax + 4096, RDMAMSG_ACCESS_REMOTE_READ,
			      &mr),
	       0, "register C's source");
	sends_done = 0;
	replies = 0;
	small_more();
	t0 = test_now_ms();
	last_echo_ms = 0;
	for (i = 0; i < CN; i++) {
		large_pending++;
		if (rdmamsg_send_mr(ep_c, mr, (size_t)i * 4096, cmsg,
				    (void *)(uintptr_t)(101 + i)))
			large_pending--;
	}
	is_int(large_pending, CN, "several large messages in flight at once");
	is_int(rdmamsg_send_mr(ep_c, mr, 0, cmax + 4096,
			       (void *)(uintptr_t)(CN + 3)),
	       0, "one above the peer's large maximum (accepted locally)");
	flag = 0;
	while ((sends_done < CN + 1 || replies < CN ||
		small_echoes < SMALL_N) &&
	       test_now_ms() - t0 < 240000)
		run(&flag, 20);
	t1 = test_now_ms();
	is_int(send_errors, 0, "every large message completed");
	is_int(send_status[CN + 3], -EMSGSIZE,
	       "the oversize one: on_send(-EMSGSIZE) from the receiver");
	is_int(replies, CN, "the receiver checksummed all of them");
	ok(echoes_during >= 10,
	   "small messages kept flowing during the large ones (%lld echoes, "
	   "largest gap %lld ms)",
	   echoes_during, max_gap_ms);
	/* a loose bound: echoes_during shows the interleaving; a gap as long
	 * as the transfers would mean small messages waited behind them */
	ok(max_gap_ms < 20000, "no small message waited behind the large ones");
	diag("C: %d x %zu MiB in %lld ms, %lld small echoes meanwhile", CN,
	     cmsg >> 20, t1 - t0, echoes_during);
	/* stop the small stream, then ask for the peak */
	small_sent = small_echoes + 1000000;
	is_int(rdmamsg_send(ep_c, "P", 1, NULL), 0, "ask for the peak");
	run(&peak_got, 60000);
	ok(peak.len <= cmax && peak.len >= cmsg,
	   "receive memory bounded by the large maximum (peak %llu MiB, "
	   "limit %zu MiB)",
	   (unsigned long long)(peak.len >> 20), cmax >> 20);
	is_int(peak.sum, CN, "all went through the allocation callback");
	is_int(rdmamsg_mr_dereg(&mr), 0, "C's source released");
	free(mem);

	/* D: close with large messages in flight */
	rdmamsg_ep_attr_set_private_data(attr, "D", 1);
	is_int(rdmamsg_connect(ctx, addr, attr, &cli_cbs, NULL, &ep_d), 0,
	       "connect D");
	run(&connected_d, 60000);
	mem = malloc(cmsg);
	fill(mem, cmsg, 0xD);
	is_int(rdmamsg_send_large(ep_d, mem, cmsg, (void *)(uintptr_t)1), 0,
	       "large send (copied)");
	is_int(rdmamsg_send_large(ep_d, mem, cmsg, (void *)(uintptr_t)2), 0,
	       "another");
	free(mem);     /* copied: ours again at once */
	run(&flag, 5); /* let the receiver start pulling */
	is_int(rdmamsg_ep_close(ep_d, cli_closed), 0, "close D meanwhile");
	t1 = test_now_ms();
	while (closed < 1 && test_now_ms() - t1 < 10000)
		run(&flag, 20);
	is_int(closed, 1, "D closed");
	ok(d_calls[1] == 1 && d_calls[2] == 1,
	   "each large send completed exactly once");
	ok((d_status[1] == 0 || d_status[1] == -ECANCELED) &&
		   (d_status[2] == 0 || d_status[2] == -ECANCELED),
	   "with 0 (pulled in time) or -ECANCELED (%d, %d)", d_status[1],
	   d_status[2]);

	rdmamsg_ep_attr_delete(&attr);
	rdmamsg_ep_close(ep_a, cli_closed);
	rdmamsg_ep_close(ep_c, cli_closed);
	while (closed < 3 && test_now_ms() - t1 < 10000)
		run(&flag, 20);
	is_int(closed, 3, "closed");
	is_int(test_wait_child(pid), 0, "server checks pass");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
