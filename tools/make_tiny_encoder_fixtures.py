#!/usr/bin/env python3
"""Write tiny random-weight BERT / RoBERTa / DistilBERT checkpoints and their HF outputs.

Developer-only. Needs torch, transformers, safetensors, numpy; no network. Usage:

    python tools/make_tiny_encoder_fixtures.py [--out tests/fixtures/tiny_encoders]

For each of bert, roberta, distilbert writes <out>/<name>/{config.json, model.safetensors,
expected.json}; also <out>/bert_sharded/ (the bert weights, bit-identical, saved as a 2-shard
checkpoint with model.safetensors.index.json; it has no expected.json of its own: its outputs
are those in bert/expected.json).

expected.json:
  {"model_type", "hidden_size", "generator", "seed", "versions", "tolerance_hint",
   "cases": [{"name", "input_ids" [B][T], "attention_mask" [B][T],
              "token_type_ids" [B][T] (bert only; absent = no token types / all zeros),
              "position_ids" [B][T] (what HF computed internally; informative),
              "lengths" [B],
              "last_hidden_state" [B][T][H] (rows at padded positions are HF's values; compare
                                             only rows where attention_mask == 1),
              "mean_pooled" [B][H]   (sum(h * mask) / sum(mask), unnormalised),
              "cls_pooled" [B][H]    (h[:, 0]),
              "pooler_output" [B][H] (bert/roberta: tanh(dense(h[:, 0])))
              "hidden_states" [L+1][B][T][H] (single-sequence case only: embeddings output,
                                              then every layer's output)}]}
Floats are written with '%.9g' (float32 round-trips exactly).
"""

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import (  # noqa: E402
    AutoModel,
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    RobertaConfig,
    RobertaModel,
)

SEED = 1234
LENGTHS = (5, 17, 30)
SINGLE_LENGTH = 23


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
    }


# ----------------------------------------------------------------------------- json output

def fmt_tensor(t):
    """Nested JSON list; float tensors as float32 printed with '%.9g'."""
    t = t.detach().cpu()
    if t.dim() == 0:
        if t.is_floating_point():
            f = float(t.to(torch.float32))
            assert math.isfinite(f), f
            return "%.9g" % f
        return str(int(t))
    return "[" + ",".join(fmt_tensor(x) for x in t) + "]"


