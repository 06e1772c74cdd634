#!/usr/bin/env python3
"""Write tiny random-weight sequence-classification checkpoints and their HF logits.

Developer-only. Needs torch, transformers, safetensors, numpy; no network. Usage:

    python tools/make_tiny_classifier_fixtures.py [--out tests/fixtures/tiny_classifiers]

Writes <out>/<name>/{config.json, model.safetensors, expected.json} for
  bert             BertForSequenceClassification, 3 labels (negative, neutral, positive)
  roberta          RobertaForSequenceClassification, 2 labels (HF default names LABEL_0/1)
  distilbert       DistilBertForSequenceClassification, 4 labels
  bert_multilabel  BertForSequenceClassification, 3 labels,
                   problem_type="multi_label_classification"
with the encoder sizes of tools/make_tiny_encoder_fixtures.py (hidden 32, 2 layers, 4 heads,
vocab 97) and its weight init; the head's matrices get a larger std (HEAD_STD) so that the
logits are O(1) and the probabilities are far from uniform and from one-hot.

expected.json:
  {"model_type", "model_class", "num_labels", "id2label" [names by id], "problem_type",
   "function_to_apply" ("softmax" | "sigmoid": the text-classification pipeline's default for
   this config), "head" (how the logits are computed, informative), "generator", "seed",
   "model_sha256", "versions", "tolerance_hint", "checks_max_abs",
   "cases": [{"name", "input_ids" [B][T], "attention_mask" [B][T], "lengths" [B],
              "logits" [B][num_labels], "probabilities" [B][num_labels]}]}
Case "padded_batch": B=3, lengths 5, 17, 30, right padding, attention_mask passed to HF.
Case "single": B=1, 23 tokens, no padding, no attention_mask passed. token_type_ids are never
passed (all zeros). Floats are written with '%.9g' (float32 round-trips exactly).
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_tiny_encoder_fixtures as tiny  # noqa: E402  (sets HF_HUB_OFFLINE)
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import (  # noqa: E402
    AutoModel,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

SEED = 4321
HEAD_STD = 0.25
HEAD_BIAS_STD = 0.2

# Encoder sizes: exactly those of tiny_encoders/.
BERT_SIZES = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
                  hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0)
ROBERTA_SIZES = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
                     hidden_act="gelu_new", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                     eos_token_id=2)
DISTILBERT_SIZES = dict(vocab_size=97, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                        max_position_embeddings=64, activation="gelu", sinusoidal_pos_embds=False,
                        pad_token_id=0)


def labels(*names):
    return {i: n for i, n in enumerate(names)}


def make_models():
    """name -> (model class, config, encoder kind for inputs, head prefixes, head description)."""
    return {
        "bert": (
            BertForSequenceClassification,
            BertConfig(**BERT_SIZES, id2label=labels("negative", "neutral", "positive"),
                       label2id={"negative": 0, "neutral": 1, "positive": 2}),
            "bert", ("bert.pooler.", "classifier."),
            "classifier(tanh(bert.pooler.dense(h[:, 0])))"),
        "roberta": (
            RobertaForSequenceClassification,
            RobertaConfig(**ROBERTA_SIZES, num_labels=2),
            "roberta", ("classifier.",),
            "classifier.out_proj(tanh(classifier.dense(h[:, 0])))"),
        "distilbert": (
            DistilBertForSequenceClassification,
            DistilBertConfig(**DISTILBERT_SIZES,
                             id2label=labels("world", "sports", "business", "sci_tech"),
                             label2id={"world": 0, "sports": 1, "business": 2, "sci_tech": 3}),
            "distilbert", ("pre_classifier.", "classifier."),
            "classifier(relu(pre_classifier(h[:, 0])))"),
        "bert_multilabel": (
            BertForSequenceClassification,
            BertConfig(**BERT_SIZES, id2label=labels("urgent", "legal", "finance"),
                       label2id={"urgent": 0, "legal": 1, "finance": 2},
                       problem_type="multi_label_classification"),
            "bert", ("bert.pooler.", "classifier."),
            "classifier(tanh(bert.pooler.dense(h[:, 0])))"),
    }


def init_head(model, prefixes, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(prefixes):
                std = HEAD_BIAS_STD if name.endswith("bias") else HEAD_STD
                p.copy_(std * torch.randn(p.shape, generator=gen))


def pipeline_function(cfg):
    """transformers' TextClassificationPipeline.postprocess default (function_to_apply=None)."""
    if cfg.problem_type == "regression":
        return "none"
    if cfg.problem_type == "multi_label_classification" or cfg.num_labels == 1:
        return "sigmoid"
    return "softmax"


def probabilities(logits, function):
    if function == "sigmoid":
        return torch.sigmoid(logits)
    if function == "softmax":
        return torch.softmax(logits, dim=-1)
    return logits


def run(model, ids, mask, with_mask):
    kwargs = {"input_ids": ids}
    if with_mask:
        kwargs["attention_mask"] = mask
    with torch.no_grad():
        return model(**kwargs).logits


