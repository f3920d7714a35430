/* SPDX-License-Identifier: MIT */
/*
 * rdma_rw.c -- one-sided RDMA read and write with exported keys
 *
 *   rdma_rw -s [-b ADDR] [-p PORT] [-S BYTES] [-t EXP]  expose a region
 *   rdma_rw -c HOST [-p PORT] [-t EXP]           write, read, add, notify
 *
 * The server registers a region (remote read, write and atomics), exports
 * it (rdmamsg_mr_export: opaque bytes with address, length and key) and
 * sends the export to the client in an ordinary message.  The client
 * imports it and works on the server's memory without the server's CPU:
 * it writes a pattern, reads it back and compares, bumps a counter with
 * fetch-and-add, then tells the server with a write-with-immediate, which
 * is the only operation the server sees (on_write_imm).  The server checks
 * the region and answers with a message, and the client closes once that
 * answer has come and every operation of its own has completed.
 * Driven by a plain poll() loop over rdmamsg_ctx_get_fd/arm/progress.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmamsg.h"

#define DEFAULT_PORT 18612
#define DATA_OFF     64 /* the first 64 bytes hold the counter */

static struct rdmamsg_ctx *ctx;
static int done, failures;
/* both sides' endpoint attributes: the ACK timeout (-t), else defaults */
static struct rdmamsg_ep_attr *ep_attr;

/* step -- block on the fd unless work is pending, then progress */
static void step(void)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	if (rdmamsg_ctx_arm(ctx) == 0)
		poll(&pfd, 1, 1000);
	rdmamsg_ctx_progress(ctx);
}

/* run -- progress until *flag */
static void run(volatile int *flag)
{
	while (!*flag)
		step();
}

/* pattern -- byte i of what the client writes */
static char pattern(size_t i)
{
	return (char)(i * 7 + (i >> 12));
}

/* ---- server ---------------------------------------------------------- */

static char *region;
static size_t region_len;
static struct rdmamsg_mr *region_mr;

/* srv_connect -- hand the client our export */
static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status || rdmamsg_mr_export(region_mr, ex, sizeof(ex)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		failures++;
}

/* srv_write_imm -- the client is done: check what it left in our memory */
static void srv_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			  void *arg)
{
	uint64_t counter;
	size_t i, bad = 0;
	char verdict[64];

	(void)len;
	(void)arg;
	memcpy(&counter, region, 8);
	for (i = DATA_OFF; i < region_len; i++)
		if (region[i] != pattern(i - DATA_OFF))
			bad++;
	printf("rdma_rw: client wrote %zu bytes (imm %u), counter %llu, "
	       "%zu bad bytes\n",
	       region_len - DATA_OFF, imm, (unsigned long long)counter, bad);
	fflush(stdout);
	snprintf(verdict, sizeof(verdict), "%s", bad ? "bad" : "good");
	if (bad || counter != imm)
		failures++;
	if (rdmamsg_send(ep, verdict, strlen(verdict) + 1, NULL))
		failures++;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	done = 1;
}

/* srv_disconnect -- the client said goodbye (0), or the connection
 * failed: say why, then close */
static void srv_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)arg;
	if (status)
		fprintf(stderr, "rdma_rw: connection down: %s\n",
			rdmamsg_strerror(status));
	rdmamsg_ep_close(ep, srv_closed);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_disconnect = srv_disconnect,
};

static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, ep_attr, &srv_cbs, NULL, &ep))
		failures++;
}

static int lclosed;

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg; /* the listener's arg: NULL here */
	lclosed = 1;
}

static int server(const char *local, int port)
{
	struct rdmamsg_listener *lst;
	char addr[300];
	int ret;

	region = calloc(1, region_len);
	if (!region)
		return 1;
	ret = rdmamsg_mr_reg(ctx, region, region_len,
			     RDMAMSG_ACCESS_REMOTE_READ |
				     RDMAMSG_ACCESS_REMOTE_WRITE |
				     RDMAMSG_ACCESS_REMOTE_ATOMIC,
			     &region_mr);
	if (ret) {
		fprintf(stderr, "rdma_rw: register: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	rdmamsg_ep_attr_set_on_write_imm(ep_attr, srv_write_imm);
	snprintf(addr, sizeof(addr), "%s:%d", local, port);
	ret = rdmamsg_listen(ctx, addr, on_conn_req, NULL, &lst);
	if (ret) {
		fprintf(stderr, "rdma_rw: listen on %s: %s\n", addr,
			rdmamsg_strerror(ret));
		return 1;
	}
	printf("rdma_rw: %zu bytes exposed on %s\n", region_len, addr);
	fflush(stdout);
	run(&done);
	rdmamsg_listener_close(lst, lst_closed);
	run(&lclosed);
	rdmamsg_mr_dereg(&region_mr);
	free(region);
	return failures ? 1 : 0;
}

/* ---- client ---------------------------------------------------------- */

static struct rdmamsg_ep *cep;
static struct rdmamsg_rmr *rmr;
static int connected, cstatus, have_export, ops_done, verdict_good, verdict_got;
static int cdown; /* the connection went down before the close */
static uint64_t fadd_old;

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	connected = 1;
	cstatus = status;
}

/* cli_recv -- first the export, at the end the server's verdict */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (!rmr && rdmamsg_rmr_import(data, len, &rmr) == 0) {
		have_export = 1;
		return;
	}
	verdict_got = 1;
	verdict_good = len >= 5 && !memcmp(data, "good", 5);
}

/* run_up -- progress until *flag, or until the connection is down */
static void run_up(volatile int *flag)
{
	while (!*flag && !cdown)
		step();
}

