/* test_runtime.c: runs every suite of the runtime module. */
#include <stdlib.h>

#include "runtime_suites.h"

int main(void)
{
	SRunner *sr = srunner_create(rt_file_suite());
	srunner_add_suite(sr, rt_dir_suite());
	srunner_add_suite(sr, rt_kern_conv_bn_suite());
	srunner_add_suite(sr, rt_kern_ops_suite());
	srunner_add_suite(sr, rt_kern_attn_suite());
	srunner_add_suite(sr, rt_kern_norm_suite());
	srunner_add_suite(sr, rt_rng_suite());
	srunner_add_suite(sr, rt_data_suite());
	srunner_add_suite(sr, rt_batch_suite());
	srunner_add_suite(sr, rt_npy_suite());
	srunner_add_suite(sr, rt_adamw_suite());
	srunner_add_suite(sr, rt_pool_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
