#!/usr/bin/env python3
"""Write tiny random-weight BigBird checkpoints and what transformers computes with them.

Developer-only. Needs torch, transformers (5.x), safetensors, numpy; no network. Usage:

    python tools/make_bigbird_fixtures.py [--out tests/fixtures/bigbird]

Writes <out>/model/ (BigBirdModel) and <out>/classifier/ (BigBirdForSequenceClassification,
3 labels): config.json, model.safetensors and expected.json. Their vocabulary is that of the
byte-level BPE tokenizer in tests/fixtures/bpe_spm/bart_tokenizer (4,001 ids: <s>=0, <pad>=1,
</s>=2), which the server tests put beside them.

transformers' block-sparse attention in eval mode is deterministic: every random block is block 0
(`_bigbird_block_rand_mask*` return zeros when not training), and at or below
(5 + 2 * num_random_blocks) * block_size tokens BigBirdModel switches to full attention. It
decides both on the batch's padded length and lays the blocks out over it, so a document's
output depends on its batch-mates there; docsparse plans each document on its own length. So
every row of a case is computed ALONE (a batch of one, no padding) and the rows are stacked:
that is the reference a padded batch of ours must reproduce row by row. The switch to full
attention also sticks to the model object (set_attention_type), so it is switched back to
block_sparse before every forward.

expected.json:

  {"versions", "seed", "block_size", "num_random_blocks",
   "cases": [{"name", "input_ids" [B][T], "lengths" [B],
              "knobs": {...}    (request knobs that give transformers' setting of the case:
                                 random_blocks and dense_up_to where the case narrows
                                 num_random_blocks; {} otherwise),
              "last_hidden_state" [B][T][H]  (model/: rows >= lengths[b] are zeros),
              "logits" [B][labels]           (classifier/)}]}

Floats are written with '%.9g' (float32 round-trips exactly).
"""

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    BigBirdConfig,
    BigBirdForSequenceClassification,
    BigBirdModel,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_encoder_fixtures import dumps, framed_ids, init_weights, versions  # noqa: E402

SEED = 2020
VOCAB = 4001
BOS, PAD, EOS = 0, 1, 2


def make_config(**extra):
    settings = dict(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=512, type_vocab_size=2,
        hidden_act="gelu_new", layer_norm_eps=1e-12, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS, sep_token_id=EOS, attention_type="block_sparse", block_size=8,
        num_random_blocks=2)
    settings.update(extra)
    return BigBirdConfig(**settings)


def make_ids(gen, lengths):
    return framed_ids(gen, lengths, VOCAB, BOS, PAD, EOS)


def set_random_blocks(model, random_blocks):
    """num_random_blocks on the config and on every block-sparse module."""
    model.config.num_random_blocks = random_blocks
    for module in model.modules():
        if hasattr(module, "num_random_blocks"):
            module.num_random_blocks = random_blocks
        if hasattr(module, "config"):
            module.config.num_random_blocks = random_blocks


def base(model):
    return model.bert if hasattr(model, "bert") else model


def run_alone(model, ids, n):
    """One document, as a batch of one: its own block layout and threshold."""
    base(model).set_attention_type("block_sparse")
    with torch.no_grad():
        return model(input_ids=ids[:n].unsqueeze(0), attention_mask=torch.ones(1, n, dtype=torch.long))


# (name, lengths, random blocks or None for the checkpoint's)
CASES = [
    ("short_dense", [40], None),
    ("at_threshold", [72], None),
    ("just_above", [73], None),
    ("odd", [157], None),
    ("padded_batch", [157, 40, 100, 256], None),
    ("fewer_random", [130, 61], 1),
    ("long", [512], None),
]


def write_folder(out, model, kind, gen):
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    checkpoint_random = model.config.num_random_blocks
    block = model.config.block_size
    cases = []
    for name, lengths, random_blocks in CASES:
        ids = make_ids(gen, lengths)
        knobs = {}
        if random_blocks is not None:
            knobs = {"random_blocks": random_blocks,
                     "dense_up_to": (5 + 2 * random_blocks) * block}
            set_random_blocks(model, random_blocks)
        rows = [run_alone(model, ids[b], n) for b, n in enumerate(lengths)]
        set_random_blocks(model, checkpoint_random)
        case = {"name": name, "input_ids": ids, "lengths": lengths, "knobs": knobs}
        if kind == "classifier":
            case["logits"] = torch.cat([r.logits for r in rows], 0)
        else:
            hidden = torch.zeros(len(lengths), max(lengths), model.config.hidden_size)
            for b, (r, n) in enumerate(zip(rows, lengths)):
                hidden[b, :n] = r.last_hidden_state[0]
            case["last_hidden_state"] = hidden
        cases.append(case)
    expected = {"versions": versions(), "seed": SEED, "block_size": block,
                "num_random_blocks": checkpoint_random, "cases": cases}
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write(dumps(expected) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "bigbird"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    print(versions(), file=sys.stderr)

    gen = torch.Generator().manual_seed(SEED)
    model = BigBirdModel(make_config(), add_pooling_layer=False).eval()
    init_weights(model, gen)
    write_folder(os.path.join(args.out, "model"), model, "model", gen)

    # The classifier covers the other config switches: no query/key/value biases, rescaled
    # embeddings, smaller blocks.
    config = make_config(num_labels=3, id2label={0: "alpha", 1: "beta", 2: "gamma"},
                         label2id={"alpha": 0, "beta": 1, "gamma": 2}, use_bias=False,
                         rescale_embeddings=True, block_size=4)
    classifier = BigBirdForSequenceClassification(config).eval()
    init_weights(classifier, gen)
    write_folder(os.path.join(args.out, "classifier"), classifier, "classifier", gen)


if __name__ == "__main__":
    main()
