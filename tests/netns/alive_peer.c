/* SPDX-License-Identifier: MIT */
/*
 * alive_peer.c -- the target of one-sided work keeps a busy peer, and
 * still finds a dead one (tests/netns/alive-hosts.sh), between two hosts
 * of the namespace fabric.
 *
 *   alive_peer server BIND PORT PEER_MS SIZE
 *	exports a region of SIZE bytes, sends the export to the client and
 *	waits for its write with immediate (imm 1), which follows the
 *	client's writes of the whole region: then checks every byte.  Its
 *	peer timeout is PEER_MS; it receives nothing else while the writes
 *	drain.  Then waits for the disconnect the test causes by cutting
 *	the link.  Prints "server: region intact|N bad bytes after T ms"
 *	and "server: disconnected (STATUS) at MS" (CLOCK_REALTIME ms);
 *	exit 0 when the region came intact before any disconnect and the
 *	disconnect said -ETIMEDOUT.
 *
 *   alive_peer client HOST PORT PEER_MS SIZE CHUNK
 *	writes the server's region in CHUNK-byte RDMA writes, all posted at
 *	once (as many as the send queue takes, the rest as completions make
 *	room), then the write with immediate; prints "client: N writes ok
 *	in T ms" once each completed, then "client: done" and waits for
 *	the disconnect (the test cuts the link).  Exit 1 when an operation
 *	fails or the connection drops before "done".
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdmamsg.h"

static struct rdmamsg_ctx *ctx;

static long long now_ms(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* step -- block on the fd unless work is pending, then progress: without
 * a time limit, as an application driven by events only would (its clock
 * moves only when the library's fd wakes it: lib/ep.c) */
static void step(void)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	if (rdmamsg_ctx_arm(ctx) == 0)
		poll(&pfd, 1, -1);
	rdmamsg_ctx_progress(ctx);
}

/* pattern -- byte i of the region */
static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 8) + (i >> 16) + 1);
}

/* ---- server ---------------------------------------------------------- */

static uint8_t *region;
static size_t size;
static struct rdmamsg_mr *region_mr;
static int s_up, s_checked, s_disc, s_closed, s_bad_early, s_fail;
static int s_status;
static long long s_t0;

static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status || rdmamsg_mr_export(region_mr, ex, sizeof(ex)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL)) {
		s_fail = 1;
		return;
	}
	s_up = 1;
	s_t0 = now_ms(CLOCK_MONOTONIC);
}

static void srv_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			  void *arg)
{
	size_t i, bad = 0;

	(void)ep;
	(void)len;
	(void)arg;
	if (imm != 1) {
		s_fail = 1;
		return;
	}
	for (i = 0; i < size; i++)
		bad += region[i] != pattern(i);
	if (bad) {
		s_fail = 1;
		printf("server: %zu bad bytes after %lld ms\n", bad,
		       now_ms(CLOCK_MONOTONIC) - s_t0);
	} else {
		printf("server: region intact after %lld ms\n",
		       now_ms(CLOCK_MONOTONIC) - s_t0);
	}
	fflush(stdout);
	s_checked = 1;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	s_closed = 1;
}

static void srv_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)arg;
	s_disc = 1;
	s_status = status;
	if (!s_checked)
		s_bad_early = 1;
	printf("server: disconnected (%d: %s) at %lld, %lld ms after the "
	       "connection came up%s\n",
	       status, rdmamsg_strerror(status), now_ms(CLOCK_REALTIME),
	       now_ms(CLOCK_MONOTONIC) - s_t0,
	       s_checked ? "" : ", before the client's writes were done");
	fflush(stdout);
	if (rdmamsg_ep_close(ep, srv_closed))
		s_fail = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_disconnect = srv_disconnect,
};

static struct rdmamsg_ep_attr *srv_attr;
static int accepted, lclosed;

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	lclosed = 1;
}

static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (accepted) {
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
		return;
	}
	accepted = 1;
	if (rdmamsg_conn_req_accept(req, srv_attr, &srv_cbs, NULL, &ep))
		s_fail = 1;
}

static int server(const char *bind, const char *port, unsigned int peer_ms)
{
	struct rdmamsg_listener *lst;
	char addr[300];
	int ret;

	region = calloc(1, size);
	if (!region)
		return 1;
	ret = rdmamsg_mr_reg(ctx, region, size, RDMAMSG_ACCESS_REMOTE_WRITE,
			     &region_mr);
	if (ret) {
		fprintf(stderr, "alive_peer: register: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	if (rdmamsg_ep_attr_new(&srv_attr) ||
	    rdmamsg_ep_attr_set_peer_timeout(srv_attr, peer_ms) ||
	    rdmamsg_ep_attr_set_on_write_imm(srv_attr, srv_write_imm))
		return 1;
	snprintf(addr, sizeof(addr), "%s:%s", bind, port);
	ret = rdmamsg_listen(ctx, addr, on_conn_req, NULL, &lst);
	if (ret) {
		fprintf(stderr, "alive_peer: listen on %s: %s\n", addr,
			rdmamsg_strerror(ret));
		return 1;
	}
	printf("server: listening on %s\n", addr);
	fflush(stdout);
	while (!s_closed && !s_fail)
		step();
	rdmamsg_listener_close(lst, lst_closed);
	while (!lclosed || (s_disc && !s_closed))
		step();
	rdmamsg_ep_attr_delete(&srv_attr);
	return s_fail || s_bad_early || !s_checked || s_status != -ETIMEDOUT;
}

/* ---- client ---------------------------------------------------------- */

static struct rdmamsg_rmr *rmr;
static int c_up, c_fail, c_disc;
static size_t c_ok, c_posted, nops;

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status) {
		printf("client: connect: %s\n", rdmamsg_strerror(status));
		c_fail = 1;
	} else {
		c_up = 1;
	}
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (rmr || rdmamsg_rmr_import(data, len, &rmr))
		c_fail = 1;
}

