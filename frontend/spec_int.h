/* spec_int.h: internal to frontend/.  The key table and the converted value
 * of one assignment, shared by the parser (spec_parse.c), the store and
 * defaults (spec.c), the checker and the printer. */
#ifndef REVC_FE_SPEC_INT_H
#define REVC_FE_SPEC_INT_H

#include "fe.h"

/* keys.def's req column: the networks whose specs must give the key. */
#define FE_REQ_true ((1u << FE_NET_COUNT) - 1)
#define FE_REQ_false 0u
#define FE_REQ_REVNET (1u << FE_NET_REVNET)

/* The value kinds of keys.def's kind column. */
typedef enum { FE_VK_INT, FE_VK_COUNT, FE_VK_REAL, FE_VK_POS, FE_VK_BOOL, FE_VK_WORD } fe_value_kind;

typedef struct {
	const char *name;
	fe_value_kind kind;
	int nmin, nmax;
	const char *def;
	unsigned req; /* the networks whose specs must give it, a bit each (1u << fe_network) */
	const char *help;
} fe_key_info;

extern const fe_key_info fe_keys[FE_KEY_COUNT];

/* The longest list any key takes. */
#define FE_MAX_VALUES FE_MAX_LR

/* One assignment's value, converted and checked on its own. */
typedef struct {
	int n;                    /* number of values */
	int64_t i[FE_MAX_VALUES]; /* INT, COUNT, BOOL (0/1), WORD (its enum) */
	double f[FE_MAX_VALUES];  /* REAL, POS */
	ir_pos pos[FE_MAX_VALUES];
	char text[FE_MAX_DATASET]; /* WORD: as written */
} fe_value;

/* Looks a key up by name (n bytes); false when there is none. */
bool fe_key_lookup(const char *s, size_t n, fe_key *out);

/* Makes v key k's value, assigned at kpos: replaces the field(s), their
 * positions and the key's seq.  lr also rewrites lr_list and lr_steps. */
void fe_spec_store(fe_spec *s, fe_key k, const fe_value *v, ir_pos kpos);

/* What fe_spec_check checks of the settings alone (fe_settings_parse). */
bool fe_settings_check(const fe_spec *s, ir_diags *d);

#endif
