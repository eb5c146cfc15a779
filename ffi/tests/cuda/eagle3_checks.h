/* EAGLE-3 on the CUDA device against the CPU device (eagle3_checks.cpp): in their own translation unit, so they report
 * their check counts for test_cuda_emu's summary. */
#ifndef RILL_CUDA_EMU_EAGLE3_CHECKS_H
#define RILL_CUDA_EMU_EAGLE3_CHECKS_H

void eagle3_device_checks(int *passed, int *failed);

#endif /* RILL_CUDA_EMU_EAGLE3_CHECKS_H */
