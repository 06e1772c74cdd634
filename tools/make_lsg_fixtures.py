#!/usr/bin/env python3
"""Write LSG-attention parity fixtures produced with the reference LSG implementation.

Developer-only. The reference is github.com/ccdv-ai/convert_checkpoint_to_lsg at commit
c56734b2da192cbe78bc072644d738ce957902ed; it is NOT vendored: pass a checkout (or `git archive`)
of it with --reference and this script imports `lsg_converter.<arch>.modeling_lsg_<arch>` from
there. The reference targets transformers 4.36 (it does not import under transformers 5), so run
this with transformers 4.36.2 (see tests/fixtures/lsg/README.md for the venv). Needs torch,
transformers, safetensors, numpy; no network. Usage:

    python tools/make_lsg_fixtures.py --reference /tmp/lsgref [--out tests/fixtures/lsg]

For each of bert, roberta, distilbert, bart writes <out>/<arch>/{config.json, model.safetensors,
cases.json, expected.safetensors}:

  config.json, model.safetensors   the reference's save_pretrained() of a tiny random-weight base
                                   model (LSGBertModel, LSGRobertaModel, LSGDistilBertModel,
                                   LSGBartModel) with the default LSG knobs (DEFAULT_LSG); fp32.
                                   Cases change only LSG config fields, which change no weight
                                   (global_embeddings always has 512 rows).
  cases.json   {"generator", "reference": {"repo", "commit", "modeling_sha256"}, "versions",
                "model": {...sizes...}, "default_lsg", "tolerance_hint",
                "cases": [{"name", "kind": "exact" | "lsh_stats",
                           "lsg": {block_size, sparse_block_size, sparsity_factor, sparsity_type,
                                   num_global_tokens, adaptive, mask_first_token,
                                   pool_with_global, lsh_num_pre_rounds
                                   (+ pass_global_tokens_to_decoder for bart)},
                           "input_ids" [B][T], "attention_mask" [B][T],
                           "token_type_ids" [B][T] (bert only),
                           "lengths" [B],
                           "reference_path" [B]: "sparse" | "full" (which branch the reference
                               took: "full" when the internal length, after adaptive padding,
                               is <= 2*block_size; per item of a padded batch = the batch's path,
                               "single_paths" = the path of each item run alone),
                           "output": name of a tensor in expected.safetensors (exact cases),
                           "single_outputs": [names] (padded batches: each item run alone),
                           "checks": {"batch_vs_single_max_abs": [B floats]} (padded batches:
                               max |batch item real rows - item run alone|),
                           bos_pooling only: "bos_pooling_unmasked_padded_chunks" [B] (and
                               "single_bos_pooling_unmasked_padded_chunks" [B]): how many pooled
                               chunks holding only padding the reference leaves unmasked (see
                               unmasked_padded_chunks(); 0 = no padding leak in that run),
                           lsh_stats only: "seeds", "seed_list", "mean", "std", "compare_with",
                               "checks" (distances of the mean to the compare_with outputs)}]}
  expected.safetensors   float32 tensors:
      <case>            last_hidden_state [B][T][H] exactly as the reference returns it (bert,
                        roberta, distilbert: global tokens removed, pool_with_global applied;
                        bart with pass_global_tokens_to_decoder=true: [B][G+T][H], the G global
                        tokens first). Rows at padded positions are the reference's values.
      <case>.single.<i> item i of a padded batch run alone (batch of one, no padding):
                        [1][len_i][H] ([1][G+len_i][H] for bart passing global tokens)
      <case>.mean / <case>.std   lsh_stats: per-element mean / std (correction=1) over seeds

Deterministic: torch.set_num_threads(1); re-running with the same versions reproduces every file
byte for byte.
"""

import argparse
import hashlib
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import zlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

REF_REPO = "github.com/ccdv-ai/convert_checkpoint_to_lsg"
REF_COMMIT = "c56734b2da192cbe78bc072644d738ce957902ed"
SEED = 4242
LSH_SEEDS = 200
HIDDEN = 32

