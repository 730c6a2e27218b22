/*
 * cmd_diff.c - fp8conv diff A B: tensor by tensor, whatever the sharding.
 * Exit 0 when identical, 1 when not (fp8conv(1), EXIT STATUS).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "cli.h"

#define DIFF_JSON_VERSION 1

enum { OPT_DEQUANT = CLI_OPT_FIRST };

static int take_option(int code, const char *value, void *state)
{
    (void)value;
    if (code != OPT_DEQUANT)
        return EXIT_USAGE;
    *(bool *)state = true;
    return -1;
}

static const char *const kind_names[] = { "same", "only_in_a", "only_in_b", "dtype", "shape",
                                          "values" };

/* The coordinates of flat element i of tensor t (expert, row, column; for a
 * packed-FP4 weight, of the unpacked weight). */
static void coordinates(const fp8_tensor_info *t, uint64_t i, uint64_t *at)
{
    for (int k = t->rank - 1; k >= 0; k--) {
        at[k] = t->shape[k] ? i % t->shape[k] : 0;
        i = t->shape[k] ? i / t->shape[k] : 0;
    }
}

static void print_text(const fp8_diff *d)
{
    char sa[128], sb[128];
    size_t different = 0;
    for (size_t i = 0; i < fp8_diff_count(d); i++) {
        const fp8_diff_entry *e = fp8_diff_entry_at(d, i);
        different += e->kind != FP8_DIFF_SAME;
        switch (e->kind) {
        case FP8_DIFF_SAME: break;
        case FP8_DIFF_ONLY_A: cli_printf("only in A: %s\n", cli_esc(e->name)); break;
        case FP8_DIFF_ONLY_B: cli_printf("only in B: %s\n", cli_esc(e->name)); break;
        case FP8_DIFF_DTYPE:
            cli_printf("dtype differs: %s: %s in A, %s in B\n", cli_esc(e->name),
                       fp8_dtype_name(e->a->dtype),
                   fp8_dtype_name(e->b->dtype));
            break;
        case FP8_DIFF_SHAPE:
            fp8_shape_text(e->a->rank, e->a->shape, sa, sizeof sa);
            fp8_shape_text(e->b->rank, e->b->shape, sb, sizeof sb);
            cli_printf("shape differs: %s: %s in A, %s in B\n", cli_esc(e->name), sa, sb);
            break;
        case FP8_DIFF_VALUES:
            cli_printf("values differ: %s: %" PRIu64 " of %" PRIu64 " elements%s, first at %" PRIu64,
                   cli_esc(e->name), e->differing, e->elements,
                   e->dequantized ? " (dequantized)" : "",
                   e->first_index);
            if (e->a->rank > 1 && e->a->rank <= 16 && e->a->elements == e->elements) {
                /* not bytes of a sub-byte dtype */
                uint64_t at[16];
                coordinates(e->a, e->first_index, at);
                fp8_shape_text(e->a->rank, at, sa, sizeof sa);
                cli_printf(" %s", sa);
            }
            if (e->max_abs == e->max_abs)
                /* ULPs of the compared dtype (fp32, or the float side's for dequantized values) */
                cli_printf(", max |a - b| %.9g, max %" PRIu64 " ulp of %s", e->max_abs, e->max_ulp,
                           fp8_dtype_name(e->dequantized ? e->compared : e->a->dtype));
            if (e->sign_changes) /* not in the ulp figure */
                cli_printf(", %" PRIu64 " of opposite sign", e->sign_changes);
            cli_print_quality(&e->quality);
            cli_printf("\n");
            break;
        }
    }
    cli_printf("A: digest %s\nB: digest %s\n", fp8_diff_digest(d, 0), fp8_diff_digest(d, 1));
    fp8_quality q = fp8_diff_quality(d);
    if (q.elements) {
        cli_printf("quality: %" PRIu64 " elements compared by value", q.elements);
        cli_print_quality(&q);
        cli_printf("\n");
    }
    if (different)
        cli_printf("different: %zu of %zu tensors\n", different, fp8_diff_count(d));
    else
        cli_printf("identical: %zu tensor%s\n", fp8_diff_count(d), fp8_diff_count(d) == 1 ? "" : "s");
}

