/* SPDX-License-Identifier: MIT */
/*
 * rma.c -- one-sided operations between processes: registration, export
 * and import; RDMA write, write with immediate, read, fetch-and-add and
 * compare-and-swap from several endpoints at once (the counters and the
 * data must come out exact); bad input and access violations refused
 * locally; a forged export and a revoked registration reported as remote
 * access errors that take the endpoint down, every pending operation
 * completing exactly once.  rdmamsg_mr_alloc() makes zeroed,
 * page-aligned, registered memory in a memfd of its own, refuses bad
 * input, and rdmamsg_mr_dereg() frees it; the server's read-only region
 * is such memory, and on softrdma the client's READs of it map its file;
 * so is the revoked one, written (mapped) before the revocation.
 */
#include "config.h"

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../tap.h"
#include "../core/util.h"

#define NEP	  4
#define RW_LEN	  ((size_t)1 << 20)
#define RO_LEN	  ((size_t)64 << 10)
#define REV_LEN	  ((size_t)64 << 10)
#define SL	  ((size_t)64 << 10) /* one endpoint's slice */
#define SLICE_OFF ((size_t)64 << 10)
#define WINDOW	  16

static unsigned int nops, ncas;

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_mr *rw, *ro, *rev;
	char *rw_mem, *ro_mem;
	int nconn, nclosed, lclosed, failures, imms;
	struct rdmamsg_ep_attr *attr;
};

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->nclosed++;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_closed);
}

/* srv_connect -- send the client our three exports */
static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	uint8_t ex[3 * RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	if (status) {
		s->failures++;
		return;
	}
	if (rdmamsg_mr_export(s->rw, ex, RDMAMSG_MR_EXPORT_SIZE) ||
	    rdmamsg_mr_export(s->ro, ex + 32, RDMAMSG_MR_EXPORT_SIZE) ||
	    (s->rev ? rdmamsg_mr_export(s->rev, ex + 64, 32)
		    : (memset(ex + 64, 0, 32), 0)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		s->failures++;
}

/* srv_recv -- "revoke": deregister the third region */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;

	(void)imm;
	(void)flags;
	if (len == 6 && !memcmp(data, "revoke", 6)) {
		if (s->rev && rdmamsg_mr_dereg(&s->rev))
			s->failures++;
		if (rdmamsg_send(ep, "revoked", 7, NULL))
			s->failures++;
	}
}

/* srv_write_imm -- the client wrote its slice: send back its checksum */
static void srv_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			  void *arg)
{
	struct srv *s = arg;
	uint64_t r[2] = {imm, 0};
	size_t i;

	s->imms++;
	if (imm >= NEP || len != 4096) {
		s->failures++;
		return;
	}
	for (i = 0; i < SL; i++)
		r[1] = r[1] * 31 +
		       (unsigned char)s->rw_mem[SLICE_OFF + imm * SL + i];
	if (rdmamsg_send(ep, r, sizeof(r), NULL))
		s->failures++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, s->attr, &srv_cbs, s, &ep))
		s->failures++;
	s->nconn++;
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct srv *)arg)->lclosed = 1;
}

