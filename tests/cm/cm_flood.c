/* SPDX-License-Identifier: MIT */
/*
 * cm_flood.c -- an rdma_cm listener under plain-TCP attack (issue 9):
 * 2,000 idle sockets plus a flood of fake connection requests (garbage,
 * short messages, and well-formed REQs naming no QP that never send an
 * RTU), once with fds to spare and once with the listener's process at its
 * fd limit.  Real clients (another process) must still connect within
 * their connect timeout; the listener's fds and memory stay bounded, it
 * does not spin (CPU time well under the wall time), and every socket is
 * gone once the attack stops.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../tap.h"
#include "cm_util.h"

#define IDLE	  2000
#define REAL	  5
#define WIRE_LEN  276 /* softrdma's CM message (soft/cm_internal.h) */
#define FAKE_KEEP 50  /* fake requesters the attacker holds open */

/* count_fds -- open fds of this process */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own */
}

/* cpu_ms -- user + system time of this process (ms) */
static long long cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000LL +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* rss_kib -- resident set (KiB) */
static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* reg_id -- the registry's id (offset 16), as a same-uid attacker reads */
static void reg_id(uint8_t id[16])
{
	const char *p = getenv("SOFTRDMA_SHM_PREFIX");
	char name[256];
	int fd;

	memset(id, 0, 16);
	if (p && *p)
		snprintf(name, sizeof(name), "/dev/shm/%s-registry", p);
	else
		snprintf(name, sizeof(name), "/dev/shm/softrdma-%u-registry",
			 (unsigned)geteuid());
	fd = open(name, O_RDONLY);
	if (fd < 0)
		return;
	if (pread(fd, id, 16, 16) != 16)
		memset(id, 0, 16);
	close(fd);
}

