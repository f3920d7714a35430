/* SPDX-License-Identifier: MIT */
/* cm.c -- softrdma's librdmacm: event channels, events, ids, progress thread */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cm_internal.h"

/*
 * softrdma's librdmacm, as seen by a program (same ABI, same errno values
 * and event order as librdmacm over a RoCE device):
 *
 * - An id owns a TCP socket once it has an address (rdma_bind_addr, or
 *   rdma_resolve_addr binding port 0): RDMA ports and TCP ports are one
 *   space, as on iWARP.  rdma_listen listens on it; rdma_connect connects
 *   from it and the IB CM messages (REQ, REP, REJ, RTU, DREQ, DREP, and
 *   SIDR for UD ids) travel on that connection (cm_conn.c).
 * - Events are queued on the id's channel, whose fd is an eventfd readable
 *   while the queue is not empty.  A per-process progress thread (epoll
 *   over the sockets and a wake-up eventfd) turns messages, EOFs and
 *   timeouts into events; it runs while at least one id exists.
 * - What librdmacm does in user space when an event is taken (moving the
 *   QP to RTR/RTS and sending the RTU on CONNECT_RESPONSE, flushing the QP
 *   on REJECTED, attaching multicast groups) happens in rdma_get_cm_event.
 * - As on RoCE hardware: private data is reported at the IB CM field size
 *   (56/92 REQ, 196 REP, 148 REJ, zero padded); nobody listening gives
 *   REJECTED with status 8 (IB_CM_REJ_INVALID_SERVICE_ID), rdma_reject
 *   status 28 (IB_CM_REJ_CONSUMER_DEFINED); TIMEWAIT_EXIT follows
 *   DISCONNECTED by ~1 s if the id is still there.
 * - Disconnects as the IB CM's: a DREQ gives its receiver DISCONNECTED
 *   (DREQ_RCVD), and the DREP, hence the initiator's DISCONNECTED, waits
 *   for the receiver's rdma_disconnect or rdma_destroy_id, or the DREQ
 *   times out (2 s; DISCONNECTED, -ETIMEDOUT).  Before the RTU
 *   (REP_SENT, REP_RCVD) rdma_disconnect flushes the QP, sends nothing
 *   and returns 0.
 * - A dead peer process gives DISCONNECTED at once (its TCP connection
 *   closes), as the DREQ its kernel would send; the QP stays as it was
 *   (only REJECTED flushes it, as librdmacm), and a send times out
 *   (RETRY_EXC_ERR).  A silent host or a cut path is not noticed here (no
 *   keepalive), as on hardware: the QP's retries or the application's
 *   keep-alives tell.  The progress thread itself never touches a QP.
 * - Not as on hardware: a refused connect is retried for 100 ms
 *   (SOFTRDMA_CM_REFUSED_MS) because softrdma resolves addresses
 *   instantly and programs race their server's rdma_listen.
 */

/*
 * One lock guards every id, channel and queue: the CM is not on the data
 * path, and a single lock keeps the progress thread and the callers from
 * racing on an id that is being destroyed.
 */
pthread_mutex_t scm__lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Every id of the process is in scm_ids, and in a hash of its handle (the
 * epoll key); the ids with a deadline are also in scm_timed.  A server
 * holds one id per connection, so nothing done per event walks them all.
 */
static struct soft_list scm_ids = {&scm_ids, &scm_ids};
static struct soft_list scm_timed = {&scm_timed, &scm_timed};
static int scm_nids;
static uint64_t scm_next_handle = 1;
static struct scm_id **scm_htab;
static size_t scm_hbuckets; /* a power of two; 0 before the first id */

/* The progress thread runs while at least one id exists. */
static pthread_mutex_t scm_thr_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_t scm_thr;
static int scm_thr_running;
static int scm_thr_stop;
static int scm_epfd = -1;
static int scm_wakefd = -1;

/* scm__now_ms -- monotonic clock in milliseconds */
uint64_t scm__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* scm__channel_new -- allocate a channel whose fd is readable iff queued */
struct scm_channel *scm__channel_new(int sync)
{
	struct scm_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->sync = sync;
	return ch;
}

/* scm__channel_free -- close a channel and drop what is still queued */
void scm__channel_free(struct scm_channel *ch)
{
	struct scm_event *e, *n;

	for (e = ch->head; e; e = n) {
		n = e->next;
		free(e);
	}
	close(ch->ch.fd);
	free(ch);
}

/* scm_channel_signal -- make the fd readable (queue became non-empty) */
static void scm_channel_signal(struct scm_channel *ch)
{
	uint64_t one = 1;
	ssize_t r;

	do
		r = write(ch->ch.fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR);
}

/* scm_channel_drain -- make the fd unreadable (queue became empty) */
static void scm_channel_drain(struct scm_channel *ch)
{
	struct pollfd p = {.fd = ch->ch.fd, .events = POLLIN};
	uint64_t v;
	ssize_t r;

	/* the user may have made the fd blocking or not: read only if set,
	 * and not while a waiter may take the count between our poll and
	 * read (it reads it for us: rdma_get_cm_event) */
	if (!ch->waiters && poll(&p, 1, 0) == 1) {
		do
			r = read(ch->ch.fd, &v, sizeof(v));
		while (r < 0 && errno == EINTR);
	}
}

