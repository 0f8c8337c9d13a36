/* spec_parse.c: reads spec files and --set overrides (grammar: docs/spec.md).
 *
 * A file is read line by line.  Each line is scanned into words, '=' and ','
 * (a '#' ends it; in a --set, which is one line, '#' is an error).  A
 * statement is `model NAME` or `key = value[, value...]`.  Each value is
 * converted and checked on its own here (kind, sign, size, list length,
 * block and dataset words) and only then stored, so a failed --set leaves
 * the spec unchanged.  Checks that need the whole spec are spec_check.c's.
 *
 * The input is untrusted bytes: every read is bounded by the end of its
 * line, lines by FE_MAX_LINE and files by FE_MAX_FILE, and the first error,
 * scanning left to right, is the one reported. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lang.h"

typedef struct {
	const char *file; /* for positions: the spec's name, or "--set" */
	int line;
	const char *base; /* the byte at column 1 */
	const char *p, *end;
	bool is_set;      /* a --set string, not a line of a file */
	ir_diags *d;
} scanner;

typedef enum { T_END, T_WORD, T_EQ, T_COMMA, T_ERROR } tok_kind;

typedef struct {
	tok_kind kind;
	const char *s;
	size_t n;
	int col;
} tok;

/* The values after '=', as scanned: the first FE_MAX_VALUES + 1 are kept
 * (one more than any key takes, to point at), all are counted. */
typedef struct {
	tok v[FE_MAX_VALUES + 1];
	int n;
} elems;

static ir_pos pos_at(const scanner *sc, int col)
{
	return (ir_pos){sc->file, sc->line, col};
}

static int col_of(const scanner *sc, const char *p)
{
	return (int)(p - sc->base) + 1;
}

static bool fail(scanner *sc, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(scanner *sc, int col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(sc->d, pos_at(sc, col), fmt, ap);
	va_end(ap);
	return false;
}

/* Text from the input, for a message: at most 40 bytes of it.  Words are
 * printable ASCII by construction. */
static const char *show(char *buf, size_t cap, const char *s, size_t n)
{
	snprintf(buf, cap, "%.*s%s", (int)(n > 40 ? 40 : n), s, n > 40 ? "..." : "");
	return buf;
}

static const char *describe(const tok *t, char *buf, size_t cap)
{
	char w[48];
	switch (t->kind) {
	case T_END:
		return "end of line";
	case T_EQ:
		return "'='";
	case T_COMMA:
		return "','";
	default:
		show(w, sizeof w, t->s, t->n);
		snprintf(buf, cap, "'%.*s'", (int)(cap > 3 ? cap - 3 : 0), w);
		return buf;
	}
}

/* ---- scanning ---------------------------------------------------------- */

static bool is_word_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '#' && c != ',' && c != '=';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(char c)
{
	return is_ident_start(c) || is_digit(c) || c == '.' || c == '-';
}

static tok next(scanner *sc)
{
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\r'))
		sc->p++;
	tok t = {T_END, sc->p, 0, col_of(sc, sc->p)};
	if (sc->p == sc->end)
		return t;
	unsigned char c = (unsigned char)*sc->p;
	if (c == '#' && !sc->is_set) {
		/* A comment may hold any text, UTF-8 included, but no control
		 * bytes: those mean the file is not a spec. */
		for (const char *q = sc->p + 1; q < sc->end; q++) {
			unsigned char b = (unsigned char)*q;
			if ((b < 0x20 && b != '\t' && b != '\r') || b == 0x7f) {
				fail(sc, col_of(sc, q), "unexpected byte 0x%02x", b);
				t.kind = T_ERROR;
				return t;
			}
		}
		sc->p = sc->end;
		return t;
	}
	if (c == '=' || c == ',') {
		sc->p++;
		t.kind = c == '=' ? T_EQ : T_COMMA;
		t.n = 1;
		return t;
	}
	if (is_word_char(c)) {
		while (sc->p < sc->end && is_word_char((unsigned char)*sc->p))
			sc->p++;
		t.kind = T_WORD;
		t.n = (size_t)(sc->p - t.s);
		return t;
	}
	if (c > 0x20 && c < 0x7f)
		fail(sc, t.col, "unexpected character '%c'", c);
	else
		fail(sc, t.col, "unexpected byte 0x%02x", c);
	t.kind = T_ERROR;
	return t;
}

/* ---- keys -------------------------------------------------------------- */

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Levenshtein distance, ignoring case; a and b are short (a <= 64 bytes,
 * b a key name). */
static int edit_distance(const char *a, size_t na, const char *b)
{
	size_t nb = strlen(b);
	int row[32];
	IR_ASSERT(nb < sizeof row / sizeof row[0]);
	for (size_t j = 0; j <= nb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= na; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= nb; j++) {
			int up = row[j];
			int sub = diag + (lower(a[i - 1]) != lower(b[j - 1]));
			int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
			row[j] = sub < best ? sub : best;
			diag = up;
		}
	}
	return row[nb];
}

