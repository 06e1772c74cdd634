#!/usr/bin/env python3
"""docsparse against the CPU peers for all-MiniLM-L6-v2 sentence embeddings.

Run through bench/peers/run (it makes the venv). Every implementation gets the
same documents, cut from real text under /usr/share/doc into documents of
exactly 512, 4096 and 16384 tokens ([CLS] and [SEP] included, MiniLM's
tokenizer), and the same number of threads (2 by default):

  ort         ONNX Runtime, fp32, on an ONNX export of models/minilm
  ov-f32      OpenVINO, INFERENCE_PRECISION_HINT f32, same ONNX file
  ov-default  OpenVINO, its default precision (bf16 on AMX CPUs)
  st          sentence-transformers (PyTorch), fp32
  docsparse   build/server/docsparse-server driven by
              `build/client/docsparse bench load` (gRPC, closed loop)

Peers are timed end to end from text: tokenization, the forward pass, mean
pooling and L2 normalisation. 512-token documents go one per call (batch 1)
and 8 per call (batch 8). Longer documents are cut into 512-token windows the
way docsparse's `overflow: chunk` does (equal-sized windows of at most 510
tokens plus [CLS]/[SEP]), run 8 windows per call, pooled, and averaged with
the window lengths as weights. docsparse embeds 512-token documents with
`minilm` (dense) and `minilm-lsg`, longer ones with `minilm-lsg` in one pass.

Each measurement prints one JSON line; a markdown table is printed at the end
and written to --out. Each peer runs in its own process, so thread pools of
different runtimes never share the cores.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DOCSPARSE_CACHE", str(Path.home() / ".cache" / "docsparse")))
PEER_IMPLS = ("ort", "ov-f32", "ov-default", "st")
ALL_IMPLS = PEER_IMPLS + ("docsparse",)
DOCS_PER_LENGTH = {512: 16, 4096: 8, 16384: 4}
DOC_ALGORITHM = "v1"  # bump when the way documents are cut changes
RESULT = "PEERS-RESULT "  # prefix of a worker's result lines on stdout


def log(msg: str) -> None:
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def detect_isa() -> str:
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return platform.machine()
    if {"amx_bf16", "amx_tile"} & flags:
        return "amx"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "other"


# --cap-isa: the variables that cap docsparse's kernels and oneDNN's (which
# OpenVINO's CPU plugin is built on) at an instruction set.
CAPS = {
    "avx2": {"DOCSPARSE_MAX_CPU_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "OPENBLAS_CORETYPE": "Haswell"},
    "avx512": {"DOCSPARSE_MAX_CPU_ISA": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def csv_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def csv_ints(text: str) -> list[int]:
    return [int(x) for x in csv_list(text)]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- documents ----------------------------------------------------------------


def corpus_files() -> list[Path]:
    """README / NEWS / changelog / copyright files under /usr/share/doc, sorted."""
    pattern = re.compile(r"^(readme|news|changelog|changes|copyright)", re.IGNORECASE)
    out = []
    for dirpath, _, names in os.walk("/usr/share/doc"):
        for name in names:
            if pattern.match(name):
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    out.append(path)
    return sorted(out)


def read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        elif path.suffix in (".bz2", ".xz", ".zst", ".html", ".htm", ".pdf"):
            return None
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None
    if "\x00" in text:
        return None
    return text


def corpus_text(min_chars: int) -> str:
    """Unique files concatenated until the text has at least min_chars."""
    seen: set[str] = set()
    parts: list[str] = []
    total = 0
    for path in corpus_files():
        text = read_text(path)
        if not text or len(text.strip()) < 200:
            continue
        digest = hashlib.sha1(text.encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        parts.append(text.strip())
        total += len(parts[-1]) + 2
        if total >= min_chars:
            break
    return "\n\n".join(parts)


def load_tokenizer(model_dir: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def cut_documents(tok, text: str, length: int, count: int) -> list[str]:
    """count substrings of text that tokenize to exactly `length` tokens with
    [CLS]/[SEP]. Cuts fall on word boundaries (the tokens on both sides of a
    cut start a pre-tokenizer word), so a substring tokenizes as it did in the
    corpus; each is checked anyway."""
    enc = tok.encode(text, add_special_tokens=False)
    words = enc.word_ids
    offsets = enc.offsets
    n_tokens = len(enc.ids)
    content = length - 2

    def starts_word(k: int) -> bool:
        return k == 0 or k >= n_tokens or words[k] != words[k - 1]

    docs: list[str] = []
    pos = 0
    while len(docs) < count:
        if pos + content > n_tokens:
            raise RuntimeError(
                f"corpus too short for {count} documents of {length} tokens ({n_tokens} tokens)")
        if not (starts_word(pos) and starts_word(pos + content)):
            pos += 1
            continue
        doc = text[offsets[pos][0]:offsets[pos + content - 1][1]]
        if len(tok.encode(doc, add_special_tokens=True).ids) == length:
            docs.append(doc)
            pos += content
        else:
            pos += 1
    return docs


def prepare_documents(work: Path, model_dir: Path, lengths: list[int]) -> dict[int, Path]:
    """Writes (or reuses) work/docs/<length>/doc_NNN.txt; returns length -> dir."""
    tok = load_tokenizer(model_dir)
    tok_hash = sha256_file(model_dir / "tokenizer.json")
    result: dict[int, Path] = {}
    text: str | None = None
    for length in lengths:
        count = DOCS_PER_LENGTH.get(length, max(2, 65536 // length))
        folder = work / "docs" / str(length)
        manifest = work / "docs" / f"{length}.json"
        key = {"algorithm": DOC_ALGORITHM, "tokenizer": tok_hash, "length": length, "count": count}
        if manifest.exists() and folder.is_dir():
            try:
                if json.loads(manifest.read_text())["key"] == key:
                    files = sorted(folder.glob("doc_*.txt"))
                    if len(files) == count and all(
                            len(tok.encode(f.read_text(encoding="utf-8")).ids) == length
                            for f in files):
                        result[length] = folder
                        continue
            except (ValueError, KeyError, OSError):
                pass
        if text is None:
            need = max(DOCS_PER_LENGTH.get(x, 4) * x for x in lengths)
            text = corpus_text(min_chars=need * 6 + 200_000)
        log(f"documents: cutting {count} x {length} tokens from /usr/share/doc text")
        docs = cut_documents(tok, text, length, count)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for i, doc in enumerate(docs):
            (folder / f"doc_{i:03d}.txt").write_text(doc, encoding="utf-8")
        manifest.write_text(json.dumps({"key": key, "bytes": [len(d.encode()) for d in docs]}))
        result[length] = folder
    return result


def read_documents(folder: Path) -> list[str]:
    return [f.read_text(encoding="utf-8") for f in sorted(folder.glob("doc_*.txt"))]


# --- ONNX export ----------------------------------------------------------------


def export_onnx(model_dir: Path, out: Path, threads: int) -> None:
    """models/minilm (safetensors + config) to ONNX: last_hidden_state with
    dynamic batch and sequence axes. Cached by the weights' checksum."""
    import warnings

    import numpy as np
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore")  # the tracer's and the exporter's
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    wrapper = Hidden(model).eval()
    ids = torch.randint(1000, 20000, (2, 16), dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    types = torch.zeros_like(ids)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    tmp = out.with_suffix(".tmp.onnx")
    errors = []
    # The TorchScript exporter first (what optimum and most users' exports
    # produce, fused well by ONNX Runtime), the dynamo exporter if it is gone.
    for dynamo in (False, True):
        try:
            kwargs = dict(input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=17)
            if dynamo:
                kwargs["opset_version"] = 18
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(wrapper, (ids, mask, types), str(tmp), dynamo=dynamo, **kwargs)
            break
        except Exception as e:  # noqa: BLE001 - try the other exporter
            errors.append(f"dynamo={dynamo}: {type(e).__name__}: {e}")
    else:
        raise RuntimeError("torch.onnx.export failed:\n  " + "\n  ".join(errors))
    # A dynamo export may keep weights in a side file; fold everything into one.
    import onnx

    proto = onnx.load(str(tmp), load_external_data=True)
    onnx.save(proto, str(out))
    for f in out.parent.glob(tmp.name + "*"):
        f.unlink()
    if tmp.exists():
        tmp.unlink()

    import onnxruntime as ort

    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    ids = torch.randint(1000, 20000, (3, 40), dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[2, 30:] = 0
    with torch.no_grad():
        ref = wrapper(ids, mask, torch.zeros_like(ids)).numpy()
    got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                          "token_type_ids": np.zeros_like(ids.numpy())})[0]
    diff = float(np.abs((ref - got) * mask.numpy()[..., None]).max())
    log(f"onnx: exported {out} (max |torch - onnxruntime| {diff:.2e})")
    if diff > 1e-3:
        raise RuntimeError(f"ONNX export differs from torch by {diff}")