/* tcp_to -- a non-blocking TCP connection to 127.0.0.1:port */
static int tcp_to(uint16_t port)
{
	struct sockaddr_in sin = cmt_sin(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* fake_req -- a well-formed REQ (PS_TCP, RC) naming a QP nobody has */
static void fake_req(uint8_t *m, const uint8_t id[16], unsigned n)
{
	uint32_t qpn = htonl(0xabc000 + (n & 0xfff));

	memset(m, 0, WIRE_LEN);
	m[0] = 0x5d;		 /* magic */
	m[1] = 1;		 /* REQ */
	m[3] = IBV_QPT_RC;	 /* qp_type */
	m[6] = RDMA_PS_TCP >> 8; /* ps, network order */
	m[7] = RDMA_PS_TCP & 0xff;
	memcpy(m + 8, &qpn, 4);		/* qpn */
	m[16] = m[17] = 1;		/* resp_res, init_depth */
	m[19] = m[20] = 7;		/* retry, rnr retry */
	m[22] = IBV_MTU_1024;		/* mtu */
	m[28 + 10] = m[28 + 11] = 0xff; /* gid ::ffff:127.0.0.1 */
	m[28 + 12] = 127;
	m[28 + 15] = 1;
	memcpy(m + 44, id, 16); /* registry id */
}

/*
 * attacker -- IDLE idle sockets, then fake requests at ~200/s until killed:
 * garbage, half a message, and well-formed REQs that never send an RTU.
 */
static int attacker(int pfd)
{
	struct rlimit rl = {IDLE + 512, IDLE + 512};
	int keep[FAKE_KEEP], i, fd;
	uint8_t id[16], m[WIRE_LEN];
	uint16_t port = cmt_read_u16(pfd);
	unsigned n = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setrlimit(RLIMIT_NOFILE, &rl);
	if (!port)
		return 3;
	reg_id(id);
	for (i = 0; i < IDLE; i++)
		if (tcp_to(port) < 0)
			return 2;
	for (i = 0; i < FAKE_KEEP; i++)
		keep[i] = -1;
	for (;;) {
		struct pollfd p;

		fd = tcp_to(port);
		if (fd < 0) {
			usleep(5000);
			continue;
		}
		p.fd = fd;
		p.events = POLLOUT;
		poll(&p, 1, 100);
		switch (n % 3) {
		case 0: /* garbage */
			memset(m, 0xa5 ^ (int)n, sizeof(m));
			if (write(fd, m, sizeof(m)) < 0)
				(void)0;
			close(fd);
			break;
		default: /* half a message, or a REQ naming no QP; held open */
			fake_req(m, id, n);
			if (write(fd, m, n % 3 == 1 ? WIRE_LEN / 2 : WIRE_LEN) <
			    0)
				(void)0;
			if (keep[n % FAKE_KEEP] >= 0)
				close(keep[n % FAKE_KEEP]);
			keep[n % FAKE_KEEP] = fd;
			break;
		}
		n++;
		usleep(5000);
	}
	return 0;
}

/* real_clients -- REAL connections, one after another, each within the
 * default connect timeout; exit status: how many failed */
static int real_clients(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port = cmt_read_u16(pfd);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int i, good = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!port)
		return REAL;
	sleep(2); /* the idle sockets and the flood come first */
	for (i = 0; i < REAL && ch; i++) {
		long long t0 = cmt_now_ms();

		usleep(300000);
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			break;
		if (cmt_resolve(id, ch, port)) {
			rdma_destroy_id(id);
			continue;
		}
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x1234;
		if (rdma_connect(id, &cp)) {
			rdma_destroy_id(id);
			continue;
		}
		/* softrdma's connect timeout (10 s) reports UNREACHABLE */
		ev = cmt_wait(ch, 30000);
		if (ev && ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
			good++;
			fprintf(stderr,
				"# real client %d connected in %lld ms\n", i,
				cmt_now_ms() - t0);
		} else {
			fprintf(stderr, "# real client %d: %s %d\n", i,
				ev ? rdma_event_str(ev->event) : "nothing",
				ev ? ev->status : 0);
		}
		if (ev)
			rdma_ack_cm_event(ev);
		if (!rdma_establish(id) && !rdma_disconnect(id)) {
			ev = cmt_wait(ch, 10000);
			if (ev)
				rdma_ack_cm_event(ev);
		}
		rdma_destroy_id(id);
	}
	if (ch)
		rdma_destroy_event_channel(ch);
	return REAL - good;
}

/* spawn -- fork a peer running fn(read end); the write end in *wfd */
static pid_t spawn(int (*fn)(int), int *wfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		bail_out("pipe");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (!pid) {
		close(p[1]);
		_exit(fn(p[0]));
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

/* serve -- one event of the listener's channel: accept requests, drop the
 * ids that fail or end */
static void serve(struct rdma_cm_event *ev)
{
	struct rdma_conn_param cp;
	struct rdma_cm_id *id = ev->id;
	enum rdma_cm_event_type t = ev->event;

	if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x4321;
		if (rdma_accept(id, &cp))
			rdma_destroy_id(id);
		return;
	}
	rdma_ack_cm_event(ev);
	if (t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE ||
	    t == RDMA_CM_EVENT_CONNECT_ERROR || t == RDMA_CM_EVENT_DISCONNECTED)
		rdma_destroy_id(id);
}

/* flood -- one round of the attack against a fresh listener; limit: the
 * listener process's fd limit during the round (0: unchanged) */
static void flood(const char *name, rlim_t limit)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	struct rlimit old, rl;
	int apfd, rpfd, st, base, fds, peak = 0, rc_done = 0;
	long long t0, c0, wall, cpu;
	long rss0, rss_peak = 0;
	struct sockaddr_in sin = cmt_sin(0);
	pid_t att, real;

	att = spawn(attacker, &apfd);
	real = spawn(real_clients, &rpfd);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 128)) {
		kill(att, SIGKILL);
		kill(real, SIGKILL);
		bail_out("listener: %s", strerror(errno));
	}
	base = count_fds();
	rss0 = rss_kib();
	getrlimit(RLIMIT_NOFILE, &old);
	if (limit) {
		rl = old;
		rl.rlim_cur = (rlim_t)base + limit;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	cmt_write_u16(apfd, ntohs(rdma_get_src_port(l)));
	cmt_write_u16(rpfd, ntohs(rdma_get_src_port(l)));
	close(apfd);
	close(rpfd);
	t0 = cmt_now_ms();
	c0 = cpu_ms();
	while (!rc_done && cmt_now_ms() - t0 < 120000) {
		ev = cmt_wait(ch, 50);
		if (ev)
			serve(ev);
		fds = count_fds();
		peak = fds > peak ? fds : peak;
		if (rss_kib() > rss_peak)
			rss_peak = rss_kib();
		if (waitpid(real, &st, WNOHANG) == real)
			rc_done = 1;
	}
	wall = cmt_now_ms() - t0;
	cpu = cpu_ms() - c0;
	kill(att, SIGKILL);
	waitpid(att, NULL, 0);
	if (!rc_done) {
		kill(real, SIGKILL);
		waitpid(real, &st, 0);
	}
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "%s: %d real clients connected through the attack", name, REAL);
	/* half-open 1024 (SCM_HALF_OPEN_MAX), fake requesters 50, backlog 128,
	 * and some slack */
	ok(peak - base < 1300, "%s: listener's fds bounded (peak %d over %d)",
	   name, peak - base, base);
	ok(rss_peak - rss0 < 64 * 1024, "%s: memory bounded (+%ld KiB)", name,
	   rss_peak - rss0);
	/* a spinning CM thread burns the whole wall time (valgrind's CPU
	 * cost per operation is too high to tell) */
	if (tap_small())
		ok(1, "# SKIP CPU bound under valgrind (%lld ms in %lld ms)",
		   cpu, wall);
	else
		ok(cpu * 2 < wall, "%s: no spinning (%lld ms CPU in %lld ms)",
		   name, cpu, wall);
	/* the attack is over: every socket goes (handshake time 1 s) */
	t0 = cmt_now_ms();
	do {
		ev = cmt_wait(ch, 100);
		if (ev)
			serve(ev);
		fds = count_fds();
	} while (fds > base && cmt_now_ms() - t0 < 20000);
	ok(fds <= base, "%s: every socket closed after the attack (%d over)",
	   name, fds - base);
	if (limit)
		setrlimit(RLIMIT_NOFILE, &old);
	ok(!rdma_destroy_id(l), "%s: destroy listener", name);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	struct rlimit old, rl;

	signal(SIGPIPE, SIG_IGN);
	getrlimit(RLIMIT_NOFILE, &old);
	rl = old;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4096)
		rl.rlim_max = 4096; /* root may raise it */
	rl.rlim_cur = 4096;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		skip_all("cannot raise RLIMIT_NOFILE to 4096");
	/* a short handshake time and REP timeout keep the test short */
	setenv("SOFTRDMA_CM_HANDSHAKE_MS", "1000", 1);
	flood("fds to spare", 0);
	flood("at the fd limit", 100);
	setrlimit(RLIMIT_NOFILE, &old);
	return done_testing();
}