/* The key closest to an unknown one, when it is close enough to be a typo:
 * at most a third of the key's letters (and at least one) differ. */
static int suggest(const char *s, size_t n)
{
	if (n > 64)
		return -1;
	int best = -1, bestd = 0;
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		int len = (int)strlen(fe_keys[k].name);
		int limit = len / 3 > 1 ? len / 3 : 1;
		int dist = edit_distance(s, n, fe_keys[k].name);
		if (dist <= limit && (best < 0 || dist < bestd)) {
			best = k;
			bestd = dist;
		}
	}
	return best;
}

static bool parse_key(scanner *sc, const tok *t, fe_key *k)
{
	char buf[64], w[48];
	if (t->kind != T_WORD || !is_ident_start(t->s[0]))
		return fail(sc, t->col, "expected %s, found %s", sc->is_set ? "KEY=VALUE" : "a key",
			describe(t, buf, sizeof buf));
	if (fe_key_lookup(t->s, t->n, k))
		return true;
	int best = suggest(t->s, t->n);
	if (best >= 0)
		return fail(sc, t->col, "unknown key '%s'; did you mean '%s'?", show(w, sizeof w, t->s, t->n),
			fe_keys[best].name);
	return fail(sc, t->col, "unknown key '%s'", show(w, sizeof w, t->s, t->n));
}

/* ---- values ------------------------------------------------------------ */

static bool read_values(scanner *sc, const char *key, elems *e)
{
	char buf[64];
	e->n = 0;
	for (;;) {
		tok t = next(sc);
		if (t.kind == T_ERROR)
			return false;
		if (t.kind != T_WORD) {
			if (e->n == 0 && t.kind == T_END)
				return fail(sc, t.col, "missing value for '%s'", key);
			if (t.kind == T_EQ)
				return fail(sc, t.col, "unexpected '=' in the value of '%s'", key);
			return fail(sc, t.col, "missing value %s ','", e->n == 0 ? "before" : "after");
		}
		if (e->n <= FE_MAX_VALUES)
			e->v[e->n] = t;
		e->n++;
		tok sep = next(sc);
		if (sep.kind == T_ERROR)
			return false;
		if (sep.kind == T_END)
			return true;
		if (sep.kind == T_EQ)
			return fail(sc, sep.col, "unexpected '=' in the value of '%s'", key);
		if (sep.kind != T_COMMA)
			return fail(sc, sep.col, "unexpected %s after the value of '%s'",
				describe(&sep, buf, sizeof buf), key);
	}
}

enum { NUM_OK, NUM_BAD, NUM_BIG };

/* [+-]digits.  Stops accumulating past FE_INT_MAX, so *out stays small. */
static int scan_int(const char *s, size_t n, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	if (i == n)
		return NUM_BAD;
	int64_t v = 0;
	bool big = false;
	for (; i < n; i++) {
		if (!is_digit(s[i]))
			return NUM_BAD;
		if (!big && (v = v * 10 + (s[i] - '0')) > FE_INT_MAX)
			big = true;
	}
	*out = neg ? -v : v;
	return big ? NUM_BIG : NUM_OK;
}

