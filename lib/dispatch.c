/* SPDX-License-Identifier: MIT */
/* dispatch.c -- bind the control path to libibverbs/librdmacm or softrdma */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "dispatch.h"

#ifndef RDMAMSG_SOFTRDMA_PATH
#define RDMAMSG_SOFTRDMA_PATH "libsoftrdma.so"
#endif

#define VERBS_OP(field, sym, ret, args) .field = sym,
/* clang-format off */
static const struct rdmamsg__ops verbs_ops = {
	.name = "verbs",
	RDMAMSG__OPS(VERBS_OP)
};
/* clang-format on */

#define SOFT_SYM(field, sym, ret, args) \
	{offsetof(struct rdmamsg__ops, field), #sym},
static const struct {
	size_t off;
	const char *sym;
} soft_syms[] = {RDMAMSG__OPS(SOFT_SYM)};

/* softrdma is loaded once per process and never unloaded: its transport
 * threads may outlive a context. */
static pthread_mutex_t soft_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdmamsg__ops soft_ops;
static void *soft_dl;
static int soft_forking; /* soft_lock taken for a fork() */

/* soft_fork_prepare -- soft_lock across fork(), so that the child does
 * not find it held by a thread that did not come along; unless a thread
 * is loading softrdma right now: its dlopen() runs softrdma's
 * constructors, which register fork handlers, and before glibc 2.36 that
 * waits for glibc's fork lock, which this fork holds */
static void soft_fork_prepare(void)
{
	soft_forking = !pthread_mutex_trylock(&soft_lock);
}

static void soft_fork_parent(void)
{
	if (soft_forking)
		pthread_mutex_unlock(&soft_lock);
}

/* soft_fork_child -- released, or made anew when its holder was loading
 * softrdma: the child loads it again (soft_dl is set last) */
static void soft_fork_child(void)
{
	if (soft_forking)
		pthread_mutex_unlock(&soft_lock);
	else
		pthread_mutex_init(&soft_lock, NULL);
}

/* dispatch_load -- library load: register them */
__attribute__((constructor)) static void dispatch_load(void)
{
	pthread_atfork(soft_fork_prepare, soft_fork_parent, soft_fork_child);
}

/* soft_load -- dlopen softrdma and fill soft_ops (under soft_lock) */
static int soft_load(void)
{
	const char *path = getenv("RDMAMSG_SOFTRDMA_PATH");
	struct rdmamsg__ops ops;
	void *dl;
	size_t i;

	if (soft_dl)
		return 0;
	if (!path || !*path)
		path = RDMAMSG_SOFTRDMA_PATH;
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		LOG_ERR("cannot load softrdma from %s: %s", path, dlerror());
		return -ENODEV;
	}
	memset(&ops, 0, sizeof(ops));
	ops.name = "soft";
	for (i = 0; i < sizeof(soft_syms) / sizeof(soft_syms[0]); i++) {
		void *f = dlsym(dl, soft_syms[i].sym);

		if (!f) {
			LOG_ERR("softrdma at %s lacks %s", path,
				soft_syms[i].sym);
			dlclose(dl);
			return -ENODEV;
		}
		memcpy((char *)&ops + soft_syms[i].off, &f, sizeof(f));
	}
	soft_ops = ops;
	/* last (soft_fork_child), after the ops in memory order too */
	__atomic_store_n(&soft_dl, dl, __ATOMIC_RELEASE);
	LOG_INFO("softrdma loaded from %s", path);
	return 0;
}

/* verbs_present -- true when libibverbs lists at least one device */
static int verbs_present(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	return list && n > 0;
}

/* fabric_from_env -- apply RDMAMSG_FABRIC to an AUTO request */
static int fabric_from_env(enum rdmamsg_fabric *f)
{
	const char *e = getenv("RDMAMSG_FABRIC");

	if (!e || !*e || !strcasecmp(e, "auto"))
		return 0;
	if (!strcasecmp(e, "verbs")) {
		*f = RDMAMSG_FABRIC_VERBS;
		return 0;
	}
	if (!strcasecmp(e, "soft")) {
		*f = RDMAMSG_FABRIC_SOFT;
		return 0;
	}
	LOG_ERR("RDMAMSG_FABRIC=%s: expected auto, verbs or soft", e);
	return -ENOTSUP;
}

/* rdmamsg__dispatch_open -- choose the fabric and bind ctx->ops */
int rdmamsg__dispatch_open(struct rdmamsg_ctx *ctx, enum rdmamsg_fabric want)
{
	int ret;

	if (want == RDMAMSG_FABRIC_AUTO) {
		ret = fabric_from_env(&want);
		if (ret)
			return ret;
	}
	if (want == RDMAMSG_FABRIC_AUTO)
		want = verbs_present() ? RDMAMSG_FABRIC_VERBS
				       : RDMAMSG_FABRIC_SOFT;
	if (want == RDMAMSG_FABRIC_VERBS) {
		ctx->ops = &verbs_ops;
		ctx->fabric = want;
		return 0;
	}
	pthread_mutex_lock(&soft_lock);
	ret = soft_load();
	pthread_mutex_unlock(&soft_lock);
	if (ret)
		return ret;
	ctx->ops = &soft_ops;
	ctx->dl = soft_dl;
	ctx->fabric = RDMAMSG_FABRIC_SOFT;
	return 0;
}

/* rdmamsg__dispatch_close -- forget the binding (softrdma stays loaded) */
void rdmamsg__dispatch_close(struct rdmamsg_ctx *ctx)
{
	ctx->ops = NULL;
	ctx->dl = NULL;
}
