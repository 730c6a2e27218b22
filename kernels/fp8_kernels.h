/*
 * fp8_kernels.h - the plain-C face of kernels/.  lib/compute/gpu.c is its
 * only caller in the library (bench/gpu_bench.cu times the launches too);
 * nothing outside kernels/ includes a CUDA header.
 * Every function returns a cudaError_t value as an int (0 = success); a
 * failed call has already cleared the runtime's last-error state.
 */
#ifndef FP8_KERNELS_H
#define FP8_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "common/fp4_math.h"
#include "common/fp8_math.h"

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


/* Element types the kernels read or write. */
typedef enum { FP8K_BF16, FP8K_F16, FP8K_F32 } fp8k_type;

/*
 * A band of `rows` x `cols` source elements (row-major) cut into groups of
 * group_rows x group_cols (partial at the edges), one scale each, as
 * lib/compute/quant_ref.h's fp8_band; with `fixed` every element is divided by `scale`
 * and no scale is stored.
 */
typedef struct {
    fp8k_type src;
    fp8_scale_kind kind;
    uint64_t rows, cols, group_rows, group_cols;
    int fixed;
    float scale;
    fp8_numerics num; /* the profile's arithmetic (fp8_numerics_scale); scale its factor */
} fp8k_band;

/*
 * Dequantization of `rows` x `cols` E4M3 codes, rows [row0, row0 + rows) of
 * a matrix whose scales (as fp32) form a grid of group_rows x group_cols
 * groups: the band's first scale row is the one holding row0, and a scale
 * row has ceil(cols / group_cols) scales.
 */
typedef struct {
    fp8k_type out;
    uint64_t rows, cols, row0, group_rows, group_cols;
} fp8k_dequant;

/* Bits of *bad the kernels set: the host redoes such a band on the CPU, which
 * says exactly what is wrong and where. */
enum {
    FP8K_BAD_NONFINITE = 1, /* quantize: a NaN or infinity in the source */
    FP8K_BAD_SCALE = 2,     /* quantize: a scale the kind cannot store (F16 overflow) */
    FP8K_BAD_NAN_CODE = 4,  /* dequantize: an E4M3 NaN code */
    FP8K_BAD_OVERFLOW = 8,  /* dequantize: q * s, or its rounding, is not finite */
    FP8K_BAD_FP4 = 16,      /* packed FP4: a scale byte that is NaN or lets a code overflow */
    FP8K_BAD_TINY = 32,     /* FP4 quantize, MXFP4 from BF16: a quotient at or below 2^-126 */
};

/*
 * Packed-FP4 decode (lib/compute/fp4_ref.h), a band of columns of `rows`
 * rows of `cols` values: row r's codes (two a byte, element 2i in the low
 * nibble) at q + r * cols / 2, its scale bytes at scales + r * cols / group.
 * The value of code c under scale byte b is table[b * 16 + c], the output's
 * bits (16 or 32): the reference's table (fp4_table), built on the host, so
 * the device computes nothing but the lookup; clean[b] == 0 (b NaN, or some
 * code overflows under it) sets FP8K_BAD_FP4 and the host redoes the band.
 * Columns [c0, c0 + width) (multiples of the group) go to
 * y[r * width + c - c0], or with `transpose` to y[(c - c0) * rows + r].
 */
typedef struct {
    fp8k_type out;
    uint64_t rows, cols, group, c0, width;
    int transpose;
} fp8k_fp4;
/* the table (256 x 16 uint32) and clean (256 bytes), as they lie in device memory */
#define FP8K_FP4_TABLE_BYTES (256 * 16 * 4 + 256)

/*
 * Packed-FP4 quantization (lib/compute/fp4_ref.h, fp4_quantize_row) of n
 * source elements (whole rows, end to end; n a multiple of the group, 16
 * for NVFP4 and 32 for MXFP4): packed gets n / 2 bytes (element 2i in the
 * low nibble of byte i), scales n / group bytes (NVFP4: E4M3 under the
 * second level `global`; MXFP4: E8M0).  One thread a group, each rule of
 * lib/common/fp4_math.h.  A group with a NaN or infinity sets
 * FP8K_BAD_NONFINITE, one whose E8M0 byte would be 255 or more
 * FP8K_BAD_SCALE, and (MXFP4 from BF16) a nonzero element whose quotient is
 * at or below 2^-126, where the BF16 rounding of a subnormal decides the
 * sign, FP8K_BAD_TINY: the host redoes the band with the CPU reference.
 */
