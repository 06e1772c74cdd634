#!/usr/bin/env python3
"""Stage the end-to-end GPU benchmark's models as small files (bench/gpu/serve_on_gpu.sh).

    bench/gpu/stage_models.py STAGE_MODELS_DIR

Writes, per model, the files the server reads except the weights, plus the weights'
header.json (names and shapes; shaped_checkpoint.py fills random values of those
shapes on the GPU machine) and, where the shapes are scaled, dims:
- minilm-lsg: models/minilm-lsg as scripts/setup converts it (MiniLM-L6 with LSG
  attention and 16,384 positions), served for embed and classify;
- minilm-sbm: models/minilm-sbm likewise (SBM attention with the calibrated
  sbm.safetensors scripts/setup makes; 16,384 positions);
- lsg-bart-16k: the shape of ccdv's lsg-bart-base-16384 (BART-base: 6+6 layers,
  d_model 768, 12 heads, FFN 3072, vocabulary 50,265; 16,384 positions; LSG blocks of
  128, sparse blocks of 128, sparsity factor 2, norm, one global token: the LSG
  converter's defaults), scaled from the tiny LSG-BART fixture, whose tokenizer it
  keeps; generation_config.json asks for exactly 128 new tokens, greedy.
Python's standard library only.
"""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = [sys.executable, os.path.join(ROOT, "bench/gpu/shaped_checkpoint.py"), "header"]


def stage_minilm(out, name, extra_files=()):
    source = os.path.join(ROOT, "models", name)
    if not os.path.exists(os.path.join(source, "model.safetensors")):
        sys.exit(f"{source} is missing: run scripts/setup first")
    os.makedirs(out)
    for file in ("config.json", "special_tokens_map.json", "tokenizer.json",
                 "tokenizer_config.json", "vocab.txt") + tuple(extra_files):
        shutil.copy(os.path.join(source, file), out)
    serving = json.load(open(os.path.join(source, "docsparse.json")))
    serving.pop("default", None)
    serving["tasks"] = ["embed", "classify"]
    json.dump(serving, open(os.path.join(out, "docsparse.json"), "w"), indent=1)
    subprocess.check_call(HEADER + [os.path.join(source, "model.safetensors"),
                                    os.path.join(out, "header.json")])


def stage_lsg_bart_16k(out):
    tiny = os.path.join(ROOT, "tests/fixtures/seq2seq/lsg_bart")
    os.makedirs(out)
    config = json.load(open(os.path.join(tiny, "config.json")))
    layers = 6
    config.update({
        "_name_or_path": "the shape of lsg-bart-base-16384, random weights",
        "d_model": 768, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
        "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "encoder_layers": layers,
        "decoder_layers": layers, "num_hidden_layers": layers, "vocab_size": 50265,
        "max_position_embeddings": 16384, "block_size": 128, "sparse_block_size": 128,
        "sparsity_factor": 2, "sparsity_type": "norm", "num_global_tokens": 1})
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=1)
    generation = json.load(open(os.path.join(tiny, "generation_config.json")))
    generation.update({"max_length": 129, "min_length": 129, "num_beams": 1,
                       "no_repeat_ngram_size": 0, "length_penalty": 1.0,
                       "early_stopping": False})
    json.dump(generation, open(os.path.join(out, "generation_config.json"), "w"), indent=1)
    json.dump({"tasks": ["summarize"], "overflow": "truncate",
               "batching": {"max_batch_size": 4}},
              open(os.path.join(out, "docsparse.json"), "w"), indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tiny, name), out)
    # The tiny fixture's header, its two layers per stack repeated to six; its
    # dimensions (d_model 32, FFN 64, vocabulary 4,001, 1,024 + 2 positions)
    # become BART-base's.
    subprocess.check_call(HEADER + [os.path.join(tiny, "model.safetensors"),
                                    os.path.join(out, "header.json")])
    header = json.load(open(os.path.join(out, "header.json")))
    scaled = {}
    for name, entry in header.items():
        match = re.search(r"\.layers\.(\d+)\.", name)
        if match is None:
            scaled[name] = entry
        elif match.group(1) == "0":
            for layer in range(layers):
                scaled[name.replace(".layers.0.", f".layers.{layer}.")] = entry
    json.dump(scaled, open(os.path.join(out, "header.json"), "w"), indent=0, sort_keys=True)
    with open(os.path.join(out, "dims"), "w") as f:
        f.write("32=768,64=3072,4001=50265,1026=16386\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    stage_minilm(os.path.join(out, "minilm-lsg"), "minilm-lsg")
    # Its calibrated SBM parameters (200 KB) travel as they are.
    stage_minilm(os.path.join(out, "minilm-sbm"), "minilm-sbm", ["sbm.safetensors"])
    stage_lsg_bart_16k(os.path.join(out, "lsg-bart-16k"))


if __name__ == "__main__":
    main()