static void cli_wrote(struct rdmamsg_ep *ep, int status, uint64_t value,
		      void *op_ctx)
{
	(void)ep;
	(void)value;
	(void)op_ctx;
	if (status) {
		if (!c_fail)
			printf("client: write %zu of %zu: %s\n", c_ok + 1, nops,
			       rdmamsg_strerror(status));
		c_fail = 1;
	} else {
		c_ok++;
	}
}

static void cli_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)arg;
	printf("client: disconnected (%d: %s)\n", status,
	       rdmamsg_strerror(status));
	fflush(stdout);
	c_disc = 1;
}

static int c_closed;

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	c_closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_disconnect = cli_disconnect,
};

static int client(const char *host, const char *port, unsigned int peer_ms,
		  size_t chunk)
{
	struct rdmamsg_ep_attr *attr;
	struct rdmamsg_mr *lmr;
	struct rdmamsg_ep *ep;
	uint8_t *buf;
	char addr[300];
	long long t0;
	size_t i, off;
	int ret;

	buf = malloc(size);
	if (!buf)
		return 1;
	for (i = 0; i < size; i++)
		buf[i] = pattern(i);
	if (rdmamsg_mr_reg(ctx, buf, size, 0, &lmr))
		return 1;
	if (rdmamsg_ep_attr_new(&attr) ||
	    rdmamsg_ep_attr_set_peer_timeout(attr, peer_ms))
		return 1;
	snprintf(addr, sizeof(addr), "%s:%s", host, port);
	if (rdmamsg_connect(ctx, addr, attr, &cli_cbs, NULL, &ep))
		return 1;
	rdmamsg_ep_attr_delete(&attr);
	while (!c_fail && !c_disc && !(c_up && rmr))
		step();
	if (c_fail || c_disc)
		return 1;
	nops = (size + chunk - 1) / chunk + 1;
	t0 = now_ms(CLOCK_MONOTONIC);
	while (!c_fail && !c_disc && c_ok < nops) {
		while (c_posted < nops) {
			off = c_posted * chunk;
			if (c_posted == nops - 1)
				ret = rdmamsg_write_imm(ep, lmr, 0, rmr, 0, 0,
							1, cli_wrote, NULL);
			else
				ret = rdmamsg_write(
					ep, lmr, off, rmr, off,
					size - off < chunk ? size - off : chunk,
					cli_wrote, NULL);
			if (ret == -EAGAIN)
				break;
			if (ret) {
				printf("client: post: %s\n",
				       rdmamsg_strerror(ret));
				c_fail = 1;
				break;
			}
			c_posted++;
		}
		step();
	}
	printf("client: %zu writes ok in %lld ms\n", c_ok,
	       now_ms(CLOCK_MONOTONIC) - t0);
	if (c_fail || c_disc)
		return 1;
	printf("client: done\n");
	fflush(stdout);
	while (!c_disc) /* until the cut ends it (its own timeout) */
		step();
	if (rdmamsg_ep_close(ep, cli_closed))
		return 1;
	while (!c_closed)
		step();
	rdmamsg_rmr_free(&rmr);
	rdmamsg_mr_dereg(&lmr);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int peer_ms;
	size_t chunk = 0;
	int srv, ret;

	if (argc < 6 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		goto usage;
	srv = !strcmp(argv[1], "server");
	if (argc != (srv ? 6 : 7))
		goto usage;
	peer_ms = (unsigned int)strtoul(argv[4], NULL, 10);
	size = strtoul(argv[5], NULL, 10);
	if (!srv)
		chunk = strtoul(argv[6], NULL, 10);
	if (size < 1 || size > (1u << 30) || (!srv && chunk < 1))
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = rdmamsg_ctx_create(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "alive_peer: no context: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	ret = srv ? server(argv[2], argv[3], peer_ms)
		  : client(argv[2], argv[3], peer_ms, chunk);
	rdmamsg_mr_dereg(&region_mr);
	free(region);
	if (rdmamsg_ctx_destroy(&ctx)) {
		fprintf(stderr, "alive_peer: context not destroyed\n");
		ret = 1;
	}
	return ret;
usage:
	fprintf(stderr, "usage: alive_peer server BIND PORT PEER_MS SIZE | "
			"alive_peer client HOST PORT PEER_MS SIZE CHUNK\n");
	return 2;
}