typedef struct {
    fp8k_type src; /* FP8K_BF16 or FP8K_F32 */
    int nvfp4;     /* else MXFP4 */
    uint64_t n, group;
    float global;
} fp8k_fp4q;

/* ---- launches on device memory, asynchronous on `stream` (a cudaStream_t) */

/* q gets rows * cols codes, scales the groups' stored scales (row-major,
 * fp8_scale_size(kind) bytes each); *bad (device memory) gets FP8K_BAD_* bits ORed in. */
int fp8k_launch_quantize(const fp8k_band *b, const void *src, uint8_t *q, void *scales,
                         unsigned *bad, void *stream);
/* *amax_bits (device memory, zeroed by the caller) is raised to the largest
 * magnitude bits of n elements, in src's own format. */
int fp8k_launch_amax(fp8k_type src, const void *x, uint64_t n, unsigned *amax_bits,
                     void *stream);
/* y gets rows * cols values of type d->out: decode(q) * scales[group]. */
int fp8k_launch_dequantize(const fp8k_dequant *d, const uint8_t *q, const float *scales,
                           void *y, unsigned *bad, void *stream);

/* y gets the band's values (fp8k_fp4); table: FP8K_FP4_TABLE_BYTES, the
 * uint32 values then the clean bytes. */
int fp8k_launch_fp4(const fp8k_fp4 *d, const uint8_t *q, const uint8_t *scales,
                    const uint8_t *table, void *y, unsigned *bad, void *stream);

/* packed and scales get the band's codes and scale bytes (fp8k_fp4q). */
int fp8k_launch_fp4q(const fp8k_fp4q *d, const void *src, uint8_t *packed, uint8_t *scales,
                     unsigned *bad, void *stream);

/* ---- a slot: what one host thread owns on the GPU */

/*
 * A stream, three pinned host buffers host[0..2] of bytes[i] bytes and three
 * device buffers of the same sizes.  Each call below copies its inputs from
 * the host buffers, runs on the slot's stream, copies the results back into
 * the host buffers and waits for them, so the calls of different slots
 * (threads) overlap: one slot's copies run while another's kernel does and a
 * third thread reads the file.
 */
typedef struct fp8k_slot fp8k_slot;
int fp8k_slot_create(int device, const size_t bytes[3], fp8k_slot **slot, void *host[3]);
void fp8k_slot_free(fp8k_slot *slot);

/* host[0]: the source band; host[1] gets the codes, host[2] the scales. */
int fp8k_slot_quantize(fp8k_slot *s, const fp8k_band *b, unsigned *bad);
/* host[0]: n elements; *amax_bits: their largest magnitude bits. */
int fp8k_slot_amax(fp8k_slot *s, fp8k_type src, uint64_t n, unsigned *amax_bits);
/* host[0]: the codes; host[1]: `nscales` fp32 scales; host[2] gets the values. */
int fp8k_slot_dequantize(fp8k_slot *s, const fp8k_dequant *d, uint64_t nscales, unsigned *bad);

/* host[0]: the codes of d->rows rows (rows * cols / 2 bytes); host[1]: the
 * table (FP8K_FP4_TABLE_BYTES), then the rows' scale bytes; host[2] gets the
 * band's values.  upload 0: host[0] and host[1] are on the device already
 * (this slot's previous call was another band of the same rows). */
int fp8k_slot_fp4(fp8k_slot *s, const fp8k_fp4 *d, int upload, unsigned *bad);
/* host[0]: the n source elements; host[1] gets the n / 2 packed bytes,
 * host[2] the n / group scale bytes. */
int fp8k_slot_fp4q(fp8k_slot *s, const fp8k_fp4q *d, unsigned *bad);

/* ---- the caller's device memory, on the caller's stream (a cudaStream_t;
 * NULL: the legacy default stream), without a device synchronize */

/* n words of device memory (stream-ordered), zeroed on the stream. */
int fp8k_words_alloc(size_t n, unsigned **words, void *stream);
void fp8k_words_free(unsigned *words, void *stream);
/* n bytes from src to dst (to_host: device to host, else host to device),
 * queued on the stream; with `wait`, then a wait for the stream. */
int fp8k_copy(void *dst, const void *src, size_t n, int to_host, int wait, void *stream);

#ifdef __cplusplus
}
#endif
#endif