DEFAULT_LSG = {
    "block_size": 4,
    "sparse_block_size": 4,
    "sparsity_factor": 2,
    "sparsity_type": "norm",
    "num_global_tokens": 1,
    "adaptive": True,
    "mask_first_token": False,
    "pool_with_global": True,
    "lsh_num_pre_rounds": 1,
}
BART_DEFAULT_EXTRA = {"pass_global_tokens_to_decoder": True}

DETERMINISTIC_TYPES = ["none", "norm", "pooling", "stride", "block_stride", "bos_pooling"]

ARCHS = {
    "bert": {
        "module": "lsg_converter.bert.modeling_lsg_bert",
        "config": "LSGBertConfig",
        "model": "LSGBertModel",
        "kwargs": dict(vocab_size=128, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
                       hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0),
        "special": (2, 3, 0, 4),  # first id, last id, pad id, lowest random id
    },
    "roberta": {
        "module": "lsg_converter.roberta.modeling_lsg_roberta",
        "config": "LSGRobertaConfig",
        "model": "LSGRobertaModel",
        "kwargs": dict(vocab_size=128, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=514, type_vocab_size=1,
                       hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                       eos_token_id=2),
        "special": (0, 2, 1, 3),
    },
    "distilbert": {
        "module": "lsg_converter.distilbert.modeling_lsg_distilbert",
        "config": "LSGDistilBertConfig",
        "model": "LSGDistilBertModel",
        "kwargs": dict(vocab_size=128, dim=HIDDEN, n_layers=2, n_heads=4, hidden_dim=64,
                       max_position_embeddings=512, activation="gelu", sinusoidal_pos_embds=False,
                       pad_token_id=0),
        "special": (2, 3, 0, 4),
    },
    "bart": {
        "module": "lsg_converter.bart.modeling_lsg_bart",
        "config": "LSGBartConfig",
        "model": "LSGBartModel",
        "kwargs": dict(vocab_size=128, d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                       decoder_ffn_dim=64, max_position_embeddings=512, activation_function="gelu",
                       scale_embedding=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                       decoder_start_token_id=2, forced_eos_token_id=2),
        "special": (0, 2, 1, 3),
    },
}


def versions():
    import huggingface_hub
    import tokenizers
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "tokenizers": tokenizers.__version__,
        "huggingface_hub": huggingface_hub.__version__,
        "torch_num_threads": torch.get_num_threads(),
    }


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ----------------------------------------------------------------------------- json output

def dumps(obj, indent=0):
    """JSON with dicts indented one key per line and lists of numbers on one line."""
    pad = " " * indent
    if isinstance(obj, torch.Tensor):
        obj = obj.tolist()
    if isinstance(obj, dict):
        items = [pad + "  " + json.dumps(k) + ": " + dumps(v, indent + 2) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if obj and isinstance(obj[0], dict):
            return "[\n" + ",\n".join(pad + "  " + dumps(v, indent + 2) for v in obj) + "\n" + pad + "]"
        return "[" + ",".join(dumps(v, indent) for v in obj) + "]"
    if isinstance(obj, float):
        return "%.3g" % obj
    return json.dumps(obj, ensure_ascii=False)


# ----------------------------------------------------------------------------- reference

def import_reference(path):
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "lsg_converter", "bert", "modeling_lsg_bert.py")):
        sys.exit("--reference %s: no lsg_converter/bert/modeling_lsg_bert.py there" % path)
    sys.path.insert(0, path)
    mods, shas = {}, {}
    for arch, spec in ARCHS.items():
        mod = importlib.import_module(spec["module"])
        assert os.path.abspath(mod.__file__).startswith(path), mod.__file__
        mods[arch] = mod
        shas[os.path.relpath(mod.__file__, path)] = sha256(mod.__file__)
    return mods, shas


def init_weights(model, gen):
    """N(0, 0.2^2) matrices/embeddings (global_embeddings included), N(0, 0.1^2) biases,
    LayerNorm weight 1 + N(0, 0.1^2), bias N(0, 0.1^2); tied parameters initialised once."""
    ln_params = set()
    for mod_name, mod in model.named_modules():
        if isinstance(mod, torch.nn.LayerNorm):
            for pn, _ in mod.named_parameters(recurse=False):
                ln_params.add((mod_name + "." + pn) if mod_name else pn)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ln_params:
                if name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


