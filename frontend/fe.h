/* fe.h: the public interface of revc's frontend, the model-spec language.
 *
 * A spec file states a reversible network's hyperparameters as `key =
 * value` lines, and may define blocks and a network in the model language
 * (grammar and keys: docs/spec.md; the keys themselves: frontend/keys.def;
 * the RevNet every spec without a network gets: models/lib/revnet.rev).
 * Reading one is three steps, each stopping at its first error with exactly
 * one diagnostic:
 *
 *     fe_spec_parse   the file                 (file:line:col)
 *     fe_spec_set     each --set KEY=VALUE      (--set:N:col)
 *     fe_spec_check   what needs the whole spec (where the value was written)
 *
 * after which every field below is valid and consistent.  The input is
 * untrusted: any bytes give either a spec or one clean diagnostic.
 *
 * Ownership: a spec is a plain value with no heap memory; copy it freely.
 * Strings it keeps are arrays inside it.  The one exception is pos.file in
 * its positions, which points either to the static string "--set" or to the
 * `file` argument of fe_spec_parse: keep that string alive while you use the
 * positions (argv strings and literals are).  A file with definitions
 * (`def`, `network`) also keeps src, its `text`: keep that alive too.
 */
#ifndef REVC_FE_H
#define REVC_FE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

#define FE_MAX_STAGES 8
#define FE_MAX_LR 16
#define FE_MAX_NAME 64      /* model name, including the NUL */
#define FE_MAX_DATASET 1024 /* dataset value, including the NUL */
#define FE_MAX_LINE 4096    /* bytes per line (and per --set string) */
#define FE_MAX_FILE (1 << 20)
#define FE_INT_MAX 2147483647 /* every integer in a spec is at most this */
#define FE_MAX_UNITS 10000    /* reversible units in all stages together */
#define FE_MAX_WINDOW IR_MAX_WINDOW /* largest kernel, stride and pooling window */

/* The block key: a RevNet block of the prelude (models/lib/revnet.rev), or
 * FE_BLOCK_DEF, a `def` of the spec's own file named by block_name. */
typedef enum { FE_BLOCK_BASIC, FE_BLOCK_BOTTLENECK, FE_BLOCK_COUNT, FE_BLOCK_DEF = FE_BLOCK_COUNT } fe_block;
typedef enum { FE_OPT_MOMENTUM, FE_OPT_ADAMW, FE_OPT_COUNT } fe_optimizer;
/* The network key: which prelude's network and blocks a spec is read with. */
typedef enum { FE_NET_REVNET, FE_NET_REVVIT, FE_NET_COUNT } fe_network;
typedef enum { FE_DATA_SYNTHETIC, FE_DATA_FASHION_MNIST, FE_DATA_CIFAR10, FE_DATA_COUNT } fe_dataset;

typedef enum {
#define FE_KEY(name, ENUM, kind, nmin, nmax, def, req, help) FE_KEY_##ENUM,
#include "keys.def"
#undef FE_KEY
	FE_KEY_COUNT
} fe_key;

typedef struct fe_spec {
	char name[FE_MAX_NAME]; /* `model NAME`, else the file name without
	                           directory and extension; [A-Za-z0-9_.-]+ */
	int64_t input[3];       /* C, H, W */
	int64_t classes;
	int64_t init_filters, init_kernel, init_stride;
	bool init_max_pool;
	int nstages;            /* how many units values; nfilters and nstrides
	                           equal it after fe_spec_check */
	int nfilters, nstrides;
	int64_t units[FE_MAX_STAGES];
	int64_t filters[FE_MAX_STAGES];
	int64_t strides[FE_MAX_STAGES];
	fe_block block;
	char block_name[FE_MAX_NAME]; /* the block key's word, whichever it is */
	int64_t batch;
	int nlr;                /* learning rates; nlr_steps == nlr - 1 after check */
	int nlr_steps;
	double lr_list[FE_MAX_LR];
	int64_t lr_steps[FE_MAX_LR - 1];
	double momentum, weight_decay;
	int64_t steps;          /* > 0: train this many steps; 0: train epochs */
	int64_t epochs;
	int64_t seed;
	char dataset[FE_MAX_DATASET]; /* as written, e.g. "cifar10:data/x" */
	fe_dataset dataset_kind;
	fe_optimizer optimizer; /* momentum SGD, or AdamW with beta1, beta2, eps */
	double beta1, beta2, eps;
	fe_network network;     /* revvit: patch, width, heads and mlp_ratio size it */
	int64_t patch, width, heads, mlp_ratio;

	/* The model language's definitions (`def`, `network`), when the file
	 * has any: src is the whole file's text, file its name; both borrowed
	 * from fe_spec_parse's arguments (keep them alive while you use the
	 * spec, as pos.file).  NULL when the file defines nothing: the network
	 * is then the prelude's. */
	const char *src, *src_file;
	size_t src_len;
	int ndefs;
	bool own_network;       /* the file defines the network */

	/* Where each key was last assigned: pos at its key, vpos at its (first)
	 * value.  file is NULL for a default.  seq orders assignments (0: the
	 * default; a larger seq was written later, --set after the file). */
	ir_pos pos[FE_KEY_COUNT];
	ir_pos vpos[FE_KEY_COUNT];
	int seq[FE_KEY_COUNT];
	int nseq;
	/* Each list element's position, so a check can point at it. */
	ir_pos input_pos[3];
	ir_pos units_pos[FE_MAX_STAGES];
	ir_pos filters_pos[FE_MAX_STAGES];
	ir_pos strides_pos[FE_MAX_STAGES];
	ir_pos lr_list_pos[FE_MAX_LR];
	ir_pos lr_steps_pos[FE_MAX_LR - 1];
} fe_spec;

