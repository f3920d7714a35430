/* SPDX-License-Identifier: MIT */
/*
 * rpc.c -- a key-value store over rdmamsg request/response
 *
 *   rpc -s [-b ADDR] [-p PORT]                 serve one client, then exit
 *   rpc -c HOST [-p PORT] [-n KEYS] [-S BYTES] run the demo client
 *
 * Requests are PUT, GET and DEL with a key and (PUT) a value; the library
 * correlates each response with its request, so the client keeps many
 * requests outstanding and matches nothing itself.  Values may be larger
 * than the eager message size: requests and responses of any size go
 * through the same calls (rendezvous beyond the eager maximum).  Every
 * request has a timeout, so a server that never answers cannot leak them.
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

#define DEFAULT_PORT 18611
#define TIMEOUT_MS   10000
#define KEY_MAX	     64

enum { OP_PUT = 1, OP_GET = 2, OP_DEL = 3 };
enum { ST_OK = 0, ST_NOTFOUND = 1, ST_BAD = 2 };

/* the request header; key and value follow */
struct hdr {
	uint32_t op;
	uint32_t klen;
};

struct item {
	struct item *next;
	char key[KEY_MAX];
	size_t len;
	char *val;
};

static struct item *store;
static int done, failures;
static struct rdmamsg_ctx *ctx;

/* find -- the item of key, and the link that points at it */
static struct item **find(const char *key)
{
	struct item **p;

	for (p = &store; *p; p = &(*p)->next)
		if (!strcmp((*p)->key, key))
			return p;
	return NULL;
}

/* reply -- a status byte, then (GET) the value */
static void reply(struct rdmamsg_req *req, uint8_t st, const char *val,
		  size_t len)
{
	char *out = malloc(1 + len);

	if (!out) {
		rdmamsg_req_drop(req);
		return;
	}
	out[0] = (char)st;
	if (len)
		memcpy(out + 1, val, len);
	if (rdmamsg_respond(req, out, 1 + len))
		rdmamsg_req_drop(req);
	free(out);
}

/* on_request -- PUT, GET or DEL */
static void on_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
		       void *data, size_t len, void *arg)
{
	struct item **pp, *it;
	char key[KEY_MAX];
	struct hdr h;
	size_t vlen;

	(void)ep;
	(void)arg;
	if (len < sizeof(h))
		return reply(req, ST_BAD, NULL, 0);
	memcpy(&h, data, sizeof(h));
	if (!h.klen || h.klen >= KEY_MAX || sizeof(h) + h.klen > len)
		return reply(req, ST_BAD, NULL, 0);
	memcpy(key, (char *)data + sizeof(h), h.klen);
	key[h.klen] = 0;
	vlen = len - sizeof(h) - h.klen;
	pp = find(key);
	switch (h.op) {
	case OP_PUT:
		it = pp ? *pp : calloc(1, sizeof(*it));
		if (!it)
			return reply(req, ST_BAD, NULL, 0);
		free(it->val);
		it->val = malloc(vlen ? vlen : 1);
		memcpy(it->val, (char *)data + sizeof(h) + h.klen, vlen);
		it->len = vlen;
		if (!pp) {
			strcpy(it->key, key);
			it->next = store;
			store = it;
		}
		return reply(req, ST_OK, NULL, 0);
	case OP_GET:
		if (!pp)
			return reply(req, ST_NOTFOUND, NULL, 0);
		return reply(req, ST_OK, (*pp)->val, (*pp)->len);
	case OP_DEL:
		if (!pp)
			return reply(req, ST_NOTFOUND, NULL, 0);
		it = *pp;
		*pp = it->next;
		free(it->val);
		free(it);
		return reply(req, ST_OK, NULL, 0);
	default:
		return reply(req, ST_BAD, NULL, 0);
	}
}

static void on_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	done = 1;
}

static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, on_closed);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_disconnect = on_disconnect,
};

static struct rdmamsg_ep_attr *srv_attr;

static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, srv_attr, &srv_cbs, NULL, &ep))
		failures++;
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	done = 1;
}

/* run -- progress until *flag: arm, block on the fd, progress */
static void run(volatile int *flag)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	while (!*flag) {
		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&pfd, 1, 1000);
		rdmamsg_ctx_progress(ctx);
	}
}

/* ---- client ---------------------------------------------------------- */

static struct rdmamsg_ep *cep;
static int connected, cstatus;
static unsigned int outstanding, verified;
static size_t vsize;

/* value_byte -- the demo's value pattern for key number k */
static char value_byte(unsigned int k, size_t i)
{
	return (char)(k * 17 + i * 31 + (i >> 10));
}

/* value_len -- every 8th key gets a value of vsize, the rest are small */
static size_t value_len(unsigned int k)
{
	return k % 8 == 7 ? vsize : 16 + k % 100;
}

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
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

/* request -- one PUT/GET/DEL of key k */
static int request(uint32_t op, unsigned int k,
		   void (*cb)(struct rdmamsg_ep *, int, void *, size_t, void *))
{
	size_t vl = op == OP_PUT ? value_len(k) : 0, i;
	struct hdr h = {op, 0};
	char key[KEY_MAX];
	uint64_t id;
	char *buf;
	int ret;

	h.klen = (uint32_t)snprintf(key, sizeof(key), "key-%u", k);
	buf = malloc(sizeof(h) + h.klen + vl);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), key, h.klen);
	for (i = 0; i < vl; i++)
		buf[sizeof(h) + h.klen + i] = value_byte(k, i);
	ret = rdmamsg_request(cep, buf, sizeof(h) + h.klen + vl, TIMEOUT_MS, cb,
			      (void *)(uintptr_t)k, &id);
	free(buf); /* copied (or sent) by the call */
	if (!ret)
		outstanding++;
	return ret;
}