class Arch:
    def __init__(self, name, mod):
        self.name = name
        self.spec = ARCHS[name]
        self.config_cls = getattr(mod, self.spec["config"])
        self.model_cls = getattr(mod, self.spec["model"])
        self.default_lsg = dict(DEFAULT_LSG, **(BART_DEFAULT_EXTRA if name == "bart" else {}))
        self.state = None

    def config(self, lsg):
        kw = dict(self.spec["kwargs"])
        kw.update(lsg)
        cfg = self.config_cls(**kw)
        # the reference config silently rewrites some knobs: make sure ours are the ones in effect
        for k, v in lsg.items():
            assert getattr(cfg, k) == v, (self.name, k, v, getattr(cfg, k))
        return cfg

    def build(self, lsg):
        model = self.model_cls(self.config(lsg))
        if self.state is not None:
            model.load_state_dict(self.state, strict=True)
        return model.eval()

    def encode(self, model, ids, mask, types):
        """last_hidden_state as the reference returns it (bart: encoder output)."""
        with torch.no_grad():
            if self.name == "bart":
                out = model.get_encoder()(input_ids=ids.clone(), attention_mask=mask.clone(),
                                          return_dict=True)
            elif self.name == "bert":
                out = model(input_ids=ids.clone(), attention_mask=mask.clone(),
                            token_type_ids=types.clone(), return_dict=True)
            else:
                out = model(input_ids=ids.clone(), attention_mask=mask.clone(), return_dict=True)
        h = out.last_hidden_state.detach().clone().contiguous()
        assert h.dtype == torch.float32 and torch.isfinite(h).all()
        return h


def internal_length(lsg, t):
    b = lsg["block_size"]
    if lsg["adaptive"] and t > 2 * b and t % b:
        t += b - t % b
    return t


def unmasked_padded_chunks(lsg, t, n):
    """bos_pooling only: number of sparse chunks (of sparsity_factor tokens) holding no real token
    that the reference nevertheless leaves unmasked (float32 mean of finfo.min values = -inf, so
    `mask != finfo.min` holds and the chunk mask is set to 0). t = padded input length, n = real
    length. 0 on the full-attention fallback (no sparse keys there) and when sparsity_factor == 1."""
    f, ti = lsg["sparsity_factor"], internal_length(lsg, t)
    if lsg["sparsity_type"] != "bos_pooling" or f <= 1 or not lsg["sparse_block_size"] \
            or reference_path(lsg, t) == "full":
        return 0
    return ti // f - (n + f - 1) // f


def reference_path(lsg, t):
    """Which branch the reference takes for an input of padded length t."""
    return "full" if internal_length(lsg, t) <= 2 * lsg["block_size"] else "sparse"


# ----------------------------------------------------------------------------- inputs

def make_inputs(arch, name, lengths, pair_row=None):
    first, last, pad, lo = ARCHS[arch]["special"]
    gen = torch.Generator().manual_seed(SEED + zlib.crc32(name.encode()))
    T, B = max(lengths), len(lengths)
    ids = torch.full((B, T), pad, dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.long)
    types = torch.zeros((B, T), dtype=torch.long)
    for b, n in enumerate(lengths):
        row = torch.randint(lo, 128, (n,), generator=gen)
        row[0] = first
        row[-1] = last
        ids[b, :n] = row
        mask[b, :n] = 1
        if pair_row is not None and b == pair_row and arch == "bert":
            split = n // 2  # "[CLS] a a [SEP] b b [SEP]", segment B = token type 1
            ids[b, split - 1] = last
            types[b, split:n] = 1
    return ids, mask, types


# ----------------------------------------------------------------------------- case lists