def ensure_onnx(work: Path, model_dir: Path, threads: int) -> Path:
    key = sha256_file(model_dir / "model.safetensors")[:16]
    out = work / "onnx" / f"minilm-{key}.onnx"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # In its own process: torch's thread pools stay out of the measurements.
    cmd = [sys.executable, __file__, "--export-onnx", str(out), "--threads", str(threads)]
    subprocess.run(cmd, check=True, env=worker_env(threads))
    return out


# --- peers (worker process) -------------------------------------------------------


def windows_of(ids: list[int], cls: int, sep: int, limit: int = 512) -> list[list[int]]:
    """docsparse's overflow: chunk (model/encoder/text_encoder.cc): equal-sized
    windows of at most limit - 2 tokens, each framed by [CLS] ... [SEP]."""
    room = limit - 2
    if len(ids) <= room:
        return [[cls] + ids + [sep]]
    count = (len(ids) + room - 1) // room
    size = (len(ids) + count - 1) // count
    return [[cls] + ids[b:b + size] + [sep] for b in range(0, len(ids), size)]


class Peer:
    """One implementation: embed(texts) for short documents, embed_long(text)
    for a document longer than the model's 512 positions."""

    name = ""
    precision = "fp32"

    def __init__(self, model_dir: Path, threads: int, window_batch: int):
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.cls = self.tokenizer.cls_token_id
        self.sep = self.tokenizer.sep_token_id
        self.pad = self.tokenizer.pad_token_id
        self.threads = threads
        self.window_batch = window_batch

    def hidden(self, ids, mask):  # -> np.ndarray [B, T, H]
        raise NotImplementedError

    @staticmethod
    def pool(hidden, mask):
        import numpy as np

        m = mask[..., None].astype(np.float32)
        emb = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]):
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=512,
                             return_tensors="np")
        return self.pool(self.hidden(enc["input_ids"], enc["attention_mask"]),
                         enc["attention_mask"])

    def pad_windows(self, windows: list[list[int]]):
        import numpy as np

        t = max(len(w) for w in windows)
        ids = np.full((len(windows), t), self.pad, dtype=np.int64)
        mask = np.zeros((len(windows), t), dtype=np.int64)
        for i, w in enumerate(windows):
            ids[i, :len(w)] = w
            mask[i, :len(w)] = 1
        return ids, mask

    def embed_windows(self, windows: list[list[int]]):
        ids, mask = self.pad_windows(windows)
        return self.pool(self.hidden(ids, mask), mask)

    def embed_long(self, text: str):
        import numpy as np

        ids = self.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"]
        windows = windows_of(ids, self.cls, self.sep)
        rows = []
        for b in range(0, len(windows), self.window_batch):
            rows.append(self.embed_windows(windows[b:b + self.window_batch]))
        rows = np.concatenate(rows)
        w = np.array([len(x) for x in windows], dtype=np.float32)[:, None]
        emb = (rows * w).sum(0) / w.sum()
        return emb / np.linalg.norm(emb)


