/* SPDX-License-Identifier: MIT */
/* internal.h -- declarations shared by librdmamsg's files */
#ifndef RDMAMSG_INTERNAL_H
#define RDMAMSG_INTERNAL_H

/* Every public entry point carries this mark (built -fvisibility=hidden). */
#define RDMAMSG_EXPORT __attribute__((visibility("default")))

#endif /* RDMAMSG_INTERNAL_H */
