#!/usr/bin/env python3
"""Write tiny BART / Pegasus / LSG-BART / LSG-Pegasus checkpoints and what HF computes with them.

Developer-only (the C++ build and tests never run Python). Needs torch, transformers 4.36.x (the
LSG reference does not import under transformers 5), sentencepiece, safetensors; no network.
Usage (see tests/fixtures/seq2seq/README.md for the venv and the versions):

    HF_HUB_OFFLINE=1 python tools/make_seq2seq_fixtures.py --reference /tmp/lsgref \
        [--out tests/fixtures/seq2seq]

`--reference` is a checkout of github.com/ccdv-ai/convert_checkpoint_to_lsg (commit c56734b);
its converters (BartConversionScript, PegasusConversionScript) turn the tiny BART and Pegasus
into the LSG-BART and LSG-Pegasus, and its modeling_lsg_bart.py / modeling_lsg_pegasus.py run
them. The reference code is imported from there, never copied into the
repository.

For each model (bart, pegasus, lsg_bart, lsg_pegasus) writes <out>/<model>/:
  config.json, generation_config.json, model.safetensors   the checkpoint (float32)
  tokenizer files      copied from tests/fixtures/bpe_spm/{bart,pegasus}_tokenizer
  cases.json           inputs, generation parameters and HF's generated token ids
  expected.safetensors encoder states and teacher-forced logits (float32)
The README documents the formats.

Deterministic: torch.set_num_threads(1), seeded weights; re-running with the same versions
reproduces every file.
"""

import argparse
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import sentencepiece  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    BartConfig,
    BartForConditionalGeneration,
    BartTokenizer,
    GenerationConfig,
    PegasusConfig,
    PegasusForConditionalGeneration,
    PegasusTokenizer,
    set_seed,
)

REFERENCE_COMMIT = "c56734b2da192cbe78bc072644d738ce957902ed"
HIDDEN = 32
TEXT_SOURCE = "/usr/share/common-licenses/GPL-3"
DECODER_LENGTH = 6  # teacher-forced decoder inputs per row
MAX_LENGTH = 24  # generation: HF's max_length, the decoder start token included

# LSG knobs: blocks of 16 so that inputs of a few dozen tokens already take the sparse path
# (the reference runs full attention up to 2 * block_size tokens).
LSG_KNOBS = {"block_size": 16, "sparse_block_size": 16, "sparsity_factor": 2,
             "sparsity_type": "norm", "num_global_tokens": 2}
LSG_MAX_LENGTH = 1024

# Token counts (special tokens included) of the inputs, cut from TEXT_SOURCE at these offsets.
INPUTS = {
    "bart": [(0, 9), (200, 40), (600, 130)],
    "pegasus": [(0, 9), (200, 40), (600, 130)],
    # 10 tokens: full-attention fallback; 40, 173, 300: sparse (300 is not a block multiple).
    "lsg_bart": [(0, 10), (200, 40), (600, 300), (1200, 173)],
    "lsg_pegasus": [(0, 10), (200, 40), (600, 300), (1200, 173)],
}


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "sentencepiece": sentencepiece.__version__,
        "numpy": np.__version__,
        "lsg_reference": f"ccdv-ai/convert_checkpoint_to_lsg@{REFERENCE_COMMIT}",
    }


