/* The attention kernels' checks (attention_checks.cpp): run in their own translation unit, so they report their
 * check counts for test_cuda_emu's summary. */
#ifndef RILL_TESTS_CUDA_ATTENTION_CHECKS_H
#define RILL_TESTS_CUDA_ATTENTION_CHECKS_H

void attention_kernel_checks(int *passed, int *failed);

#endif /* RILL_TESTS_CUDA_ATTENTION_CHECKS_H */
