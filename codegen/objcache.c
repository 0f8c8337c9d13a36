/* objcache.c: compiled objects kept on disk, so that a second compile of
 * the same module skips LLVM's optimisation and emission (codegen/jit.c).
 *
 * The key is a 128-bit hash (two independent 64-bit hashes, FNV-1a and a
 * multiply-rotate one) of everything the object depends on: the module's
 * bitcode as emitted (before optimisation), the target CPU's name and
 * feature string (cg_cpu_target: "native" is resolved to this host's), the
 * code generator's optimisation level, whether the module is optimised and
 * with which pipeline (cg_optimize's options, written out in KEY_FIXED:
 * change them there too), the LLVM version and revc's.  Because the key
 * covers the exact IR, anything process-specific in the IR (an address, a
 * name made from a counter) makes a miss, never a wrong hit.
 *
 * Objects live in $XDG_CACHE_HOME/revc/objects/KEY.o (else
 * $HOME/.cache/revc/objects, as the conv tune's cache: none when neither
 * is an absolute path).  A file is a 32-byte header, then the object: the
 * magic "revcobj1", the object's length and two 64-bit hashes of its bytes,
 * little-endian.  A file whose header, length or hashes do not match is
 * not used; the compile that follows overwrites it.  A write goes to a
 * temporary name in the same directory, renamed over KEY.o, so a reader
 * never sees half a file.  Failures to read or write are silent: the
 * compile goes on without the cache.  The directory may be deleted at
 * any time.
 *
 * Its size is bounded: a store that takes the objects past the limit
 * (MAX_MIB, or REVC_OBJECT_CACHE_MAX in MiB) removes the least recently
 * used ones (by modification time, which a hit renews) until they are
 * under 3/4 of it, never the one just stored; a temporary file older than
 * an hour (a writer killed before its rename) goes too.  Two processes
 * trimming at once only unlink a file twice, and a reader that has the
 * file open keeps reading it: at worst a lookup misses and compiles.
 *
 * REVC_OBJECT_CACHE=0 turns the cache off (unset or 1: on; anything else
 * is an error, cg_objcache_env_ok); REVC_OBJECT_CACHE_MAX must be a whole
 * number of MiB, 1 or more. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/BitWriter.h>

#include "internal.h"
#include "revc_config.h" /* REVC_VERSION */

#define MAX_MIB 512         /* the directory's default limit */
#define STALE_SECONDS 3600  /* a temporary file this old was abandoned */
#define MAGIC "revcobj1"
#define HEADER_BYTES 32
/* What compile() and cg_optimize do that the module does not say. */
#define KEY_FIXED "revc-objcache 1|pipeline default<O3> loop-vectorize slp-vectorize no-unroll|reloc default|code-model default"

typedef struct {
	uint64_t a, b;
} hash128;

static void hash_bytes(hash128 *h, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t a = h->a, b = h->b;
	for (size_t i = 0; i < n; i++) {
		a = (a ^ s[i]) * 0x100000001b3ULL; /* FNV-1a */
		b = (b + s[i] + 1) * 0x9e3779b97f4a7c15ULL;
		b ^= b >> 29;
	}
	h->a = a, h->b = b;
}

static void hash_string(hash128 *h, const char *s)
{
	hash_bytes(h, s, strlen(s) + 1); /* the NUL separates fields */
}

static hash128 hash_init(void)
{
	return (hash128){0xcbf29ce484222325ULL, 0x243f6a8885a308d3ULL};
}

bool cg_objcache_on(void)
{
	const char *e = getenv("REVC_OBJECT_CACHE");
	return !(e && !strcmp(e, "0"));
}

/* REVC_OBJECT_CACHE_MAX in MiB, or 0 when it is not a whole number of 1
 * or more; MAX_MIB when unset or empty. */
static long long max_mib(void)
{
	const char *e = getenv("REVC_OBJECT_CACHE_MAX");
	if (!e || !*e)
		return MAX_MIB;
	char *end;
	errno = 0;
	long long v = strtoll(e, &end, 10);
	return *end || errno || v < 1 || v > ((long long)1 << 40) ? 0 : v;
}

bool cg_objcache_env_ok(ir_diags *d)
{
	const char *e = getenv("REVC_OBJECT_CACHE");
	if (e && *e && strcmp(e, "0") && strcmp(e, "1")) {
		ir_diag_add(d, (ir_pos){0}, "REVC_OBJECT_CACHE must be 0 or 1 (or unset), not '%.60s'", e);
		return false;
	}
	if (!max_mib()) {
		ir_diag_add(d, (ir_pos){0}, "REVC_OBJECT_CACHE_MAX must be a whole number of MiB, 1 or more, not '%.60s'",
			getenv("REVC_OBJECT_CACHE_MAX"));
		return false;
	}
	return true;
}