def randomize(model, seed, skip=()):
    """Seeded random weights that make generation non-trivial.

    HF's init (std 0.02) gives near-uniform logits; here matrices ~ N(0, 0.6^2), embeddings
    ~ N(0, 0.15^2) (logits of order 1, so the argmax changes from step to step), LayerNorm
    weights 1 + N(0, 0.05^2), biases of LayerNorms N(0, 0.05^2), final_logits_bias N(0, 0.5^2)
    (EOS's entry is set by calibrate_eos).
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if any(s in name for s in skip):
                continue
            noise = torch.randn(p.shape, generator=g)
            if "layer_norm" in name or "layernorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.05 * noise)
            elif "embed" in name or "shared" in name:
                p.copy_(0.15 * noise)
            else:
                p.copy_(0.6 * noise)
        model.final_logits_bias.copy_(0.5 * torch.randn(model.final_logits_bias.shape,
                                                        generator=g))
    return model.eval()


def calibrate_eos(model, inputs, special, quantile=0.15):
    """Sets final_logits_bias[EOS] so that EOS would win about `quantile` of greedy steps.

    Random weights otherwise never (or always) pick EOS; with this some generations end early
    and others run to max_length, so both ways of finishing are exercised.
    """
    eos = special["eos"]
    gaps = []
    with torch.no_grad():
        model.final_logits_bias[0, eos] = 0
        for x in inputs:
            out = model.generate(torch.tensor([x["input_ids"]]), max_length=MAX_LENGTH,
                                 num_beams=1, do_sample=False,
                                 decoder_start_token_id=special["decoder_start"],
                                 forced_bos_token_id=None, forced_eos_token_id=None,
                                 min_length=0, no_repeat_ngram_size=0, eos_token_id=eos,
                                 pad_token_id=special["pad"], return_dict_in_generate=True,
                                 output_scores=True)
            for scores in out.scores:
                row = scores[0].clone()
                eos_logit = row[eos].item()
                row[eos] = -float("inf")
                gaps.append(row.max().item() - eos_logit)
        bias = float(torch.quantile(torch.tensor(gaps, dtype=torch.float64), quantile))
        model.final_logits_bias[0, eos] = bias
    return bias


def bart_slow_tokenizer(tokenizer_json, folder):
    """transformers 4.36's `tokenizers` cannot read the fixture's tokenizer.json (newer merges
    format), so the same vocabulary and merges go through the slow BartTokenizer."""
    with open(tokenizer_json, encoding="utf-8") as f:
        spec = json.load(f)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(spec["model"]["vocab"], f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for merge in spec["model"]["merges"]:
            f.write((merge if isinstance(merge, str) else " ".join(merge)) + "\n")
    return BartTokenizer(vocab_file=os.path.join(folder, "vocab.json"),
                         merges_file=os.path.join(folder, "merges.txt"))


def check_tokenizer(tokenizer, cases_jsonl):
    """The slow tokenizer must agree with the tokenizer fixture's recorded ids."""
    with open(cases_jsonl, encoding="utf-8") as f:
        for line in list(f)[:40]:
            case = json.loads(line)
            ids = tokenizer(case["text"], add_special_tokens=False).input_ids
            if case["text"].strip() and ids != case["ids"]:
                raise SystemExit(f"tokenizer disagrees with {cases_jsonl} on {case['text']!r}")


def cut_inputs(tokenizer, spec, eos_id, bos_id):
    with open(TEXT_SOURCE, encoding="utf-8") as f:
        words = f.read().split()
    inputs = []
    for start, length in spec:
        text = " ".join(words[start:start + 2 * length])
        body = tokenizer(text, add_special_tokens=False).input_ids
        ids = ([bos_id] if bos_id is not None else []) + body
        ids = ids[:length - 1] + [eos_id]
        inputs.append({"text": tokenizer.decode(ids, skip_special_tokens=True), "input_ids": ids})
    return inputs


def padded(batch, pad_id):
    width = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, row in enumerate(batch):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return ids, mask


def generation_cases(model_name, special):
    base = {
        "max_length": MAX_LENGTH, "min_length": 0, "num_beams": 1, "length_penalty": 1.0,
        "no_repeat_ngram_size": 0, "early_stopping": False, "num_return_sequences": 1,
        "do_sample": False, "decoder_start_token_id": special["decoder_start"],
        "bos_token_id": special["bos"], "eos_token_id": special["eos"],
        "pad_token_id": special["pad"], "forced_bos_token_id": special["forced_bos"],
        "forced_eos_token_id": special["forced_eos"], "repetition_penalty": 1.0,
        "encoder_no_repeat_ngram_size": 0,
    }
    variants = [
        ("greedy", {}),
        ("greedy_min_length", {"min_length": 16}),
        ("greedy_no_repeat_ngram", {"no_repeat_ngram_size": 2}),
        ("beam4_lp2_ngram3_early", {"num_beams": 4, "length_penalty": 2.0,
                                    "no_repeat_ngram_size": 3, "early_stopping": True}),
        ("beam4_lp2_ngram3_heuristic", {"num_beams": 4, "length_penalty": 2.0,
                                        "no_repeat_ngram_size": 3, "early_stopping": False}),
        ("beam4_lp2_ngram3_never", {"num_beams": 4, "length_penalty": 2.0,
                                    "no_repeat_ngram_size": 3, "early_stopping": "never"}),
        ("beam3_lp06_min_length", {"num_beams": 3, "length_penalty": 0.6, "min_length": 12,
                                   "early_stopping": True}),
        ("beam4_return2", {"num_beams": 4, "length_penalty": 1.0, "num_return_sequences": 2,
                           "early_stopping": False}),
    ]
    if model_name in ("lsg_bart", "lsg_pegasus"):
        variants = [v for v in variants if v[0] in ("greedy", "beam4_lp2_ngram3_early",
                                                    "beam3_lp06_min_length")]
    return [(name, {**base, **over}) for name, over in variants]


