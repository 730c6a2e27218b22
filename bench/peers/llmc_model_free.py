"""llm-compressor's model_free_ptq (no model definition, reads the
safetensors directly): FP8_BLOCK on the CPU, every core.

usage: llmc_model_free.py SRC DST
"""
import os
import sys

from llmcompressor import model_free_ptq

model_free_ptq(model_stub=sys.argv[1], save_directory=sys.argv[2], scheme="FP8_BLOCK",
               ignore=["lm_head", "model.embed_tokens"], max_workers=os.cpu_count(),
               device="cpu")
