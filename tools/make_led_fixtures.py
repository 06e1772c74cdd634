#!/usr/bin/env python3
"""Write a tiny LED (Longformer-Encoder-Decoder) checkpoint and what transformers computes with it.

Developer-only. Needs torch, transformers 4.36.2 (the version of the other seq2seq fixtures:
transformers 5 changed beam search's early-stopping heuristic, which our generation follows as
4.36 has it), sentencepiece, safetensors; no network. Usage (see
tests/fixtures/seq2seq/README.md for the environment):

    HF_HUB_OFFLINE=1 python tools/make_led_fixtures.py [--out tests/fixtures/seq2seq/led]

Writes the folder in the format of tests/fixtures/seq2seq/README.md (config.json,
generation_config.json, model.safetensors, the tokenizer of tests/fixtures/bpe_spm/bart_tokenizer,
cases.json, expected.safetensors), with the helpers of tools/make_seq2seq_fixtures.py (weights,
EOS calibration, inputs cut from GPL-3, generation variants). What differs: every HF call gets
`global_attention_mask` with the first token of each input global, as LED's documentation runs
summarisation and as docsparse's native LED plan does (one global token), and the encoder's
attention_window is 8 so that the 40- and 130-token inputs run Longformer's sliding window.

Deterministic: torch.set_num_threads(1), seeded weights.
"""

import argparse
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    LEDConfig,
    LEDForConditionalGeneration,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_seq2seq_fixtures as s2s  # noqa: E402

SEED = 16384
WINDOW = 8
TOKENIZER = os.path.join("tests", "fixtures", "bpe_spm", "bart_tokenizer")
SPECIAL = {"bos": 0, "pad": 1, "eos": 2, "decoder_start": 2, "forced_bos": 0, "forced_eos": 2,
           "bos_in_input": 0}
INPUTS = [(0, 9), (200, 40), (600, 130)]


def global_mask(ids):
    mask = torch.zeros_like(ids)
    mask[:, 0] = 1
    return mask


def run_generate(model, batch, params):
    ids, mask = s2s.padded(batch, SPECIAL["pad"])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, global_attention_mask=global_mask(ids),
                             return_dict_in_generate=True, output_scores=True, use_cache=True,
                             **params)
    run = {"input_ids": batch, "sequences": out.sequences.tolist()}
    if getattr(out, "sequences_scores", None) is not None:
        run["sequences_scores"] = [float(f"{s:.9g}") for s in out.sequences_scores.tolist()]
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "seq2seq", "led"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    config = LEDConfig(
        vocab_size=4001, max_encoder_position_embeddings=256, max_decoder_position_embeddings=64,
        encoder_layers=2, encoder_ffn_dim=64, encoder_attention_heads=4, decoder_layers=2,
        decoder_ffn_dim=64, decoder_attention_heads=4, d_model=s2s.HIDDEN,
        activation_function="gelu", pad_token_id=SPECIAL["pad"], bos_token_id=SPECIAL["bos"],
        eos_token_id=SPECIAL["eos"], decoder_start_token_id=SPECIAL["decoder_start"],
        attention_window=[WINDOW, WINDOW])
    model = s2s.randomize(LEDForConditionalGeneration(config), SEED)
    tokenizer = s2s.bart_slow_tokenizer(os.path.join(TOKENIZER, "tokenizer.json"),
                                        tempfile.mkdtemp())
    s2s.check_tokenizer(tokenizer, os.path.join("tests", "fixtures", "bpe_spm", "bart_cases.jsonl"))
    inputs = s2s.cut_inputs(tokenizer, INPUTS, SPECIAL["eos"], SPECIAL["bos_in_input"])
    s2s.calibrate_eos(model, inputs, SPECIAL)

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    model.save_pretrained(args.out, safe_serialization=True)
    tensors = {}
    cases = {"encoder_cases": [], "generate_cases": []}
    for name, batch in [("single", [inputs[0]["input_ids"]]),
                        ("batch", [x["input_ids"] for x in inputs])]:
        dec = s2s.decoder_inputs(len(batch), SPECIAL["decoder_start"], config.vocab_size,
                                 SEED + len(batch))
        ids, mask = s2s.padded(batch, SPECIAL["pad"])
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, global_attention_mask=global_mask(ids),
                        decoder_input_ids=dec, use_cache=False)
        tensors[f"{name}.encoder"] = out.encoder_last_hidden_state.float().contiguous()
        tensors[f"{name}.logits"] = out.logits.float().contiguous()
        cases["encoder_cases"].append({"name": name, "input_ids": batch,
                                       "decoder_input_ids": dec.tolist(),
                                       "encoder": f"{name}.encoder", "logits": f"{name}.logits"})
    for name, params in s2s.generation_cases("led", SPECIAL):
        runs = [run_generate(model, [x["input_ids"]], params) for x in inputs]
        runs.append(run_generate(model, [x["input_ids"] for x in inputs], params))
        cases["generate_cases"].append({"name": name, "params": params, "runs": runs})
    cases["inputs"] = inputs
    save_file(tensors, os.path.join(args.out, "expected.safetensors"))

    s2s.finish_folder(
        args.out, model, TOKENIZER, "led", SPECIAL, SEED, cases,
        # transformers' own fp32 logits here are 7.3e-5 from an fp64 run (BART's fixture:
        # 3.2e-5), so an independent fp32 implementation gets twice BART's room.
        {"tolerance_hint": 2e-4, "global_tokens": 1, "attention_window": WINDOW},
        generator="tools/make_led_fixtures.py", lsg_reference=False)

if __name__ == "__main__":
    main()