/* scm_enqueue -- append an event to a channel */
static void scm_enqueue(struct scm_channel *ch, struct scm_event *e)
{
	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	/* every event is a new edge, as the kernel's fd gives (EPOLLET) */
	scm_channel_signal(ch);
}

/* scm__post -- queue an event for id on owner's channel */
struct scm_event *scm__post(struct scm_id *id, struct scm_id *owner,
			    enum rdma_cm_event_type type, int status,
			    const void *pdata, size_t pdata_len,
			    size_t field_len)
{
	struct scm_event *e;

	if (owner->destroying || !owner->id.channel)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->owner = owner;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	if (field_len > SCM_MAX_PDATA)
		field_len = SCM_MAX_PDATA;
	if (pdata_len > field_len)
		pdata_len = field_len;
	if (pdata && pdata_len)
		memcpy(e->pdata, pdata, pdata_len);
	if (field_len) {
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)field_len;
	}
	scm_enqueue(scm_ch_of(owner->id.channel), e);
	return e;
}

/* scm__ack_locked -- release an event handed to the user */
void scm__ack_locked(struct scm_event *evt)
{
	if (evt->mc)
		evt->mc->completed++;
	else
		evt->owner->completed++;
	pthread_cond_broadcast(&evt->owner->cond);
	free(evt);
}

/* scm_swallowed -- an event librdmacm takes and acks itself: REJECTED
 * or DISCONNECTED of an id that reported CONNECT_ERROR */
static int scm_swallowed(const struct scm_event *e)
{
	return !e->mc && scm_id_of(e->ev.id)->connect_error &&
	       (e->ev.event == RDMA_CM_EVENT_REJECTED ||
		e->ev.event == RDMA_CM_EVENT_DISCONNECTED);
}

/* scm__get_event_locked -- pop the next event, finishing connect replies */
int scm__get_event_locked(struct scm_channel *ch, struct scm_event **out)
{
	struct scm_event *e;

again:
	e = ch->head;
	if (!e)
		return -1;
	ch->head = e->next;
	if (!ch->head) {
		ch->tail = NULL;
		scm_channel_drain(ch);
	}
	e->next = NULL;
	if (e->mc) {
		e->mc->reported++;
		scm__mc_process_locked(e);
	} else {
		e->owner->reported++;
	}
	if (scm_swallowed(e)) {
		scm__ack_locked(e);
		goto again;
	}
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST &&
	    e->owner->state == SCM_LISTEN)
		scm__backlog_drain(e->owner); /* room for a held request */
	if (e->ev.event == SCM_EVENT_CONN_RESP)
		scm__process_conn_resp(scm_id_of(e->ev.id), e);
	else if (e->ev.event == RDMA_CM_EVENT_REJECTED)
		scm__modify_qp_err(scm_id_of(e->ev.id)); /* as librdmacm */
	*out = e;
	return 0;
}

/* scm_dequeue_id -- remove the queued events of s from ch */
static struct scm_event *scm_dequeue_id(struct scm_channel *ch,
					struct scm_id *s)
{
	struct scm_event **pp = &ch->head, *e, *taken = NULL, **tp = &taken;

	ch->tail = NULL;
	while ((e = *pp)) {
		if (e->owner == s || e->ev.id == &s->id) {
			*pp = e->next;
			e->next = NULL;
			*tp = e;
			tp = &e->next;
			continue;
		}
		ch->tail = e;
		pp = &e->next;
	}
	if (!ch->head)
		scm_channel_drain(ch);
	return taken;
}

SOFT_EXPORT struct rdma_event_channel *rdma_create_event_channel(void);
SOFT_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel);
SOFT_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				  struct rdma_cm_event **event);
SOFT_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event);
SOFT_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event);
SOFT_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			       struct rdma_cm_id **id, void *context,
			       enum rdma_port_space ps);
SOFT_EXPORT int rdma_destroy_id(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
				struct rdma_event_channel *channel);
SOFT_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
				void *optval, size_t optlen);
SOFT_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id);
SOFT_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id);

/* rdma_create_event_channel -- open a channel (an eventfd) */
struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct scm_channel *ch = scm__channel_new(0);

	return ch ? &ch->ch : NULL;
}

static void scm_drop_children(struct scm_id *s);

/*
 * scm_orphan_ids -- what closing a channel does to the ids still on it.
 * rdma_destroy_event_channel(3) wants them destroyed first; a program
 * that does not is served as the kernel serves it (ucma_close destroys
 * every id of the file): each connection ends as rdma_destroy_id ends it
 * (REJ, DREQ; a listener stops listening, its unreported requests go),
 * nothing is reported or timed for them again, and the structs stay the
 * user's, as librdmacm leaves them (a later rdma_destroy_id frees one).
 */