/* server -- the target of every one-sided operation */
static int server(int wfd, void *arg)
{
	struct srv s;
	int done = 0;
	size_t i;

	(void)arg;
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	s.rw_mem = calloc(1, RW_LEN);
	/* the read-only region is memory the library made: on softrdma the
	 * client's READs map it (main checks) */
	if (rdmamsg_mr_reg(s.ctx, s.rw_mem, RW_LEN,
			   RDMAMSG_ACCESS_REMOTE_READ |
				   RDMAMSG_ACCESS_REMOTE_WRITE |
				   RDMAMSG_ACCESS_REMOTE_ATOMIC,
			   &s.rw) ||
	    rdmamsg_mr_alloc(s.ctx, RO_LEN, RDMAMSG_ACCESS_REMOTE_READ,
			     &s.ro) ||
	    rdmamsg_mr_get_data(s.ro, (void **)&s.ro_mem, NULL) ||
	    rdmamsg_mr_alloc(s.ctx, REV_LEN, RDMAMSG_ACCESS_REMOTE_WRITE,
			     &s.rev))
		return 11;
	for (i = 0; i < RO_LEN; i++)
		s.ro_mem[i] = (char)(i * 7);
	rdmamsg_ep_attr_new(&s.attr);
	rdmamsg_ep_attr_set_on_write_imm(s.attr, srv_write_imm);
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 12;
	while (!done) {
		test_run_until(s.ctx, &done, 100);
		done = s.nconn == NEP && s.nclosed == NEP;
	}
	rdmamsg_listener_close(s.lst, lst_closed);
	test_run_until(s.ctx, &s.lclosed, 60000);
	rdmamsg_ep_attr_delete(&s.attr);
	if (rdmamsg_mr_dereg(&s.rw) || rdmamsg_mr_dereg(&s.ro) ||
	    (s.rev && rdmamsg_mr_dereg(&s.rev)))
		return 13;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 14;
	free(s.rw_mem);
	if (s.imms != NEP) {
		printf("# server: %d writes with immediate, want %d\n", s.imms,
		       NEP);
		return 15;
	}
	return s.failures ? 16 : 0;
}

/* ---- client -------------------------------------------------------- */

struct cep {
	struct rdmamsg_ep *ep;
	int idx, connected, status, exports, revoked;
	int disc, disc_status, closed;
	uint8_t ex[3 * RDMAMSG_MR_EXPORT_SIZE];
	struct rdmamsg_rmr *rw, *ro, *rev;
	unsigned int fadd_issued, fadd_done;
	uint64_t cas_guess;
	unsigned int cas_ok, cas_tries;
	int wdone, widone, rdone, sum_ok, sum_got;
	uint64_t sum_want;
	int bad_status;
};

static struct rdmamsg_ctx *ctx;
static struct rdmamsg_mr *lmr;
static char *lmem; /* NEP slices to write, NEP slices to read back */
static unsigned char *seen;
static uint64_t total_fadd;
static int cb_calls, dup_values;

static struct cep ceps[NEP], dummy;

static void op_cb(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx);

/* fadd_more -- keep WINDOW fetch-and-adds in flight */
static void fadd_more(struct cep *c)
{
	while (c->fadd_issued < nops &&
	       c->fadd_issued - c->fadd_done < WINDOW) {
		if (rdmamsg_atomic_fadd(c->ep, c->rw, 0, 1, op_cb,
					(void *)(uintptr_t)1))
			break;
		c->fadd_issued++;
	}
}

/* cas_next -- one compare-and-swap increment attempt */
static void cas_next(struct cep *c)
{
	if (c->cas_ok < ncas &&
	    rdmamsg_atomic_cas(c->ep, c->rw, 8, c->cas_guess, c->cas_guess + 1,
			       op_cb, (void *)(uintptr_t)2) == 0)
		c->cas_tries++;
}

/* op_cb -- every one-sided completion of the concurrency phase */
static void op_cb(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx)
{
	struct cep *c;
	int kind = (int)(uintptr_t)op_ctx, i;

	cb_calls++;
	c = NULL;
	for (i = 0; i < NEP; i++)
		if (ceps[i].ep == ep)
			c = &ceps[i];
	if (!c)
		return;
	if (status) {
		c->bad_status = status;
		return;
	}
	switch (kind) {
	case 1:
		c->fadd_done++;
		if (value >= total_fadd || seen[value])
			dup_values++;
		else
			seen[value] = 1;
		fadd_more(c);
		break;
	case 2:
		if (value == c->cas_guess) {
			c->cas_ok++;
			c->cas_guess++;
		} else {
			c->cas_guess = value;
		}
		cas_next(c);
		break;
	case 3:
		c->wdone = 1;
		break;
	case 4:
		c->widone = 1;
		break;
	case 5:
		c->rdone = 1;
		break;
	default:
		break;
	}
}

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cep *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->connected = 1;
	c->status = status;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cep *c = arg;
	uint64_t r[2];

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == sizeof(c->ex)) {
		memcpy(c->ex, data, len);
		c->exports = 1;
	} else if (len == sizeof(r)) {
		memcpy(r, data, sizeof(r));
		c->sum_got = 1;
		c->sum_ok = r[0] == (uint64_t)c->idx && r[1] == c->sum_want;
	} else if (len == 7 && !memcmp(data, "revoked", 7)) {
		c->revoked = 1;
	}
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cep *c = arg;

	(void)ep;
	c->disc++;
	c->disc_status = status;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cep *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_disconnect = cli_disc,
};