/* status_cb -- PUT and DEL: status byte ST_OK expected */
static void status_cb(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		      void *arg)
{
	(void)ep;
	(void)arg;
	outstanding--;
	if (status || len != 1 || *(char *)data != ST_OK) {
		fprintf(stderr, "rpc: request failed: %s\n",
			status ? rdmamsg_strerror(status) : "bad status");
		failures++;
	}
}

/* get_cb -- GET: the value must be the one we put */
static void get_cb(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		   void *arg)
{
	unsigned int k = (unsigned int)(uintptr_t)arg;
	const char *v = (const char *)data + 1;
	size_t i;

	(void)ep;
	outstanding--;
	if (status || len < 1 || *(char *)data != ST_OK ||
	    len - 1 != value_len(k)) {
		fprintf(stderr, "rpc: GET key-%u failed\n", k);
		failures++;
		return;
	}
	for (i = 0; i < len - 1; i++)
		if (v[i] != value_byte(k, i)) {
			fprintf(stderr, "rpc: GET key-%u: wrong byte %zu\n", k,
				i);
			failures++;
			return;
		}
	verified++;
}

/* missing_cb -- GET after DEL: ST_NOTFOUND expected */
static void missing_cb(struct rdmamsg_ep *ep, int status, void *data,
		       size_t len, void *arg)
{
	(void)ep;
	(void)arg;
	outstanding--;
	if (status || len != 1 || *(char *)data != ST_NOTFOUND)
		failures++;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	done = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = on_connect,
};

/* drain -- wait until no request is outstanding */
static void drain(void)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	while (outstanding) {
		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&pfd, 1, 1000);
		rdmamsg_ctx_progress(ctx);
	}
}

/* client -- PUT n keys, GET them all back, DEL them, GET one missing */
static int client(const char *host, int port, unsigned int n)
{
	char addr[300];
	unsigned int k;

	snprintf(addr, sizeof(addr), "%s:%d", host, port);
	if (rdmamsg_connect(ctx, addr, NULL, &cli_cbs, NULL, &cep))
		return 1;
	run(&connected);
	if (cstatus) {
		fprintf(stderr, "rpc: connect: %s\n",
			rdmamsg_strerror(cstatus));
		rdmamsg_ep_close(cep, cli_closed);
		run(&done);
		return 1;
	}
	for (k = 0; k < n; k++)
		if (request(OP_PUT, k, status_cb))
			failures++;
	drain();
	for (k = 0; k < n; k++)
		if (request(OP_GET, k, get_cb))
			failures++;
	drain();
	for (k = 0; k < n; k++)
		if (request(OP_DEL, k, status_cb))
			failures++;
	if (request(OP_GET, 0, missing_cb))
		failures++;
	drain();
	printf("rpc: %u keys put, %u values verified (every 8th %zu bytes), "
	       "deleted; %d failures\n",
	       n, verified, vsize, failures);
	rdmamsg_ep_close(cep, cli_closed);
	run(&done);
	return failures || verified != n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"server", no_argument, NULL, 's'},
		{"bind", required_argument, NULL, 'b'},
		{"client", required_argument, NULL, 'c'},
		{"port", required_argument, NULL, 'p'},
		{"keys", required_argument, NULL, 'n'},
		{"size", required_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	const char *bind_addr = "0.0.0.0", *host = NULL;
	int server = 0, port = DEFAULT_PORT, c, ret;
	unsigned int n = 100;
	struct rdmamsg_listener *lst;
	char addr[300];

	vsize = (size_t)4 << 20;
	while ((c = getopt_long(argc, argv, "sb:c:p:n:S:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			server = 1;
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
		case 'n':
			n = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			vsize = (size_t)strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: rpc -s [-b ADDR] [-p PORT] | "
					"rpc -c HOST [-p PORT] [-n KEYS] "
					"[-S BYTES]\n");
			return 2;
		}
	}
	if (server == !!host) {
		fprintf(stderr, "rpc: give -s or -c HOST\n");
		return 2;
	}
	ret = rdmamsg_ctx_create(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "rpc: no context: %s\n", rdmamsg_strerror(ret));
		return 1;
	}
	if (host) {
		ret = client(host, port, n);
	} else {
		snprintf(addr, sizeof(addr), "%s:%d", bind_addr, port);
		rdmamsg_ep_attr_new(&srv_attr);
		rdmamsg_ep_attr_set_on_request(srv_attr, on_request);
		ret = rdmamsg_listen(ctx, addr, on_conn_req, NULL, &lst);
		if (ret) {
			fprintf(stderr, "rpc: listen on %s: %s\n", addr,
				rdmamsg_strerror(ret));
			return 1;
		}
		printf("rpc: serving on %s\n", addr);
		fflush(stdout);
		run(&done); /* one client, until it closes */
		done = 0;
		rdmamsg_listener_close(lst, lst_closed);
		run(&done);
		if (rdmamsg_ctx_destroy(&ctx))
			failures++;
		rdmamsg_ep_attr_delete(&srv_attr);
		while (store) {
			struct item *it = store;

			store = it->next;
			free(it->val);
			free(it);
		}
		return failures ? 1 : 0;
	}
	if (rdmamsg_ctx_destroy(&ctx))
		ret = 1;
	return ret;
}