static void scm_orphan_ids(struct scm_channel *ch)
{
	struct soft_list *l, *next;
	struct scm_id *s;

	for (l = scm_ids.next; l != &scm_ids; l = next) {
		next = l->next;
		s = soft_container_of(l, struct scm_id, link);
		if (s->sync || s->id.channel != &ch->ch)
			continue;
		if (s->listen && s->state == SCM_REQ_WAIT)
			continue; /* a listener's hidden child: its listener's */
		s->destroying = 1;
		scm__teardown_locked(s);
		scm_drop_children(s);
		s->id.channel = NULL;
		if (s->listened)
			next = scm_ids.next; /* its children may be gone */
	}
}

/* the channels destroyed while threads waited on them: never freed, as
 * a waiter or a later call (EBADF) may still read them, and kept on this
 * list so that they are not lost (a program that destroys channels under
 * waiters again and again would grow it; none known does) */
static struct scm_channel *scm_dead;

/* rdma_destroy_event_channel -- close a channel; its ids should be gone
 * (those left are destroyed as the kernel does: scm_orphan_ids) */
void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct scm_channel *ch = scm_ch_of(channel);

	if (!channel)
		return;
	pthread_mutex_lock(&scm__lock);
	scm_orphan_ids(ch);
	if (ch->waiters) {
		/* A thread still waits in rdma_get_cm_event() (rping's CM
		 * thread does at exit).  librdmacm's waiter stays blocked in
		 * the kernel until a signal; ours is woken to find the channel
		 * dead and wait the same way (scm_wait_dead), so the channel
		 * and its fd stay theirs. */
		ch->dead = 1;
		ch->dead_next = scm_dead;
		scm_dead = ch;
		scm_channel_signal(ch);
	} else {
		scm__channel_free(ch);
	}
	pthread_mutex_unlock(&scm__lock);
}

/*
 * scm_wait_dead -- what a waiter on a destroyed channel does.
 * librdmacm's sleeps on in ucma_get_event (its write holds the file the
 * close left) until a signal: EINTR without SA_RESTART (with it, the
 * restarted write finds the fd closed: EBADF).  Ours reads the fd nobody
 * writes any more: EINTR alike, a restart sleeps on; an O_NONBLOCK fd
 * sleeps in pause(), which any signal ends.
 */
static int scm_wait_dead(struct scm_channel *ch)
{
	uint64_t v;

	for (;;) {
		if (read(ch->ch.fd, &v, sizeof(v)) >= 0)
			continue; /* the destroy's wake-up */
		if (errno == EAGAIN) {
			pause();
			errno = EINTR;
		}
		if (errno == EINTR)
			return -1;
	}
}

/*
 * rdma_get_cm_event -- next event; blocks unless the fd is O_NONBLOCK.
 * The wait is a read() of the eventfd, which sleeps interruptibly as the
 * kernel's ucma_get_event does: a signal whose handler lacks SA_RESTART
 * fails it with EINTR, one with SA_RESTART restarts it (poll() would
 * never restart).  The count it takes is put back while events remain
 * after the one it returns.
 */
int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event)
{
	struct scm_channel *ch = scm_ch_of(channel);
	struct scm_event *e;
	uint64_t v;
	ssize_t n;
	int r, fl, took = 0, waited = 0;

	if (!channel || !event)
		return scm_err(EINVAL);
	fl = fcntl(channel->fd, F_GETFL);
	if (fl < 0)
		return -1;
	pthread_mutex_lock(&scm__lock);
	for (;;) {
		if (ch->dead) {
			/* a call after the destroy: librdmacm's write() to
			 * the closed fd */
			pthread_mutex_unlock(&scm__lock);
			return waited ? scm_wait_dead(ch) : scm_err(EBADF);
		}
		r = scm__get_event_locked(ch, &e);
		if (!r) {
			if (took && ch->head)
				scm_channel_signal(ch); /* the count we took */
			pthread_mutex_unlock(&scm__lock);
			*event = &e->ev;
			return 0;
		}
		/* a count a drain left to a waiter gone since (EINTR) */
		scm_channel_drain(ch);
		if (fl & O_NONBLOCK) {
			pthread_mutex_unlock(&scm__lock);
			return scm_err(EAGAIN);
		}
		/* While we wait, a destroy keeps the channel and its fd */
		ch->waiters++;
		pthread_mutex_unlock(&scm__lock);
		n = read(channel->fd, &v, sizeof(v));
		r = errno;
		pthread_mutex_lock(&scm__lock);
		ch->waiters--;
		if (n < 0) {
			if (!ch->head && !ch->dead)
				scm_channel_drain(ch);
			pthread_mutex_unlock(&scm__lock);
			errno = r;
			return -1;
		}
		took = n > 0;
		waited = 1;
	}
}

/* rdma_ack_cm_event -- give an event back */
int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	scm__ack_locked((struct scm_event *)event);
	pthread_mutex_unlock(&scm__lock);
	return 0;
}

/* rdma_event_str -- the event's name, as librdmacm spells it */
const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED:
		return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED:
		return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED:
		return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	default:
		return "UNKNOWN EVENT";
	}
}

