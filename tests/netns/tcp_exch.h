/* SPDX-License-Identifier: MIT */
/* tcp_exch.h -- the TCP side channel on which the namespace peers
 * (rc_peer, port_peer, sgid_peer) swap their QP numbers, keys and GIDs
 * (struct info) */
#ifndef RDMAMSG_TCP_EXCH_H
#define RDMAMSG_TCP_EXCH_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../tap.h"

/* what a peer tells the other of its QP, in the same layout in every
 * peer (mtu: port_peer's active path MTU; the others leave it alone) */
struct info {
	uint32_t qpn, psn, rkey, mtu;
	uint64_t addr;
	uint8_t gid[16];
};

/* xfer -- write (out) or read all n bytes at p, or bail out */
static void xfer(int fd, void *p, size_t n, int out)
{
	size_t d = 0;

	while (d < n) {
		ssize_t r = out ? write(fd, (char *)p + d, n - d)
				: read(fd, (char *)p + d, n - d);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			bail_out("tcp exchange");
		}
		d += (size_t)r;
	}
}

/* tcp_accept -- the one connection to TCP port on any address */
static int tcp_accept(int port)
{
	struct sockaddr_in a;
	int lfd, fd, one = 1;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1))
		bail_out("listen");
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	if (fd < 0)
		bail_out("accept");
	return fd;
}

/* tcp_connect -- a connection to host:port, tried for 60 s (the server
 * may not listen yet; a link just brought back up, on a loaded machine,
 * may take a while to carry: ARP of a neighbour marked failed) */
static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in a;
	int i, fd, err = 0, first = 0;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		bail_out("address %s", host);
	for (i = 0; i < 1200; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return fd;
		if (!first)
			first = errno;
		err = errno;
		close(fd);
		usleep(50000);
	}
	bail_out("connect %s:%d: %s (the first of %d tries: %s)", host, port,
		 strerror(err), i, strerror(first));
}

#endif /* RDMAMSG_TCP_EXCH_H */