/* [+-](digits[.digits] | .digits)[(e|E)[+-]digits]: no hex, inf or nan. */
static bool real_syntax(const char *s, size_t n)
{
	size_t i = 0, digits = 0;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	for (; i < n && is_digit(s[i]); i++)
		digits++;
	if (i < n && s[i] == '.')
		for (i++; i < n && is_digit(s[i]); i++)
			digits++;
	if (digits == 0)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t exp = 0;
		for (; i < n && is_digit(s[i]); i++)
			exp++;
		if (exp == 0)
			return false;
	}
	return i == n;
}

static bool convert_int(scanner *sc, const char *key, fe_value_kind kind, const tok *t, int64_t *out)
{
	char w[48];
	const char *text = show(w, sizeof w, t->s, t->n);
	int r = scan_int(t->s, t->n, out);
	if (r == NUM_BAD)
		return fail(sc, t->col, "expected an integer for '%s', found '%s'", key, text);
	if (kind == FE_VK_INT && *out < 1)
		return fail(sc, t->col, "'%s' must be positive, found %s", key, text);
	if (kind == FE_VK_COUNT && *out < 0)
		return fail(sc, t->col, "'%s' must not be negative, found %s", key, text);
	if (r == NUM_BIG)
		return fail(sc, t->col, "'%s' is too large: %s (at most %d)", key, text, FE_INT_MAX);
	return true;
}

static bool convert_real(scanner *sc, const char *key, fe_value_kind kind, const tok *t, double *out)
{
	char w[48];
	const char *text = show(w, sizeof w, t->s, t->n);
	if (!real_syntax(t->s, t->n))
		return fail(sc, t->col, "expected a number for '%s', found '%s'", key, text);
	char buf[FE_MAX_LINE + 1];
	IR_ASSERT(t->n < sizeof buf);
	memcpy(buf, t->s, t->n);
	buf[t->n] = 0;
	errno = 0;
	*out = strtod(buf, NULL);
	if (errno == ERANGE || !isfinite(*out))
		return fail(sc, t->col, "number %s for '%s' is out of range", text, key);
	if (kind == FE_VK_POS && !(*out > 0))
		return fail(sc, t->col, "'%s' must be positive, found %s", key, text);
	return true;
}

