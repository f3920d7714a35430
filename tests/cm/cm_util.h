/* SPDX-License-Identifier: MIT */
/* cm_util.h -- helpers shared by the softrdma CM tests */
#ifndef TESTS_CM_UTIL_H
#define TESTS_CM_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

/* cmt_now_ms -- monotonic milliseconds */
static inline long long cmt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* cmt_wait -- next event within timeout_ms, or NULL */
static inline struct rdma_cm_event *cmt_wait(struct rdma_event_channel *ch,
					     int timeout_ms)
{
	struct rdma_cm_event *ev = NULL;
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};

	if (poll(&p, 1, timeout_ms) != 1)
		return NULL;
	if (rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* cmt_expect -- wait for an event of a type; acks others; NULL on timeout */
static inline struct rdma_cm_event *cmt_expect(struct rdma_event_channel *ch,
					       enum rdma_cm_event_type type,
					       int timeout_ms)
{
	struct rdma_cm_event *ev = cmt_wait(ch, timeout_ms);

	if (ev && ev->event != type) {
		fprintf(stderr, "# expected %s, got %s (status %d)\n",
			rdma_event_str(type), rdma_event_str(ev->event),
			ev->status);
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

/* cmt_sin -- an IPv4 loopback address with a port */
static inline struct sockaddr_in cmt_sin(uint16_t port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	return sin;
}

/* cmt_free_port -- a TCP port nobody listens on while *hold is open: a
 * socket bound to it and not listening (a connect to it is refused, and
 * no other test running beside us can listen there); close(*hold) after */
static inline uint16_t cmt_free_port(int *hold)
{
	struct sockaddr_in sin = cmt_sin(0);
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port = 0;

	*hold = -1;
	if (fd < 0)
		return 0;
	if (!bind(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
	    !getsockname(fd, (struct sockaddr *)&sin, &len))
		port = ntohs(sin.sin_port);
	if (port)
		*hold = fd;
	else
		close(fd);
	return port;
}

/* cmt_resolve -- resolve addr and route of id to 127.0.0.1:port */
static inline int cmt_resolve(struct rdma_cm_id *id,
			      struct rdma_event_channel *ch, uint16_t port)
{
	struct sockaddr_in dst = cmt_sin(port);
	struct rdma_cm_event *ev;

	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		return -1;
	ev = cmt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 2000))
		return -1;
	ev = cmt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	return 0;
}

/* cmt_write_u16 / cmt_read_u16 -- pass a port number through a pipe */
static inline void cmt_write_u16(int fd, uint16_t v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(99);
}

static inline uint16_t cmt_read_u16(int fd)
{
	uint16_t v = 0;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

/* cmt_listen_one -- listen on ch (a port of its own, written to pfd) and
 * take one connection request: its id, or NULL */
static inline struct rdma_cm_id *cmt_listen_one(struct rdma_event_channel *ch,
						int pfd)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_listen(l, 1))
		return NULL;
	cmt_write_u16(pfd, ntohs(rdma_get_src_port(l)));
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 20000);
	if (!ev)
		return NULL;
	c = ev->id;
	rdma_ack_cm_event(ev);
	return c;
}

/* srv_fails -- failed SCHECKs in a server process (its exit status) */
static int srv_fails __attribute__((unused));

/* SCHECK -- an assertion in a server process: counted, shown on stderr */
#define SCHECK(cond, ...)                                          \
	do {                                                       \
		if (!(cond)) {                                     \
			srv_fails++;                               \
			fprintf(stderr, "# server: failed: ");     \
			fprintf(stderr, __VA_ARGS__);              \
			fprintf(stderr, " (line %d)\n", __LINE__); \
		}                                                  \
	} while (0)

/* cmt_spawn -- fork a peer running fn; its port pipe's read end in *rfd
 * (needs ../tap.h) */
static inline pid_t cmt_spawn(int (*fn)(int), int *rfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		bail_out("pipe");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (!pid) {
		close(p[0]);
		_exit(fn(p[1]));
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

/* cmt_reap -- wait for a peer and report its verdict (needs ../tap.h) */
static inline void cmt_reap(pid_t pid, const char *name)
{
	int st = 0;

	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s process passed", name);
}

#endif /* TESTS_CM_UTIL_H */