def run_generate(model, batch, params, pad_id):
    ids, mask = padded(batch, pad_id)
    kwargs = {k: v for k, v in params.items()}
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, return_dict_in_generate=True,
                             output_scores=True, use_cache=True, **kwargs)
    run = {"input_ids": batch, "sequences": out.sequences.tolist()}
    if getattr(out, "sequences_scores", None) is not None:
        run["sequences_scores"] = [float(f"{s:.9g}") for s in out.sequences_scores.tolist()]
    return run


def encoder_and_logits(model, batch, pad_id, decoder_ids, tensors, prefix, keep_logits=True):
    ids, mask = padded(batch, pad_id)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                    use_cache=False)
    tensors[f"{prefix}.encoder"] = out.encoder_last_hidden_state.float().contiguous()
    if keep_logits:
        tensors[f"{prefix}.logits"] = out.logits.float().contiguous()
    return out


def decoder_inputs(rows, start_id, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    body = torch.randint(4, vocab - 1, (rows, DECODER_LENGTH - 1), generator=g)
    return torch.cat([torch.full((rows, 1), start_id, dtype=torch.long), body], dim=1)


def write_model_fixtures(name, model, tokenizer, special, out_dir, seed, lsg_single):
    """Encoder states, teacher-forced logits and generations for one model."""
    inputs = cut_inputs(tokenizer, INPUTS[name], special["eos"], special["bos_in_input"])
    tensors = {}
    cases = {"encoder_cases": [], "generate_cases": []}
    vocab = model.config.vocab_size
    forward_sets = [("single", [inputs[0]["input_ids"]]),
                    ("batch", [x["input_ids"] for x in inputs])]
    for case_name, batch in forward_sets:
        dec = decoder_inputs(len(batch), special["decoder_start"], vocab, seed + len(batch))
        encoder_and_logits(model, batch, special["pad"], dec, tensors, case_name)
        record = {"name": case_name, "input_ids": batch, "decoder_input_ids": dec.tolist(),
                  "encoder": f"{case_name}.encoder", "logits": f"{case_name}.logits"}
        if lsg_single and len(batch) > 1:
            # The C++ encoder runs every sequence as the reference runs it alone; the LSG
            # reference's padded batch is not always equal to that (padding takes part in
            # sparse-key selection), so the items' encoder states alone are recorded too (their
            # logits would double the file; batch_vs_single_max_abs says how far apart they are).
            singles = []
            for i, row in enumerate(batch):
                p = f"{case_name}.single.{i}"
                encoder_and_logits(model, [row], special["pad"], dec[i:i + 1], tensors, p, False)
                singles.append({"encoder": f"{p}.encoder"})
                full = tensors[f"{case_name}.encoder"][i, :tensors[f"{p}.encoder"].shape[1]]
                singles[-1]["batch_vs_single_max_abs"] = float(
                    (full - tensors[f"{p}.encoder"][0]).abs().max())
            record["singles"] = singles
        cases["encoder_cases"].append(record)

    for case_name, params in generation_cases(name, special):
        runs = [run_generate(model, [x["input_ids"]], params, special["pad"]) for x in inputs]
        runs.append(run_generate(model, [x["input_ids"] for x in inputs], params, special["pad"]))
        cases["generate_cases"].append({"name": case_name, "params": params, "runs": runs})
    cases["inputs"] = inputs
    save_file(tensors, os.path.join(out_dir, "expected.safetensors"))
    return cases


def finish_folder(out_dir, model, tokenizer_src, name, special, seed, cases, extra,
                  generator="tools/make_seq2seq_fixtures.py", lsg_reference=True):
    """generation_config.json (the "beam4_lp2_ngram3_early" case's settings), the tokenizer
    files and cases.json. `extra` goes over the manifest's defaults (tolerance_hint);
    lsg_reference=False leaves the LSG reference out of the versions (a generator that does not
    run it)."""
    model.generation_config = GenerationConfig(
        decoder_start_token_id=special["decoder_start"], bos_token_id=special["bos"],
        eos_token_id=special["eos"], pad_token_id=special["pad"],
        forced_bos_token_id=special["forced_bos"], forced_eos_token_id=special["forced_eos"],
        num_beams=4, length_penalty=2.0, no_repeat_ngram_size=3, early_stopping=True,
        min_length=0, max_length=MAX_LENGTH)
    model.generation_config.save_pretrained(out_dir)
    for f in os.listdir(tokenizer_src):
        shutil.copy(os.path.join(tokenizer_src, f), os.path.join(out_dir, f))
    used = versions()
    if not lsg_reference:
        used.pop("lsg_reference")
    manifest = {"generator": generator, "versions": used, "model": name, "seed": seed,
                "special_tokens": special, "tolerance_hint": 1e-4, **extra, **cases}
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def copy_config(src_dir, out_dir, name):
    """Copies a converted config.json with `_name_or_path` (the converter's scratch folder,
    random) set to `name`, in save_pretrained's format, so that re-runs reproduce the file."""
    with open(os.path.join(src_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["_name_or_path"] = name
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")


def save_checkpoint(model, out_dir):
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    model.save_pretrained(out_dir, safe_serialization=True)
    # save_pretrained wrote a generation_config.json from the model config; ours replaces it.


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True,
                        help="checkout of ccdv-ai/convert_checkpoint_to_lsg")
    parser.add_argument("--out", default="tests/fixtures/seq2seq")
    parser.add_argument("--tokenizers", default="tests/fixtures/bpe_spm")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(json.dumps(versions()), file=sys.stderr)
    scratch = tempfile.mkdtemp(prefix="seq2seq_fixtures_")
    bart_tok_dir = os.path.join(args.tokenizers, "bart_tokenizer")
    peg_tok_dir = os.path.join(args.tokenizers, "pegasus_tokenizer")

    # BART, shaped like facebook/bart-large-cnn's config (post-LN, learned positions, gelu,
    # forced BOS/EOS) at toy size.
    bart_tok = bart_slow_tokenizer(os.path.join(bart_tok_dir, "tokenizer.json"),
                                   os.path.join(scratch, "bart_input"))
    check_tokenizer(bart_tok, os.path.join(args.tokenizers, "bart_cases.jsonl"))
    bart_special = {"bos": 0, "pad": 1, "eos": 2, "decoder_start": 2, "forced_bos": 0,
                    "forced_eos": 2, "bos_in_input": 0}
    bart_config = BartConfig(
        vocab_size=len(bart_tok), d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=512, activation_function="gelu",
        scale_embedding=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, forced_bos_token_id=0, forced_eos_token_id=2)
    bart_seed = 2024
    bart = randomize(BartForConditionalGeneration(bart_config), bart_seed)
    calibrate_eos(bart, cut_inputs(bart_tok, INPUTS["bart"], 2, 0), bart_special)
    # The reference converter reads the tiny BART (with a tokenizer it can load) from disk.
    bart.save_pretrained(os.path.join(scratch, "bart_input"), safe_serialization=True)
    bart_tok.save_pretrained(os.path.join(scratch, "bart_input"))

    out = os.path.join(args.out, "bart")
    save_checkpoint(bart, out)
    cases = write_model_fixtures("bart", bart, bart_tok, bart_special, out, bart_seed, False)
    finish_folder(out, bart, bart_tok_dir, "bart", bart_special, bart_seed, cases, {})
    print("bart done", file=sys.stderr)

    # Pegasus, shaped like google/pegasus-xsum's config (pre-LN with final norms, sinusoidal
    # positions, relu, scaled embeddings, decoder starts with pad, no forced BOS).
    peg_tok = PegasusTokenizer(vocab_file=os.path.join(peg_tok_dir, "spiece.model"))
    peg_special = {"bos": None, "pad": 0, "eos": 1, "decoder_start": 0, "forced_bos": None,
                   "forced_eos": 1, "bos_in_input": None}
    peg_config = PegasusConfig(
        vocab_size=len(peg_tok), d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=512, activation_function="relu",
        scale_embedding=True, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        forced_eos_token_id=1)
    peg_seed = 2025
    # The sinusoidal position tables are parameters that must keep their values.
    pegasus = randomize(PegasusForConditionalGeneration(peg_config), peg_seed,
                        skip=("embed_positions",))
    calibrate_eos(pegasus, cut_inputs(peg_tok, INPUTS["pegasus"], 1, None), peg_special)
    out = os.path.join(args.out, "pegasus")
    save_checkpoint(pegasus, out)
    cases = write_model_fixtures("pegasus", pegasus, peg_tok, peg_special, out, peg_seed, False)
    finish_folder(out, pegasus, peg_tok_dir, "pegasus", peg_special, peg_seed, cases, {})
    print("pegasus done", file=sys.stderr)

    # LSG-BART: the reference converter applied to the tiny BART, run by the reference model.
    sys.path.insert(0, os.path.join(args.reference, "lsg_converter"))
    converter_module = importlib.import_module("bart.convert_bart_checkpoint")
    lsg_dir = os.path.join(scratch, "lsg_bart")
    set_seed(123)
    config = AutoConfig.from_pretrained(os.path.join(scratch, "bart_input"))
    converter = converter_module.BartConversionScript(
        initial_model=os.path.join(scratch, "bart_input"), model_name=lsg_dir,
        max_sequence_length=LSG_MAX_LENGTH, architecture=None, random_global_init=False,
        global_positional_stride=64, keep_first_global_token=False, resize_lsg=False,
        model_kwargs=json.dumps(LSG_KNOBS), use_token_ids=True, use_auth_token=False,
        config=config, save_model=True, seed=123)
    converter.process()
    modeling = importlib.import_module("bart.modeling_lsg_bart")
    lsg = modeling.LSGBartForConditionalGeneration.from_pretrained(lsg_dir).eval()
    out = os.path.join(args.out, "lsg_bart")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(lsg_dir, f), os.path.join(out, f))
    cases = write_model_fixtures("lsg_bart", lsg, bart_tok, bart_special, out, bart_seed, True)
    finish_folder(out, lsg, bart_tok_dir, "lsg_bart", bart_special, bart_seed, cases,
                  {"lsg_knobs": LSG_KNOBS, "lsg_max_length": LSG_MAX_LENGTH})
    print("lsg_bart done", file=sys.stderr)

    # LSG-Pegasus: the reference's PegasusConversionScript applied to the tiny Pegasus, run by
    # its modeling_lsg_pegasus.py. The converter seeds the first global token with the BOS
    # embedding and reads BOS from the config when the tokenizer has none (PegasusTokenizer
    # has none; without an id it fails), so the converter's input config gets bos_token_id 0
    # (= pad). The Pegasus fixture above is already written without it.
    peg_input = os.path.join(scratch, "pegasus_input")
    pegasus.config.bos_token_id = 0
    pegasus.save_pretrained(peg_input, safe_serialization=True)
    peg_tok.save_pretrained(peg_input)
    converter_module = importlib.import_module("pegasus.convert_pegasus_checkpoint")
    lsg_dir = os.path.join(scratch, "lsg_pegasus")
    set_seed(124)
    config = AutoConfig.from_pretrained(peg_input)
    converter = converter_module.PegasusConversionScript(
        initial_model=peg_input, model_name=lsg_dir,
        max_sequence_length=LSG_MAX_LENGTH, architecture=None, random_global_init=False,
        global_positional_stride=64, keep_first_global_token=False, resize_lsg=False,
        model_kwargs=json.dumps(LSG_KNOBS), use_token_ids=True, use_auth_token=False,
        config=config, save_model=True, seed=124)
    converter.process()
    modeling = importlib.import_module("pegasus.modeling_lsg_pegasus")
    lsg = modeling.LSGPegasusForConditionalGeneration.from_pretrained(lsg_dir).eval()
    out = os.path.join(args.out, "lsg_pegasus")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    shutil.copy(os.path.join(lsg_dir, "model.safetensors"), os.path.join(out, "model.safetensors"))
    copy_config(lsg_dir, out, "lsg_pegasus")
    cases = write_model_fixtures("lsg_pegasus", lsg, peg_tok, peg_special, out, peg_seed, True)
    finish_folder(out, lsg, peg_tok_dir, "lsg_pegasus", peg_special, peg_seed, cases,
                  {"lsg_knobs": LSG_KNOBS, "lsg_max_length": LSG_MAX_LENGTH})
    print("lsg_pegasus done", file=sys.stderr)
    shutil.rmtree(scratch, ignore_errors=True)
    # save_file and tempfile copies are 0600; fixtures are ordinary repository files.
    for root, _, files in os.walk(args.out):
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)


if __name__ == "__main__":
    main()