static bool word_is(const tok *t, const char *w)
{
	return t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

static bool convert_dataset(scanner *sc, const tok *t, fe_value *v)
{
	char w[48];
	const char *colon = memchr(t->s, ':', t->n);
	size_t kind_len = colon ? (size_t)(colon - t->s) : t->n;
	bool has_dir = colon && colon + 1 < t->s + t->n;
	tok kind = {T_WORD, t->s, kind_len, t->col};
	if (word_is(&kind, "synthetic")) {
		if (colon)
			return fail(sc, col_of(sc, colon), "dataset 'synthetic' takes no directory");
		v->i[0] = FE_DATA_SYNTHETIC;
	} else if (word_is(&kind, "fashion-mnist")) {
		if (colon && !has_dir)
			return fail(sc, col_of(sc, colon) + 1, "missing directory after 'fashion-mnist:'");
		v->i[0] = FE_DATA_FASHION_MNIST;
	} else if (word_is(&kind, "cifar10")) {
		if (!has_dir)
			return fail(sc, t->col, "dataset 'cifar10' needs a directory: cifar10:DIR");
		v->i[0] = FE_DATA_CIFAR10;
	} else {
		return fail(sc, t->col,
			"unknown dataset kind '%s' (expected synthetic, fashion-mnist, fashion-mnist:DIR or cifar10:DIR)",
			show(w, sizeof w, kind.s, kind.n));
	}
	if (t->n >= sizeof v->text)
		return fail(sc, t->col, "'dataset' is longer than %d bytes", (int)sizeof v->text - 1);
	memcpy(v->text, t->s, t->n);
	v->text[t->n] = 0;
	return true;
}

static bool convert_one(scanner *sc, fe_key k, const tok *t, fe_value *v, int i)
{
	const fe_key_info *ki = &fe_keys[k];
	char w[48];
	switch (ki->kind) {
	case FE_VK_INT:
	case FE_VK_COUNT:
		return convert_int(sc, ki->name, ki->kind, t, &v->i[i]);
	case FE_VK_REAL:
	case FE_VK_POS:
		return convert_real(sc, ki->name, ki->kind, t, &v->f[i]);
	case FE_VK_BOOL:
		if (word_is(t, "true") || word_is(t, "false")) {
			v->i[i] = word_is(t, "true");
			return true;
		}
		return fail(sc, t->col, "expected true or false for '%s', found '%s'", ki->name,
			show(w, sizeof w, t->s, t->n));
	case FE_VK_WORD:
		IR_ASSERT(i == 0);
		if (k == FE_KEY_DATASET)
			return convert_dataset(sc, t, v);
		if (k == FE_KEY_OPTIMIZER) {
			for (int o = 0; o < FE_OPT_COUNT; o++) {
				if (word_is(t, fe_optimizer_name((fe_optimizer)o))) {
					v->i[0] = o;
					return true;
				}
			}
			return fail(sc, t->col, "unknown optimizer '%s' (expected momentum or adamw)",
				show(w, sizeof w, t->s, t->n));
		}
		if (k == FE_KEY_NETWORK) {
			for (int n = 0; n < FE_NET_COUNT; n++) {
				if (word_is(t, fe_network_name((fe_network)n))) {
					v->i[0] = n;
					return true;
				}
			}
			return fail(sc, t->col, "unknown network '%s' (expected revnet or revvit)",
				show(w, sizeof w, t->s, t->n));
		}
		IR_ASSERT(k == FE_KEY_BLOCK);
		if (t->n < FE_MAX_NAME) {
			memcpy(v->text, t->s, t->n);
			v->text[t->n] = 0;
		}
		for (int b = 0; b < FE_BLOCK_COUNT; b++) {
			if (word_is(t, fe_block_name((fe_block)b))) {
				v->i[0] = b;
				return true;
			}
		}
		/* Any other name may be a def of the file: fe_spec_check looks. */
		bool ident = t->n < FE_MAX_NAME && is_ident_start(t->s[0]);
		for (size_t j = 0; ident && j < t->n; j++)
			ident = is_ident_start(t->s[j]) || is_digit(t->s[j]);
		if (ident) {
			v->i[0] = FE_BLOCK_DEF;
			return true;
		}
		return fail(sc, t->col, "unknown block kind '%s' (expected basic or bottleneck)",
			show(w, sizeof w, t->s, t->n));
	}
	IR_DIE("bad value kind");
}

static bool is_stage_list(fe_key k)
{
	return k == FE_KEY_UNITS || k == FE_KEY_FILTERS || k == FE_KEY_STRIDES;
}

/* Converts each value left to right, then checks how many there are. */
static bool convert(scanner *sc, fe_key k, const elems *e, fe_value *v)
{
	const fe_key_info *ki = &fe_keys[k];
	int n = e->n < ki->nmax ? e->n : ki->nmax;
	for (int i = 0; i < n; i++) {
		v->pos[i] = pos_at(sc, e->v[i].col);
		if (!convert_one(sc, k, &e->v[i], v, i))
			return false;
	}
	if (e->n > ki->nmax) {
		int col = e->v[ki->nmax].col;
		if (ki->nmax == 1)
			return fail(sc, col, "'%s' takes one value, not a list", ki->name);
		if (ki->nmin == ki->nmax)
			return fail(sc, col, "'%s' needs %d values, found %d", ki->name, ki->nmax, e->n);
		if (is_stage_list(k))
			return fail(sc, col, "'%s' has %d values, more than the %d stages revc supports",
				ki->name, e->n, FE_MAX_STAGES);
		return fail(sc, col, "'%s' takes at most %d values, found %d", ki->name, ki->nmax, e->n);
	}
	if (e->n < ki->nmin)
		return fail(sc, e->v[0].col, "'%s' needs %d values, found %d", ki->name, ki->nmin, e->n);
	v->n = e->n;
	return true;
}

/* `= value[, value...]` after key k, to the end of the line. */
static bool parse_value(scanner *sc, fe_key k, fe_value *v)
{
	char buf[64];
	const char *key = fe_keys[k].name;
	tok eq = next(sc);
	if (eq.kind == T_ERROR)
		return false;
	if (eq.kind != T_EQ)
		return fail(sc, eq.col, "expected '=' after '%s', found %s", key, describe(&eq, buf, sizeof buf));
	elems e;
	memset(v, 0, sizeof *v);
	return read_values(sc, key, &e) && convert(sc, k, &e, v);
}

/* ---- statements -------------------------------------------------------- */

static bool parse_model(scanner *sc, const tok *t, fe_spec *s, bool first)
{
	char buf[64];
	if (!first)
		return fail(sc, t->col, "'model' must be the first statement");
	tok name = next(sc);
	if (name.kind == T_ERROR)
		return false;
	if (name.kind != T_WORD)
		return fail(sc, name.col, "expected a name after 'model' (write: model NAME), found %s",
			describe(&name, buf, sizeof buf));
	for (size_t i = 0; i < name.n; i++)
		if (!is_name_char(name.s[i]))
			return fail(sc, name.col + (int)i,
				"a model name may contain only letters, digits, '_', '.' and '-', not '%c'",
				name.s[i]);
	if (name.n >= sizeof s->name)
		return fail(sc, name.col, "model name is longer than %d bytes", (int)sizeof s->name - 1);
	tok rest = next(sc);
	if (rest.kind == T_ERROR)
		return false;
	if (rest.kind != T_END)
		return fail(sc, rest.col, "unexpected %s after the model name", describe(&rest, buf, sizeof buf));
	memcpy(s->name, name.s, name.n);
	s->name[name.n] = 0;
	return true;
}

/* One line of a file.  seen[k] is where key k was written in this file
 * (line 0: not yet), for duplicates; *any says a statement came before. */
static bool parse_line(scanner *sc, fe_spec *s, ir_pos *seen, bool *any)
{
	tok t = next(sc);
	if (t.kind == T_ERROR)
		return false;
	if (t.kind == T_END)
		return true;
	bool first = !*any;
	*any = true;
	if (word_is(&t, "model"))
		return parse_model(sc, &t, s, first);
	fe_key k;
	if (!parse_key(sc, &t, &k))
		return false;
	if (seen[k].line)
		return fail(sc, t.col, "'%s' is already set at %d:%d", fe_keys[k].name, seen[k].line, seen[k].col);
	fe_value v;
	if (!parse_value(sc, k, &v))
		return false;
	seen[k] = pos_at(sc, t.col);
	fe_spec_store(s, k, &v, seen[k]);
	return true;
}

/* The file's base name without its extension, as a model name: bytes other
 * than [A-Za-z0-9_.-] become '_', and it is cut to fit. */
static void derive_name(char *name, const char *file)
{
	const char *b = strrchr(file, '/');
	b = b ? b + 1 : file;
	size_t n = strlen(b);
	const char *dot = strrchr(b, '.');
	if (dot && dot != b)
		n = (size_t)(dot - b);
	if (n >= FE_MAX_NAME)
		n = FE_MAX_NAME - 1;
	for (size_t i = 0; i < n; i++)
		name[i] = is_name_char(b[i]) ? b[i] : '_';
	name[n] = 0;
	if (n == 0)
		strcpy(name, "model");
}

bool fe_spec_parse(fe_spec *s, const char *file, const char *text, size_t len, ir_diags *d)
{
	fe_spec_init(s);
	if (!file)
		file = "<input>";
	derive_name(s->name, file);
	if (!text) {
		text = "";
		len = 0;
	}
	if (len > FE_MAX_FILE) {
		ir_diag_add(d, (ir_pos){file, 0, 0}, "a spec is at most %d bytes; this one is %zu", FE_MAX_FILE, len);
		return false;
	}
	ir_pos seen[FE_KEY_COUNT] = {{0}};
	bool any = false;
	int line = 1;
	const char *p = text, *end = text + len;
	/* Definitions are read into a program beside the prelude's, so a name
	 * defined twice is found here; fe_lower reads them again from s->src. */
	fe_prog prog;
	fe_spec probe;
	fe_spec_init(&probe);
	fe_prog_load(&prog, &probe);
	bool ok = true;
	while (ok && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		scanner sc = {file, line, p, p, le, false, d};
		if (le - p > FE_MAX_LINE) {
			ok = fail(&sc, FE_MAX_LINE + 1, "line is longer than %d bytes", FE_MAX_LINE);
		} else if (fe_lang_opens(p, (size_t)(le - p))) {
			any = true;
			ok = fe_lang_parse_def(&prog, file, text, end, &p, &line, false, d);
			s->ndefs++;
			s->own_network |= ok && !prog.defs[prog.ndefs - 1].name;
			continue;
		} else {
			ok = parse_line(&sc, s, seen, &any);
		}
		p = nl ? nl + 1 : end;
		line++;
	}
	fe_prog_free(&prog);
	if (!ok)
		return false;
	if (s->ndefs) {
		s->src = text;
		s->src_file = file;
		s->src_len = len;
	}
	/* Missing keys are reported just past the last line. */
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		if (fe_spec_needs_key(s, (fe_key)k) && !seen[k].line) {
			ir_diag_add(d, (ir_pos){file, line, 1}, "missing required key '%s'", fe_keys[k].name);
			return false;
		}
	}
	return true;
}

