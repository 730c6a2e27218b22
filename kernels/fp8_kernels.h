/*
 * fp8_kernels.h - the plain-C face of kernels/.  lib/backend_cuda.c is its
 * only caller; nothing outside kernels/ includes a CUDA header.
 * Every function returns a cudaError_t value as an int (0 = success).
 */
#ifndef FP8_KERNELS_H
#define FP8_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int fp8k_device_count(int *count);
int fp8k_device_props(int device, char *name, size_t name_cap, int *major, int *minor,
                      uint64_t *memory_bytes);
/* Checks that the device can run this build's code (a kernel launch round trip). */
int fp8k_device_probe(int device);
const char *fp8k_error_string(int err);
/* Clears the runtime's sticky last-error state. */
void fp8k_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
