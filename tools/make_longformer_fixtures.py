#!/usr/bin/env python3
"""Write tiny random-weight Longformer checkpoints and what transformers computes with them.

Developer-only. Needs torch, transformers (5.x), safetensors, numpy; no network. Usage:

    python tools/make_longformer_fixtures.py [--out tests/fixtures/longformer]

Writes <out>/model/ (LongformerModel) and <out>/classifier/ (LongformerForSequenceClassification,
3 labels): config.json, model.safetensors and expected.json. Their vocabulary is that of the
byte-level BPE tokenizer in tests/fixtures/bpe_spm/bart_tokenizer (4,001 ids: <s>=0, <pad>=1,
</s>=2, as Longformer's), which the server tests put beside them.

expected.json:

  {"versions", "seed", "attention_window",
   "cases": [{"name", "input_ids" [B][T], "lengths" [B],
              "global_tokens": g   (global_attention_mask = 1 on each row's first g tokens,
                                    always passed: 0 = no global token),
              "window": w          (every layer's attention_window for this case: the
                                    checkpoint's, or a narrower one set on the HF modules),
              "last_hidden_state" [B][T][H]  (model/: compare rows < lengths[b] only),
              "logits" [B][labels]           (classifier/)}]}

HF pads each batch to a multiple of the window internally; the cases have odd lengths, lengths
below the window and above it, and padded batches, so that padding matters.
Floats are written with '%.9g' (float32 round-trips exactly).
"""

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    LongformerConfig,
    LongformerForSequenceClassification,
    LongformerModel,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_encoder_fixtures import dumps, framed_ids, init_weights, versions  # noqa: E402

SEED = 4096
WINDOW = 8
VOCAB = 4001
BOS, PAD, EOS = 0, 1, 2


def make_config(**extra):
    return LongformerConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=258, type_vocab_size=1,
        hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS, sep_token_id=EOS, attention_window=[WINDOW] * 3, **extra)


def make_ids(gen, lengths):
    return framed_ids(gen, lengths, VOCAB, BOS, PAD, EOS)


def set_window(model, window):
    """Every layer's attention window, as if the checkpoint had been saved with it."""
    model.config.attention_window = [window] * model.config.num_hidden_layers
    for module in model.modules():
        if hasattr(module, "one_sided_attn_window_size"):
            module.one_sided_attn_window_size = window // 2
            module.config.attention_window = model.config.attention_window


def run(model, ids, lengths, global_tokens):
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    # Always passed: without it the classifier would make the first token global.
    globals_ = torch.zeros_like(ids)
    globals_[:, :global_tokens] = 1
    kwargs = {"input_ids": ids, "attention_mask": mask, "global_attention_mask": globals_}
    with torch.no_grad():
        return model(**kwargs)


# (name, lengths, global tokens, window)
CASES = [
    ("single_short", [5], 1, WINDOW),
    ("single_odd", [61], 1, WINDOW),
    ("padded_batch", [61, 17, 4, 130], 1, WINDOW),
    ("no_global", [37, 23], 0, WINDOW),
    ("three_global", [45, 9], 3, WINDOW),
    ("narrow_window", [53, 30], 1, 4),
    ("long", [256], 1, WINDOW),
]


def write_folder(out, model, kind, gen):
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    cases = []
    for name, lengths, global_tokens, window in CASES:
        ids = make_ids(gen, lengths)
        set_window(model, window)
        output = run(model, ids, lengths, global_tokens)
        case = {"name": name, "input_ids": ids, "lengths": lengths,
                "global_tokens": global_tokens, "window": window}
        if kind == "classifier":
            case["logits"] = output.logits
        else:
            case["last_hidden_state"] = output.last_hidden_state
        cases.append(case)
    set_window(model, WINDOW)
    expected = {"versions": versions(), "seed": SEED, "attention_window": WINDOW, "cases": cases}
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write(dumps(expected) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "longformer"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    print(versions(), file=sys.stderr)

    gen = torch.Generator().manual_seed(SEED)
    model = LongformerModel(make_config(), add_pooling_layer=False).eval()
    init_weights(model, gen)
    write_folder(os.path.join(args.out, "model"), model, "model", gen)

    config = make_config(num_labels=3, id2label={0: "alpha", 1: "beta", 2: "gamma"},
                         label2id={"alpha": 0, "beta": 1, "gamma": 2})
    classifier = LongformerForSequenceClassification(config).eval()
    init_weights(classifier, gen)
    write_folder(os.path.join(args.out, "classifier"), classifier, "classifier", gen)


if __name__ == "__main__":
    main()
