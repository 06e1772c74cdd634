#!/usr/bin/env python3
"""Write tiny checkpoints and the reference LSG converter's output for them.

Developer-only (the C++ build and tests never run Python). Needs torch, a transformers 4.4x
that the reference converter runs under, tokenizers, safetensors; no network. Usage:

    HF_HUB_OFFLINE=1 python tools/make_lsg_converter_fixtures.py \
        --reference /tmp/lsgref [--out tests/fixtures/lsg_converter]

`--reference` is a checkout of github.com/ccdv-ai/convert_checkpoint_to_lsg (commit c56734b);
its code is imported from there, never copied into this repository. For each case below this
writes <out>/<case>/input/ (config.json, model.safetensors, tokenizer files: what
`docsparse-convert lsg --input` reads) and <out>/<case>/reference/ (the reference converter's
config.json, model.safetensors, tokenizer_config.json; the other tokenizer files it writes equal
the input's and the modeling_lsg_*.py it copies is the reference's code, so neither is kept),
plus <out>/cases.json: per case the converter arguments, so the C++ test runs the same
conversion.

The reference is driven through its per-architecture ConversionScript classes with exactly the
arguments convert_checkpoint.py passes (set_seed(123) first, save_model=True). We do not run
convert_checkpoint.py itself: it imports every architecture, and the ALBERT module fails to
import under transformers >= 4.4x (`AlbertEmbeddings` is no longer exported by `import *`).
No other shim or patch is applied.

Every position table has >= 512 rows, so the reference's order_positions never takes its
random branch (torch.normal padding of short tables), and the outputs are deterministic.
"""

import argparse
import hashlib
import importlib
import json
import os
import platform
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    BertTokenizerFast,
    DistilBertConfig,
    DistilBertForMaskedLM,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizerFast,
    set_seed,
)

REFERENCE_COMMIT = "c56734b"
HIDDEN = 16

# name -> how the checkpoint is built and converted. `knobs` become the reference's
# model_kwargs and our --flags; `max_length` its max_sequence_length and our --max-length.
CASES = {
    # Base BertModel (no tensor prefix), 512 positions, non-default LSG knobs.
    "bert": {
        "family": "bert", "max_length": 1536,
        "knobs": {"block_size": 64, "sparse_block_size": 32, "sparsity_factor": 4,
                  "sparsity_type": "pooling", "num_global_tokens": 4},
    },
    # Task model ("bert." prefix + head), 1024 positions: order_positions keeps every 2nd
    # row with stride 64 / 2 = 32.
    "bert_classifier": {
        "family": "bert", "max_length": 4096, "knobs": {"sparsity_type": "lsh"},
    },
    # "roberta" positions: 2 offset rows + 512; defaults.
    "roberta": {"family": "roberta", "max_length": 2048, "knobs": {}},
    # DistilBertForMaskedLM ("distilbert." prefix), 600 positions: order_positions first
    # cuts the table to 512 rows.
    "distilbert": {
        "family": "distilbert", "max_length": 1000,
        "knobs": {"block_size": 32, "sparse_block_size": 16, "sparsity_factor": 8,
                  "sparsity_type": "stride", "mask_first_token": True},
    },
    # BartForConditionalGeneration ("model." prefix), encoder and decoder tables of
    # 2 + 512 rows, shared embeddings.
    "bart": {
        "family": "bart", "max_length": 1536,
        "knobs": {"sparsity_type": "bos_pooling", "pass_global_tokens_to_decoder": False},
    },
}

WORDS = ["the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as",
         "was", "at", "by", "this", "be", "from", "or", "an", "are", "not", "but", "have"]


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "reference": f"ccdv-ai/convert_checkpoint_to_lsg@{REFERENCE_COMMIT}",
    }