/* scm_thread_main -- the CM progress thread: sockets and timeouts */
static void *scm_thread_main(void *arg)
{
	struct epoll_event evs[32];
	uint64_t now, next;
	struct soft_list *l;
	struct scm_id *s;
	int n, i, timeout;

	soft_internal = 1;
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&scm__lock);
		if (scm_thr_stop) {
			pthread_mutex_unlock(&scm__lock);
			break;
		}
		next = 0;
		for (l = scm_timed.next; l != &scm_timed; l = l->next) {
			s = soft_container_of(l, struct scm_id, tlink);
			if (!next || s->deadline_ms < next)
				next = s->deadline_ms;
		}
		pthread_mutex_unlock(&scm__lock);
		now = scm__now_ms();
		timeout = !next ? -1 : next <= now ? 0 : (int)(next - now);
		n = epoll_wait(scm_epfd, evs, 32, timeout);
		if (n < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&scm__lock);
		for (i = 0; i < n; i++) {
			if (!evs[i].data.u64) {
				uint64_t v;

				if (read(scm_wakefd, &v, sizeof(v)) < 0)
					(void)0;
				continue;
			}
			s = scm__id_find(evs[i].data.u64);
			if (s && !s->destroying)
				scm__progress(evs[i].events, s);
		}
		scm__timeouts(scm__now_ms());
		pthread_mutex_unlock(&scm__lock);
	}
	return NULL;
}

/* scm_thread_start -- create epoll, wake-up fd and thread (thr_mutex held) */
static int scm_thread_start(void)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
	sigset_t all, old;
	int err;

	scm_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (scm_epfd < 0)
		return errno;
	scm_wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (scm_wakefd < 0) {
		err = errno;
		goto close_epfd;
	}
	if (epoll_ctl(scm_epfd, EPOLL_CTL_ADD, scm_wakefd, &ev)) {
		err = errno;
		goto close_wakefd;
	}
	scm_thr_stop = 0;
	/* the program's signals are not ours to take: block them all */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&scm_thr, NULL, scm_thread_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto close_wakefd;
	scm_thr_running = 1;
	return 0;

close_wakefd:
	close(scm_wakefd);
	scm_wakefd = -1;
close_epfd:
	close(scm_epfd);
	scm_epfd = -1;
	return err;
}

/* scm_thread_stop -- stop and join the thread (thr_mutex held) */
static void scm_thread_stop(void)
{
	if (!scm_thr_running)
		return;
	pthread_mutex_lock(&scm__lock);
	scm_thr_stop = 1;
	pthread_mutex_unlock(&scm__lock);
	scm__wake();
	pthread_join(scm_thr, NULL);
	scm_thr_running = 0;
	close(scm_wakefd);
	close(scm_epfd);
	scm_wakefd = scm_epfd = -1;
}

/* scm__wake -- interrupt epoll_wait so deadlines are recomputed */
void scm__wake(void)
{
	uint64_t one = 1;

	if (scm_wakefd >= 0 && write(scm_wakefd, &one, sizeof(one)) < 0)
		(void)0;
}

/* scm__thread_put -- stop the thread once the last id is gone */
void scm__thread_put(void)
{
	int idle;

	pthread_mutex_lock(&scm_thr_mutex);
	pthread_mutex_lock(&scm__lock);
	idle = !scm_nids;
	pthread_mutex_unlock(&scm__lock);
	if (idle)
		scm_thread_stop();
	pthread_mutex_unlock(&scm_thr_mutex);
}

/* soft_cm_fork_prepare -- no CM state is half-changed across fork()
 * (fork.c: first, as the CM opens devices and reaches the network path
 * under these locks) */
void soft_cm_fork_prepare(void)
{
	pthread_mutex_lock(&scm_thr_mutex);
	pthread_mutex_lock(&scm__lock);
}

/* soft_cm_fork_parent -- resume */
void soft_cm_fork_parent(void)
{
	pthread_mutex_unlock(&scm__lock);
	pthread_mutex_unlock(&scm_thr_mutex);
}

/*
 * soft_cm_fork_child -- the progress thread did not come along: forget it,
 * so that new ids start their own and exit() does not wait for it.  The
 * parent's ids are not usable in the child (fork-safety is not promised).
 */
void soft_cm_fork_child(void)
{
	pthread_mutex_unlock(&scm__lock);
	pthread_mutex_unlock(&scm_thr_mutex);
	if (scm_thr_running) {
		close(scm_epfd);
		close(scm_wakefd);
		scm_epfd = scm_wakefd = -1;
		scm_thr_running = 0;
	}
}

/*
 * scm_unload -- library unload: the thread must not outlive the code.  At
 * exit() the lock may be held for good (exit() called from a signal handler
 * inside fork(), whose prepare handler holds it): then the thread is left
 * alone, since at exit the code stays mapped.
 */
__attribute__((destructor)) static void scm_unload(void)
{
	if (soft_exit_lock(&scm_thr_mutex))
		return;
	scm_thread_stop();
	pthread_mutex_unlock(&scm_thr_mutex);
}

/* scm__epoll_add -- watch an id's socket */
int scm__epoll_add(struct scm_id *s, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = s->handle};

	if (epoll_ctl(scm_epfd, EPOLL_CTL_ADD, s->fd, &ev))
		return errno;
	s->in_epoll = 1;
	scm__wake();
	return 0;
}