/* all -- every endpoint satisfies the condition */
#define ALL(cond)                                  \
	({                                         \
		int a_ = 1, i_;                    \
		for (i_ = 0; i_ < NEP; i_++) {     \
			struct cep *c = &ceps[i_]; \
			(void)c;                   \
			if (!(cond))               \
				a_ = 0;            \
		}                                  \
		a_;                                \
	})

/* run_all -- drive until cond holds for every endpoint (or ms pass) */
#define RUN_ALL(cond, ms)                                  \
	do {                                               \
		long long end_ = test_now_ms() + (ms);     \
		int z_ = 0;                                \
		while (!ALL(cond) && test_now_ms() < end_) \
			test_run_until(ctx, &z_, 20);      \
	} while (0)

/* count_cb -- the violation phase: every completion is counted */
static int vio_calls, vio_status[8];
static void vio_cb(struct rdmamsg_ep *ep, int status, uint64_t value,
		   void *op_ctx)
{
	(void)ep;
	(void)value;
	if (vio_calls < 8)
		vio_status[vio_calls] = status;
	vio_calls++;
	(void)op_ctx;
}

/* mr_maps -- this process's mappings of rdmamsg_mr_alloc()'s files (its
 * own, or a peer's that softrdma mapped) */
static int mr_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:rdmamsg-mr") != NULL;
	fclose(f);
	return n;
}

/* alloc_regions -- rdmamsg_mr_alloc(): zeroed, page-aligned memory of
 * the length asked, registered, in a memfd of its own, and gone with
 * rdmamsg_mr_dereg() */
static void alloc_regions(void)
{
	struct rdmamsg_mr *m = NULL;
	int before = mr_maps(), zero = 1;
	unsigned char *p = NULL;
	size_t len = 0, i;

	is_int(rdmamsg_mr_alloc(ctx, 5000,
				RDMAMSG_ACCESS_REMOTE_READ |
					RDMAMSG_ACCESS_REMOTE_WRITE,
				&m),
	       0, "mr_alloc of 5000 bytes");
	if (!m) {
		bail_out("no region");
		return;
	}
	is_int(rdmamsg_mr_get_data(m, (void **)&p, &len), 0, "its data");
	is_int(len, 5000, "its length is the one asked");
	ok(p && (uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE) == 0,
	   "page-aligned");
	for (i = 0; i < len; i++)
		zero &= p[i] == 0;
	ok(zero, "zeroed");
	memset(p, 0x3c, len);
	is_int(mr_maps(), before + 1, "one mapping of a memfd of its own");
	is_int(rdmamsg_mr_dereg(&m), 0, "mr_dereg frees it");
	ok(m == NULL, "and clears the pointer");
	is_int(mr_maps(), before, "its mapping is gone");
}

