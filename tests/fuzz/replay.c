/* SPDX-License-Identifier: MIT */
/*
 * replay.c -- a fuzz target's driver without libFuzzer: runs every file
 * named on the command line (or found in a directory named there) through
 * LLVMFuzzerTestOneInput, each in a buffer of exactly its size so that an
 * overread meets ASan's redzone or valgrind.  With -m it also runs
 * deterministic variants of each file: shorter prefixes, each byte with
 * each bit flipped and set to 0x00, 0x7f, 0x80 and 0xff, and the file with
 * 1 and 64 bytes appended: a cheap search around the seeds for builds
 * without libFuzzer.  In a long file only the first HEAD and the last TAIL
 * bytes (where headers and lengths meet the end) are varied one by one,
 * and every STRIDE-th beyond, so that a corpus stays quick under valgrind.
 *
 * usage: replay [-m] [-v] PATH...
 * Exit status 0, or 2 for a usage error or an unreadable or empty input
 * set; a bug found aborts (the name of the input comes first on stderr).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLAY_MAX (1 << 20) /* libFuzzer's default -max_len is far less */
#define HEAD	   256
#define TAIL	   16
#define STRIDE	   64

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static int mutate, verbose;
static unsigned long runs;
static const char *cur_file; /* what runs now, for the crash report */
static const char *cur_variant = "as is";
static size_t cur_pos;

/* on_death -- name the input a sanitizer (or abort) stopped at */
static void on_death(void)
{
	fprintf(stderr, "replay: stopped at %s, variant: %s (byte %zu)\n",
		cur_file ? cur_file : "?", cur_variant, cur_pos);
}

/* on_signal -- the same for a crash no sanitizer reports, then die of it */
static void on_signal(int sig)
{
	on_death();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* run -- one input, in a heap copy of exactly its length */
static void run(const uint8_t *data, size_t len, const char *variant,
		size_t pos)
{
	uint8_t *copy = malloc(len ? len : 1);

	if (!copy) {
		perror("replay: malloc");
		exit(2);
	}
	if (len)
		memcpy(copy, data, len);
	cur_variant = variant;
	cur_pos = pos;
	LLVMFuzzerTestOneInput(copy, len);
	free(copy);
	runs++;
}

/* varied -- whether byte pos of a len-byte input is varied (and cut at) */
static int varied(size_t pos, size_t len)
{
	return pos < HEAD || pos + TAIL >= len || pos % STRIDE == 0;
}

/* run_variants -- the input, then (with -m) what lies around it */
static void run_variants(const uint8_t *data, size_t len)
{
	static const uint8_t set[] = {0x00, 0x7f, 0x80, 0xff};
	uint8_t *buf;
	size_t i, j;

	run(data, len, "as is", 0);
	if (!mutate)
		return;
	for (i = 0; i < len; i++)
		if (varied(i, len))
			run(data, i, "prefix", i);
	buf = malloc(len + 64);
	if (!buf) {
		perror("replay: malloc");
		exit(2);
	}
	memcpy(buf, data, len);
	for (i = 0; i < len; i++) {
		if (!varied(i, len))
			continue;
		for (j = 0; j < 8; j++) {
			buf[i] ^= (uint8_t)(1u << j);
			run(buf, len, "bit flipped", i);
			buf[i] ^= (uint8_t)(1u << j);
		}
		for (j = 0; j < sizeof(set); j++) {
			buf[i] = set[j];
			run(buf, len, "byte set", i);
		}
		buf[i] = data[i];
	}
	memset(buf + len, 0, 64);
	run(buf, len + 1, "one byte appended", len);
	memset(buf + len, 0xff, 64);
	run(buf, len + 64, "64 bytes appended", len);
	free(buf);
}

/* replay_file -- read path whole and run it; 0 or -errno */
static int replay_file(const char *path)
{
	uint8_t *data = NULL;
	size_t len = 0, cap = 0, n;
	FILE *f = fopen(path, "rb");

	if (!f)
		return -errno;
	do {
		if (len == cap) {
			uint8_t *p;

			if (cap >= REPLAY_MAX) {
				fprintf(stderr, "replay: %s: over %d bytes\n",
					path, REPLAY_MAX);
				free(data);
				fclose(f);
				return -EFBIG;
			}
			cap = cap ? 2 * cap : 4096;
			p = realloc(data, cap);
			if (!p) {
				free(data);
				fclose(f);
				return -ENOMEM;
			}
			data = p;
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
	} while (n);
	if (ferror(f)) {
		free(data);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	if (verbose)
		fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	cur_file = path;
	run_variants(data ? data : (const uint8_t *)"", len);
	cur_file = NULL;
	free(data);
	return 0;
}

/* replay_path -- a file, or every file of a directory; files run or -errno */
static int replay_path(const char *path)
{
	struct dirent *de;
	int files = 0, ret;
	DIR *d = opendir(path);

	if (!d) {
		if (errno != ENOTDIR)
			return -errno;
		ret = replay_file(path);
		return ret ? ret : 1;
	}
	while ((de = readdir(d))) {
		char *sub;

		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&sub, "%s/%s", path, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		ret = replay_file(sub);
		if (ret == -EISDIR) /* a subdirectory: not an input */
			ret = 0;
		else if (!ret)
			files++;
		free(sub);
		if (ret) {
			closedir(d);
			return ret;
		}
	}
	closedir(d);
	return files;
}

int main(int argc, char **argv)
{
	int opt, files = 0, ret, i;

	while ((opt = getopt(argc, argv, "mv")) != -1) {
		switch (opt) {
		case 'm':
			mutate = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-m] [-v] PATH...\n",
				argv[0]);
			return 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "usage: %s [-m] [-v] PATH...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	/* a sanitizer reports faults itself; abort() is the target's own */
	if (__sanitizer_set_death_callback) {
		__sanitizer_set_death_callback(on_death);
	} else {
		signal(SIGSEGV, on_signal);
		signal(SIGBUS, on_signal);
		signal(SIGFPE, on_signal);
		signal(SIGILL, on_signal);
	}
	signal(SIGABRT, on_signal);
	for (i = optind; i < argc; i++) {
		ret = replay_path(argv[i]);
		if (ret < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(-ret));
			return 2;
		}
		files += ret;
	}
	if (!files) {
		fprintf(stderr, "replay: no input found\n");
		return 2;
	}
	printf("replay: %d files, %lu runs\n", files, runs);
	return 0;
}