bool cg_objcache_key(LLVMModuleRef mod, const char *cpu, int level, bool optimize, char key[CG_OBJCACHE_KEY])
{
	LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(mod);
	if (!bc)
		return false;
	hash128 h = hash_init();
	char *name, *features;
	cg_cpu_target(cpu, &name, &features);
	char fields[128];
	snprintf(fields, sizeof fields, "level %d|optimize %d", level, (int)optimize);
	hash_string(&h, KEY_FIXED);
	hash_string(&h, REVC_VERSION);
	hash_string(&h, cg_llvm_version());
	char *triple = LLVMGetDefaultTargetTriple();
	hash_string(&h, triple);
	LLVMDisposeMessage(triple);
	hash_string(&h, name);
	hash_string(&h, features);
	hash_string(&h, fields);
	LLVMDisposeMessage(name);
	LLVMDisposeMessage(features);
	size_t n = LLVMGetBufferSize(bc);
	hash_bytes(&h, &n, sizeof n);
	hash_bytes(&h, LLVMGetBufferStart(bc), n);
	LLVMDisposeMemoryBuffer(bc);
	snprintf(key, CG_OBJCACHE_KEY, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
	return true;
}

/* The objects' directory, or false when there is no home for it. */
static bool dir_path(char *buf, size_t len)
{
	if (!cg_cache_dir(buf, len))
		return false;
	size_t n = strlen(buf);
	return snprintf(buf + n, len - n, "/objects") < (int)(len - n);
}

static bool file_path(const char *key, char *buf, size_t len)
{
	char dir[4096];
	if (!dir_path(dir, sizeof dir))
		return false;
	int n = snprintf(buf, len, "%s/%s.o", dir, key);
	return n > 0 && (size_t)n < len;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The header of an object of n bytes at p. */
static void header(unsigned char hd[HEADER_BYTES], const void *p, size_t n)
{
	hash128 h = hash_init();
	hash_bytes(&h, p, n);
	memcpy(hd, MAGIC, 8);
	put64(hd + 8, (uint64_t)n);
	put64(hd + 16, h.a);
	put64(hd + 24, h.b);
}

LLVMMemoryBufferRef cg_objcache_load(const char *key)
{
	char path[4200];
	if (!file_path(key, path, sizeof path))
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	unsigned char *data = NULL;
	LLVMMemoryBufferRef buf = NULL;
	if (fstat(fd, &st) || st.st_size < HEADER_BYTES || st.st_size > ((off_t)1 << 32))
		goto out;
	size_t size = (size_t)st.st_size, got = 0;
	if (!(data = malloc(size)))
		goto out;
	while (got < size) {
		ssize_t r = read(fd, data + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto out;
		got += (size_t)r;
	}
	size_t n = size - HEADER_BYTES;
	unsigned char want[HEADER_BYTES];
	if (memcmp(data, MAGIC, 8) || get64(data + 8) != (uint64_t)n)
		goto out;
	header(want, data + HEADER_BYTES, n);
	if (memcmp(want, data, HEADER_BYTES))
		goto out;
	buf = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)data + HEADER_BYTES, n, key);
	futimens(fd, NULL); /* recently used: the last a trim removes (a read-only cache keeps its times) */
out:
	free(data);
	close(fd);
	return buf;
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		s += w, n -= (size_t)w;
	}
	return true;
}

/* ---- the size limit ------------------------------------------------------ */

typedef struct {
	char name[CG_OBJCACHE_KEY + 2]; /* KEY.o */
	struct timespec used;
	int64_t bytes;
} entry;

static int older(const void *a, const void *b)
{
	const struct timespec *x = &((const entry *)a)->used, *y = &((const entry *)b)->used;
	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* Is name an object's (32 hex digits and ".o"), or a temporary one's
 * (that, a dot and mkstemp's six characters)? */
static bool object_name(const char *name, bool *temporary)
{
	size_t n = strspn(name, "0123456789abcdef");
	if (n != CG_OBJCACHE_KEY - 1 || strncmp(name + n, ".o", 2))
		return false;
	*temporary = name[n + 2] == '.';
	return name[n + 2] == 0 || *temporary;
}

/* The objects of dir under 3/4 of the limit once they are past it, the
 * least recently used removed first but never `keep` (a file name); stale
 * temporary files removed. */
static void trim(const char *dir, const char *keep)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	entry *e = NULL;
	int n = 0, cap = 0;
	int64_t total = 0;
	time_t now = time(NULL);
	char path[4400];
	for (struct dirent *de; (de = readdir(d));) {
		bool temporary;
		struct stat st;
		if (!object_name(de->d_name, &temporary) ||
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path || stat(path, &st))
			continue;
		if (temporary) {
			if (now - st.st_mtime > STALE_SECONDS)
				unlink(path);
			continue;
		}
		total += st.st_size;
		if (!strcmp(de->d_name, keep))
			continue;
		if (n == cap) {
			entry *grown = realloc(e, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *e);
			if (!grown)
				break;
			e = grown;
		}
		memcpy(e[n].name, de->d_name, sizeof e[n].name - 1); /* object_name: exactly that long */
		e[n].name[sizeof e[n].name - 1] = 0;
		e[n].used = st.st_mtim;
		e[n++].bytes = st.st_size;
	}
	closedir(d);
	int64_t max = (int64_t)max_mib() << 20;
	if (total > max) {
		qsort(e, (size_t)n, sizeof *e, older);
		for (int i = 0; i < n && total > max / 4 * 3; i++)
			if (snprintf(path, sizeof path, "%s/%s", dir, e[i].name) < (int)sizeof path && !unlink(path))
				total -= e[i].bytes;
	}
	free(e);
}

void cg_objcache_store(const char *key, LLVMMemoryBufferRef obj)
{
	char dir[4096], path[4200], tmp[4300];
	if (!dir_path(dir, sizeof dir) || !file_path(key, path, sizeof path))
		return;
	if (!cg_make_dirs(dir)) /* XDG_CACHE_HOME too: the conv tune may not have made it */
		return;
	snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0)
		return;
	fchmod(fd, 0644); /* as the conv tune's file, not mkstemp's 0600 */
	const char *p = LLVMGetBufferStart(obj);
	size_t n = LLVMGetBufferSize(obj);
	unsigned char hd[HEADER_BYTES];
	header(hd, p, n);
	bool ok = write_all(fd, hd, sizeof hd) && write_all(fd, p, n);
	ok = !close(fd) && ok;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return;
	}
	trim(dir, strrchr(path, '/') + 1);
}