def case_specs(arch):
    """(name, lsg overrides, lengths, batch?, pair_row)."""
    specs = []

    def add(name, lsg, lengths, batch, pair_row=None):
        specs.append((name, lsg, list(lengths), batch, pair_row))

    if arch == "bert":
        for st in DETERMINISTIC_TYPES:
            for g in (1, 3):
                lsg = dict(sparsity_type=st, num_global_tokens=g)
                add("%s_g%d_batch" % (st, g), lsg, (19, 12, 6), True, pair_row=1)
                add("%s_g%d_single24" % (st, g), lsg, (24,), False)
                add("%s_g%d_single27" % (st, g), lsg, (27,), False)
            add("%s_g1_batchT20" % st, dict(sparsity_type=st), (20, 13, 6), True, pair_row=0)
            # long inputs: middle blocks have sparse keys on both sides
            add("%s_b8s8f4_g1_single97" % st,
                dict(sparsity_type=st, block_size=8, sparse_block_size=8, sparsity_factor=4), (97,), False)
            add("%s_b4s4f2_g2_single90" % st, dict(sparsity_type=st, num_global_tokens=2), (90,), False)
            if st not in ("stride", "block_stride"):  # (size budget)
                add("%s_b8s8f2_g2_batch" % st,
                    dict(sparsity_type=st, block_size=8, sparse_block_size=8, num_global_tokens=2),
                    (70, 48, 29), True, pair_row=2)
        add("bos_pooling_g1_single25", dict(sparsity_type="bos_pooling"), (25,), False)
        for st in ("norm", "pooling", "stride", "bos_pooling"):
            add("maskfirst_%s_g1_batch" % st, dict(sparsity_type=st, mask_first_token=True),
                (19, 12, 6), True)
        for st in ("norm", "pooling", "block_stride", "bos_pooling"):
            add("nopoolglobal_%s_g1_batch" % st, dict(sparsity_type=st, pool_with_global=False),
                (19, 12, 6), True)
            add("nopoolglobal_%s_g3_single27" % st,
                dict(sparsity_type=st, pool_with_global=False, num_global_tokens=3), (27,), False)
        for st in ("norm", "pooling", "stride", "block_stride", "bos_pooling"):
            add("f1_%s_g1_single27" % st, dict(sparsity_type=st, sparsity_factor=1), (27,), False)
            add("f4_%s_g1_single27" % st, dict(sparsity_type=st, sparsity_factor=4), (27,), False)
            add("b8s4f2_%s_g1_single45" % st,
                dict(sparsity_type=st, block_size=8, sparse_block_size=4), (45,), False)
            add("b4s8f2_%s_g1_single45" % st, dict(sparsity_type=st, sparse_block_size=8), (45,), False)
        for st in ("norm", "pooling"):
            add("f1_%s_g1_batch" % st, dict(sparsity_type=st, sparsity_factor=1), (19, 12, 6), True)
        for st in ("norm", "bos_pooling"):
            add("f4_%s_g2_batch" % st, dict(sparsity_type=st, sparsity_factor=4, num_global_tokens=2),
                (19, 12, 6), True)
            add("b8s4f2_%s_g1_batch" % st, dict(sparsity_type=st, block_size=8, sparse_block_size=4),
                (45, 32, 13), True)
        add("s0_norm_g1_single27", dict(sparse_block_size=0), (27,), False)
        add("s0_norm_g3_batch", dict(sparse_block_size=0, num_global_tokens=3), (19, 12, 6), True)
        for st in ("norm", "pooling", "bos_pooling"):
            add("noadaptive_%s_g1_single24" % st, dict(sparsity_type=st, adaptive=False), (24,), False)
            add("noadaptive_%s_g1_batch" % st, dict(sparsity_type=st, adaptive=False), (24, 16, 8), True)
        for g in (1, 3):
            add("fallback_norm_g%d_batch" % g, dict(num_global_tokens=g), (8, 5, 3), True)
            add("fallback_bos_pooling_g%d_single7" % g, dict(sparsity_type="bos_pooling",
                                                             num_global_tokens=g), (7,), False)
        # LSH: statistics over seeds + the deterministic neighbours on the same input
        lsh = dict(block_size=8, sparse_block_size=8, sparsity_factor=2, lsh_num_pre_rounds=1)
        for st in ("none", "pooling"):
            add("lshref_%s_b8s8f2_g1_single64" % st, dict(lsh, sparsity_type=st), (64,), False)
        add("lsh_b8s8f2_g1_single64", dict(lsh, sparsity_type="lsh"), (64,), False)
        return specs

    types = ("norm", "pooling", "stride", "bos_pooling")
    if arch == "bart":
        types = types + ("none", "block_stride")
    for st in types:
        for g in (1, 3):
            lsg = dict(sparsity_type=st, num_global_tokens=g)
            add("%s_g%d_batch" % (st, g), lsg, (19, 12, 6), True)
            add("%s_g%d_single27" % (st, g), lsg, (27,), False)
    add("bos_pooling_g1_single25", dict(sparsity_type="bos_pooling"), (25,), False)
    add("bos_pooling_b8s8f4_g1_single97",
        dict(sparsity_type="bos_pooling", block_size=8, sparse_block_size=8, sparsity_factor=4), (97,), False)
    add("fallback_norm_g1_batch", dict(), (8, 5, 3), True)
    if arch == "bart":
        for pwg in (True, False):
            for st in ("norm", "bos_pooling"):
                add("noglobaldec_pool%d_%s_g2_batch" % (int(pwg), st),
                    dict(sparsity_type=st, num_global_tokens=2, pass_global_tokens_to_decoder=False,
                         pool_with_global=pwg), (19, 12, 6), True)
        add("maskfirst_norm_g1_batch", dict(mask_first_token=True), (19, 12, 6), True)
    else:
        add("maskfirst_norm_g1_batch", dict(mask_first_token=True), (19, 12, 6), True)
        add("nopoolglobal_pooling_g1_batch", dict(sparsity_type="pooling", pool_with_global=False),
            (19, 12, 6), True)
    return specs


