/* hello.c -- connect, send one message, print the echo, close */
#include <stdio.h>
#include <rdmamsg.h>

static int echoed;

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t pdata_len, void *arg)
{
	if (status == 0)
		rdmamsg_send(ep, "hello", 5, NULL);
	else
		rdmamsg_ep_close(ep, NULL);
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	printf("echo: %.*s\n", (int)len, (char *)data);
	echoed = 1;
	rdmamsg_ep_close(ep, NULL); /* asynchronous: run() returns after it */
}

int main(int argc, char **argv)
{
	struct rdmamsg_ep_cbs cbs = {.on_connect = on_connect,
				     .on_recv = on_recv};
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;

	/* An RDMA device if there is one, else softrdma. */
	if (argc != 2 || rdmamsg_ctx_create(NULL, &ctx))
		return 1;
	/* A private loop; rdmamsg_ctx_attr_set_loop() takes yours. */
	if (rdmamsg_connect(ctx, argv[1], NULL, &cbs, NULL, &ep) == 0)
		rdmamsg_ctx_run(ctx);
	rdmamsg_ctx_destroy(&ctx);
	return echoed ? 0 : 1;
}
