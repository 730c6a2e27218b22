/*
 * conditions.h - a loader that loads a layout, or a model_type, only under a
 * condition that no tensor or config key shows: a device, an option, remote
 * code.  One table row per fact, each citing where it comes from; verify
 * names the condition on its loaders line and in a note
 * (fp8conv-formats(5), LOADER CONDITIONS).
 */
#ifndef FP8_CONDITIONS_H
#define FP8_CONDITIONS_H

#include "common/internal.h"

typedef struct {
    const char *when; /* short, for the loaders line: "on a CUDA or XPU GPU" */
    const char *why;  /* the rule, with its source */
} loader_condition;

/* The condition under which `loader` loads a checkpoint declared as
 * `format` with config.json's `model_type` (may be NULL); NULL: none known. */
const loader_condition *loader_condition_of(int loader, fp8_format format, const char *model_type);

#endif