class OrtPeer(Peer):
    name = "ort"

    def __init__(self, model_dir, threads, window_batch, onnx_path: Path):
        super().__init__(model_dir, threads, window_batch)
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
        self.version = ort.__version__

    def hidden(self, ids, mask):
        import numpy as np

        return self.session.run(None, {"input_ids": ids.astype(np.int64),
                                       "attention_mask": mask.astype(np.int64),
                                       "token_type_ids": np.zeros_like(ids, dtype=np.int64)})[0]


class OvPeer(Peer):
    def __init__(self, model_dir, threads, window_batch, onnx_path: Path, f32: bool):
        super().__init__(model_dir, threads, window_batch)
        import openvino as ov

        core = ov.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                  "PERFORMANCE_HINT": "LATENCY"}
        if f32:
            config["INFERENCE_PRECISION_HINT"] = "f32"
        self.compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.output = self.compiled.output(0)
        got = str(self.compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
        got = {"<type: 'bfloat16'>": "bf16", "<type: 'float32'>": "f32",
               "<type: 'float16'>": "f16"}.get(got, got)
        for short in ("bf16", "f16", "f32"):
            if short in got or {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[short] in got:
                got = short
                break
        self.name = "ov-f32" if f32 else "ov-default"
        self.precision = got if f32 else f"default ({got})"
        self.version = ov.__version__ if hasattr(ov, "__version__") else ov.get_version()
        nthreads = self.compiled.get_property("INFERENCE_NUM_THREADS")
        if int(nthreads) != threads:
            log(f"{self.name}: INFERENCE_NUM_THREADS is {nthreads}, asked {threads}")

    def hidden(self, ids, mask):
        import numpy as np

        out = self.request.infer({"input_ids": ids.astype(np.int64),
                                  "attention_mask": mask.astype(np.int64),
                                  "token_type_ids": np.zeros_like(ids, dtype=np.int64)})
        return out[self.output]


class StPeer(Peer):
    name = "st"

    def __init__(self, model_dir, threads, window_batch):
        super().__init__(model_dir, threads, window_batch)
        import sentence_transformers
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = SentenceTransformer(str(model_dir), device="cpu")
        self.model.max_seq_length = 512  # the checkpoint says 256
        self.model.eval()
        self.tokenizer = self.model.tokenizer
        self.version = sentence_transformers.__version__

    def embed(self, texts):
        return self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                 show_progress_bar=False)

    def embed_windows(self, windows):
        ids, mask = self.pad_windows(windows)
        t = self.torch
        features = {"input_ids": t.from_numpy(ids), "attention_mask": t.from_numpy(mask),
                    "token_type_ids": t.zeros_like(t.from_numpy(ids))}
        with t.inference_mode():
            return self.model(features)["sentence_embedding"].numpy()


def measure(fn, items: list, duration: float, min_iters: int, warmup: float) -> tuple[int, float]:
    """Calls fn on items round-robin: warm-up (at least one call per item or
    `warmup` seconds), then until both `duration` seconds and min_iters calls
    have passed. Returns (calls, seconds)."""
    start = time.perf_counter()
    i = 0
    while i < len(items) or time.perf_counter() - start < warmup:
        fn(items[i % len(items)])
        i += 1
        if i >= len(items) and time.perf_counter() - start >= warmup:
            break
    calls = 0
    start = time.perf_counter()
    while True:
        fn(items[calls % len(items)])
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= duration and calls >= min_iters:
            return calls, elapsed


def peer_worker_main(args) -> None:
    """One peer, every length and batch; result lines on stdout."""
    import numpy as np

    impl = args.worker
    model_dir = ROOT / "models" / "minilm"
    onnx_path = Path(args.onnx) if args.onnx else None
    if impl == "ort":
        peer = OrtPeer(model_dir, args.threads, args.window_batch, onnx_path)
    elif impl in ("ov-f32", "ov-default"):
        peer = OvPeer(model_dir, args.threads, args.window_batch, onnx_path, impl == "ov-f32")
    elif impl == "st":
        peer = StPeer(model_dir, args.threads, args.window_batch)
    else:
        raise SystemExit(f"unknown peer {impl}")
    work = Path(args.work_dir)
    for length in csv_ints(args.lengths):
        docs = read_documents(work / "docs" / str(length))
        if length <= 512:
            configs = [(b, [docs[(i * b + j) % len(docs)] for j in range(b)])
                       for b in csv_ints(args.batches) for i in range(max(1, len(docs) // b))]
            by_batch: dict[int, list] = {}
            for b, group in configs:
                by_batch.setdefault(b, []).append(group)
            runs = [(b, groups, peer.embed, b) for b, groups in by_batch.items()]
            # Reference embedding of the first document, for the cross-check.
            first = peer.embed([docs[0]])[0]
        else:
            runs = [(args.window_batch, docs, peer.embed_long, 1)]
            first = peer.embed_long(docs[0])
        np.save(work / "embeddings" / f"{impl}-{length}.npy", np.asarray(first, dtype=np.float32))
        duration = args.duration if length < 16384 else max(args.duration, args.long_duration)
        for batch, items, fn, docs_per_call in runs:
            calls, seconds = measure(fn, items, duration, args.min_iters, args.warmup)
            docs_per_s = calls * docs_per_call / seconds
            row = {"impl": peer.name, "precision": peer.precision, "tokens": length,
                   "batch": batch, "docs_per_s": round(docs_per_s, 3),
                   "tokens_per_s": round(docs_per_s * length, 1), "isa": args.isa,
                   "threads": args.threads, "docs": calls * docs_per_call,
                   "seconds": round(seconds, 2), "version": str(peer.version)}
            if length > 512:
                row["windows_per_doc"] = len(windows_of([0] * (length - 2), 0, 0))
                row["batch_unit"] = "windows"
            print(RESULT + json.dumps(row), flush=True)


def worker_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_peer(args, impl: str, lengths: list[int], onnx_path: Path | None) -> list[dict]:
    cmd = [sys.executable, __file__, "--worker", impl, "--lengths", ",".join(map(str, lengths)),
           "--threads", str(args.threads), "--duration", str(args.duration),
           "--long-duration", str(args.long_duration), "--min-iters", str(args.min_iters),
           "--warmup", str(args.warmup), "--batches", args.batches,
           "--window-batch", str(args.window_batch), "--work-dir", str(args.work_dir),
           "--isa", args.isa]
    if onnx_path:
        cmd += ["--onnx", str(onnx_path)]
    log(f"{impl}: running")
    rows, code = run_worker(cmd, args.threads)
    if code != 0:
        log(f"{impl}: FAILED (exit {code}); its rows are missing")
    return rows


def run_worker(cmd: list[str], threads: int) -> tuple[list[dict], int]:
    """Runs a worker process; echoes and returns its result rows, passes its
    other output to stderr, and returns its exit code too."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=worker_env(threads))
    rows = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(RESULT):
            row = json.loads(line[len(RESULT):])
            print(json.dumps(row), flush=True)
            rows.append(row)
        else:
            sys.stderr.write(line)
    return rows, proc.wait()


# --- docsparse ----------------------------------------------------------------------


class Server:
    def __init__(self, build: Path, threads: int, precision: str, log_path: Path,
                 instances: int = 0):
        self.cmd = [str(build / "server" / "docsparse-server"), "--model_repository=models",
                    "--host=127.0.0.1", "--port=0", "--metrics_port=0", f"--threads={threads}"]
        if precision != "default":
            self.cmd.append(f"--precision={precision}")
        if instances != 0:
            # --threads is divided among them (docsparse-server --help); 0
            # leaves the server's default (two, a lone batch on every thread).
            self.cmd.append(f"--instances={instances}")
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.address = ""

    def start(self, timeout: float = 600) -> str | None:
        """None when ready, else the reason (the log's tail)."""
        self.log_file = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=self.log_file,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            if "docsparse-server: ready" in text:
                m = re.search(r"listening grpc=(\S+)", text)
                if not m:
                    return "no 'listening grpc=' line in the server log"
                self.address = m.group(1)
                return None
            if self.proc.poll() is not None:
                return text[-2000:] or f"exit {self.proc.returncode}"
            time.sleep(0.2)
        return f"not ready after {timeout:.0f} s"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()


def bench_load(cli: Path, address: str, model: str, folder: Path, concurrency: int,
               duration: float) -> tuple[dict | None, str]:
    cmd = [str(cli), f"--server={address}", f"--model={model}", "bench", "load",
           "--concurrency", str(concurrency), "--duration", str(duration),
           "--documents", str(folder), "--deadline_ms", "600000", "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line), ""
            except ValueError:
                break
    return None, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]


def server_default_precision(server_bin: Path) -> str | None:
    """The default of the server's --precision flag ("" means each model's
    docsparse.json, "auto" unless it says otherwise), or None when it has no
    such flag (a server from before it, whose only precision is fp32)."""
    try:
        proc = subprocess.run([str(server_bin), "--help=precision"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'--precision \(.*?\); default: "?([^";]*)"?;', proc.stdout + proc.stderr,
                  re.DOTALL)
    return m.group(1) if m else None


def build_dir(args) -> Path:
    build = Path(args.build_dir)
    return build if build.is_absolute() else ROOT / build


def run_docsparse(args, lengths: list[int], folders: dict[int, Path]) -> list[dict]:
    build = build_dir(args)
    server_bin = build / "server" / "docsparse-server"
    cli = build / "client" / "docsparse"
    missing = [str(p) for p in (server_bin, cli) if not os.access(p, os.X_OK)]
    if missing:
        log(f"docsparse: skipped, missing {', '.join(missing)} (scripts/build)")
        return []
    models_512 = csv_list(args.docsparse_models)
    models_long = csv_list(args.docsparse_long_models)
    absent = sorted({m for m in models_512 + models_long
                     if not (ROOT / "models" / m / "config.json").exists()})
    if absent:
        log(f"docsparse: no {', '.join('models/' + m for m in absent)} "
            "(scripts/prepare-models makes minilm-lsg); their rows are skipped")
        models_512 = [m for m in models_512 if m not in absent]
        models_long = [m for m in models_long if m not in absent]
    if not (models_512 if any(x <= 512 for x in lengths) else []) and not (
            models_long if any(x > 512 for x in lengths) else []):
        log("docsparse: skipped, no model to run")
        return []
    default_precision = server_default_precision(server_bin)
    if default_precision is None:
        log("docsparse: the server has no --precision flag: it runs fp32 only")
    else:
        log("docsparse: the server's --precision defaults to "
            f"{default_precision or 'each model docsparse.json (auto)'}")
    rows = []
    for precision, instances in [(p, i) for p in csv_list(args.docsparse_precision)
                                 for i in csv_ints(args.docsparse_instances)]:
        suffix = "" if instances == 0 else f"-instances{instances}"
        log_path = Path(args.work_dir) / f"server-{precision}{suffix}.log"
        server = Server(build, args.threads, precision, log_path, instances)
        log(f"docsparse: starting {' '.join(server.cmd)}")
        why = server.start()
        shown_precision = precision
        if precision == "default":
            shown_precision = ("fp32" if default_precision is None else
                               f"default ({default_precision or 'auto'})")
        if why is not None and precision != "default" and "precision" in why.lower():
            server.stop()
            if precision == "fp32":
                # A server without the flag is the fp32-only one.
                log("docsparse: the server has no --precision flag; fp32 is its only "
                    "precision, so running it without the flag")
                server = Server(build, args.threads, "default", log_path)
                why = server.start()
            else:
                log(f"docsparse: SKIPPED precision {precision}: the server rejects "
                    f"--precision={precision}: {why.strip().splitlines()[-1]}")
                continue
        if why is not None:
            server.stop()
            log(f"docsparse: SKIPPED precision {precision}: the server did not start "
                f"(log {log_path}):\n{why}")
            continue
        try:
            for length in lengths:
                models = models_512 if length <= 512 else models_long
                duration = args.duration if length < 16384 else max(args.duration,
                                                                   args.long_duration)
                for model in models:
                    # Warm-up: a request or two on this model and length.
                    bench_load(cli, server.address, model, folders[length], 1,
                               min(1.0, duration))
                    for conc in csv_ints(args.concurrency):
                        report, err = bench_load(cli, server.address, model, folders[length],
                                                 conc, duration)
                        if report is None:
                            log(f"docsparse {model} {length} c{conc}: bench load failed: {err}")
                            continue
                        if report["errors"]:
                            log(f"docsparse {model} {length} c{conc}: {report['errors']} errors "
                                f"{report['errors_by_code']}")
                        tokens = report.get("mean_input_tokens", 0)
                        if report["ok"] and round(tokens) != length:
                            log(f"WARNING: docsparse counts {tokens:.1f} tokens per document of "
                                f"{length} (model {model}); the peers count {length}")
                        if report["ok"] < 3:
                            log(f"WARNING: docsparse {model} {length} c{conc}: only "
                                f"{report['ok']} documents completed; raise --duration "
                                f"or --long-duration")
                        row = {"impl": "docsparse", "precision": shown_precision,
                               "tokens": length, "batch": conc,
                               "docs_per_s": round(report["requests_per_s"], 3),
                               "tokens_per_s": round(report["tokens_per_s"], 1),
                               "isa": args.isa, "threads": args.threads, "model": model,
                               "concurrency": conc, "instances": instances,
                               "docs": report["ok"],
                               "seconds": round(report["elapsed_s"], 2),
                               "counted_tokens": round(tokens, 1),
                               "latency_p50_ms": round(report["latency_ms"]["p50"], 1),
                               "mean_batch_size": round(report.get("mean_batch_size", 0), 2),
                               "mean_density": report.get("mean_density")}
                        print(json.dumps(row), flush=True)
                        rows.append(row)
        finally:
            server.stop()
    return rows


# --- report -------------------------------------------------------------------------


def instances_label(row: dict) -> str:
    """', N instances' for a docsparse row run at --instances N; '' at the server's default."""
    instances = row.get("instances", 0)
    if instances == 0:
        return ""
    return f", {instances} instance" + ("" if instances == 1 else "s")


def column_of(row: dict) -> str:
    if row["impl"] == "docsparse":
        return f"docsparse {row['model']} {row['precision']}" + instances_label(row)
    return f"{row['impl']} {row['precision']}"


def cell_of(row: dict) -> str:
    if row["impl"] == "docsparse":
        tag = f"c{row['concurrency']}"
    elif row.get("batch_unit") == "windows":
        tag = f"b{row['batch']}w"
    else:
        tag = f"b{row['batch']}"
    return f"{row['docs_per_s']:.3g} ({tag})"


def best_of_rounds(rows: list[dict], key, value: str, higher_is_better: bool) -> list[dict]:
    """Each measurement's best round (rows with the same key(row)), in first-seen
    order, with every round's `value` as `<value>_rounds`. The machines these
    runs share slow down for minutes at a time, never speed up, so the best
    round is the closest to what each implementation can do; taking turns
    spreads the slow spells over all of them."""
    best: dict[tuple, dict] = {}
    rounds = f"{value}_rounds"
    for r in rows:
        k = key(r)
        if k not in best:
            best[k] = dict(r, **{rounds: []})
        elif r[value] > best[k][value] if higher_is_better else r[value] < best[k][value]:
            best[k] = dict(r, **{rounds: best[k][rounds]})
        best[k][rounds].append(r[value])
    return list(best.values())


def best_rounds(rows: list[dict]) -> list[dict]:
    """The embedding rows' best rounds: the most documents per second."""
    return best_of_rounds(rows, lambda r: (r["impl"], r["precision"], r.get("model"), r["tokens"],
                                           r.get("batch"), r.get("concurrency"),
                                           r.get("instances", 0), r.get("batch_unit")),
                          "docs_per_s", higher_is_better=True)


def best_summarize_rounds(rows: list[dict]) -> list[dict]:
    """The decode rows' best rounds: the fewest ms per generated step."""
    return best_of_rounds(rows, lambda r: (r["impl"], r["precision"], r["beams"], r["batch"]),
                          "ms_per_token", higher_is_better=False)


def with_rounds(text: str, rounds: list[float], fmt: str) -> str:
    """`text`, then every round's figure in brackets where there were several."""
    if len(rounds) < 2:
        return text
    return text + " (rounds: " + ", ".join(format(x, fmt) for x in rounds) + ")"


def markdown(rows: list[dict], args, summarize_rows: list[dict]) -> str:
    out = ["# docsparse vs CPU peers: all-MiniLM-L6-v2 embeddings", ""]
    if args.cap_isa:
        out.append(f"Capped at {args.cap_isa} on a CPU with {detect_isa()} "
                   f"({' '.join(f'{k}={v}' for k, v in CAPS[args.cap_isa].items())}): docsparse "
                   "and OpenVINO's oneDNN kernels follow the cap; OpenVINO's MLAS products and "
                   "ONNX Runtime choose by cpuid and keep the wider instructions, so the cap "
                   "favours them.")
        out.append("")
    out.append(f"CPU: {cpu_model()}, isa {args.isa}, {os.cpu_count()} cores visible; "
               f"{args.threads} threads on every side. Measured {time.strftime('%Y-%m-%d %H:%M')}, "
               f"duration {args.duration:g} s per measurement "
               f"({max(args.duration, args.long_duration):g} s at 16384 tokens).")
    if args.rounds > 1:
        out.append("")
        out.append(f"Best of {args.rounds} rounds per row; the implementations took turns in "
                   "every round (docsparse first in every second one). Every round's figure is "
                   "in the .jsonl.")
    out.append("")
    out.append("Documents per second (higher is better). b1/b8: documents per call; "
               "b8w: 8 windows of 512 tokens per call; cN: docsparse bench load "
               "concurrency N (closed loop, gRPC included).")
    out.append("")
    columns: list[str] = []
    for r in rows:
        c = column_of(r)
        if c not in columns:
            columns.append(c)
    lengths = sorted({r["tokens"] for r in rows})
    if rows:
        out.append("| tokens | " + " | ".join(columns) + " |")
        out.append("|---:|" + "---:|" * len(columns))
        for length in lengths:
            cells = []
            for c in columns:
                cells.append(" · ".join(cell_of(r) for r in rows
                                        if r["tokens"] == length and column_of(r) == c) or "–")
            out.append(f"| {length} | " + " | ".join(cells) + " |")
        out.append("")
        out.append("All rows:")
        out.append("")
        out.append("| impl | precision | model | tokens | batch/conc | docs/s | tokens/s |")
        out.append("|---|---|---|---:|---:|---:|---:|")
        for r in rows:
            bc = (f"c{r['concurrency']}" + instances_label(r)
                  if r["impl"] == "docsparse" else
                  f"{r['batch']} windows" if r.get("batch_unit") == "windows" else str(r["batch"]))
            docs = with_rounds(f"{r['docs_per_s']:.3g}", r.get("docs_per_s_rounds", []), ".3g")
            out.append(f"| {r['impl']} | {r['precision']} | {r.get('model', 'minilm')} | "
                       f"{r['tokens']} | {bc} | {docs} | {r['tokens_per_s']:.0f} |")
    else:
        out.append("(no embedding results)")
    if summarize_rows:
        out += ["", "## Summarization peers (random BART-base-shaped checkpoint)", "",
                "| impl | precision | beams | batch | source tokens | new tokens | "
                "ms per step | generated tokens/s |",
                "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in best_summarize_rounds(summarize_rows):
            ms = with_rounds(f"{r['ms_per_token']:.1f}", r["ms_per_token_rounds"], ".1f")
            out.append(f"| {r['impl']} | {r['precision']} | {r['beams']} | {r['batch']} | "
                       f"{r['source_tokens']} | {r['new_tokens']} | {ms} | "
                       f"{r['tokens_per_s']:.1f} |")
    out.append("")
    return "\n".join(out)


def cross_check(work: Path, impls: list[str], lengths: list[int]) -> None:
    """Cosine of each peer's first-document embedding against the first peer's."""
    import numpy as np

    for length in lengths:
        embs = {}
        for impl in impls:
            path = work / "embeddings" / f"{impl}-{length}.npy"
            if path.exists():
                embs[impl] = np.load(path)
        if len(embs) < 2:
            continue
        ref_name = "st" if "st" in embs else next(iter(embs))
        ref = embs[ref_name]
        parts = []
        for name, e in embs.items():
            if name != ref_name:
                cos = float(e @ ref / (np.linalg.norm(e) * np.linalg.norm(ref)))
                parts.append(f"{name} {cos:.5f}")
                if cos < 0.99:
                    log(f"WARNING: {name} embeds the {length}-token document far from "
                        f"{ref_name} (cosine {cos:.4f})")
        log(f"cross-check {length} tokens: cosine to {ref_name}: " + ", ".join(parts))


# --- summarization peers (optional) -----------------------------------------------------


def summarize_worker(args) -> None:
    """CTranslate2 float32/int8 against transformers generate on a random
    BART-base-shaped checkpoint; result lines on stdout."""
    import numpy as np
    import torch
    from transformers import BartConfig, BartForConditionalGeneration
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    hf_dir = work / "bart-base-random"
    config_path = hf_dir / "config.json"
    if not config_path.exists() or "normalize_before" not in json.loads(config_path.read_text()):
        make_random_bart(hf_dir)
    import ctranslate2

    src_len, new_tokens = args.src_tokens, args.gen_tokens
    rng = np.random.default_rng(0)
    config = BartConfig.from_pretrained(str(hf_dir))
    model = BartForConditionalGeneration.from_pretrained(str(hf_dir)).eval()
    vocab = [f"w{i}" for i in range(config.vocab_size)]
    for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"]):
        vocab[i] = t

    # float32 and int8 always; bfloat16 and int8_bfloat16 where CTranslate2
    # runs them on this CPU (a precision-for-precision peer for our bf16).
    supported = ctranslate2.get_supported_compute_types("cpu")
    compute_types = ["float32", "int8"] + [
        ct for ct in ("bfloat16", "int8_bfloat16") if ct in supported]
    for compute_type in compute_types:
        ct2_dir = work / f"bart-base-random-ct2-{compute_type}"
        if not (ct2_dir / "model.bin").exists():
            from ctranslate2.converters import TransformersConverter

            TransformersConverter(str(hf_dir)).convert(str(ct2_dir), quantization=compute_type,
                                                      force=True)
    translators = {
        ct: ctranslate2.Translator(str(work / f"bart-base-random-ct2-{ct}"), device="cpu",
                                   compute_type=ct, intra_threads=args.threads, inter_threads=1)
        for ct in compute_types}
    results = []
    for batch in csv_ints(args.sum_batches):
        source_ids = rng.integers(4, config.vocab_size, size=(batch, src_len - 1))
        ids = torch.from_numpy(np.concatenate(
            [source_ids, np.full((batch, 1), config.eos_token_id)], axis=1)).long()
        tokens = [[vocab[int(t)] for t in row] + ["</s>"] for row in source_ids]
        for beams in csv_ints(args.beams):

            def hf_generate(ids=ids, beams=beams):
                with torch.inference_mode():
                    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                         num_beams=beams, do_sample=False,
                                         max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                         early_stopping=False)
                return out.shape[1] - 1  # less the decoder start token

            results.append(("transformers", "fp32", batch, beams, hf_generate))
            for compute_type, translator in translators.items():

                def ct2_generate(translator=translator, tokens=tokens, beams=beams):
                    out = translator.translate_batch(
                        tokens, beam_size=beams, max_decoding_length=new_tokens,
                        min_decoding_length=new_tokens, return_scores=False)
                    return len(out[0].hypotheses[0])

                results.append(("ctranslate2", compute_type, batch, beams, ct2_generate))
    for impl, precision, batch, beams, fn in results:
        steps = fn()  # warm-up, and the number of generated tokens
        calls, seconds = measure(lambda _: fn(), [None], args.duration, args.min_iters, 0)
        ms = seconds / calls / max(steps, 1) * 1000
        row = {"impl": impl, "precision": precision, "task": "summarize", "beams": beams,
               "batch": batch, "source_tokens": src_len, "new_tokens": steps,
               "ms_per_token": round(ms, 2), "tokens_per_s": round(1000 / ms * batch, 1),
               "isa": args.isa, "threads": args.threads}
        print(RESULT + json.dumps(row), flush=True)


def make_random_bart(out: Path) -> None:
    """facebook/bart-base's shapes, random weights, and a placeholder
    word-level tokenizer with its vocabulary size (CTranslate2's converter
    reads the vocabulary from the tokenizer)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = BartConfig(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6,
                        encoder_attention_heads=12, decoder_attention_heads=12,
                        encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
                        bos_token_id=0, pad_token_id=1, eos_token_id=2,
                        decoder_start_token_id=2, forced_bos_token_id=0,
                        forced_eos_token_id=2, scale_embedding=False,
                        # as in facebook/bart-base's config.json (CTranslate2 reads them)
                        normalize_before=False, normalize_embedding=True,
                        add_final_layer_norm=False)
    model = BartForConditionalGeneration(config).eval()
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=out.name + "."))
    model.save_pretrained(str(tmp))
    vocab = {f"w{i}": i for i in range(config.vocab_size)}
    for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"]):
        del vocab[f"w{i}"]
        vocab[t] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>", unk_token="<unk>").save_pretrained(str(tmp))
    if out.exists():
        shutil.rmtree(out)
    for stale in out.parent.glob(out.name + "-ct2-*"):
        shutil.rmtree(stale)
    tmp.rename(out)
    log(f"summarize: wrote a random BART-base-shaped checkpoint to {out}")


def in_rounds(args, docsparse, peers, label: str = "") -> list[dict]:
    """--rounds rounds of peers() and docsparse() (each returns rows), taking
    turns: docsparse first in every second round. Each row gets its round."""
    rows: list[dict] = []
    for round_index in range(1, max(1, args.rounds) + 1):
        if args.rounds > 1:
            log(f"{label}round {round_index} of {args.rounds}")
        round_rows = docsparse() + peers() if round_index % 2 == 0 else peers() + docsparse()
        for row in round_rows:
            row["round"] = round_index
        rows += round_rows
    return rows


def run_summarize(args) -> list[dict]:
    """The peers' and docsparse's decode loops in --rounds rounds (in_rounds)."""
    cmd = [sys.executable, __file__, "--summarize-worker", "--threads", str(args.threads),
           "--duration", str(args.duration), "--min-iters", str(args.min_iters),
           "--work-dir", str(args.work_dir), "--isa", args.isa, "--beams", args.beams,
           "--sum-batches", args.sum_batches, "--src-tokens", str(args.src_tokens),
           "--gen-tokens", str(args.gen_tokens)]

    def peers() -> list[dict]:
        log("summarize: CTranslate2 float32/int8 and transformers generate")
        rows, code = run_worker(cmd, args.threads)
        if code != 0:
            log(f"summarize: FAILED (exit {code})")
        return rows

    return in_rounds(args, lambda: run_docsparse_generate(args), peers, "summarize: ")


def run_docsparse_generate(args) -> list[dict]:
    """docsparse's decode loop on the same checkpoint, in the engine
    (`docsparse-bench generate`: encoding included, every text run to
    --gen-tokens as the peers' min_decoding_length forces)."""
    bench = build_dir(args) / "bench" / "docsparse-bench"
    if not os.access(bench, os.X_OK):
        log(f"summarize: docsparse skipped, missing {bench} (scripts/build)")
        return []
    cmd = [str(bench), "generate", f"--gen_model={Path(args.work_dir) / 'bart-base-random'}",
           f"--gen_src_tokens={args.src_tokens}", f"--gen_new_tokens={args.gen_tokens}",
           f"--gen_beams={args.beams}", f"--gen_batches={args.sum_batches}",
           f"--gen_precision={args.sum_precisions}",
           f"--threads={args.threads}", f"--repeats={max(3, args.min_iters)}", "--json"]
    log("summarize: docsparse generate (engine)")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(args.threads))
    rows = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if proc.returncode != 0:
        log(f"summarize: docsparse generate FAILED (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return rows


# --- main ---------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="512,4096,16384",
                   help="document lengths in tokens, [CLS]/[SEP] included")
    p.add_argument("--impls", default=",".join(ALL_IMPLS), help="of " + ",".join(ALL_IMPLS))
    p.add_argument("--duration", type=float, default=20,
                   help="seconds per measurement (peers: at least, and at least --min-iters "
                        "calls; docsparse: bench load --duration)")
    p.add_argument("--long-duration", type=float, default=60,
                   help="seconds per measurement at 16384 tokens (the larger of the two)")
    p.add_argument("--min-iters", type=int, default=3, help="peers: calls per measurement, at least")
    p.add_argument("--warmup", type=float, default=2, help="peers: warm-up seconds")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", default="1,8", help="peers: documents per call at 512 tokens")
    p.add_argument("--window-batch", type=int, default=8,
                   help="peers: 512-token windows per call for longer documents")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--concurrency", default="1,4", help="docsparse bench load concurrencies")
    p.add_argument("--cap-isa", choices=sorted(CAPS), default=None,
                   help="run every side as on a CPU with at most this instruction set: "
                        "DOCSPARSE_MAX_CPU_ISA and ONEDNN_MAX_CPU_ISA for all children. "
                        "docsparse and OpenVINO's oneDNN kernels follow it; OpenVINO's MLAS "
                        "products and ONNX Runtime pick by cpuid and do not")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure everything this many times, the implementations taking turns "
                        "(docsparse first in every second round); the table keeps each row's "
                        "best round, the .jsonl every round")
    p.add_argument("--docsparse-models", default="minilm,minilm-lsg",
                   help="docsparse models for 512-token documents")
    p.add_argument("--docsparse-long-models", default="minilm-lsg",
                   help="docsparse models for longer documents (add minilm for its chunking)")
    p.add_argument("--docsparse-precision", default="default",
                   help="comma list of default|fp32|bf16|auto; 'default' passes no --precision")
    p.add_argument("--docsparse-instances", default="0",
                   help="comma list of docsparse-server --instances counts (each its own "
                        "server and column; --threads divided among the instances; 0: the "
                        "server's default, two with a lone batch widened to every thread)")
    p.add_argument("--work-dir", default=str(CACHE / "peers"))
    p.add_argument("--out", default=None, help="markdown report (default WORK_DIR/peers.md)")
    p.add_argument("--summarize", action="store_true",
                   help="also CTranslate2 vs transformers generate on a random BART-base")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--sum-batches", default="1,4")
    p.add_argument("--sum-precisions", default=None,
                   help="docsparse's summarizer precisions (default: fp32, int8, and bf16 "
                        "where the CPU has AMX or AVX512-BF16)")
    p.add_argument("--src-tokens", type=int, default=512)
    p.add_argument("--gen-tokens", type=int, default=64)
    # internal
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--summarize-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--export-onnx", help=argparse.SUPPRESS)
    p.add_argument("--onnx", help=argparse.SUPPRESS)
    p.add_argument("--isa", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main() -> int:
    args = parse_args()
    if args.cap_isa:
        os.environ.update(CAPS[args.cap_isa])
        args.isa = args.isa or args.cap_isa
    args.isa = args.isa or detect_isa()
    if args.sum_precisions is None:
        args.sum_precisions = ("fp32,bf16,int8" if args.isa in ("amx", "avx512_bf16")
                               else "fp32,int8")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    model_dir = ROOT / "models" / "minilm"
    if args.export_onnx:
        export_onnx(model_dir, Path(args.export_onnx), args.threads)
        return 0
    if args.worker:
        peer_worker_main(args)
        return 0
    if args.summarize_worker:
        summarize_worker(args)
        return 0

    work = Path(args.work_dir)
    (work / "embeddings").mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out) if args.out else work / "peers.md"
    lengths = csv_ints(args.lengths)
    impls = [] if args.impls.strip() == "none" else csv_list(args.impls)
    unknown = [i for i in impls if i not in ALL_IMPLS]
    if unknown:
        log(f"unknown --impls {unknown}; known: {','.join(ALL_IMPLS)}")
        return 2
    log(f"isa {args.isa}, {args.threads} threads, lengths {lengths}, impls {impls}, "
        f"work dir {work}")
    folders = prepare_documents(work, model_dir, lengths)
    for old in (work / "embeddings").glob("*.npy"):
        old.unlink()

    rows: list[dict] = []
    peers = [i for i in impls if i in PEER_IMPLS]
    onnx_path = None
    if any(i in ("ort", "ov-f32", "ov-default") for i in peers):
        onnx_path = ensure_onnx(work, model_dir, args.threads)
    rows += in_rounds(
        args, lambda: run_docsparse(args, lengths, folders) if "docsparse" in impls else [],
        lambda: [row for impl in peers
                 for row in run_peer(args, impl, lengths, onnx_path if impl != "st" else None)])
    cross_check(work, peers, lengths)
    summarize_rows = run_summarize(args) if args.summarize else []

    report = markdown(best_rounds(rows), args, summarize_rows)
    print()
    print(report)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(report, encoding="utf-8")
    with open(out_path.with_suffix(".jsonl"), "w", encoding="utf-8") as f:
        for row in rows + summarize_rows:
            f.write(json.dumps(row) + "\n")
    log(f"wrote {out_path} and {out_path.with_suffix('.jsonl')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