/* scm__epoll_mod -- change what an id's socket is watched for */
int scm__epoll_mod(struct scm_id *s, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = s->handle};

	if (!s->in_epoll)
		return scm__epoll_add(s, events);
	if (epoll_ctl(scm_epfd, EPOLL_CTL_MOD, s->fd, &ev))
		return errno;
	scm__wake();
	return 0;
}

/* scm__epoll_del -- stop watching an id's socket */
void scm__epoll_del(struct scm_id *s)
{
	if (s->in_epoll && s->fd >= 0)
		epoll_ctl(scm_epfd, EPOLL_CTL_DEL, s->fd, NULL);
	s->in_epoll = 0;
}

/* scm__close_fd -- forget an id's socket */
void scm__close_fd(struct scm_id *s)
{
	if (s->fd < 0)
		return;
	scm__epoll_del(s);
	close(s->fd);
	s->fd = -1;
}

/* scm_hslot -- the hash bucket of a handle */
static struct scm_id **scm_hslot(uint64_t handle)
{
	return &scm_htab[handle & (scm_hbuckets - 1)];
}

/* scm_hgrow -- twice the buckets once there are more ids than buckets (a
 * failed allocation keeps the table: longer chains, still right) */
static int scm_hgrow(void)
{
	size_t n = scm_hbuckets ? scm_hbuckets * 2 : 64, i;
	struct scm_id **old = scm_htab, *s, *next;
	size_t oldn = scm_hbuckets;

	if (scm_hbuckets && (size_t)scm_nids < scm_hbuckets)
		return 0;
	scm_htab = calloc(n, sizeof(*scm_htab));
	if (!scm_htab) {
		scm_htab = old;
		return oldn ? 0 : -1;
	}
	scm_hbuckets = n;
	for (i = 0; i < oldn; i++)
		for (s = old[i]; s; s = next) {
			next = s->hnext;
			s->hnext = *scm_hslot(s->handle);
			*scm_hslot(s->handle) = s;
		}
	free(old);
	return 0;
}

/* scm__id_find -- the live id with this handle, or NULL */
struct scm_id *scm__id_find(uint64_t handle)
{
	struct scm_id *s;

	if (!scm_hbuckets)
		return NULL;
	for (s = *scm_hslot(handle); s; s = s->hnext)
		if (s->handle == handle)
			return s;
	return NULL;
}

/* scm__id_alive -- is the id of this handle still there and connected? */
int scm__id_alive(uint64_t handle)
{
	struct scm_id *s = scm__id_find(handle);

	return s && s->fd >= 0;
}

/* scm__deadline -- set (ms > 0) or clear an id's deadline */
void scm__deadline(struct scm_id *s, uint64_t ms)
{
	s->deadline_ms = ms;
	soft_list_del(&s->tlink);
	if (ms)
		soft_list_add(&scm_timed, &s->tlink);
}

/* scm__next_due -- an id whose deadline has come by now, or NULL */
struct scm_id *scm__next_due(uint64_t now)
{
	struct soft_list *l;

	for (l = scm_timed.next; l != &scm_timed; l = l->next) {
		struct scm_id *s = soft_container_of(l, struct scm_id, tlink);

		if (s->deadline_ms <= now && !s->destroying)
			return s;
	}
	return NULL;
}

/* what librdmacm's rsocket code reads through an id (cm_internal.h) */
static const struct scm_cma_dev scm_cma_dev = {
	.port_cnt = 1,
	.refcnt = 1,
	.max_qpsize = SOFT_MAX_QP_WR,
	.max_initiator_depth = SOFT_MAX_RD_ATOM,
	.max_responder_resources = SOFT_MAX_RD_ATOM,
};

/* scm__id_new -- allocate an id and link it (scm__lock held) */
struct scm_id *scm__id_new(struct scm_channel *ch, void *context,
			   enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct scm_id *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id.channel = &ch->ch;
	s->id.context = context;
	s->id.ps = ps;
	s->id.qp_type = qp_type;
	s->sync = ch->sync;
	s->cma_dev = &scm_cma_dev;
	s->fd = -1;
	s->sgid_index = 0;
	s->retry_count = SCM_DEFAULT_RETRY;
	s->rnr_retry_count = SCM_DEFAULT_RETRY;
	s->mtu = IBV_MTU_4096;
	if (scm_hgrow()) {
		free(s);
		return NULL;
	}
	pthread_cond_init(&s->cond, NULL);
	soft_list_init(&s->tlink);
	soft_list_init(&s->waiting);
	soft_list_init(&s->wlink);
	s->handle = scm_next_handle++;
	s->hnext = *scm_hslot(s->handle);
	*scm_hslot(s->handle) = s;
	soft_list_add(&scm_ids, &s->link);
	scm_nids++;
	return s;
}