/* bad_input -- local refusals: nothing posted, no callback */
static void bad_input(struct cep *c)
{
	struct rdmamsg_rmr *r = NULL;
	struct rdmamsg_mr *m = NULL;
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];
	int before = cb_calls + vio_calls;
	size_t sz;

	is_int(rdmamsg_write(c->ep, lmr, 0, c->ro, 0, 8, vio_cb, NULL), -EACCES,
	       "write to a read-only export: -EACCES locally");
	is_int(rdmamsg_read(c->ep, lmr, 0, c->rev, 0, 8, vio_cb, NULL), -EACCES,
	       "read from a write-only export: -EACCES locally");
	is_int(rdmamsg_atomic_fadd(c->ep, c->ro, 0, 1, vio_cb, NULL), -EACCES,
	       "atomic on a read-only export: -EACCES");
	is_int(rdmamsg_write(c->ep, lmr, 0, c->rw, RW_LEN - 4, 8, vio_cb, NULL),
	       -ERANGE, "remote range past the export: -ERANGE");
	is_int(rdmamsg_write(c->ep, lmr, 0, c->rw, (size_t)-1, 8, vio_cb, NULL),
	       -ERANGE, "remote offset overflow: -ERANGE");
	is_int(rdmamsg_read(c->ep, lmr, 2 * NEP * SL, c->rw, 0, 1, vio_cb,
			    NULL),
	       -ERANGE, "local range past the registration: -ERANGE");
	is_int(rdmamsg_atomic_cas(c->ep, c->rw, 3, 0, 1, vio_cb, NULL), -EINVAL,
	       "misaligned atomic: -EINVAL");
	is_int(rdmamsg_atomic_cas(c->ep, c->rw, RW_LEN, 0, 1, vio_cb, NULL),
	       -ERANGE, "atomic past the end: -ERANGE");
	is_int(rdmamsg_write(NULL, lmr, 0, c->rw, 0, 8, vio_cb, NULL), -EINVAL,
	       "NULL endpoint: -EINVAL");
	is_int(rdmamsg_write(c->ep, NULL, 0, c->rw, 0, 8, vio_cb, NULL),
	       -EINVAL, "NULL local region: -EINVAL");
	is_int(rdmamsg_read(c->ep, lmr, 0, NULL, 0, 8, vio_cb, NULL), -EINVAL,
	       "NULL remote region: -EINVAL");
	is_int(rdmamsg_mr_reg(ctx, lmem, 0, 0, &m), -EINVAL,
	       "mr_reg of 0 bytes: -EINVAL");
	is_int(rdmamsg_mr_reg(ctx, lmem, 8, 0x100, &m), -EINVAL,
	       "mr_reg with an unknown flag: -EINVAL");
	is_int(rdmamsg_mr_alloc(ctx, 0, 0, &m), -EINVAL,
	       "mr_alloc of 0 bytes: -EINVAL");
	is_int(rdmamsg_mr_alloc(ctx, 8, 0x100, &m), -EINVAL,
	       "mr_alloc with an unknown flag: -EINVAL");
	is_int(rdmamsg_mr_alloc(NULL, 8, 0, &m), -EINVAL,
	       "mr_alloc without a context: -EINVAL");
	is_int(rdmamsg_mr_alloc(ctx, 8, 0, NULL), -EINVAL,
	       "mr_alloc without a result: -EINVAL");
	is_int(rdmamsg_mr_alloc(ctx, SIZE_MAX, 0, &m), -ENOMEM,
	       "mr_alloc of SIZE_MAX bytes: -ENOMEM");
	is_int(rdmamsg_mr_alloc(ctx, SIZE_MAX / 2, 0, &m), -ENOMEM,
	       "mr_alloc of SIZE_MAX / 2 bytes: -ENOMEM");
	ok(m == NULL, "output untouched on failure");
	is_int(rdmamsg_mr_export(lmr, ex, 8), -ENOSPC, "short export: -ENOSPC");
	memset(ex, 0x5a, sizeof(ex));
	is_int(rdmamsg_rmr_import(ex, sizeof(ex), &r), -EINVAL,
	       "import of garbage: -EINVAL");
	is_int(rdmamsg_rmr_import(c->ex, 8, &r), -EINVAL,
	       "import of a short export: -EINVAL");
	ok(r == NULL, "output untouched on failure");
	is_int(rdmamsg_rmr_get_size(c->rw, &sz), 0, "rmr_get_size");
	is_int(sz, RW_LEN, "imported size is the exported size");
	is_int(rdmamsg_mr_dereg(NULL), -EINVAL, "mr_dereg(NULL): -EINVAL");
	ok(strcmp(rdmamsg_strerror(-ERANGE), "unknown error") &&
		   strcmp(rdmamsg_strerror(-ENOSPC), "unknown error"),
	   "-ERANGE and -ENOSPC have their own texts");
	is_int(cb_calls + vio_calls, before, "no refused call ran a callback");
}

