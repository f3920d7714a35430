/* SPDX-License-Identifier: MIT */
/* strerror.c -- rdmamsg_strerror() covers every errno the API returns */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "rdmamsg.h"
#include "../tap.h"

int main(void)
{
	static const int errs[] = {
		EINVAL,	    ENOMEM,	  EAGAIN,     EBUSY,	 EMSGSIZE,
		ENOTCONN,   ENOTSUP,	  ECANCELED,  ETIMEDOUT, ECONNREFUSED,
		ECONNRESET, EACCES,	  EREMOTEIO,  ENODEV,	 EPROTO,
		EALREADY,   EHOSTUNREACH, EADDRINUSE, ENOENT,	 ENOBUFS,
		ERANGE,	    ENOSPC,	  EPIPE,      EPERM,	 EADDRNOTAVAIL,
		EMFILE,	    EIO,	  ENETDOWN};
	size_t i;

	ok(!strcmp(rdmamsg_strerror(0), "success"), "0 is success");
	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		ok(strcmp(rdmamsg_strerror(-errs[i]), "unknown error") != 0,
		   "-%d has its own text: %s", errs[i],
		   rdmamsg_strerror(-errs[i]));
	ok(!strcmp(rdmamsg_strerror(-12345), "unknown error"),
	   "an unknown value gets a constant text");
	ok(!strcmp(rdmamsg_version(), "0.1.0"), "version string");
	return done_testing();
}