/* scm__id_free_locked -- unlink and free an id (scm__lock held) */
void scm__id_free_locked(struct scm_id *s)
{
	struct scm_id **pp;

	for (pp = scm_hslot(s->handle); *pp; pp = &(*pp)->hnext)
		if (*pp == s) {
			*pp = s->hnext;
			break;
		}
	soft_list_del(&s->link);
	soft_list_del(&s->tlink);
	soft_list_del(&s->wlink);
	while (s->waiting.next != &s->waiting) /* a listener's children */
		soft_list_del(s->waiting.next);
	scm_nids--;
	scm__close_fd(s);
	scm__dev_detach(s);
	if (s->sync && s->id.channel)
		scm__channel_free(scm_ch_of(s->id.channel));
	free(s->id.route.path_rec);
	free(s->qp_init_attr);
	free(s->connect);
	pthread_cond_destroy(&s->cond);
	free(s);
}

/* scm_create_id2 -- rdma_create_id with an explicit QP type */
static int scm_create_id2(struct rdma_event_channel *channel,
			  struct rdma_cm_id **id, void *context,
			  enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct scm_channel *ch;
	struct scm_id *s;
	int err;

	if (!id)
		return scm_err(EINVAL);
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IB:
	case RDMA_PS_IPOIB:
		break;
	default:
		return scm_err(EINVAL);
	}
	ch = channel ? scm_ch_of(channel) : scm__channel_new(1);
	if (!ch)
		return -1;
	pthread_mutex_lock(&scm_thr_mutex);
	if (!scm_thr_running) {
		err = scm_thread_start();
		if (err) {
			pthread_mutex_unlock(&scm_thr_mutex);
			goto free_channel;
		}
	}
	pthread_mutex_lock(&scm__lock);
	s = scm__id_new(ch, context, ps, qp_type);
	pthread_mutex_unlock(&scm__lock);
	pthread_mutex_unlock(&scm_thr_mutex);
	if (!s) {
		err = ENOMEM;
		scm__thread_put();
		goto free_channel;
	}
	*id = &s->id;
	return 0;

free_channel:
	if (!channel)
		scm__channel_free(ch);
	return scm_err(err);
}

/* rdma_create_id -- new id; NULL channel makes it synchronous */
int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qpt = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP)
				       ? IBV_QPT_UD
				       : IBV_QPT_RC;

	return scm_create_id2(channel, id, context, ps, qpt);
}

/* scm__create_id_qpt -- for rdma_create_ep, which carries ai_qp_type */
int scm__create_id_qpt(struct rdma_cm_id **id, enum rdma_port_space ps,
		       enum ibv_qp_type qpt)
{
	return scm_create_id2(NULL, id, NULL, ps, qpt);
}

/* scm_drop_children -- a listener goes: its unreported requests go too */
static void scm_drop_children(struct scm_id *s)
{
	struct scm_event *taken, *e, *n;
	struct soft_list *l, *ln;
	struct scm_id *c;

	taken = scm_dequeue_id(scm_ch_of(s->id.channel), s);
	for (e = taken; e; e = n) {
		n = e->next;
		if (e->owner == s &&
		    e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    e->ev.id != &s->id) {
			c = scm_id_of(e->ev.id);
			scm__teardown_locked(c);
			scm__id_free_locked(c);
		}
		free(e);
	}
	if (!s->listened)
		return; /* no children: no need to look at every id */
	for (l = scm_ids.next; l != &scm_ids; l = ln) {
		ln = l->next;
		c = soft_container_of(l, struct scm_id, link);
		if (c->listen != s)
			continue;
		if (c->state == SCM_REQ_WAIT) {
			scm__teardown_locked(c);
			scm__id_free_locked(c);
		} else {
			c->listen = NULL;
			soft_list_del(&c->wlink);
		}
	}
}

/* rdma_destroy_id -- tear down; waits until its events are acked */
int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct scm_id *s = scm_id_of(id);

	if (!id)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	if (!s->id.channel) {
		/* its channel was destroyed with it on it: already torn
		 * down (scm_orphan_ids), only the struct is left */
		scm__id_free_locked(s);
		pthread_mutex_unlock(&scm__lock);
		scm__thread_put();
		return 0;
	}
	s->destroying = 1;
	scm__teardown_locked(s);
	scm_drop_children(s);
	if (s->id.event) {
		scm__ack_locked((struct scm_event *)s->id.event);
		s->id.event = NULL;
	}
	while (s->completed < s->reported)
		pthread_cond_wait(&s->cond, &scm__lock);
	scm__mc_free_all_locked(s);
	scm__id_free_locked(s);
	pthread_mutex_unlock(&scm__lock);
	scm__thread_put();
	return 0;
}

/*
 * scm_unreported -- is c a child of listener l whose request the user has
 * not taken yet: hidden (no REQ read), or its CONNECT_REQUEST still queued?
 */
static int scm_unreported(struct scm_id *l, struct scm_id *c)
{
	struct scm_event *e;

	if (c->listen != l || c->destroying)
		return 0;
	if (c->state == SCM_REQ_WAIT)
		return 1;
	for (e = scm_ch_of(l->id.channel)->head; e; e = e->next)
		if (e->owner == l && e->ev.id == &c->id)
			return 1;
	return 0;
}

