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
 * compile goes on without the cache.  Nothing is ever removed: the
 * directory may be deleted at any time.
 *
 * REVC_OBJECT_CACHE=0 turns the cache off (unset or 1: on; anything else
 * is an error, cg_objcache_env_ok). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm-c/BitWriter.h>

#include "internal.h"
#include "revc_config.h" /* REVC_VERSION */

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

bool cg_objcache_env_ok(ir_diags *d)
{
	const char *e = getenv("REVC_OBJECT_CACHE");
	if (e && *e && strcmp(e, "0") && strcmp(e, "1")) {
		ir_diag_add(d, (ir_pos){0}, "REVC_OBJECT_CACHE must be 0 or 1 (or unset), not '%.60s'", e);
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

void cg_objcache_store(const char *key, LLVMMemoryBufferRef obj)
{
	char dir[4096], path[4200], tmp[4300];
	if (!dir_path(dir, sizeof dir) || !file_path(key, path, sizeof path))
		return;
	/* The parent (revc/) first, then objects/. */
	char *slash = strrchr(dir, '/');
	*slash = 0;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return;
	*slash = '/';
	if (mkdir(dir, 0755) && errno != EEXIST)
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
	if (!ok || rename(tmp, path))
		unlink(tmp);
}
