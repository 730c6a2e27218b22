/*
 * A program outside the repository, using the installed library: opens a
 * checkpoint through the public API and says what it holds.  Built by
 * tests/install/check_install.sh with pkg-config's flags, against the static
 * and the shared libfp8conv, as C and as C++.
 */
#include <fp8conv.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: call CHECKPOINT\n");
        return 2;
    }
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ckpt = NULL;
    if (!ctx)
        return 4;
    fp8_status st = fp8_checkpoint_open(ctx, argv[1], &ckpt);
    if (st != FP8_OK) {
        fprintf(stderr, "call: %s: %s\n", fp8_status_str(st), fp8_ctx_message(ctx));
        fp8_ctx_free(ctx);
        return 3;
    }
    printf("fp8conv %s: %zu tensors in %zu shards, quant_method %s\n", FP8CONV_VERSION,
           fp8_checkpoint_tensor_count(ckpt), fp8_checkpoint_shard_count(ckpt),
           fp8_checkpoint_quant_method(ckpt) ? fp8_checkpoint_quant_method(ckpt) : "none");
    fp8_checkpoint_close(ckpt);
    fp8_ctx_free(ctx);
    return 0;
}