/*
 * scm_children_unreported -- the children of l whose requests follow it
 * to another channel (librdmacm makes a child on its listener's channel,
 * synchronous with it, when the user takes the CONNECT_REQUEST:
 * ucma_process_conn_req).  An array the caller frees; *n of them; with
 * sync, a private channel for each in chs.  ENOMEM leaves nothing made.
 */
static int scm_children_unreported(struct scm_id *l, int sync,
				   struct scm_id ***out,
				   struct scm_channel ***chs, size_t *n)
{
	struct soft_list *it;
	struct scm_id **v;
	size_t i, k = 0;

	*out = NULL;
	*chs = NULL;
	*n = 0;
	if (!l->listened)
		return 0;
	for (it = scm_ids.next; it != &scm_ids; it = it->next)
		k += scm_unreported(l,
				    soft_container_of(it, struct scm_id, link));
	if (!k)
		return 0;
	v = calloc(k, sizeof(*v));
	*chs = sync ? calloc(k, sizeof(**chs)) : NULL;
	if (!v || (sync && !*chs))
		goto nomem;
	for (it = scm_ids.next; it != &scm_ids; it = it->next) {
		struct scm_id *c = soft_container_of(it, struct scm_id, link);

		if (!scm_unreported(l, c))
			continue;
		if (sync && !((*chs)[*n] = scm__channel_new(1)))
			goto nomem;
		v[(*n)++] = c;
	}
	*out = v;
	return 0;
nomem:
	for (i = 0; sync && *chs && i < *n; i++)
		scm__channel_free((*chs)[i]);
	free(*chs);
	*chs = NULL;
	*n = 0;
	free(v);
	return ENOMEM;
}

/* scm_rehome -- put an id and its queued events on ch (its own channel,
 * if it had one, is freed, the event it holds acked) */
static void scm_rehome(struct scm_id *s, struct scm_channel *ch, int sync)
{
	struct scm_channel *old = scm_ch_of(s->id.channel);
	struct scm_event *e, *n;

	for (e = scm_dequeue_id(old, s); e; e = n) {
		n = e->next;
		scm_enqueue(ch, e);
	}
	if (s->sync) {
		if (s->id.event) {
			scm__ack_locked((struct scm_event *)s->id.event);
			s->id.event = NULL;
		}
		scm__channel_free(old);
	}
	s->sync = sync;
	s->id.channel = &ch->ch;
}

/* rdma_migrate_id -- move an id (and its queued events) to a channel; a
 * listener's requests not yet taken go with it */
int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct scm_id *s = scm_id_of(id), **kids;
	struct scm_channel *ch, **kchs;
	size_t nkids, i;
	int err;

	if (!id)
		return scm_err(EINVAL);
	if (s->sync && !channel)
		return scm_err(EINVAL);
	ch = channel ? scm_ch_of(channel) : scm__channel_new(1);
	if (!ch)
		return -1;
	pthread_mutex_lock(&scm__lock);
	err = scm_children_unreported(s, !channel, &kids, &kchs, &nkids);
	if (err) {
		pthread_mutex_unlock(&scm__lock);
		if (!channel)
			scm__channel_free(ch);
		return scm_err(err);
	}
	scm_rehome(s, ch, !channel);
	/* after the listener's own: its CONNECT_REQUESTs are on ch now,
	 * and a child's old channel holds only the child's events */
	for (i = 0; i < nkids; i++)
		scm_rehome(kids[i], channel ? ch : kchs[i], !channel);
	free(kids);
	free(kchs);
	while (s->completed < s->reported)
		pthread_cond_wait(&s->cond, &scm__lock);
	pthread_mutex_unlock(&scm__lock);
	return 0;
}

/* scm__complete -- synchronous ids: wait for the call's event */
int scm__complete(struct scm_id *s)
{
	struct rdma_cm_event *ev;
	int ret;

	if (!s->sync)
		return 0;
	if (s->id.event) {
		rdma_ack_cm_event(s->id.event);
		s->id.event = NULL;
	}
	ret = rdma_get_cm_event(s->id.channel, &s->id.event);
	if (ret)
		return ret;
	ev = s->id.event;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return scm_err(ECONNREFUSED);
		return scm_err(ev->status < 0 ? -ev->status : ev->status);
	}
	return 0;
}

/*
 * scm_kern_rc -- is the kernel's id RC (or XRC initiator)?  Its QP type is
 * the port space's (ucma_get_qp_type): RC for PS_TCP whatever the user's
 * (a UC id of rdma_create_ep), UD for PS_UDP and PS_IPOIB, the user's for
 * PS_IB only.  rdma_set_ack_timeout looks at that one.
 */
static int scm_kern_rc(const struct scm_id *s)
{
	if (s->id.ps == RDMA_PS_TCP)
		return 1;
	return s->id.ps == RDMA_PS_IB && (s->id.qp_type == IBV_QPT_RC ||
					  s->id.qp_type == IBV_QPT_XRC_SEND);
}