/* op_done -- every one-sided completion */
static void op_done(struct rdmamsg_ep *ep, int status, uint64_t value,
		    void *op_ctx)
{
	(void)ep;
	if (status) {
		fprintf(stderr, "rdma_rw: %s failed: %s\n", (char *)op_ctx,
			rdmamsg_strerror(status));
		failures++;
	}
	if (!strcmp(op_ctx, "fetch-and-add"))
		fadd_old = value;
	ops_done++;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	done = 1;
}

/* cli_disconnect -- the server went away: stop waiting for it */
static void cli_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)arg;
	fprintf(stderr, "rdma_rw: disconnected: %s\n",
		rdmamsg_strerror(status));
	failures++;
	cdown = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_disconnect = cli_disconnect,
	.on_recv = cli_recv,
};

static int client(const char *host, int port)
{
	struct rdmamsg_mr *lmr;
	char addr[300], *buf;
	size_t len, n, i;
	int want;

	snprintf(addr, sizeof(addr), "%s:%d", host, port);
	if (rdmamsg_connect(ctx, addr, ep_attr, &cli_cbs, NULL, &cep))
		return 1;
	run(&connected);
	if (cstatus)
		fprintf(stderr, "rdma_rw: connect: %s\n",
			rdmamsg_strerror(cstatus));
	else
		run_up(&have_export);
	if (!have_export) {
		rdmamsg_ep_close(cep, cli_closed);
		run(&done);
		return 1;
	}
	rdmamsg_rmr_get_size(rmr, &len);
	n = len - DATA_OFF;
	/* local memory: what we write, then what we read back */
	buf = malloc(2 * n);
	if (!buf || rdmamsg_mr_reg(ctx, buf, 2 * n, 0, &lmr))
		return 1;
	for (i = 0; i < n; i++)
		buf[i] = pattern(i);
	/* RC keeps order: the read sees the write, the imm comes last */
	if (rdmamsg_write(cep, lmr, 0, rmr, DATA_OFF, n, op_done, "write") ||
	    rdmamsg_read(cep, lmr, n, rmr, DATA_OFF, n, op_done, "read") ||
	    rdmamsg_atomic_fadd(cep, rmr, 0, 5, op_done, "fetch-and-add"))
		failures++;
	want = 3;
	while (ops_done < want && !failures)
		step();
	if (!failures && memcmp(buf, buf + n, n)) {
		fprintf(stderr, "rdma_rw: read back differs\n");
		failures++;
	}
	/* tell the server: imm = the counter after our add */
	if (rdmamsg_write_imm(cep, lmr, 0, rmr, DATA_OFF, 0,
			      (uint32_t)(fadd_old + 5), op_done,
			      "write with immediate"))
		failures++;
	else
		want++;
	/* the verdict, and our own completions: the server may close as
	 * soon as our goodbye arrives, and a close with the write with
	 * immediate still waiting for its acknowledgement (lost on the
	 * wire, its retransmission not yet answered) flushes it with
	 * -ECANCELED, though the server has it */
	while ((!verdict_got || ops_done < want) && !cdown)
		step();
	printf("rdma_rw: wrote and read back %zu bytes, counter %llu -> %llu, "
	       "server says %s\n",
	       n, (unsigned long long)fadd_old,
	       (unsigned long long)(fadd_old + 5),
	       verdict_good ? "good" : "bad");
	rdmamsg_ep_close(cep, cli_closed);
	run(&done);
	rdmamsg_mr_dereg(&lmr);
	rdmamsg_rmr_free(&rmr);
	free(buf);
	return failures || !verdict_good;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"server", no_argument, NULL, 's'},
		{"bind", required_argument, NULL, 'b'},
		{"client", required_argument, NULL, 'c'},
		{"port", required_argument, NULL, 'p'},
		{"size", required_argument, NULL, 'S'},
		{"ack-timeout", required_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	const char *bind_addr = "0.0.0.0", *host = NULL;
	int server_mode = 0, port = DEFAULT_PORT, c, ret;
	unsigned long t;
	char *end;

	region_len = (size_t)16 << 20;
	ret = rdmamsg_ep_attr_new(&ep_attr);
	if (ret) {
		fprintf(stderr, "rdma_rw: attributes: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	while ((c = getopt_long(argc, argv, "sb:c:p:S:t:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			server_mode = 1;
			break;
		case 'b':
			bind_addr = optarg;
			break;
		case 'c':
			host = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'S':
			region_len = (size_t)strtoull(optarg, NULL, 0);
			break;
		case 't':
			/* a lost tail, a lost NAK or a retransmission lost
			 * again waits out the ACK timeout (rdma_cm's 18:
			 * 1.07 s); on a lossy link, ask for less */
			errno = 0;
			t = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' ||
			    t < 1 || t > 31 ||
			    rdmamsg_ep_attr_set_ack_timeout(ep_attr,
							    (unsigned int)t))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (server_mode == !!host || region_len <= DATA_OFF) {
		fprintf(stderr, "rdma_rw: give -s or -c HOST\n");
		rdmamsg_ep_attr_delete(&ep_attr);
		return 2;
	}
	ret = rdmamsg_ctx_create(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "rdma_rw: no context: %s\n",
			rdmamsg_strerror(ret));
		rdmamsg_ep_attr_delete(&ep_attr);
		return 1;
	}
	ret = host ? client(host, port) : server(bind_addr, port);
	if (rdmamsg_ctx_destroy(&ctx))
		ret = 1;
	rdmamsg_ep_attr_delete(&ep_attr);
	return ret;

usage:
	fprintf(stderr, "usage: rdma_rw -s [-b ADDR] [-p PORT] [-S BYTES] "
			"[-t EXP] | rdma_rw -c HOST [-p PORT] [-t EXP]\n");
	rdmamsg_ep_attr_delete(&ep_attr);
	return 2;
}