def manual_logits(name, model, hidden):
    """The head recomputed from the encoder's last_hidden_state with plain torch ops."""
    x = hidden[:, 0]
    if name.startswith("bert"):
        dense = model.bert.pooler.dense
        return model.classifier(torch.tanh(dense(x)))
    if name == "roberta":
        return model.classifier.out_proj(torch.tanh(model.classifier.dense(x)))
    return model.classifier(torch.relu(model.pre_classifier(x)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/tiny_classifiers")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    vers = tiny.versions()
    print("versions:", tiny.json.dumps(vers), file=sys.stderr)

    for idx, (name, (cls, cfg, kind, head_prefixes, head_desc)) in enumerate(make_models().items()):
        gen = torch.Generator().manual_seed(SEED + idx)
        torch.manual_seed(SEED + idx)
        model = cls(cfg)
        tiny.init_weights(model, gen)
        init_head(model, head_prefixes, gen)
        model.eval()

        folder = os.path.join(args.out, name)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        model.save_pretrained(folder, safe_serialization=True)
        assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors"], os.listdir(folder)
        saved = load_file(os.path.join(folder, "model.safetensors"))
        params = dict(model.named_parameters())
        assert set(saved) == set(params), (set(saved) ^ set(params))
        for k, v in saved.items():
            assert v.dtype == torch.float32 and torch.equal(v, params[k].detach()), k
        head_names = sorted(k for k in saved if k.startswith(head_prefixes))

        ref = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="eager").eval()
        sdpa = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").eval()
        assert type(ref) is cls, type(ref)
        assert ref.config.problem_type == cfg.problem_type and ref.config.id2label == cfg.id2label
        function = pipeline_function(ref.config)
        # AutoModel on a task checkpoint strips the prefix and drops the head: the encoder
        # outputs the head is applied to.
        base = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()

        in_gen = torch.Generator().manual_seed(SEED + 100 + idx)
        ids, mask, _ = tiny.make_inputs(kind, in_gen, tiny.LENGTHS)
        ids1, mask1, _ = tiny.make_inputs(kind, in_gen, (tiny.SINGLE_LENGTH,))
        inputs = (("padded_batch", ids, mask, True), ("single", ids1, mask1, False))

        cases, diffs = [], {}
        for case_name, i_, m_, wm in inputs:
            logits = run(ref, i_, m_, wm)
            for other_name, other in (("sdpa", sdpa), ("in_memory", model)):
                d = tiny.max_abs_diff(run(other, i_, m_, wm), logits)
                diffs["%s_vs_eager_%s" % (other_name, case_name)] = d
                assert d < 1e-5, (name, other_name, case_name, d)
            with torch.no_grad():
                kwargs = {"input_ids": i_, "attention_mask": m_} if wm else {"input_ids": i_}
                hidden = base(**kwargs).last_hidden_state
                d = tiny.max_abs_diff(manual_logits(name, ref, hidden), logits)
            diffs["manual_head_vs_hf_%s" % case_name] = d
            assert d < 1e-5, (name, case_name, d)
            cases.append({"name": case_name, "input_ids": i_, "attention_mask": m_,
                          "lengths": m_.sum(1), "attention_mask_passed_to_hf": wm,
                          "logits": logits, "probabilities": probabilities(logits, function)})
        for b, n in enumerate(tiny.LENGTHS):
            alone = run(ref, ids[b:b + 1, :n], mask[b:b + 1, :n], False)
            d = tiny.max_abs_diff(alone[0], cases[0]["logits"][b])
            diffs["batched_vs_alone_row%d" % b] = d
            assert d < 1e-5, (name, b, d)

        logits = torch.cat([c["logits"] for c in cases])
        probs = torch.cat([c["probabilities"] for c in cases])
        print("%-16s params=%d labels=%d %s logits std=%.2f |max|=%.2f probs [%.3f, %.3f] "
              "argmax=%s head=%s diffs=%s"
              % (name, sum(p.numel() for p in model.parameters()), cfg.num_labels, function,
                 float(logits.std()), float(logits.abs().max()), float(probs.min()),
                 float(probs.max()), logits.argmax(-1).tolist(), head_names,
                 tiny.json.dumps({k: float("%.2g" % v) for k, v in diffs.items()})),
              file=sys.stderr)

        expected = {
            "model_type": cfg.model_type,
            "model_class": cls.__name__,
            "num_labels": cfg.num_labels,
            "id2label": [cfg.id2label[i] for i in range(cfg.num_labels)],
            "problem_type": cfg.problem_type,
            "function_to_apply": function,
            "head": head_desc,
            "head_tensors": head_names,
            "generator": "tools/make_tiny_classifier_fixtures.py",
            "seed": SEED + idx,
            "model_sha256": tiny.sha256(os.path.join(folder, "model.safetensors")),
            "versions": vers,
            "tolerance_hint": 1e-5,
            "checks_max_abs": diffs,
            "cases": cases,
        }
        path = os.path.join(folder, "expected.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(tiny.dumps(expected) + "\n")
        tiny.json.load(open(path))

    for d in sorted(os.listdir(args.out)):
        p = os.path.join(args.out, d)
        if os.path.isdir(p):
            for f in os.listdir(p):
                os.chmod(os.path.join(p, f), 0o644)
            size = tiny.dir_bytes(p)
            assert size < 300_000, (d, size)
            print("%-16s %7d bytes  %s" % (d, size, sorted(os.listdir(p))), file=sys.stderr)


if __name__ == "__main__":
    main()