def dumps(obj, indent=0):
    """JSON: tensors via fmt_tensor, dicts indented; plain Python floats use repr."""
    pad = " " * indent
    if isinstance(obj, torch.Tensor):
        return fmt_tensor(obj)
    if isinstance(obj, dict):
        items = [pad + "  " + json.dumps(k) + ": " + dumps(v, indent + 2) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if obj and isinstance(obj[0], dict):
            return "[\n" + ",\n".join(pad + "  " + dumps(v, indent + 2) for v in obj) + "\n" + pad + "]"
        return "[" + ",".join(dumps(v, indent) for v in obj) + "]"
    if isinstance(obj, float):
        assert math.isfinite(obj), obj
        return repr(obj)
    return json.dumps(obj, ensure_ascii=False)


# ----------------------------------------------------------------------------- models

def make_configs():
    return {
        "bert": BertConfig(
            vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
            hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0,
        ),
        "roberta": RobertaConfig(
            vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
            hidden_act="gelu_new", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        ),
        "distilbert": DistilBertConfig(
            vocab_size=97, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64,
            activation="gelu", sinusoidal_pos_embds=False, pad_token_id=0,
        ),
    }


MODEL_CLASSES = {"bert": BertModel, "roberta": RobertaModel, "distilbert": DistilBertModel}

# special ids used to build inputs: (first, last, pad, lowest random id)
SPECIAL = {
    "bert": (2, 3, 0, 4),
    "roberta": (0, 2, 1, 3),  # <s> ... </s>, pad = 1 (RoBERTa convention)
    "distilbert": (2, 3, 0, 4),
}


def init_weights(model, gen):
    """Large-variance init so that outputs are far from trivial."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                if name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def framed_ids(gen, lengths, vocab, bos, pad, eos):
    """[B, max(lengths)] random ids in [3, vocab), each row bos ... eos, right-padded with pad
    (the Longformer, ModernBERT and BigBird fixtures' inputs)."""
    ids = torch.full((len(lengths), max(lengths)), pad, dtype=torch.long)
    for b, n in enumerate(lengths):
        row = torch.randint(3, vocab, (n,), generator=gen)
        row[0], row[-1] = bos, eos
        ids[b, :n] = row
    return ids


def make_inputs(name, gen, lengths, pair_row=None):
    first, last, pad, lo = SPECIAL[name]
    T = max(lengths)
    B = len(lengths)
    ids = torch.full((B, T), pad, dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.long)
    types = torch.zeros((B, T), dtype=torch.long)
    for b, n in enumerate(lengths):
        row = torch.randint(lo, 97, (n,), generator=gen)
        row[0] = first
        row[-1] = last
        ids[b, :n] = row
        mask[b, :n] = 1
        if pair_row is not None and b == pair_row:
            # "[CLS] a a a [SEP] b b b [SEP]" with segment B = token type 1
            split = n // 2
            ids[b, split - 1] = last
            types[b, split:n] = 1
    return ids, mask, types


def hf_position_ids(name, cfg, ids):
    if name == "roberta":
        m = ids.ne(cfg.pad_token_id).long()
        return torch.cumsum(m, dim=1) * m + cfg.pad_token_id
    return torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)


def run_case(name, cfg, model, case_name, ids, mask, types, with_mask, with_hidden):
    kwargs = {"input_ids": ids}
    if with_mask:
        kwargs["attention_mask"] = mask
    if name == "bert":
        kwargs["token_type_ids"] = types
    with torch.no_grad():
        out = model(**kwargs, output_hidden_states=with_hidden)
    h = out.last_hidden_state
    m = mask.unsqueeze(-1).to(h.dtype)
    mean = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    case = {"name": case_name, "input_ids": ids, "attention_mask": mask}
    if name == "bert":
        case["token_type_ids"] = types
    case["position_ids"] = hf_position_ids(name, cfg, ids)
    case["lengths"] = mask.sum(1)
    case["attention_mask_passed_to_hf"] = with_mask
    case["last_hidden_state"] = h
    case["mean_pooled"] = mean
    case["cls_pooled"] = h[:, 0]
    if getattr(out, "pooler_output", None) is not None:
        case["pooler_output"] = out.pooler_output
    if with_hidden:
        case["hidden_states"] = torch.stack(out.hidden_states)
    return case


def max_abs_diff(a, b):
    return float((a - b).abs().max())


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/tiny_encoders")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    vers = versions()
    print("versions:", json.dumps(vers), file=sys.stderr)

    configs = make_configs()
    for idx, (name, cfg) in enumerate(configs.items()):
        gen = torch.Generator().manual_seed(SEED + idx)
        torch.manual_seed(SEED + idx)
        model = MODEL_CLASSES[name](cfg)
        init_weights(model, gen)
        model.eval()

        folder = os.path.join(args.out, name)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        model.save_pretrained(folder, safe_serialization=True)
        assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors"], os.listdir(folder)

        # the saved file must hold exactly our parameters
        saved = load_file(os.path.join(folder, "model.safetensors"))
        params = dict(model.named_parameters())
        assert set(saved) == set(params), (set(saved) ^ set(params))
        for k, v in saved.items():
            assert v.dtype == torch.float32 and torch.equal(v, params[k].detach()), k

        # reference = reloaded from disk, eager attention; sdpa and the in-memory model must agree
        ref = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
        sdpa = AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()

        in_gen = torch.Generator().manual_seed(SEED + 100 + idx)
        cases = []
        ids, mask, types = make_inputs(name, in_gen, LENGTHS, pair_row=2 if name == "bert" else None)
        cases.append(run_case(name, cfg, ref, "padded_batch", ids, mask, types, True, False))
        ids1, mask1, types1 = make_inputs(name, in_gen, (SINGLE_LENGTH,))
        cases.append(run_case(name, cfg, ref, "single", ids1, mask1, types1, False, True))

        diffs = {}
        for other_name, other in (("sdpa", sdpa), ("in_memory", model)):
            for c, (i_, m_, t_, wm) in zip(cases, ((ids, mask, types, True), (ids1, mask1, types1, False))):
                o = run_case(name, cfg, other, c["name"], i_, m_, t_, wm, False)
                valid = m_.bool()
                d = max_abs_diff(o["last_hidden_state"][valid], c["last_hidden_state"][valid])
                diffs["%s_vs_eager_%s" % (other_name, c["name"])] = d
                assert d < 1e-5, (name, other_name, c["name"], d)
        # batched rows == the same sequences run alone, unpadded
        for b, n in enumerate(LENGTHS):
            alone = run_case(name, cfg, ref, "alone", ids[b:b + 1, :n], mask[b:b + 1, :n],
                             types[b:b + 1, :n], False, False)
            d = max_abs_diff(alone["last_hidden_state"][0], cases[0]["last_hidden_state"][b, :n])
            diffs["batched_vs_alone_row%d" % b] = d
            assert d < 1e-5, (name, b, d)
        # the position ids we document are the ones HF uses
        if name == "roberta":
            emb = ref.embeddings
            assert torch.equal(emb.create_position_ids_from_input_ids(ids, cfg.pad_token_id),
                               cases[0]["position_ids"])

        h = cases[0]["last_hidden_state"]
        print("%-10s params=%d |h| mean=%.3f std=%.3f  diffs=%s"
              % (name, sum(p.numel() for p in model.parameters()), float(h.norm(dim=-1).mean()),
                 float(h.std()), json.dumps({k: float("%.2g" % v) for k, v in diffs.items()})),
              file=sys.stderr)

        expected = {
            "model_type": cfg.model_type,
            "hidden_size": model.config.hidden_size if name != "distilbert" else cfg.dim,
            "generator": "tools/make_tiny_encoder_fixtures.py",
            "seed": SEED + idx,
            "model_sha256": sha256(os.path.join(folder, "model.safetensors")),
            "versions": vers,
            "tolerance_hint": 1e-5,
            "checks_max_abs": diffs,
            "cases": cases,
        }
        with open(os.path.join(folder, "expected.json"), "w", encoding="utf-8") as f:
            f.write(dumps(expected) + "\n")
        json.load(open(os.path.join(folder, "expected.json")))

        if name == "bert":
            sharded = os.path.join(args.out, "bert_sharded")
            if os.path.isdir(sharded):
                shutil.rmtree(sharded)
            total = os.path.getsize(os.path.join(folder, "model.safetensors"))
            model.save_pretrained(sharded, safe_serialization=True, max_shard_size=int(total * 0.6))
            files = sorted(os.listdir(sharded))
            shards = [f for f in files if f.endswith(".safetensors")]
            assert "model.safetensors.index.json" in files and len(shards) == 2, files
            merged = {}
            for s in shards:
                merged.update(load_file(os.path.join(sharded, s)))
            assert set(merged) == set(saved)
            for k in saved:
                assert torch.equal(merged[k], saved[k]), k
            re = AutoModel.from_pretrained(sharded, attn_implementation="eager").eval()
            o = run_case(name, cfg, re, "padded_batch", ids, mask, types, True, False)
            assert torch.equal(o["last_hidden_state"], cases[0]["last_hidden_state"])
            print("bert_sharded: %s" % files, file=sys.stderr)

    for d in sorted(os.listdir(args.out)):
        p = os.path.join(args.out, d)
        if os.path.isdir(p):
            for f in os.listdir(p):  # save_pretrained writes shards 0600
                os.chmod(os.path.join(p, f), 0o644)
            print("%-14s %7d bytes  %s" % (d, dir_bytes(p), sorted(os.listdir(p))), file=sys.stderr)


if __name__ == "__main__":
    main()