/* The defaults of keys.def; required keys unset, name "model". */
void fe_spec_init(fe_spec *s);

/* Resets s to the defaults and parses a spec file's text (len bytes, not
 * necessarily NUL-terminated; file names it in positions and, without a
 * `model` line, gives the model its name).  Checks syntax, each value on its
 * own, duplicates and required keys.  On error returns false with exactly
 * one diagnostic added to d; s is then unspecified. */
bool fe_spec_parse(fe_spec *s, const char *file, const char *text, size_t len, ir_diags *d);

/* Applies one override "KEY=VALUE" (NUL-terminated), replacing the key's
 * value.  index is the 1-based position of this --set on the command line.
 * Positions in its diagnostics use file "--set", line = index, col = 1-based
 * byte column within the string.  On error returns false with exactly one
 * diagnostic and leaves s unchanged. */
bool fe_spec_set(fe_spec *s, const char *assignment, int index, ir_diags *d);

/* Checks everything that needs the whole spec (after all overrides): widths,
 * strides against spatial sizes, list lengths, the lr schedule, ranges.
 * One diagnostic, at the position where the offending value was (last)
 * written, file or --set. */
bool fe_spec_check(const fe_spec *s, ir_diags *d);

/* Writes the resolved spec in the spec language, every key included; it
 * parses back to an fe_spec_equal spec. */
void fe_spec_print(FILE *out, const fe_spec *s);

/* Compares the values of two specs (name included), not their positions. */
bool fe_spec_equal(const fe_spec *a, const fe_spec *b);

/* Derived sizes of the RevNet network, valid after fe_spec_check of a spec
 * whose network is revnet: the spatial size (H, W) entering
 * stage `stage` (0 <= stage <= nstages; nstages is what enters the final
 * block), and the half width (channels of x1, and of x2) entering it.  Any
 * output pointer may be NULL. */
void fe_spec_stage_input(const fe_spec *s, int stage, int64_t *h, int64_t *w, int64_t *half);

/* The learning rate of training step `step` (0-based): lr_list[i] for
 * lr_steps[i-1] <= step < lr_steps[i]. */
double fe_spec_lr_at(const fe_spec *s, int64_t step);

/* The directory of a dataset ("cifar10:DIR" gives DIR), or NULL when the
 * dataset names none (synthetic; fashion-mnist: the system's copy). */
const char *fe_spec_dataset_dir(const fe_spec *s);

const char *fe_block_name(fe_block b);
const char *fe_dataset_name(fe_dataset k);
const char *fe_optimizer_name(fe_optimizer o);
const char *fe_network_name(fe_network n);

/* The key table, for help output and docs. */
const char *fe_key_name(fe_key k);
const char *fe_key_help(fe_key k);
const char *fe_key_default(fe_key k); /* spec-language text; "" empty; NULL none */
/* Whether some spec must give key k (keys.def's req: true or REVNET). */
bool fe_key_required(fe_key k);
/* Whether spec s must give key k: keys.def's req for s's network (the
 * RevNet keys init_filters, filters, strides and block only with revnet). */
bool fe_spec_needs_key(const fe_spec *s, fe_key k);

/* ---- lowering (frontend/lower.c) -------------------------------------- */

typedef enum {
	FE_LOWER_TRAIN, /* batch statistics, running-statistic updates, loss */
	FE_LOWER_EVAL,  /* running statistics; loss and logits */
} fe_lower_mode;

/* Checks that every tensor the network of checked spec s holds in dtype dt
 * (activations, gradients, weights) is at most IR_MAX_BYTES, with overflow-
 * checked products, before anything is allocated.  On failure one
 * diagnostic at the value of the key to blame (of those that make the
 * tensor large, the one written last), e.g. "batch 100000000 makes the
 * output of init.conv f32[100000000,16,28,28] larger than 2^40 bytes". */
bool fe_spec_check_sizes(const fe_spec *s, ir_dtype dt, ir_diags *d);
/* After fe_spec_check_sizes(s, dt) failed: whether it failed only because
 * a tensor is too large (the network builds without the size checks), not
 * for another error of the network at these keys (a division by zero at
 * this batch, a shape a layer refuses). */
bool fe_spec_too_large(const fe_spec *s, ir_dtype dt);

/* The forward IR of a checked spec in dtype dt: inputs "x" and "labels",
 * outputs "loss" and "logits".  Sources are typed; the shape pass types
 * the rest.  The network is the spec file's own, else the prelude's RevNet
 * with the block the key `block` names (frontend/lang_lower.c).  Requires
 * fe_spec_check_sizes(s, dt) to have passed. */
ir_graph *fe_lower(const fe_spec *s, ir_dtype dt, fe_lower_mode mode);

/* ---- training settings of an IR file (frontend/spec_parse.c) ---------- */

/* The keys a `train { ... }` block of an IR file may hold (docs/ir.md):
 * batch, the learning-rate schedule, the optimiser and its keys, steps,
 * epochs, seed and dataset; not the network's (the graph is the network). */
bool fe_key_is_setting(fe_key k);

/* Resets s to the defaults and reads text (len bytes: the lines of a
 * block's body, the first being line `line` of `file`) as spec statements
 * `key = value` of setting keys, each at most once.  Then checks what
 * fe_spec_check checks of them (the schedule, the optimiser's ranges).
 * One diagnostic on error, at the line and column in file. */
bool fe_settings_parse(fe_spec *s, const char *file, const char *text, size_t len, int line, ir_diags *d);

/* Writes s's settings as such a block: "train {", one "  key = value"
 * line per setting key (every one, defaults included), "}". */
void fe_settings_print(FILE *out, const fe_spec *s);

#endif
