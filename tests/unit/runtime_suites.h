/* runtime_suites.h: the Check suites of the runtime module, one per concept;
 * test_runtime.c runs them all. */
#ifndef REVC_RUNTIME_SUITES_H
#define REVC_RUNTIME_SUITES_H

#include <check.h>

Suite *rt_file_suite(void);
Suite *rt_dir_suite(void);
Suite *rt_kern_conv_bn_suite(void);
Suite *rt_kern_ops_suite(void);
Suite *rt_kern_attn_suite(void);
Suite *rt_kern_norm_suite(void);
Suite *rt_rng_suite(void);
Suite *rt_data_suite(void);
Suite *rt_batch_suite(void);
Suite *rt_npy_suite(void);
Suite *rt_adamw_suite(void);
Suite *rt_pool_suite(void);

#endif
