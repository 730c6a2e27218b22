"""llm-compressor's oneshot: the model loaded in transformers, FP8_BLOCK
(data-free) applied to every Linear but lm_head, saved compressed.

usage: llmc_oneshot.py SRC DST
"""
import sys

import torch
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16)
oneshot(model=model,
        recipe=QuantizationModifier(targets="Linear", scheme="FP8_BLOCK", ignore=["lm_head"]))
model.save_pretrained(sys.argv[2], save_compressed=True)