/* scm_opt_id -- RDMA_OPTION_ID options, with the kernel's checks */
static int scm_opt_id(struct scm_id *s, int optname, void *optval,
		      size_t optlen)
{
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return EINVAL;
		s->tos = *(uint8_t *)optval;
		s->tos_set = 1;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int))
			return EINVAL;
		if (s->state != SCM_IDLE &&
		    (!*(int *)optval || s->state == SCM_LISTEN))
			return EINVAL;
		s->reuseaddr = !!*(int *)optval;
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return EINVAL;
		/* the kernel's rdma_set_afonly: until the id listens */
		if (s->state != SCM_IDLE && s->state != SCM_ADDR_BOUND)
			return EINVAL;
		return scm__set_afonly(s, !!*(int *)optval);
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			return EINVAL;
		if (!scm_kern_rc(s))
			return EINVAL;
		s->ack_timeout = *(uint8_t *)optval;
		s->ack_timeout_set = 1;
		return 0;
	default:
		return ENOSYS;
	}
}

/* scm_has_primary_path -- does the array hold the record the kernel's
 * ucma_set_ib_path takes: flags exactly GMP | PRIMARY | BIDIRECTIONAL */
static int scm_has_primary_path(const struct ibv_path_data *p, size_t n)
{
	const uint32_t want = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			      IBV_PATH_FLAG_BIDIRECTIONAL;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i].flags == want)
			return 1;
	return 0;
}

/* scm_opt_ib_path -- a path given by the user resolves the route */
static int scm_opt_ib_path(struct scm_id *s, void *optval, size_t optlen)
{
	if (!optlen || optlen % sizeof(struct ibv_path_data))
		return EINVAL;
	if (!scm_has_primary_path(optval,
				  optlen / sizeof(struct ibv_path_data)))
		return EINVAL;
	if (s->state != SCM_ADDR_RESOLVED)
		return EINVAL;
	s->state = SCM_ROUTE_RESOLVED;
	scm__fill_path(s);
	scm__post(s, s, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0, 0);
	return 0;
}

/* rdma_set_option -- validate and record an id option */
int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
		    size_t optlen)
{
	struct scm_id *s = scm_id_of(id);
	int err;

	if (!id)
		return scm_err(EINVAL);
	/* the kernel's ucma_set_option copies optlen bytes in first
	 * (memdup_user): from NULL that is EFAULT; no bytes from NULL go
	 * on to the option's own checks (a wrong length: EINVAL) */
	if (!optval && optlen)
		return scm_err(EFAULT);
	pthread_mutex_lock(&scm__lock);
	if (level == RDMA_OPTION_ID)
		err = scm_opt_id(s, optname, optval, optlen);
	else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		err = scm_opt_ib_path(s, optval, optlen);
	else
		err = ENOSYS;
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/* scm_port -- the port of an IP socket address, network order */
static __be16 scm_port(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)sa)->sin_port;
	case AF_INET6:
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	default:
		return 0;
	}
}

/* scm_afonly -- the kernel's id_priv->afonly: AF_INET ids are, by default */
static int scm_afonly(const struct scm_id *s, sa_family_t family)
{
	/* AF_INET6: net.ipv6.bindv6only, 0 unless the host changed it */
	return s->afonly_set ? s->afonly : family == AF_INET;
}

/* scm_same_addr -- the kernel's cma_addr_cmp == 0, ports aside */
static int scm_same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr,
		       sizeof(struct in6_addr));
}

/*
 * scm__port_check -- may s take sa's port?  The kernel's cma_check_port
 * over the ids of this process that own a port in s's port space: both
 * REUSEADDR (reuse) and the holder not listening, or both AF-only of two
 * families, share it; else a wildcard on either side is EADDRNOTAVAIL and
 * the same address EADDRINUSE.  The TCP socket under the id stands for
 * other processes (bind(2) there says EADDRINUSE).  Called locked.
 */
int scm__port_check(const struct scm_id *s, const struct sockaddr *sa,
		    int reuse)
{
	const struct sockaddr *ca;
	struct soft_list *l;
	struct scm_id *c;

	if (!scm_port(sa))
		return 0;
	for (l = scm_ids.next; l != &scm_ids; l = l->next) {
		c = soft_container_of(l, struct scm_id, link);
		ca = &c->id.route.addr.src_addr;
		/* a destroyed id's port is free at once (librdmacm waits
		 * for its events after the kernel destroyed it) */
		if (c == s || !c->bound || c->destroying ||
		    c->id.ps != s->id.ps || scm_port(ca) != scm_port(sa))
			continue;
		if (reuse && c->reuseaddr && c->state != SCM_LISTEN)
			continue;
		if (scm_afonly(s, sa->sa_family) &&
		    scm_afonly(c, ca->sa_family) &&
		    sa->sa_family != ca->sa_family)
			continue;
		if (scm__addr_is_any(sa) || scm__addr_is_any(ca))
			return EADDRNOTAVAIL;
		if (scm_same_addr(sa, ca))
			return EADDRINUSE;
	}
	return 0;
}

/* rdma_get_src_port -- local port of the id */
__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? scm_port(&id->route.addr.src_addr) : 0;
}

/* rdma_get_dst_port -- remote port of the id */
__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? scm_port(&id->route.addr.dst_addr) : 0;
}
