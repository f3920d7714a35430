/* SPDX-License-Identifier: MIT */
/* addr.c -- "host:port" and "[v6]:port" into a socket address */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* rdmamsg__addr_parse -- resolve addr (numeric or name); port may be 0 */
int rdmamsg__addr_parse(const char *addr, struct sockaddr_storage *ss)
{
	char host[256], *end;
	const char *colon, *h = addr;
	struct addrinfo hints, *res;
	size_t hl;
	long port;
	int v6 = 0;

	if (!addr)
		return -EINVAL;
	if (*addr == '[') {
		const char *rb = strchr(addr, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = addr + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
		v6 = 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || strchr(addr, ':') != colon)
			return -EINVAL;
		hl = (size_t)(colon - addr);
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	/* digits only: strtol would take " 80" and "+80" too */
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || port > 65535 || errno)
		return -EINVAL;
	if (!strcmp(host, "*"))
		strcpy(host, "0.0.0.0");
	memset(&hints, 0, sizeof(hints));
	/* brackets are for IPv6 ("[10.0.0.1]:80" is no address) */
	hints.ai_family = v6 ? AF_INET6 : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) || !res)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else
		return -EINVAL;
	return 0;
}
