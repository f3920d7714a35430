/* SPDX-License-Identifier: MIT */
/* softrdma.h -- internal declarations shared by softrdma's files */
#ifndef SOFTRDMA_H
#define SOFTRDMA_H

/* Every standard entry point softrdma defines carries this mark. */
#define SOFT_EXPORT __attribute__((visibility("default")))

#endif /* SOFTRDMA_H */