int main(void)
{
	struct rdmamsg_ep *dead = NULL;
	char addr[64];
	int rfd, i, accepted, zero = 0;
	uint64_t counters[2];
	long long t0;
	pid_t pid;

	test_setup("rma");
	nops = tap_small() ? 200 : 5000;
	ncas = tap_small() ? 50 : 1000;
	total_fadd = (uint64_t)nops * NEP;
	seen = calloc(1, total_fadd);
	ctx = test_ctx();
	if (rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_ATOMICS, &counters[0]))
		bail_out("softrdma reports no atomics");
	lmem = calloc(1, 2 * NEP * SL);
	is_int(rdmamsg_mr_reg(ctx, lmem, 2 * NEP * SL, 0, &lmr), 0,
	       "register local memory");
	is_int(rdmamsg_ctx_destroy(&ctx), -EBUSY,
	       "ctx_destroy with a registration: -EBUSY");
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));

	/* an endpoint not yet connected refuses one-sided operations */
	is_int(rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &dummy, &dead), 0,
	       "connect (to close at once)");
	is_int(rdmamsg_write(dead, lmr, 0, (struct rdmamsg_rmr *)lmr, 0, 8,
			     vio_cb, NULL),
	       -ENOTCONN, "write before connected: -ENOTCONN");
	rdmamsg_ep_close(dead, NULL);

	for (i = 0; i < NEP; i++) {
		ceps[i].idx = i;
		if (rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &ceps[i],
				    &ceps[i].ep))
			bail_out("connect %d failed", i);
	}
	RUN_ALL(c->connected && c->exports, 10000);
	ok(ALL(c->status == 0 && c->exports), "%d endpoints up with exports",
	   NEP);
	for (i = 0; i < NEP; i++) {
		struct cep *x = &ceps[i];

		if (rdmamsg_rmr_import(x->ex, 32, &x->rw) ||
		    rdmamsg_rmr_import(x->ex + 32, 32, &x->ro) ||
		    rdmamsg_rmr_import(x->ex + 64, 32, &x->rev))
			bail_out("import failed");
	}
	bad_input(&ceps[0]);
	alloc_regions();

	/* concurrency: atomics, writes, write_imm and reads on every ep */
	t0 = test_now_ms();
	for (i = 0; i < NEP; i++) {
		struct cep *x = &ceps[i];
		char *src = lmem + (size_t)i * SL;
		size_t j;

		for (j = 0; j < SL; j++) {
			src[j] = (char)((i + 1) * 31 + j * 13 + (j >> 9));
			x->sum_want = x->sum_want * 31 + (unsigned char)src[j];
		}
		fadd_more(x);
		cas_next(x);
		is_int(rdmamsg_write(x->ep, lmr, (size_t)i * SL, x->rw,
				     SLICE_OFF + (size_t)i * SL, SL, op_cb,
				     (void *)(uintptr_t)3),
		       0, "write a slice");
		/* rewrites the slice's first 4 KiB with the same bytes */
		is_int(rdmamsg_write_imm(x->ep, lmr, (size_t)i * SL, x->rw,
					 SLICE_OFF + (size_t)i * SL, 4096,
					 (uint32_t)i, op_cb,
					 (void *)(uintptr_t)4),
		       0, "write with immediate (4 KiB)");
		is_int(rdmamsg_read(x->ep, lmr, (size_t)(NEP + i) * SL, x->rw,
				    SLICE_OFF + (size_t)i * SL, SL, op_cb,
				    (void *)(uintptr_t)5),
		       0, "read the slice back");
	}
	is_int(rdmamsg_mr_dereg(&lmr), -EBUSY,
	       "mr_dereg while operations use it: -EBUSY");
	RUN_ALL(c->fadd_done == nops && c->cas_ok == ncas && c->wdone &&
			c->widone && c->rdone && c->sum_got,
		60000);
	ok(ALL(c->fadd_done == nops), "every fetch-and-add completed");
	ok(ALL(c->cas_ok == ncas), "every compare-and-swap chain completed");
	ok(ALL(c->bad_status == 0), "no operation failed");
	is_int(dup_values, 0, "fetch-and-add results are all distinct");
	ok(ALL(c->sum_got && c->sum_ok),
	   "the peer saw each write_imm after its write (checksums match)");
	ok(ALL(!memcmp(lmem + (size_t)c->idx * SL,
		       lmem + (size_t)(NEP + c->idx) * SL, SL)),
	   "read back what was written");
	memset(lmem, 0, 16);
	ceps[0].rdone = 0;
	is_int(rdmamsg_read(ceps[0].ep, lmr, 0, ceps[0].rw, 0, 16, op_cb,
			    (void *)(uintptr_t)5),
	       0, "read the counters");
	RUN_ALL(ceps[0].rdone || c->idx != 0, 5000);
	memcpy(counters, lmem, 16);
	is_int(counters[0], total_fadd, "fetch-and-add counter exact");
	is_int(counters[1], (uint64_t)ncas * NEP,
	       "compare-and-swap counter exact");
	{
		int rd_ok = 1;
		size_t j;

		ceps[1].rdone = 0;
		is_int(rdmamsg_read(ceps[1].ep, lmr, 0, ceps[1].ro, 100, 4096,
				    op_cb, (void *)(uintptr_t)5),
		       0, "read from the read-only export");
		RUN_ALL(ceps[1].rdone || c->idx != 1, 5000);
		for (j = 0; j < 4096; j++)
			if (lmem[j] != (char)((j + 100) * 7))
				rd_ok = 0;
		ok(rd_ok, "read-only data as the peer wrote it");
	}
	/* the server made that region (rdmamsg_mr_alloc): on softrdma the
	 * READ mapped its file instead of calling process_vm_readv */
	{
		const char *dev = "";
		long pfd = syscall(SYS_pidfd_open, getpid(), 0);

		rdmamsg_ctx_get_device_name(ctx, &dev);
		if (pfd < 0 || strncmp(dev, "softrdma", 8) ||
		    getenv("SOFTRDMA_NO_MAP"))
			ok(1, "the READ mapped the server's region # SKIP "
			      "not softrdma, SOFTRDMA_NO_MAP, or no pidfd_open "
			      "here");
		else
			ok(mr_maps() >= 1,
			   "the READ mapped the server's region");
		if (pfd >= 0)
			close((int)pfd);
	}
	diag("%u fetch-and-add + %u cas chains x %d endpoints in %lld ms "
	     "(%u cas attempts on ep 0)",
	     nops, ncas, NEP, test_now_ms() - t0, ceps[0].cas_tries);

	/* remote errors: a forged export (past the real region) */
	{
		struct cep *x = &ceps[2];
		struct rdmamsg_rmr *forged = NULL;
		uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];
		uint64_t flen;

		memcpy(ex, x->ex, sizeof(ex));
		memcpy(&flen, ex + 24, 8);
		flen = flen * 2;
		memcpy(ex + 24, &flen, 8);
		is_int(rdmamsg_rmr_import(ex, sizeof(ex), &forged), 0,
		       "import a forged export (twice the length)");
		vio_calls = 0;
		accepted = 0;
		accepted += rdmamsg_write(x->ep, lmr, 0, forged, RW_LEN + 64,
					  64, vio_cb, NULL) == 0;
		is_int(accepted, 1, "out-of-bounds write accepted locally");
		accepted += rdmamsg_write(x->ep, lmr, 0, x->rw, 0, 64, vio_cb,
					  NULL) == 0;
		accepted += rdmamsg_atomic_fadd(x->ep, x->rw, 0, 1, vio_cb,
						NULL) == 0;
		RUN_ALL(vio_calls >= accepted && ceps[2].disc, 5000);
		is_int(vio_status[0], -EACCES,
		       "the bad write completes with -EACCES (remote)");
		ok(accepted == 1 || vio_status[1] != 0,
		   "operations behind it complete with an error");
		test_run_until(ctx, &zero, 100);
		is_int(vio_calls, accepted,
		       "every accepted operation completed exactly once");
		is_int(x->disc, 1, "endpoint disconnected once");
		is_int(x->disc_status, -EACCES, "on_disconnect got -EACCES");
		is_int(rdmamsg_write(x->ep, lmr, 0, x->rw, 0, 8, vio_cb, NULL),
		       -ENOTCONN, "then: -ENOTCONN");
		rdmamsg_rmr_free(&forged);
		ok(forged == NULL, "rmr_free clears the pointer");
	}
	/* remote errors: a registration the peer revoked */
	{
		struct cep *x = &ceps[3];

		/* the region is rdmamsg_mr_alloc()'s: on softrdma this
		 * write maps its file, which must not outlive the
		 * registration for the peer */
		vio_calls = 0;
		is_int(rdmamsg_write(x->ep, lmr, 0, x->rev, 0, 64, vio_cb,
				     NULL),
		       0, "write to the region before it is revoked");
		RUN_ALL(vio_calls || c->idx != 3, 5000);
		is_int(vio_status[0], 0, "which completes");
		is_int(rdmamsg_send(x->ep, "revoke", 6, NULL), 0,
		       "ask the peer to deregister");
		RUN_ALL(ceps[3].revoked || c->idx != 3, 5000);
		ok(x->revoked, "peer deregistered");
		vio_calls = 0;
		is_int(rdmamsg_write(x->ep, lmr, 0, x->rev, 0, 64, vio_cb,
				     NULL),
		       0, "write to the revoked region accepted locally");
		RUN_ALL(vio_calls || c->idx != 3, 5000);
		RUN_ALL(ceps[3].disc || c->idx != 3, 5000);
		is_int(vio_status[0], -EACCES,
		       "revoked registration: -EACCES (remote)");
		is_int(x->disc_status, -EACCES, "endpoint down with -EACCES");
	}
	/* the other endpoints are unaffected */
	ceps[0].rdone = 0;
	is_int(rdmamsg_read(ceps[0].ep, lmr, 0, ceps[0].rw, 0, 8, op_cb,
			    (void *)(uintptr_t)5),
	       0, "another endpoint still works");
	RUN_ALL(ceps[0].rdone || c->idx != 0, 5000);
	ok(ceps[0].rdone && ceps[0].bad_status == 0, "and completes");

	for (i = 0; i < NEP; i++) {
		rdmamsg_rmr_free(&ceps[i].rw);
		rdmamsg_rmr_free(&ceps[i].ro);
		rdmamsg_rmr_free(&ceps[i].rev);
		is_int(rdmamsg_ep_close(ceps[i].ep, cli_closed), 0, "close");
	}
	RUN_ALL(c->closed, 5000);
	ok(ALL(c->closed), "every endpoint closed");
	is_int(rdmamsg_mr_dereg(&lmr), 0, "deregister");
	ok(lmr == NULL, "mr_dereg clears the pointer");
	is_int(test_wait_child(pid), 0, "server checks pass");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	free(lmem);
	free(seen);
	close(rfd);
	return done_testing();
}