bool fe_spec_set(fe_spec *s, const char *assignment, int index, ir_diags *d)
{
	if (!assignment)
		assignment = "";
	size_t len = strnlen(assignment, FE_MAX_LINE + 1);
	scanner sc = {"--set", index, assignment, assignment, assignment + len, true, d};
	if (len > FE_MAX_LINE)
		return fail(&sc, FE_MAX_LINE + 1, "a --set is at most %d bytes", FE_MAX_LINE);
	tok t = next(&sc);
	if (t.kind == T_ERROR)
		return false;
	fe_key k;
	if (!parse_key(&sc, &t, &k))
		return false;
	fe_value v;
	if (!parse_value(&sc, k, &v))
		return false;
	/* A revvit spec made revnet must already have the RevNet keys (so that
	 * it still prints as a spec that parses). */
	if (k == FE_KEY_NETWORK && v.i[0] == FE_NET_REVNET && s->network != FE_NET_REVNET) {
		fe_spec probe = *s;
		probe.network = FE_NET_REVNET;
		for (int j = 0; j < FE_KEY_COUNT; j++)
			if (fe_spec_needs_key(&probe, (fe_key)j) && !s->seq[j])
				return fail(&sc, v.pos[0].col, "network revnet needs the key '%s', which this spec "
					"does not give", fe_keys[j].name);
	}
	fe_spec_store(s, k, &v, pos_at(&sc, t.col));
	return true;
}

