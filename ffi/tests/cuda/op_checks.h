/* Each device operation (device_ops.h) on the CUDA device against the CPU device's from the same inputs
 * (op_checks.cpp): in their own translation unit, so they report their check counts for test_cuda_emu's summary. */
#ifndef RILL_CUDA_EMU_OP_CHECKS_H
#define RILL_CUDA_EMU_OP_CHECKS_H

void device_op_checks(int *passed, int *failed);

#endif /* RILL_CUDA_EMU_OP_CHECKS_H */
