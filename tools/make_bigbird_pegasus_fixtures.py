#!/usr/bin/env python3
"""Write a tiny BigBird-Pegasus checkpoint and what transformers computes with it.

Developer-only. Needs torch, transformers 4.36.2 (the version of the other seq2seq fixtures, see
tools/make_led_fixtures.py for why), sentencepiece, safetensors; no network. Usage (see
tests/fixtures/seq2seq/README.md for the environment):

    HF_HUB_OFFLINE=1 python tools/make_bigbird_pegasus_fixtures.py \
        [--out tests/fixtures/seq2seq/bigbird_pegasus]

Writes the folder in the format of tests/fixtures/seq2seq/README.md (config.json,
generation_config.json, model.safetensors, the tokenizer of
tests/fixtures/bpe_spm/pegasus_tokenizer, cases.json, expected.safetensors), with the helpers of
tools/make_seq2seq_fixtures.py (weights, EOS calibration, inputs cut from GPL-3, generation
variants).

What differs from the other seq2seq fixtures: transformers' BigBird encoder lays its blocks over
a batch's padded length, and decides on full attention from it, so a document's output depends
on its batch-mates; docsparse plans every document on its own length. So each input is run ALONE
(a batch of one) and the "batch" records are those runs assembled as a padded batch would hold
them: encoder states zero-padded to the longest input, logits stacked, generated sequences padded
with pad_token_id to the longest (as generate pads a batch), scores in input order. The switch to
full attention sticks to the model object (set_attention_type), so the encoder is switched back
to block_sparse before every call. In eval mode transformers draws every random block as block 0
(deterministic, no indices to supply).

block_size 4 and num_random_blocks 2: inputs of at most (5 + 2 * 2) * 4 = 36 tokens run full
attention (the 9-token input), the 40- and 130-token inputs the block-sparse path.

Deterministic: torch.set_num_threads(1), seeded weights.
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    BigBirdPegasusConfig,
    BigBirdPegasusForConditionalGeneration,
    PegasusTokenizer,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_seq2seq_fixtures as s2s  # noqa: E402

SEED = 4096
TOKENIZER = os.path.join("tests", "fixtures", "bpe_spm", "pegasus_tokenizer")
# google/bigbird-pegasus-large-arxiv's ids: pad 0, eos 1, decoder start (and bos) 2.
SPECIAL = {"bos": 2, "pad": 0, "eos": 1, "decoder_start": 2, "forced_bos": None, "forced_eos": 1,
           "bos_in_input": None}
INPUTS = [(0, 9), (200, 40), (600, 130)]


def reset(model):
    model.model.encoder.set_attention_type("block_sparse")


def forward_alone(model, ids, decoder_ids):
    reset(model)
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                                                                              dtype=torch.long),
                     decoder_input_ids=decoder_ids, use_cache=False)


def generate_alone(model, ids, params):
    reset(model)
    with torch.no_grad():
        return model.generate(input_ids=torch.tensor([ids]), return_dict_in_generate=True,
                              output_scores=True, use_cache=True, **params)


def run_generate(model, batch, params):
    """Every input alone; the sequences padded to the longest as a batch's would be."""
    outs = [generate_alone(model, ids, params) for ids in batch]
    width = max(o.sequences.shape[1] for o in outs)
    sequences = []
    for o in outs:
        for row in o.sequences.tolist():
            sequences.append(row + [SPECIAL["pad"]] * (width - len(row)))
    run = {"input_ids": batch, "sequences": sequences}
    if getattr(outs[0], "sequences_scores", None) is not None:
        run["sequences_scores"] = [float(f"{s:.9g}") for o in outs
                                   for s in o.sequences_scores.tolist()]
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out",
                        default=os.path.join("tests", "fixtures", "seq2seq", "bigbird_pegasus"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    tokenizer = PegasusTokenizer(vocab_file=os.path.join(TOKENIZER, "spiece.model"))
    config = BigBirdPegasusConfig(
        vocab_size=len(tokenizer), d_model=s2s.HIDDEN, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=256, activation_function="gelu_new",
        scale_embedding=True, pad_token_id=SPECIAL["pad"], bos_token_id=SPECIAL["bos"],
        eos_token_id=SPECIAL["eos"], decoder_start_token_id=SPECIAL["decoder_start"],
        forced_eos_token_id=SPECIAL["forced_eos"], attention_type="block_sparse", block_size=4,
        num_random_blocks=2, use_bias=False)
    model = s2s.randomize(BigBirdPegasusForConditionalGeneration(config), SEED)
    inputs = s2s.cut_inputs(tokenizer, INPUTS, SPECIAL["eos"], SPECIAL["bos_in_input"])
    reset(model)
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
        outs = [forward_alone(model, ids, dec[i:i + 1]) for i, ids in enumerate(batch)]
        width = max(len(ids) for ids in batch)
        encoder = torch.zeros(len(batch), width, config.d_model)
        for i, (o, ids) in enumerate(zip(outs, batch)):
            encoder[i, :len(ids)] = o.encoder_last_hidden_state[0]
        tensors[f"{name}.encoder"] = encoder.contiguous()
        tensors[f"{name}.logits"] = torch.cat([o.logits for o in outs], 0).float().contiguous()
        cases["encoder_cases"].append({"name": name, "input_ids": batch,
                                       "decoder_input_ids": dec.tolist(),
                                       "encoder": f"{name}.encoder", "logits": f"{name}.logits"})
    for name, params in s2s.generation_cases("bigbird_pegasus", SPECIAL):
        runs = [run_generate(model, [x["input_ids"]], params) for x in inputs]
        runs.append(run_generate(model, [x["input_ids"] for x in inputs], params))
        cases["generate_cases"].append({"name": name, "params": params, "runs": runs})
    cases["inputs"] = inputs
    save_file(tensors, os.path.join(args.out, "expected.safetensors"))

    s2s.finish_folder(
        args.out, model, TOKENIZER, "bigbird_pegasus", SPECIAL, SEED, cases,
        {"rows_alone": True, "block_size": 4, "num_random_blocks": 2},
        generator="tools/make_bigbird_pegasus_fixtures.py", lsg_reference=False)

if __name__ == "__main__":
    main()