def randomize(model, seed):
    """Every parameter ~ N(0, 0.5^2): nothing is zero or one, so a wrong row shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def wordpiece_tokenizer(folder):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["##s", "##ed"]
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=path, do_lower_case=True)
    return tokenizer, len(vocab)


def bpe_tokenizer(folder):
    # Byte-level BPE: the specials, the printable bytes a test sentence needs, a few merges.
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    letters = sorted(set("".join(WORDS)) | {"Ġ"})
    vocab = {tok: i for i, tok in enumerate(specials + letters)}
    merges = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("a", "n"), ("an", "d")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(f"{a} {b}" for a, b in merges) + "\n")
    tokenizer = RobertaTokenizerFast(vocab_file=os.path.join(folder, "vocab.json"),
                                     merges_file=os.path.join(folder, "merges.txt"))
    return tokenizer, len(vocab)


def build_input(name, folder):
    os.makedirs(folder)
    if name in ("bert", "bert_classifier", "distilbert"):
        tokenizer, vocab_size = wordpiece_tokenizer(folder)
    else:
        tokenizer, vocab_size = bpe_tokenizer(folder)
    if name == "bert":
        model = BertModel(BertConfig(
            vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=512, type_vocab_size=2, pad_token_id=0))
    elif name == "bert_classifier":
        model = BertForSequenceClassification(BertConfig(
            vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=1024, type_vocab_size=2, pad_token_id=0,
            num_labels=3))
    elif name == "roberta":
        model = RobertaModel(RobertaConfig(
            vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
            bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5))
    elif name == "distilbert":
        model = DistilBertForMaskedLM(DistilBertConfig(
            vocab_size=vocab_size, dim=HIDDEN, n_layers=1, n_heads=2, hidden_dim=24,
            max_position_embeddings=600, pad_token_id=0))
    elif name == "bart":
        model = BartForConditionalGeneration(BartConfig(
            vocab_size=vocab_size, d_model=HIDDEN, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
            decoder_ffn_dim=24, max_position_embeddings=512, pad_token_id=1, bos_token_id=0,
            eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2))
    else:
        raise ValueError(name)
    seed = 1000 + sorted(CASES).index(name)
    randomize(model, seed).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return seed


def run_reference(reference, family, src, dst, max_length, knobs):
    sys.path.insert(0, os.path.join(reference, "lsg_converter"))
    module = importlib.import_module(f"{family}.convert_{family}_checkpoint")
    script_class = {"bert": "BertConversionScript", "roberta": "RobertaConversionScript",
                    "distilbert": "DistilBertConversionScript",
                    "bart": "BartConversionScript"}[family]
    # convert_checkpoint.py's main(), with its defaults for the other arguments.
    set_seed(123)
    config = AutoConfig.from_pretrained(src, trust_remote_code=True)
    converter = getattr(module, script_class)(
        initial_model=src, model_name=dst, max_sequence_length=max_length, architecture=None,
        random_global_init=False, global_positional_stride=64, keep_first_global_token=False,
        resize_lsg=False, model_kwargs=json.dumps(knobs), use_token_ids=True,
        use_auth_token=False, config=config, save_model=True, seed=123)
    converter.process()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True,
                        help="checkout of ccdv-ai/convert_checkpoint_to_lsg")
    parser.add_argument("--out", default="tests/fixtures/lsg_converter")
    parser.add_argument("--scratch", default="/tmp/lsg_converter_fixtures")
    args = parser.parse_args()
    print(json.dumps(versions()), file=sys.stderr)

    shutil.rmtree(args.scratch, ignore_errors=True)
    manifest = {"versions": versions(), "cases": {}}
    for name, case in CASES.items():
        src = os.path.join(args.scratch, name, "input")
        dst = os.path.join(args.scratch, name, "reference")
        seed = build_input(name, src)
        run_reference(args.reference, case["family"], src, dst, case["max_length"],
                      case["knobs"])
        out_case = os.path.join(args.out, name)
        shutil.rmtree(out_case, ignore_errors=True)
        shutil.copytree(src, os.path.join(out_case, "input"))
        os.makedirs(os.path.join(out_case, "reference"))
        for f in ("config.json", "model.safetensors", "tokenizer_config.json"):
            shutil.copy(os.path.join(dst, f), os.path.join(out_case, "reference", f))
        manifest["cases"][name] = {
            "family": case["family"], "max_length": case["max_length"],
            "knobs": case["knobs"], "seed": seed,
            # The reference writes _name_or_path = its model_name argument.
            "reference_name_or_path": dst,
            "input_sha256": sha256(os.path.join(src, "model.safetensors")),
            "reference_sha256": sha256(os.path.join(dst, "model.safetensors")),
        }
        print(f"{name}: {sorted(os.listdir(dst))}", file=sys.stderr)
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
