#!/usr/bin/env python3
"""Write tiny random-weight ModernBERT checkpoints and what transformers computes with them.

Developer-only. Needs torch, transformers 5.x (ModernBERT), safetensors, numpy; no network.

    HF_HUB_OFFLINE=1 python tools/make_modernbert_fixtures.py [--out tests/fixtures/modernbert]

Writes <out>/model/ (ModernBertModel) and <out>/classifier/ (ModernBertForSequenceClassification,
3 labels, classifier_pooling "mean"): config.json, model.safetensors, expected.json. The
config.json is rewritten in the published checkpoints' format (answerdotai/ModernBERT-base:
global_attn_every_n_layers, local_attention, global_rope_theta, local_rope_theta) rather than
transformers 5's (layer_types, rope_parameters), since that is what users download; the
loader reads both. Shape: hidden 32, 4 layers (global every 3rd: layers 0 and 3), 4 heads,
intermediate 40 (GeGLU: Wi is 80 wide), local_attention 8 (|i - j| <= 4 on sliding layers),
global rope theta 160000, local 10000, norm_bias false, 128 positions; vocab 4,001 (the
byte-level BPE of tests/fixtures/bpe_spm/bart_tokenizer; pad 1).

expected.json: {"versions", "seed", "cases": [{"name", "input_ids" [B][T], "lengths" [B],
"last_hidden_state" [B][T][H] (model/) | "logits" [B][3] (classifier/)}]}. Inputs are right
padded with attention_mask 0 on padding; compare rows < lengths[b]. Floats '%.9g'.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    ModernBertConfig,
    ModernBertForSequenceClassification,
    ModernBertModel,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_encoder_fixtures import dumps, framed_ids, versions  # noqa: E402

SEED = 8192
VOCAB = 4001
BOS, PAD, EOS = 0, 1, 2

PUBLISHED_CONFIG = {
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": BOS,
    "classifier_activation": "gelu", "classifier_bias": False, "classifier_dropout": 0.0,
    "classifier_pooling": "mean", "cls_token_id": BOS, "decoder_bias": True,
    "deterministic_flash_attn": False, "embedding_dropout": 0.0, "eos_token_id": EOS,
    "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
    "gradient_checkpointing": False, "hidden_activation": "gelu", "hidden_size": 32,
    "initializer_cutoff_factor": 2.0, "initializer_range": 0.02, "intermediate_size": 40,
    "layer_norm_eps": 1e-05, "local_attention": 8, "local_rope_theta": 10000.0,
    "max_position_embeddings": 128, "mlp_bias": False, "mlp_dropout": 0.0,
    "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
    "num_attention_heads": 4, "num_hidden_layers": 4, "pad_token_id": PAD,
    "position_embedding_type": "absolute", "reference_compile": False, "sep_token_id": EOS,
    "sparse_pred_ignore_index": -100, "sparse_prediction": False, "torch_dtype": "float32",
    "vocab_size": VOCAB,
}

# (name, lengths)
CASES = [
    ("single_short", [5]),
    ("single_odd", [37]),
    ("padded_batch", [37, 11, 3, 90]),
    ("long", [128]),
]


def init_weights(model, gen):
    """make_tiny_encoder_fixtures' init for ModernBERT's names: norms ("norm", "attn_norm",
    "mlp_norm", "final_norm", the head's) 1 + N(0, 0.1^2), matrices N(0, 0.2^2), biases
    N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def make_ids(gen, lengths):
    ids = framed_ids(gen, lengths, VOCAB, BOS, PAD, EOS)
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return ids, mask


def write_folder(out, model, kind, gen, extra_config):
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    config = dict(PUBLISHED_CONFIG, **extra_config)
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    cases = []
    for name, lengths in CASES:
        ids, mask = make_ids(gen, lengths)
        with torch.no_grad():
            output = model(input_ids=ids, attention_mask=mask)
        case = {"name": name, "input_ids": ids, "lengths": lengths}
        if kind == "classifier":
            case["logits"] = output.logits
        else:
            case["last_hidden_state"] = output.last_hidden_state
        cases.append(case)
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write(dumps({"versions": versions(), "seed": SEED, "cases": cases}) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "modernbert"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    print(versions(), file=sys.stderr)
    gen = torch.Generator().manual_seed(SEED)

    config = ModernBertConfig(**{k: v for k, v in PUBLISHED_CONFIG.items() if k != "torch_dtype"})
    config._attn_implementation = "eager"
    model = ModernBertModel(config).eval()
    init_weights(model, gen)
    write_folder(os.path.join(args.out, "model"), model, "model", gen,
                 {"architectures": ["ModernBertModel"]})

    labels = {"id2label": {"0": "alpha", "1": "beta", "2": "gamma"},
              "label2id": {"alpha": 0, "beta": 1, "gamma": 2}}
    config = ModernBertConfig(**{k: v for k, v in PUBLISHED_CONFIG.items() if k != "torch_dtype"},
                              num_labels=3, id2label={0: "alpha", 1: "beta", 2: "gamma"},
                              label2id={"alpha": 0, "beta": 1, "gamma": 2})
    config._attn_implementation = "eager"
    classifier = ModernBertForSequenceClassification(config).eval()
    init_weights(classifier, gen)
    write_folder(os.path.join(args.out, "classifier"), classifier, "classifier", gen,
                 {"architectures": ["ModernBertForSequenceClassification"], **labels})


if __name__ == "__main__":
    main()
