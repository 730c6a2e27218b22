/*
 * conditions.c - the loader-condition table (conditions.h).
 */
#include "layout/conditions.h"

#include <string.h>

/* A loader, the declared format (ANY: every one), the model_types (none
 * listed: every one), and the condition. */
#define ANY (-1)
static const struct {
    int loader;
    int format;
    const char *model_types[4];
    loader_condition c;
} rows[] = {
    /* vLLM 0.32.0 model_executor/layers/quantization/__init__.py
     * DEPRECATED_QUANTIZATION_METHODS lists fbgemm_fp8; config/model.py
     * ModelConfig then raises unless allow_deprecated_quantization */
    { FP8_LOADER_VLLM, FP8_FORMAT_FBGEMM_FP8, { NULL },
      { "with --allow-deprecated-quantization",
        "vLLM lists fbgemm_fp8 in DEPRECATED_QUANTIZATION_METHODS "
        "(model_executor/layers/quantization/__init__.py, 0.32.0) and its ModelConfig refuses the "
        "checkpoint (\"The quantization method fbgemm_fp8 is deprecated\") unless "
        "--allow-deprecated-quantization (LLM(allow_deprecated_quantization=True)) is given" } },
    /* transformers 5.19 quantizers/quantizer_fbgemm_fp8.py validate_environment */
    { FP8_LOADER_TRANSFORMERS, FP8_FORMAT_FBGEMM_FP8, { NULL },
      { "on a CUDA GPU with fbgemm-gpu, or an XPU",
        "transformers' FbgemmFp8HfQuantizer.validate_environment (quantizers/"
        "quantizer_fbgemm_fp8.py) refuses a machine without a CUDA GPU or XPU (\"Using fbgemm fp8 "
        "quantization requires a GPU or XPU\"), and on CUDA wants the fbgemm-gpu library and "
        "compute capability 9.0 or more" } },
    /* transformers 5.19 models/auto/configuration_auto.py has no kimi_k2;
     * moonshotai/Kimi-K2-Instruct and Kimi-K2-Thinking ship
     * configuration_deepseek.py and modeling_deepseek.py with an auto_map */
    { FP8_LOADER_TRANSFORMERS, ANY, { "kimi_k2" },
      { "with trust_remote_code=True",
        "transformers has no model_type kimi_k2 (models/auto/configuration_auto.py: \"does not "
        "recognize this architecture\"); Moonshot's releases ship their own modeling code "
        "(configuration_deepseek.py, modeling_deepseek.py, config.json auto_map), which it runs "
        "only with trust_remote_code=True" } },
};

const loader_condition *loader_condition_of(int loader, fp8_format format, const char *model_type)
{
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        if (rows[i].loader != loader || (rows[i].format != ANY && rows[i].format != (int)format))
            continue;
        bool listed = !rows[i].model_types[0];
        for (size_t k = 0; k < 4 && rows[i].model_types[k] && !listed; k++)
            listed = model_type && !strcmp(rows[i].model_types[k], model_type);
        if (listed)
            return &rows[i].c;
    }
    return NULL;
}
