/*
 * fuzz_header.c - libFuzzer target for the container reader: any byte string
 * is opened as a safetensors file image; it must be accepted or refused,
 * never crash, leak or hang.  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>

#include "fp8conv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f = NULL;
    if (fp8_file_open_memory(ctx, "fuzz", data, size, &f) == FP8_OK) {
        uint64_t sum = 0;
        for (size_t i = 0; i < fp8_file_tensor_count(f); i++) {
            const fp8_tensor_info *t = fp8_file_tensor(f, i);
            unsigned char b;
            if (fp8_tensor_nbytes(t) && fp8_file_read(ctx, f, t, 0, &b, 1) == FP8_OK)
                sum += b;
            if (fp8_file_find(f, t->name) != t)
                __builtin_trap();
        }
        (void)sum;
        fp8_file_close(f);
    }
    fp8_ctx_free(ctx);
    return 0;
}
