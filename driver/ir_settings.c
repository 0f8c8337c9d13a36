/* ir_settings.c: the training settings an IR file may carry ahead of its
 * graph (docs/ir.md, "Training settings"):
 *
 *     train {
 *       batch = 100
 *       lr_list = 0.1,0.01
 *       ...
 *     }
 *     graph @fashion passes(shape) { ... }
 *
 * The block's body is spec-language statements of the setting keys
 * (fe_key_is_setting), read by the front end; the graph after it is the
 * IR parser's, given the text with the block blanked out so that its
 * positions stay those of the file. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The next line of [p, end): its end (at '\n' or end). */
static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl : end;
}

static const char *skip_blanks(const char *p, const char *le)
{
	while (p < le && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* Whether [p, le) holds nothing but blanks and a comment. */
static bool rest_empty(const char *p, const char *le)
{
	p = skip_blanks(p, le);
	return p == le || *p == '#';
}

/* The first line from p (line `*line`) with more than blanks and a comment:
 * its start, *line updated. */
static const char *first_full(const char *p, const char *end, int *line)
{
	const char *le = line_end(p, end);
	while (p < end && rest_empty(p, le)) {
		p = le < end ? le + 1 : end;
		le = line_end(p, end);
		++*line;
	}
	return p;
}

/* Where the graph begins: the first thing from `from` (line `line`). */
static ir_pos graph_at(const char *path, const char *from, const char *end, int line)
{
	const char *p = first_full(from, end, &line);
	return (ir_pos){path, line, (int)(skip_blanks(p, line_end(p, end)) - p) + 1};
}

bool drv_ir_settings_find(const char *path, const char *text, size_t len, drv_ir_settings *out, ir_diags *d)
{
	memset(out, 0, sizeof *out);
	const char *end = text + len;
	int line = 1;
	const char *p = first_full(text, end, &line), *le = line_end(p, end);
	const char *w = skip_blanks(p, le);
	if (!(le - w >= 5 && memcmp(w, "train", 5) == 0 && (w + 5 == le || w[5] == ' ' || w[5] == '\t' ||
	    w[5] == '{'))) {
		out->graph = graph_at(path, text, end, 1);
		return true;
	}
	ir_pos at = {path, line, (int)(w - p) + 1};
	const char *brace = skip_blanks(w + 5, le);
	if (brace == le || *brace != '{') {
		ir_diag_add(d, (ir_pos){path, line, (int)(brace - p) + 1}, "expected '{' after 'train'");
		return false;
	}
	if (!rest_empty(brace + 1, le)) {
		ir_diag_add(d, (ir_pos){path, line, (int)(skip_blanks(brace + 1, le) - p) + 1},
			"the settings begin on the line after 'train {'");
		return false;
	}
	out->found = true;
	out->pos = at;
	out->body_line = line + 1;
	p = le < end ? le + 1 : end;
	out->body = p - text;
	for (line++; p < end; line++) {
		le = line_end(p, end);
		const char *c = skip_blanks(p, le);
		if (le - c > 5 && memcmp(c, "graph", 5) == 0 && (c[5] == ' ' || c[5] == '@')) {
			ir_diag_add(d, (ir_pos){path, line, (int)(c - p) + 1}, "the graph begins before the train block's "
				"closing '}' line (at %d:%d)", at.line, at.col);
			return false;
		}
		if (c < le && *c == '}') {
			if (!rest_empty(c + 1, le)) {
				ir_diag_add(d, (ir_pos){path, line, (int)(skip_blanks(c + 1, le) - p) + 1},
					"the graph begins on the line after the settings' '}'");
				return false;
			}
			out->body_len = (size_t)(p - text) - out->body;
			out->after = le < end ? (size_t)(le + 1 - text) : len;
			out->graph = graph_at(path, text + out->after, end, line + 1);
			return true;
		}
		p = le < end ? le + 1 : end;
	}
	ir_diag_add(d, at, "the train block has no closing '}' line");
	return false;
}

char *drv_ir_settings_blank(const char *text, size_t len, const drv_ir_settings *s)
{
	char *t = malloc(len + 1);
	if (!t)
		IR_DIE("out of memory");
	memcpy(t, text, len);
	t[len] = 0;
	for (size_t i = 0; s->found && i < s->after; i++)
		if (t[i] != '\n')
			t[i] = ' ';
	return t;
}
