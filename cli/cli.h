/* cli.h: shared pieces of the revc command: exit statuses, option parsing,
 * error reporting, and the subcommands. */
#ifndef REVC_CLI_H
#define REVC_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "revc.h"

/* Exit statuses (documented in the README). */
enum { EXIT_OK = 0, EXIT_USER = 1, EXIT_USAGE = 2, EXIT_BUDGET = 3 };

/* ---- options (cli/args.c) --------------------------------------------- */

typedef struct {
	const char *name;  /* long name without "--" */
	char short_name;   /* e.g. 'o' for -o, or 0 */
	const char *arg;   /* metavariable when the option takes a value, else NULL */
	const char *help;
} cli_opt;

typedef struct {
	const char *cmd;   /* for messages: "revc dump" */
	int argc;
	char **argv;
	int i;
	bool only_positional; /* after "--" */
} cli_args;

enum { CLI_END = -1, CLI_POSITIONAL = -2, CLI_ERROR = -3 };

/* A command's options table has one entry per OPT_* enumerator, then the
 * NULL entry: n is the enumerator after the last (OPT_PASS0 +
 * CLI_PASS_OPT_COUNT, or OPT_HELP + 1 without pass options). */
#define CLI_OPTS_MATCH(opts, n) \
	_Static_assert(sizeof(opts) / sizeof((opts)[0]) == (size_t)(n) + 1, #opts " and the OPT_* enumerators differ")

void cli_args_init(cli_args *a, const char *cmd, int argc, char **argv);
/* The next argument: an index into opts (value in *val for options that take
 * one), CLI_POSITIONAL (*val is it), CLI_END, or CLI_ERROR after printing a
 * usage error.  opts ends with an entry whose name is NULL. */
int cli_next(cli_args *a, const cli_opt *opts, const char **val);
/* Prints "revc CMD: error: ..." and a hint, and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_print_help(FILE *out, const char *usage, const char *about, const cli_opt *opts);

/* The pass-manager options every pipeline command takes; append with
 * CLI_PASS_OPTS and hand unknown indices to cli_pass_option. */
#define CLI_PASS_OPTS                                                                        \
	{"dump-after", 0, "PASS|all", "print the IR after PASS (or after every pass)"},           \
	{"dump-dir", 0, "DIR", "write dumps as numbered files DIR/NN-PASS.ir instead"},           \
	{"verify-each", 0, NULL, "run the verifier after every pass"},                            \
	{"stop-after", 0, "PASS", "stop the pipeline after PASS"},                                \
	{"passes", 0, "P1,P2", "run only these passes of the pipeline"},                          \
	{"print-passes", 0, NULL, "list the pipeline's passes and exit"}
#define CLI_PASS_OPT_COUNT 6
/* Applies pass option number k (0-based within CLI_PASS_OPTS).  Returns
 * false when the command should exit (after --print-passes). */
bool cli_pass_option(int k, const char *val, revc_options *o);
/* Validates pass names; prints a usage error and returns false if one is
 * unknown. */
bool cli_pass_options_check(const char *cmd, const revc_options *o);
/* After parsing: checks the pass names (else EXIT_USAGE) and makes the dump
 * directory (else EXIT_USER); EXIT_OK when the command may go on. */
int cli_pass_options_ready(const char *cmd, const revc_options *o);
/* Whether --stop-after or --passes cut the pipeline short; then it says so
 * on stderr, and a command that runs its graphs (train, grad, bench, eval,
 * check) exits 0 once they are built and dumped, without running them. */
bool cli_pipeline_cut(const char *cmd, const revc_options *o);
/* An option of the commands that compile a model, by its long name
 * (engine, cpu, threads, max-memory, check-numerics, strategy, dtype), into
 * o: 1 when it was one, 0 when not, -1 after a usage error. */
int cli_revc_option(const char *cmd, const char *name, const char *val, revc_options *o);
/* Prints the dumps the pass options asked of the model on stderr, as the
 * pass manager would have. */
void cli_print_dumps(const revc_model *m);
/* Creates directory path unless it exists (its parent must); reports and
 * returns false when it cannot, or when path is not a directory. */
bool cli_make_dir(const char *path);

/* ---- reporting (cli/report.c) ----------------------------------------- */

/* Names the command running ("train"), so errors read "revc train: error: ...". */
void cli_set_command(const char *name);
/* Prints "revc CMD: error: MESSAGE" on stderr; returns EXIT_USER. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a library error (its "revc: error:" prefix naming the command), frees it and
 * returns its exit status (its kind). */
int cli_revc_error(revc_error *err);

/* Writes text to path atomically, or to stdout when path is NULL or "-". */
bool cli_write_output(const char *path, const char *text, size_t len);
/* Whether cli_write_output could write path (its directory exists and is
 * writable, and path is no directory), checked before long work; else
 * prints why and returns false. */
bool cli_output_writable(const char *path);

/* ---- models and their options (cli/args.c) ------------------------------ */

#define CLI_MAX_SETS 64

/* A command's --set overrides, "KEY=VALUE" in command-line order. */
typedef struct {
	const char *sets[CLI_MAX_SETS];
	int nsets;
} cli_sets;

/* The option every spec-reading command takes. */
#define CLI_SET_OPT {"set", 0, "KEY=VALUE", "override a spec key (repeatable; lists comma-separated)"}

bool cli_is_spec(const char *path); /* a .rev file */
bool cli_sets_add(cli_sets *s, const char *cmd, const char *assignment);
/* The spec as a model, with the sets, or the IR file (FILE.ir: any path
 * but a .rev, which takes no sets); NULL after printing the error, with
 * the exit status in *status. */
revc_model *cli_model_open(const char *cmd, const char *path, const cli_sets *s, int *status);
/* cli_revc_option, or --set (into sets): the options of the commands
 * that compile a spec. */
int cli_model_option(const char *cmd, const char *name, const char *val, revc_options *o, cli_sets *sets);

/* The name of revc_options_init's default strategy (REVC_REVNET), for the
 * help texts. */
#define CLI_STRATEGY_DEFAULT "revnet"
/* Where an option's help names what --strategy accepts: cli_print_help
 * writes the names of cli/args.c's table there. */
#define CLI_STRATEGIES "@STRATEGIES@"
/* --strategy of the commands that build a training step. */
#define CLI_STRATEGY_OPT {"strategy", 0, "NAME", CLI_STRATEGIES " (default " CLI_STRATEGY_DEFAULT ")"}
/* --budget of strategy auto (train, bench): the fastest decisions whose
 * planned total fits (docs/mem.md). */
#define CLI_BUDGET_OPT {"budget", 0, "SIZE", "--strategy auto: the fastest per-unit decisions whose planned total fits SIZE (default --max-memory)"}
#define CLI_DECISIONS_OPT {"decisions", 0, "LETTERS", "--strategy auto: these decisions, a letter a unit and segment (docs/ir.md)"}

/* --ranks of the commands that plan a training step: the step of one of K
 * processes (docs/distributed.md; default: the world's size). */
#define CLI_RANKS_OPT {"ranks", 0, "K", "the step of one of K data-parallel processes, with its all-reduces (default: mpirun's -np)"}
/* --bucket and --overlap of the commands that plan a training step: how its
 * gradients are summed over the processes (docs/distributed.md). */
#define CLI_DP_OPTS \
	{"bucket", 0, "SIZE", "data parallelism: sum the gradients in buckets of up to SIZE (0: one tensor a sum; default 25MiB)"}, \
	{"overlap", 0, "on|off", "data parallelism: start each bucket's sum when it is final, wait before the update (default on)"}

/* --strategy's value: what it names into *out, and into *minimum whether
 * it is min (REVC_AUTO's minimum-memory decisions); else a usage error
 * listing the names, and also after them when not NULL (mem's "all",
 * which the caller handles), and false. */
bool cli_parse_strategy(const char *cmd, const char *val, const char *also, revc_strategy *out, bool *minimum);
bool cli_parse_int(const char *cmd, const char *opt, const char *val, int64_t lo, int64_t hi,
	int64_t *out);

#define CLI_ENGINE_OPT {"engine", 0, "interp|jit", "run with the reference interpreter or native code (default jit)"}
/* Every command that generates code takes --cpu (docs/codegen.md). */
#define CLI_CPU_OPT {"cpu", 0, "NAME", "code for CPU NAME: native (default) or LLVM's name, e.g. x86-64-v3 (AVX2), znver3; OPENBLAS_CORETYPE=Haswell makes BLAS AVX2 too"}

/* --cpu: "native" or a CPU LLVM knows (not necessarily one this host can
 * run), into *out; prints a usage error. */
bool cli_cpu_parse(const char *cmd, const char *val, const char **out);
/* With the other usage checks, before anything is loaded: --cpu (cpu not
 * NULL) with the interpreter is a usage error (EXIT_USAGE), code for a
 * CPU this host cannot run a user error (EXIT_USER); else EXIT_OK. */
int cli_engine_check(const char *cmd, revc_engine kind, const char *cpu);
/* The engine as JSON members on stdout: "engine":"jit","cpu":"znver4",
 * (cpu null for the interpreter), each with its comma. */
void cli_model_engine_json(const revc_model *m);

/* ---- revc mem --sweep and --max-batch (cli/mem_sweep.c) ------------------ */

typedef struct {
	const char *spec;       /* the model's file, opened afresh for each schedule --measure times */
	const cli_sets *sets;
	bool json, measure;
	const char *plot;       /* --plot FILE.svg, or NULL */
	int64_t steps;          /* --measure: timed steps a schedule */
	int points;             /* budgets walked at most (0: the library's default) */
} cli_sweep_args;

/* --max-batch SIZE: a size with a unit (1GiB, 512MB), so that it cannot
 * be taken for a batch; prints a usage error. */
bool cli_max_batch_size(const char *cmd, const char *val, int64_t *out);
/* Prints (and draws, and times) strategy auto's frontier for m; an exit status. */
int cli_mem_sweep(revc_model *m, const revc_options *o, const cli_sweep_args *a);
/* Prints the largest batches at which auto, store and revnet fit size. */
int cli_mem_max_batch(revc_model *m, const revc_options *o, int64_t size, const cli_sweep_args *a);

/* ---- progress (cli/progress.c) ---------------------------------------------- */

typedef struct {
	bool tty, json, drawn;
	int64_t batch;
	double last_draw;
} cli_progress;

void cli_progress_init(cli_progress *p, bool json, int64_t batch);
void cli_progress_step(void *p, const revc_progress *s);
void cli_progress_eval(void *p, int64_t step, double loss, double accuracy);
void cli_progress_save(void *p, int64_t step, const char *dir);
/* Writes s escaped for the inside of a JSON string. */
void cli_json_string(FILE *out, const char *s);
/* Seconds on the monotonic clock; the process's peak RSS in MiB. */
double cli_now(void);
double cli_rss_mib(void);

/* Clears a progress bar being drawn, before other output. */
void cli_progress_break(cli_progress *p);

/* ---- the world of processes (cli/world.c) ------------------------------- */

/* Joins the world mpirun started (if any); on ranks other than 0, sets
 * stdout aside and keeps stderr.  EXIT_OK, or the status of an error said. */
int cli_world_begin(void);
/* Leaves it with the command's status (said by a rank other than 0 only
 * when rank 0 has not ended the job first); returns status. */
int cli_world_end(int status);

/* ---- signals (cli/signals.c) ---------------------------------------------- */

/* From now on SIGINT and SIGTERM set a flag instead of ending the process
 * (once each: a second one ends it). */
void cli_signal_catch(void);
/* The signal caught (SIGINT, SIGTERM), or 0. */
int cli_signal_caught(void);
/* "SIGINT", "SIGTERM". */
const char *cli_signal_name(int sig);

/* ---- subcommands ------------------------------------------------------ */

int cmd_dump(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_mem(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_compile(int argc, char **argv);


/* ---- limits (cli/limits.c) ------------------------------------------------ */

#define CLI_MAX_MEMORY_OPT {"max-memory", 0, "SIZE", "refuse to run when parameters + optimiser state + planned arena (+ data, for train and eval) exceed SIZE"}
#define CLI_CHECK_NUMERICS_OPT {"check-numerics", 0, NULL, "stop at the first NaN or Inf and name the node that made it"}
/* Parses the SIZE of a limit, --max-memory or --budget (opt, as written:
 * "--budget"): revc_parse_size's, more than 0; else a usage error that
 * names opt. */
bool cli_parse_limit(const char *cmd, const char *opt, const char *val, int64_t *out);
#endif
