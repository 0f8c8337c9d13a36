/* drift.c: `revc check --drift` prints the drift report driver/drift.c
 * computes: as text, or as the JSON the driver formats. */
#include <stdlib.h>

#include "cli.h"
#include "tools.h"

#define NDT DRV_DRIFT_NDT

static void print_units(const drv_drift_report *r)
{
	printf("reconstructed unit inputs against the forward values: max|rec - fwd| (abs) and that over max|fwd| (rel)\n");
	printf("%-8s  %-43s  %s\n", "", "f32", "f64");
	printf("%-8s", "unit");
	for (int d = 0; d < NDT; d++)
		printf("  %10s %10s %10s %10s", "x1 abs", "x1 rel", "x2 abs", "x2 rel");
	printf("\n");
	for (int k = 0; k < r->nunits; k++) {
		const drv_drift_unit *u = &r->units[k];
		printf("%-8s", u->unit);
		for (int d = 0; d < NDT; d++)
			printf("  %10.2e %10.2e %10.2e %10.2e", u->abs[d][0], u->rel[d][0], u->abs[d][1], u->rel[d][1]);
		printf("\n");
	}
	if (r->nunits == 0)
		printf("  (no invertible unit: every unit changes its width or stride)\n");
}

static void print_text(const drv_drift_report *r)
{
	int nu = r->nunits, ng = r->ngrads;
	printf("revc check --drift: %s, batch %lld, seed %llu, revnet against store, %d invertible unit%s\n\n",
		r->model, (long long)r->batch, (unsigned long long)r->seed, nu, nu == 1 ? "" : "s");
	print_units(r);
	printf("\ngradients, revnet against store: angle in degrees over %d tensors\n", ng);
	for (int d = 0; d < NDT; d++) {
		const drv_drift_summary *m = &r->sum[d];
		printf("  %s  worst %.3e (%s), median %.3e\n", ir_dtype_name(drv_drift_dtypes[d]), m->worst_degrees,
			ng ? r->grads[m->worst_grad].name : "-", m->median_degrees);
	}
	printf("\nsummary\n");
	for (int d = 0; d < NDT; d++) {
		const drv_drift_summary *m = &r->sum[d];
		printf("  %s  ", ir_dtype_name(drv_drift_dtypes[d]));
		if (nu)
			printf("largest relative reconstruction error %.2e (%s.x%d), ", m->worst_rel,
				r->units[m->worst_unit].unit, m->worst_x + 1);
		printf("largest gradient angle %.2e degrees\n", m->worst_degrees);
	}
}

int cli_check_drift(const cli_model *m, uint64_t seed, bool json)
{
	drv_drift_report r;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = drv_drift(&m->spec, seed, &r, &d);
	if (!ok) {
		cli_model_report(m, &d);
	} else if (json) {
		char *text = drv_drift_json(&r);
		fputs(text, stdout);
		free(text);
	} else {
		print_text(&r);
	}
	if (ok)
		drv_drift_report_free(&r);
	ir_diags_free(&d);
	return ok ? EXIT_OK : EXIT_USER;
}
