/* data_in.h: internal to runtime/.  The byte stream a dataset loader reads
 * one file from: a regular file, gunzipped as it is read when it holds gzip
 * data, or bytes already in memory (the parsers' and fuzzers' entry).
 *
 * A gzip stream inflates no further than its caller asks (it reads at
 * most 64 KiB of compressed input ahead), so a loader that reads what a
 * header promises and then one byte more decompresses no more than that,
 * whatever the file would inflate to.  The end of the data is only
 * reported once the gzip trailer (CRC and length) has been checked;
 * concatenated gzip members are read as one stream, and anything else
 * after a member is corrupt data. */
#ifndef REVC_RT_DATA_IN_H
#define REVC_RT_DATA_IN_H

#include "rt.h"

typedef struct {
	const char *name;     /* in messages: the path, or the caller's name */
	int64_t size;         /* bytes the stream holds: known for a plain file and
	                       * for memory, -1 for gzip data */
	int64_t pos;          /* bytes read so far */
	const uint8_t *mem;   /* a memory stream's bytes */
	int fd;               /* a file stream's descriptor, else -1 */
	void *z;              /* a gzip stream's inflate state (data_in.c), else NULL */
} rt_data_in;

/* Opens path (a regular file) for reading; on failure nothing is open. */
bool rt_data_in_open(rt_data_in *in, const char *path, rt_err *e);
/* A stream over len bytes at p, which must outlive it. */
void rt_data_in_memory(rt_data_in *in, const void *p, size_t len, const char *name);
/* Reads up to n bytes into buf; *got < n only at the end of the data.
 * False on a read error or corrupt gzip data (the message names the file). */
bool rt_data_in_read(rt_data_in *in, void *buf, size_t n, size_t *got, rt_err *e);
/* Whether any data follows what has been read; reads at most one byte. */
bool rt_data_in_more(rt_data_in *in, bool *more, rt_err *e);
void rt_data_in_close(rt_data_in *in);

#endif