# ----------------------------------------------------------------------------- main

def overflow_report():
    fmin = torch.finfo(torch.float32).min
    res = {
        "finfo_min": repr(fmin),
        "mean([min, min])": repr(float(torch.tensor([fmin, fmin]).mean())),
        "mean([0, min])": repr(float(torch.tensor([0.0, fmin]).mean())),
        "mean([min, min, min, min])": repr(float(torch.tensor([fmin] * 4).mean())),
    }
    # the bos_pooling mask computation, verbatim semantics: chunk of sparsity_factor mask values,
    # mean over the chunk, then every value != finfo.min is set to 0 (= not masked)
    mask = torch.tensor([[0.0, 0.0], [0.0, fmin], [fmin, fmin]])
    m = mask.mean(dim=-1)
    raw = [repr(float(x)) for x in m]
    m[m != torch.finfo(m.dtype).min] = 0
    res["bos_pooling_chunk_masks_[[0,0],[0,min],[min,min]]_mean"] = raw
    res["bos_pooling_chunk_masks_[[0,0],[0,min],[min,min]]_after"] = [repr(float(x)) for x in m]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True,
                    help="checkout of %s at %s (its lsg_converter/ is imported)" % (REF_REPO, REF_COMMIT[:7]))
    ap.add_argument("--out", default="tests/fixtures/lsg")
    ap.add_argument("--only", nargs="*", default=None, help="architectures to write (default: all)")
    args = ap.parse_args()

    if not transformers.__version__.startswith("4."):
        sys.exit("transformers %s: the reference needs transformers 4.x (fixtures made with 4.36.2)"
                 % transformers.__version__)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    mods, ref_shas = import_reference(args.reference)
    transformers.logging.set_verbosity_error()
    vers = versions()
    print("versions:", json.dumps(vers), file=sys.stderr)
    print("reference:", args.reference, json.dumps(ref_shas), file=sys.stderr)
    ovf = overflow_report()
    print("float32 mean overflow:", json.dumps(ovf), file=sys.stderr)

    batch_table = {}
    for idx, arch_name in enumerate(ARCHS):
        if args.only and arch_name not in args.only:
            continue
        arch = Arch(arch_name, mods[arch_name])
        folder = os.path.join(args.out, arch_name)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.makedirs(folder)

        # --- weights: built with the reference class, saved with its save_pretrained
        torch.manual_seed(SEED + idx)  # the constructor's own init (overwritten below)
        base = arch.build(arch.default_lsg)
        init_weights(base, torch.Generator().manual_seed(SEED + idx))
        with tempfile.TemporaryDirectory() as tmp:
            base.save_pretrained(tmp, safe_serialization=True)
            # save_pretrained also copies the reference's modeling_lsg_<arch>.py (config.auto_map):
            # that file is not ours to redistribute and is not copied
            extra = set(os.listdir(tmp)) - {"config.json", "model.safetensors"}
            assert extra <= {os.path.basename(mods[arch_name].__file__)}, extra
            for f in ("config.json", "model.safetensors"):
                shutil.copyfile(os.path.join(tmp, f), os.path.join(folder, f))
                os.chmod(os.path.join(folder, f), 0o644)
        saved = load_file(os.path.join(folder, "model.safetensors"))
        sd = base.state_dict()
        for k, v in saved.items():
            assert v.dtype == torch.float32 and torch.equal(v, sd[k]), k
        missing = set(sd) - set(saved)
        # only tied copies may be left out (bart: encoder/decoder.embed_tokens = shared)
        for k in missing:
            assert any(sd[k].data_ptr() == sd[s].data_ptr() for s in saved), k
        # every case model is rebuilt from the file on disk (checks the file is complete)
        arch.state = {k: saved.get(k, None) for k in sd}
        for k in missing:
            arch.state[k] = saved["shared.weight"]
        reloaded = arch.model_cls.from_pretrained(folder).eval()
        for k, v in reloaded.state_dict().items():
            assert torch.equal(v, sd[k]), k

        tensors = {}
        cases = []
        table = {}
        for name, over, lengths, batch, pair_row in case_specs(arch_name):
            lsg = dict(arch.default_lsg, **over)
            model = arch.build(lsg)
            ids, mask, types = make_inputs(arch_name, name, lengths, pair_row)
            T = ids.shape[1]
            case = {"name": name, "kind": "lsh_stats" if lsg["sparsity_type"] == "lsh" else "exact",
                    "lsg": lsg, "input_ids": ids, "attention_mask": mask}
            if arch_name == "bert":
                case["token_type_ids"] = types
            case["lengths"] = lengths
            case["reference_path"] = [reference_path(lsg, T)] * len(lengths)
            if lsg["sparsity_type"] == "bos_pooling":
                case["bos_pooling_unmasked_padded_chunks"] = [unmasked_padded_chunks(lsg, T, n) for n in lengths]
            G = lsg["num_global_tokens"]
            out_rows = (G if arch_name == "bart" and lsg["pass_global_tokens_to_decoder"] else 0)
            if case["kind"] == "lsh_stats":
                outs = []
                for s in range(LSH_SEEDS):
                    torch.manual_seed(s)
                    outs.append(arch.encode(model, ids, mask, types).double())
                stack = torch.stack(outs)
                mean, std = stack.mean(0).float(), stack.std(0, correction=1).float()
                torch.manual_seed(0)
                again = arch.encode(model, ids, mask, types)
                assert torch.equal(again, outs[0].float()), "lsh not reproducible under a seed"
                refs = [tensors[c] for c in ("lshref_none_b8s8f2_g1_single64", "lshref_pooling_b8s8f2_g1_single64")]
                case["checks"] = {
                    "std_mean": float(std.mean()), "std_max": float(std.max()),
                    "max_abs_mean_minus_none": float((mean - refs[0]).abs().max()),
                    "max_abs_mean_minus_pooling": float((mean - refs[1]).abs().max()),
                    "mean_abs_mean_minus_none": float((mean - refs[0]).abs().mean()),
                    "mean_abs_mean_minus_pooling": float((mean - refs[1]).abs().mean()),
                    "max_abs_seed0_minus_pooling": float((outs[0].float() - refs[1]).abs().max()),
                    "max_abs_none_minus_pooling": float((refs[0] - refs[1]).abs().max()),
                    "mean_abs_none_minus_pooling": float((refs[0] - refs[1]).abs().mean()),
                }
                tensors[name + ".mean"] = mean
                tensors[name + ".std"] = std
                case.update({"output": None, "mean": name + ".mean", "std": name + ".std",
                             "seeds": LSH_SEEDS, "seed_list": "torch.manual_seed(s), s = 0..%d" % (LSH_SEEDS - 1),
                             "compare_with": ["lshref_none_b8s8f2_g1_single64", "lshref_pooling_b8s8f2_g1_single64"]})
                print("%-10s %-40s %s" % (arch_name, name, json.dumps(case["checks"])), file=sys.stderr)
            else:
                h = arch.encode(model, ids, mask, types)
                assert h.shape == (len(lengths), T + out_rows, HIDDEN), h.shape
                again = arch.encode(model, ids, mask, types)
                assert torch.equal(h, again)
                tensors[name] = h
                case["output"] = name
                if batch:
                    singles, diffs, paths = [], [], []
                    for b, n in enumerate(lengths):
                        hs = arch.encode(model, ids[b:b + 1, :n], mask[b:b + 1, :n], types[b:b + 1, :n])
                        key = "%s.single.%d" % (name, b)
                        tensors[key] = hs
                        singles.append(key)
                        paths.append(reference_path(lsg, n))
                        diffs.append(float((h[b, :out_rows + n] - hs[0]).abs().max()))
                    case["single_outputs"] = singles
                    case["single_paths"] = paths
                    if lsg["sparsity_type"] == "bos_pooling":
                        case["single_bos_pooling_unmasked_padded_chunks"] = [
                            unmasked_padded_chunks(lsg, n, n) for n in lengths]
                    case["checks"] = {"batch_vs_single_max_abs": diffs}
                    table[name] = (lsg, lengths, case["reference_path"][0], paths, diffs)
                    print("%-10s %-40s batch-vs-alone %s" % (arch_name, name, " ".join("%.2e" % d for d in diffs)),
                          file=sys.stderr)
            cases.append(case)
        batch_table[arch_name] = table

        for k, v in tensors.items():
            assert v.dtype == torch.float32 and torch.isfinite(v).all(), k
        save_file({k: v.contiguous() for k, v in tensors.items()},
                  os.path.join(folder, "expected.safetensors"), metadata={"generator": "tools/make_lsg_fixtures.py"})
        cfg = base.config
        doc = {
            "generator": "tools/make_lsg_fixtures.py",
            "reference": {"repo": REF_REPO, "commit": REF_COMMIT, "modeling_sha256": ref_shas},
            "versions": vers,
            "architecture": arch_name,
            "model_class": arch.spec["model"],
            "weights_seed": SEED + idx,
            "model_sha256": sha256(os.path.join(folder, "model.safetensors")),
            "hidden_size": HIDDEN,
            "default_lsg": arch.default_lsg,
            "tolerance_hint": 1e-4,
            "float32_mean_overflow": ovf,
            "cases": cases,
        }
        assert cfg.sparsity_type == DEFAULT_LSG["sparsity_type"]
        with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8") as f:
            f.write(dumps(doc) + "\n")
        json.load(open(os.path.join(folder, "cases.json")))

    # batch-dependence summary per sparsity type (items whose own run takes the sparse path vs
    # the full-attention fallback; main matrix and variants together)
    print("\nbatch vs alone, max abs over real rows, per sparsity type:", file=sys.stderr)
    for arch_name, table in batch_table.items():
        per = {}
        for name, (lsg, lengths, bpath, paths, diffs) in table.items():
            for p, d in zip(paths, diffs):
                key = (lsg["sparsity_type"], p if bpath == "sparse" else "batch-full")
                per[key] = max(per.get(key, 0.0), d)
        for (st, p), d in sorted(per.items()):
            print("  %-10s %-13s alone=%-10s %.3e" % (arch_name, st, p, d), file=sys.stderr)

    total = 0
    for root, _, files in os.walk(args.out):
        for f in sorted(files):
            p = os.path.join(root, f)
            total += os.path.getsize(p)
            print("%-50s %8d bytes" % (p, os.path.getsize(p)), file=sys.stderr)
    print("total %d bytes" % total, file=sys.stderr)


if __name__ == "__main__":
    main()