/* One line of an IR file's settings: `key = value` of a setting key. */
static bool parse_setting(scanner *sc, fe_spec *s, ir_pos *seen)
{
	tok t = next(sc);
	if (t.kind == T_ERROR)
		return false;
	if (t.kind == T_END)
		return true;
	fe_key k;
	if (!parse_key(sc, &t, &k))
		return false;
	if (!fe_key_is_setting(k))
		return fail(sc, t.col, "'%s' is not a training setting: in an IR file the graph is the network",
			fe_keys[k].name);
	if (seen[k].line)
		return fail(sc, t.col, "'%s' is already set at %d:%d", fe_keys[k].name, seen[k].line, seen[k].col);
	fe_value v;
	if (!parse_value(sc, k, &v))
		return false;
	seen[k] = pos_at(sc, t.col);
	fe_spec_store(s, k, &v, seen[k]);
	return true;
}

bool fe_settings_parse(fe_spec *s, const char *file, const char *text, size_t len, int line, ir_diags *d)
{
	fe_spec_init(s);
	ir_pos seen[FE_KEY_COUNT] = {{0}};
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		scanner sc = {file, line, p, p, le, false, d};
		if (le - p > FE_MAX_LINE)
			return fail(&sc, FE_MAX_LINE + 1, "line is longer than %d bytes", FE_MAX_LINE);
		if (!parse_setting(&sc, s, seen))
			return false;
		p = nl ? nl + 1 : end;
		line++;
	}
	return fe_settings_check(s, d);
}
