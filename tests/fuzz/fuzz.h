/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h -- the entry points of a fuzz target, included ahead of every
 * file of a fuzz build (tests/fuzz.am passes -include), so that targets
 * need no prototype of their own.  Spelled with built-in types only: it
 * comes before config.h, which must precede every system header.
 */
#ifndef RDMAMSG_FUZZ_H
#define RDMAMSG_FUZZ_H

/* LLVMFuzzerTestOneInput -- run one input: return 0; crash, abort or
 * leak on a bug (uint8_t and size_t, as libFuzzer declares it) */
int LLVMFuzzerTestOneInput(const unsigned char *data, __SIZE_TYPE__ size);

/* LLVMFuzzerInitialize -- optional one-time setup of a target */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif /* RDMAMSG_FUZZ_H */
