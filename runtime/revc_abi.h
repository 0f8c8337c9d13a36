/* revc_abi.h: the ABI of the code revc generates, declared once for the
 * code generator (codegen/), the runtime that runs it (runtime/exec.c,
 * runtime/pool.c) and the runtime of model libraries (revc_aot.h).  Plain
 * C with <stdint.h> only: it is compiled into every model library.
 *
 * A step runs a planned graph's schedule over its arena:
 *   - arena: the planned arena (ps_arena_bytes), inputs and outputs at
 *     their planned offsets;
 *   - persist[k]: the data of the graph's k-th param or state node, in node
 *     list order (ir_persist_slots);
 *   - inputs[k]: the data of its k-th input node, in list order
 *     (ir_input_slots);
 *   - par(par_ctx, kernel, args, n): the dispatcher the step hands each
 *     parallel kernel to, which must call kernel(args, lo, hi, tid) over a
 *     split of [0, n) (every thread, with an empty range if need be;
 *     runtime/pool.c's rt_parallel, or a serial one running fn(args, 0, n, 0)).
 *     A step JIT-compiled for profiling (cg_options.profile, never an
 *     object file) also calls par with kernel NULL: a mark before its
 *     call number n (args: the call's label), and n = -1 at its end.
 * These are function types: declare a step with `revc_abi_step NAME_step;`
 * and point at one with `revc_abi_step *`. */
#ifndef REVC_ABI_H
#define REVC_ABI_H

#include <stdint.h>

typedef void revc_abi_kernel(void **args, int64_t lo, int64_t hi, int64_t tid);
typedef void revc_abi_parallel(void *ctx, revc_abi_kernel *fn, void **args, int64_t n);
typedef void revc_abi_step(uint8_t *arena, void **persist, void **inputs, revc_abi_parallel *par, void *par_ctx);

#endif