static int print_json(const fp8_diff *d, const char *a, const char *b, bool dequant)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "diff_version", DIFF_JSON_VERSION);
    cJSON_AddStringToObject(root, "a", a);
    cJSON_AddStringToObject(root, "b", b);
    cJSON_AddBoolToObject(root, "dequant", dequant);
    cJSON_AddBoolToObject(root, "identical", fp8_diff_identical(d));
    cJSON_AddStringToObject(root, "digest_a", fp8_diff_digest(d, 0));
    cJSON_AddStringToObject(root, "digest_b", fp8_diff_digest(d, 1));
    cJSON_AddNumberToObject(root, "tensors", (double)fp8_diff_count(d));
    fp8_quality q = fp8_diff_quality(d);
    if (q.elements)
        cJSON_AddItemToObject(root, "quality", cli_json_quality(&q));
    else
        cJSON_AddNullToObject(root, "quality");
    cJSON *diffs = cJSON_AddArrayToObject(root, "differences");
    for (size_t i = 0; i < fp8_diff_count(d); i++) {
        const fp8_diff_entry *e = fp8_diff_entry_at(d, i);
        if (e->kind == FP8_DIFF_SAME)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddStringToObject(o, "kind", kind_names[e->kind]);
        if (e->a) {
            cJSON_AddStringToObject(o, "dtype_a", fp8_dtype_name(e->a->dtype));
            cJSON_AddItemToObject(o, "shape_a", cli_json_shape(e->a->rank, e->a->shape));
        }
        if (e->b) {
            cJSON_AddStringToObject(o, "dtype_b", fp8_dtype_name(e->b->dtype));
            cJSON_AddItemToObject(o, "shape_b", cli_json_shape(e->b->rank, e->b->shape));
        }
        if (e->kind == FP8_DIFF_VALUES) {
            cJSON_AddBoolToObject(o, "dequantized", e->dequantized);
            cJSON_AddItemToObject(o, "elements", cli_json_u64(e->elements));
            cJSON_AddItemToObject(o, "differing", cli_json_u64(e->differing));
            cJSON_AddItemToObject(o, "first_index", cli_json_u64(e->first_index));
            if (e->a->rank <= 16 && e->a->elements == e->elements) { /* not bytes of F4, F6 */
                uint64_t at[16];
                coordinates(e->a, e->first_index, at);
                cJSON_AddItemToObject(o, "first_at", cli_json_shape(e->a->rank, at));
            }
            if (e->dequantized)
                cJSON_AddStringToObject(o, "compared", fp8_dtype_name(e->compared));
            if (e->max_abs == e->max_abs) {
                cJSON_AddNumberToObject(o, "max_abs_diff", e->max_abs);
                cJSON_AddItemToObject(o, "max_ulp", cli_json_u64(e->max_ulp));
            } else {
                cJSON_AddNullToObject(o, "max_abs_diff");
                cJSON_AddNullToObject(o, "max_ulp");
            }
            if (e->sign_changes)
                cJSON_AddItemToObject(o, "sign_changes", cli_json_u64(e->sign_changes));
            if (e->quality.elements)
                cJSON_AddItemToObject(o, "quality", cli_json_quality(&e->quality));
        }
        cJSON_AddItemToArray(diffs, o);
    }
    return cli_print_json(root);
}

/* The command's own long options (getopt, --help, bash completion). */
static const struct option cli_diff_options[] = {
    { "dequant", no_argument, NULL, OPT_DEQUANT },
    { NULL, 0, NULL, 0 },
};

static int cmd_diff(int argc, char **argv, cli_common *common)
{
    fp8_diff_options opts = { 0 };
    cli_options own = { cli_diff_options, take_option, &opts.dequant };
    int rc = cli_parse(&cli_cmd_diff, &argc, argv, common, &own);
    if (rc >= 0)
        return rc;
    opts.threads = common->threads;
    cli_progress_state prog = { .label = "diff" };
    if (cli_progress_wanted(common)) {
        opts.progress = cli_show_progress;
        opts.progress_user = &prog;
    }
    fp8_ctx *ctx = cli_ctx_create();
    fp8_diff *d = NULL;
    if (!ctx)
        return EXIT_IO;
    fp8_status st = fp8_diff_run(ctx, argv[1], argv[2], &opts, &d);
    cli_progress_end(&prog, st == FP8_OK);
    if (st) {
        rc = cli_fail(ctx, st);
    } else {
        rc = fp8_diff_identical(d) ? EXIT_OK : EXIT_FOUND;
        if (!common->quiet && common->json && print_json(d, argv[1], argv[2], opts.dequant))
            rc = EXIT_IO;
        else if (!common->quiet && !common->json)
            print_text(d);
    }
    fp8_diff_free(d);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help diff), and its options for getopt and completion. */
const cli_command cli_cmd_diff = { "diff", "A B", "compare two checkpoints tensor by tensor (exit 1 if they differ)", cmd_diff,
  "Options:\n"
  "      --dequant              compare FP8 and packed-FP4 weights by dequantized value\n",
  "  fp8conv diff a/ b/ && echo same\n"
  "  fp8conv diff --dequant model-fp8/ model-f32/ && echo same values\n",
  "0 identical; 1 different; 2 usage error; 3 bad input; 4 I/O error; 5 device error",
  cli_diff_options };
