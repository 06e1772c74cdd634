#!/usr/bin/env python3
"""Write golden WordPiece tokenizer fixtures from Hugging Face `tokenizers`.

Developer-only. Needs the PyPI packages `tokenizers` and `transformers` (no torch, no
network: the model is read from a local folder). Usage:

    python tools/make_tokenizer_fixtures.py \
        [--model models/minilm] [--out tests/fixtures/tokenizer]

Writes three files under --out:

  wordpiece_minilm.jsonl   one JSON object per line:
      {"text": str, "ids": [int], "decoded": str,
       "vocab_ids": [int]   (only when it differs from "ids"),
       "slow_ids": [int]    (only when it differs from "ids")}
    ids        tokenizers.Tokenizer.from_file(tokenizer.json), truncation and padding
               disabled, add_special_tokens=False
    decoded    that tokenizer's decode(ids) (skip_special_tokens=True, its WordPiece decoder)
    vocab_ids  transformers.BertTokenizer.from_pretrained() on a folder holding only
               vocab.txt + tokenizer_config.json + special_tokens_map.json (what a user
               without tokenizer.json gets; in transformers 5 it is tokenizers-backed)
    slow_ids   transformers' pure-Python BertTokenizerLegacy on the same folder
               (informational: Python's unicodedata and case rules, not HF's tables)

  variants.json  the same tokenizer.json with other settings, to cover what the default
    model does not use: {"name", "patch", "cases": [{"text", "ids", "decoded"}]}; the patch
    replaces top-level keys of tokenizer.json, except "extra_added_tokens" which is
    appended to "added_tokens" (tests apply the same patch to models/minilm/tokenizer.json)

  unicode_properties.json  what the HF BertNormalizer / BertPreTokenizer do to every code
    point on its own (surrogates excluded), as [first, last] ranges or [cp, [cps]] maps:
      removed        dropped by clean_text
      to_space       turned into ' ' by clean_text
      whitespace     split on (and removed) by BertPreTokenizer
      punctuation    isolated by BertPreTokenizer
      cjk            spaced by handle_chinese_chars
      strip_removed  removed by strip_accents (NFD, then drop Mn)
      strip_hangul   Hangul syllables strip_accents turns into their conjoining jamo
                     (checked here against the algorithmic NFD decomposition)
      strip_accents  what strip_accents makes of every other code point it changes
      lowercase      full lowercase mapping, where it changes the code point

The strings are deterministic: hand-written cases, seeded random mixes of fragments and
code points, and the text of /usr/share/common-licenses/GPL-3 (stored in the fixture).
"""

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, normalizers, pre_tokenizers  # noqa: E402
from transformers import BertTokenizer  # noqa: E402
from transformers.models.bert.tokenization_bert_legacy import (  # noqa: E402
    BertTokenizerLegacy,
)

SEED = 20240917
GPL3 = "/usr/share/common-licenses/GPL-3"

HANDWRITTEN = [
    "",
    " ",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter; they're here, we've won, I'm done.",
    "Don't do not stop -- 'quoted' and \"double\" ... ok?!",
    # Accents, combining marks, Latin-1 and case.
    "Café crème brûlée à la mode, naïve façade, jalapeño, São Paulo",
    "CAFÉ CRÈME BRÛLÉE ÀÉÎÕÜ Ñ Ç Ø Å Æ Œ",
    "e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 u\u030a i\u0302",
    "a\u0315\u0300\u0323 \u1e9b\u0323 q\u0307\u0323 \u1e0b\u0323",
    "Ångström, Øresund, Þórsmörk, Ðað",
    "ﬁ ﬂ ﬃ Ⅻ ① ㎏ ｆｕｌｌｗｉｄｔｈ",
    # Greek, Cyrillic with case.
    "Ελληνικά: ΟΔΥΣΣΕΥΣ ὀδυσσεύς Σίσυφος ΣΊΣΥΦΟΣ ς σ",
    "Русский текст: ПРИВЕТ, мир! Ёжик в тумане.",
    "Українська: Ґанок, їжак, Київ; Беларуская: ў",
    # Turkish and German.
    "İstanbul İZMİR ıslak Iğdır",
    "\u0130",
    "Straße STRASSE Maß Fuß ẞ",
    # CJK.
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、ひらがなとカタカナ。東京タワー！",
    "한국어 텍스트입니다. 서울특별시",
    "混合English和中文mixed",
    "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 𰀀 丽 刃",
    "⺀ ⼀ 〇 〡 ㄅ ㆠ",
    # Emoji.
    "I love pizza 🍕 and 🎉 parties 😀😃😄",
    "family 👨\u200d👩\u200d👧\u200d👦 and 🏳\ufe0f\u200d🌈 flag",
    "thumbs 👍🏻👍🏼👍🏽👍🏾👍🏿 wave 👋🏽",
    "recent 🥰 🫠 🫶 🪿 🩷 🫨 🐦\u200d🔥 🍋\u200d🟩",
    "keycaps 1\ufe0f\u20e3 #\ufe0f\u20e3 flags 🇫🇷🇯🇵",
    # Punctuation runs.
    "Wait...what?!?! (really) [no] {yes} <maybe>",
    "!!!???,,,;;;:::---___***",
    "«guillemets» „Anführung“ ‚single‘ 「括弧」 『二重』 【】",
    "em—dash en–dash ‐hyphen ‑nb ‒figure ―bar … ‥ ·middle· •bullet",
    "¡Hola! ¿Qué tal? §1 ¶2 †‡ ※ ‼ ⁉",
    "$100 €50 £20 ¥1000 ₹500 ₿1 ¢ ¤",
    # Very long words.
    "a" * 100,
    "a" * 101,
    "b" * 99 + "é",
    "é" * 100,
    "é" * 101,
    "supercalifragilisticexpialidocious" * 3,
    "x" * 300 + " short",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    # Whitespace oddities.
    "tab\tseparated\tvalues",
    "windows\r\nline\r\nendings\n\nand\rcarriage",
    "non\u00a0breaking\u00a0space",
    "em\u2003space\u2002en\u2009thin\u200ahair\u3000ideographic",
    "zero\u200bwidth\u200cnon\u200djoiner",
    "\ufeffBOM at start and \ufeff inside",
    "line\u2028separator\u2029paragraph\u0085nel",
    "   leading and trailing   ",
    "\u1680ogham\u180emongolian\u202fnarrow\u205fmath",
    # Control chars and U+FFFD.
    "ctrl\x00null\x01soh\x07bell\x08bs\x0bvt\x0cff\x1bescape\x7fdel",
    "c1\x80\x85\x9f controls",
    "replacement \ufffd char \ufffd\ufffd",
    "soft\u00adhyphen and \u2066isolate\u2069 \u202eRLO\u202c",
    "private use \ue000\uf8ff\U000f0000 end",
    "noncharacters \ufdd0 \uffff \U0010fffe",
    "tags \U000e0001\U000e0041 and variation \ufe00 \U000e0100",
    # Special tokens.
    "[MASK]",
    "The capital of France is [MASK].",
    "[CLS] sentence one [SEP] sentence two [SEP]",
    "[cls] lower [sep] [mask] [pad] [unk]",
    "[PAD][PAD][UNK]x[MASK]y",
    "[MASK[MASK]] [[CLS]] [ MASK ] [MASK",
    "prefix[SEP]suffix",
    "[MASK]" * 5,
    # Digits.
    "0123456789 3.14159 1,000,000 1e-10 -42 +7 0x1F 0b1010",
    "٠١٢٣٤٥٦٧٨٩ ०१२३ ０１２３ ¹²³ ½ ¾",
    "Phone: +1 (555) 123-4567, ISBN 978-3-16-148410-0",
    # URLs and code.
    "https://example.com/path?query=1&x=y#frag",
    "mailto:someone@example.org and ftp://files.example.net/a_b-c.txt",
    "int main(int argc, char** argv) { return argv[0][0] == '-'; }",
    "def f(x): return {'a': [1, 2, 3], \"b\": x**2} # comment",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "<div class=\"x\">Hello &amp; goodbye</div>",
    "snake_case_name camelCaseName PascalCase kebab-case SCREAMING_CASE",
    # Math symbols.
    "∀x ∈ ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≤ ∞ ⇒ ∫₀¹ f(x) dx ≈ π",
    "α + β = γ; Δx → 0; ∂f/∂x; √2 ≠ 1.414",
    "matrix ⊗ ⊕ ⊂ ⊆ ∩ ∪ ∅ ¬ ∨ ≡ ⊢ ⊨",
    # Mixed scripts.
    "Hello Привет Γειά 你好 こんにちは 안녕하세요 مرحبا שלום नमस्ते",
    "עברית עם ניקוד: שָׁלוֹם; العربية: مَرْحَبًا",
    "हिन्दी देवनागरी, বাংলা, தமிழ், ไทย ภาษา, ລາວ",
    "ქართული, Հայերեն, አማርኛ, ᏣᎳᎩ, ᚠᚢᚦ",
    # Unicode-version sensitive: new punctuation, marks, format chars, case pairs.
    "a\u2e42b a\u2e45b a\u2e4fb a\u2e5db",
    "e\u0d00x e\u1df5x e\u1dfax e\u0898x e\u1ac1x",
    "a\u0890b a\u08e2b a\U000110cdb a\U00013430b",
    "\ua7cb\ua7cc \u1c89 \ua7c0 \ua7dc \ua7c7 \ua7f5 \U00010d50",
    "\U0001fae8 \U0001fa77 \U0001f9cc\u200d\u2642\ufe0f",
    # Real-looking sentences.
    "Sparse attention lets transformers read documents of 64k tokens.",
    "On 12 March 2024, the committee approved the €2.5bn budget (see §4.2).",
    "Dr. Smith's patients—aged 18–65—reported fewer side-effects.",
    "\"Are you sure?\" she asked. \"Yes,\" he replied, \"I'm certain.\"",
    "The U.S.A. and the U.K. signed the agreement in N.Y.C. at 3 p.m.",
]

WORDS = (
    "the of and to in is was for on that with as by at from his her an were are which "
    "this be or has had not but what all when can there who been one so if would more "
    "transformer attention sparse document embedding tokenizer model budget density "
    "running jumped unbelievable preprocessing internationalization misunderstanding "
    "antidisestablishmentarianism hyperparameter backpropagation"
).split()
FRAGMENTS = [
    "café", "naïve", "Zürich", "Ærøskøbing", "İstanbul", "Straße", "ΣΟΦΙΑ", "σοφία",
    "Москва", "Ёлка", "東京", "北京大学", "ひらがな", "カタカナ", "서울", "한글",
    "🍕", "👍🏽", "👨\u200d💻", "🏳\ufe0f\u200d⚧\ufe0f", "🥰", "🫠", "[MASK]", "[SEP]", "[cls]",
    "[UNK]", "...", "?!", "—", "«", "»", "„", "\u00a0", "\u2003", "\u200b", "\u200d", "\ufeff",
    "\t", "\r\n", "\n", "\x00", "\x07", "\ufffd", "\u0301", "\u0308", "\u0327", "3.14",
    "1,000", "42", "https://ex.am/ple", "a_b", "x<=y", "f(x)", "∑", "≠", "√", "½", "ﬁ",
    "e\u0301", "o\u0308", "\u1e9b\u0323", "\u0130", "ß", "ẞ", "Ω", "µ", "ǅ", "ǈ", "ῼ",
]
# Blocks sampled for random code point strings: (first, last).
BLOCKS = [
    (0x0020, 0x007E), (0x00A0, 0x024F), (0x0250, 0x036F), (0x0370, 0x052F),
    (0x0590, 0x06FF), (0x0900, 0x0DFF), (0x0E00, 0x0EFF), (0x1000, 0x1FFF),
    (0x2000, 0x2BFF), (0x2C00, 0x2E7F), (0x2E80, 0x33FF), (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF), (0xA000, 0xABFF), (0xAC00, 0xD7AF), (0xF900, 0xFFFD),
    (0x10000, 0x1FFFF), (0x1F300, 0x1FAFF), (0x20000, 0x3134F), (0xE0000, 0xE01EF),
    (0x0000, 0x001F), (0x007F, 0x009F),
]


def random_codepoint(rng):
    lo, hi = rng.choice(BLOCKS)
    while True:
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def random_strings(rng):
    out = []
    for _ in range(200):  # Mixes of words and tricky fragments.
        parts = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            if r < 0.5:
                w = rng.choice(WORDS)
                parts.append(w.upper() if rng.random() < 0.15 else w.capitalize()
                             if rng.random() < 0.2 else w)
            elif r < 0.85:
                parts.append(rng.choice(FRAGMENTS))
            else:
                parts.append("".join(random_codepoint(rng)
                                     for _ in range(rng.randint(1, 4))))
        seps = [" ", " ", " ", "", "\t", "\n", ", ", ". ", "-"]
        out.append("".join(p + rng.choice(seps) for p in parts).rstrip(" "))
    for _ in range(120):  # Random code points, dense in odd blocks.
        out.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 24))))
    for _ in range(20):  # Words near the 100-character limit.
        n = rng.choice([98, 99, 100, 101, 102])
        unit = rng.choice(["a", "é", "中", "ab", "😀", "e\u0301"])
        out.append((unit * n)[:n] if len(unit) == 1 else unit * (n // len(unit)))
    return out


def long_document(rng):
    sentences = [s for s in HANDWRITTEN if len(s) > 30]
    return " ".join(rng.choice(sentences) for _ in range(400))


def bert_normalizer(clean=True, chinese=True, strip=None, lower=True):
    return {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
            "strip_accents": strip, "lowercase": lower}


def added(content, token_id, special=False, normalized=False, lstrip=False, rstrip=False,
          single_word=False):
    return {"id": token_id, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


VARIANTS = [
    ("cased", {"normalizer": bert_normalizer(lower=False, chinese=False)}),
    ("lowercase_keep_accents", {"normalizer": bert_normalizer(strip=False)}),
    ("strip_accents_cased", {"normalizer": bert_normalizer(strip=True, lower=False)}),
    ("no_clean_text", {"normalizer": bert_normalizer(clean=False)}),
    ("no_normalizer_no_decoder", {"normalizer": None, "decoder": None}),
    ("no_pre_tokenizer", {"pre_tokenizer": None}),
    ("added_tokens", {
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "extra_added_tokens": [
            added("<ent>", 1, lstrip=True, rstrip=True),
            added("Hello World", 2, normalized=True),
            added("wow", 3, single_word=True),
            added("[SPECIAL]", 4, special=True),
            added("<ent>x", 5),
            added("Ünï", 6, normalized=True, single_word=True),
        ]}),
]
VARIANT_TEXTS = [
    "a <ent> b", "x<ent>y", "  <ent>  ", "<ent><ent> <ent>x <ent>xy", "\t<ent>\u3000z",
    "Hello World hello world HELLO WORLD HelloWorld", "say Hello   World",
    "wow wowza swow wow! _wow wow_ 1wow wow1 éwow wow\u0301 (wow)",
    "[SPECIAL] text [special] [SPECIAL][SPECIAL]", "ünï Ünï UNI xÜnï",
    "the \u0130stanbul \u0130 I\u0307 \u03a3\u0391\u03a3 \u1e9e",
]


def variants(base):
    out = []
    texts = VARIANT_TEXTS + [t for t in HANDWRITTEN if len(t) < 200]
    for name, patch in VARIANTS:
        config = json.loads(json.dumps(base))
        for key, value in patch.items():
            if key == "extra_added_tokens":
                config["added_tokens"] += value
            else:
                config[key] = value
        tok = Tokenizer.from_str(json.dumps(config))
        tok.no_truncation()
        tok.no_padding()
        cases = []
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids)})
        out.append({"name": name, "patch": patch, "cases": cases})
    return out


def to_ranges(cps):
    ranges = []
    for cp in cps:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def unicode_properties():
    def bert(clean=False, chinese=False, strip=False, lower=False):
        return normalizers.BertNormalizer(clean_text=clean, handle_chinese_chars=chinese,
                                          strip_accents=strip, lowercase=lower)
    clean, chinese, strip, lower = (bert(clean=True), bert(chinese=True), bert(strip=True),
                                    bert(lower=True))
    pre = pre_tokenizers.BertPreTokenizer()
    props = {k: [] for k in ("removed", "to_space", "whitespace", "punctuation", "cjk")}
    maps = {"strip_accents": [], "lowercase": []}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cleaned = clean.normalize_str(c)
        if cleaned == "":
            props["removed"].append(cp)
        elif cleaned == " " and c != " ":
            props["to_space"].append(cp)
        words = [w for w, _ in pre.pre_tokenize_str("a" + c + "a")]
        if words == ["a", "a"]:
            props["whitespace"].append(cp)
        elif words == ["a", c, "a"]:
            props["punctuation"].append(cp)
        if chinese.normalize_str(c) == " " + c + " ":
            props["cjk"].append(cp)
        for name, norm in (("strip_accents", strip), ("lowercase", lower)):
            mapped = norm.normalize_str(c)
            if mapped != c:
                maps[name].append([cp, [ord(m) for m in mapped]])
    # Hangul syllables (11,172 of them) are written as ranges, after checking they
    # follow the algorithmic decomposition, to keep the file small.
    strip_removed, hangul, strip_map = [], [], []
    for cp, mapped in maps["strip_accents"]:
        if not mapped:
            strip_removed.append(cp)
        elif 0xAC00 <= cp <= 0xD7A3:
            assert mapped == hangul_jamo(cp), hex(cp)
            hangul.append(cp)
        else:
            strip_map.append([cp, mapped])
    result = {k: to_ranges(v) for k, v in props.items()}
    result["strip_removed"] = to_ranges(strip_removed)
    result["strip_hangul"] = to_ranges(hangul)
    result["strip_accents"] = strip_map
    result["lowercase"] = maps["lowercase"]
    return result


def hangul_jamo(cp):
    """Unicode's algorithmic NFD of a precomposed Hangul syllable."""
    s = cp - 0xAC00
    jamo = [0x1100 + s // 588, 0x1161 + (s % 588) // 28]
    if s % 28:
        jamo.append(0x11A7 + s % 28)
    return jamo


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="models/minilm")
    parser.add_argument("--out", default="tests/fixtures/tokenizer")
    args = parser.parse_args()

    fast = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    fast.no_truncation()
    fast.no_padding()
    vocab_only = tempfile.mkdtemp()
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(args.model, name), vocab_only)
    from_vocab = BertTokenizer.from_pretrained(vocab_only)
    slow = BertTokenizerLegacy.from_pretrained(vocab_only)
    shutil.rmtree(vocab_only)

    rng = random.Random(SEED)
    texts = HANDWRITTEN + random_strings(rng) + [long_document(rng)]
    with open(GPL3, encoding="utf-8") as f:
        texts.append(f.read())

    os.makedirs(args.out, exist_ok=True)
    n_vocab_diff = n_slow_diff = 0
    with open(os.path.join(args.out, "wordpiece_minilm.jsonl"), "w", encoding="utf-8") as out:
        for text in texts:
            ids = fast.encode(text, add_special_tokens=False).ids
            row = {"text": text, "ids": ids, "decoded": fast.decode(ids)}
            vocab_ids = from_vocab(text, add_special_tokens=False)["input_ids"]
            if vocab_ids != ids:
                row["vocab_ids"] = vocab_ids
                n_vocab_diff += 1
            slow_ids = slow(text, add_special_tokens=False)["input_ids"]
            if slow_ids != ids:
                row["slow_ids"] = slow_ids
                n_slow_diff += 1
            out.write(json.dumps(row, ensure_ascii=True) + "\n")
    with open(os.path.join(args.model, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    with open(os.path.join(args.out, "variants.json"), "w", encoding="utf-8") as out:
        out.write("[\n" + ",\n".join(json.dumps(v, ensure_ascii=True) for v in variants(base))
                  + "\n]\n")
    with open(os.path.join(args.out, "unicode_properties.json"), "w", encoding="utf-8") as out:
        props = unicode_properties()
        # One key per line keeps diffs of a regenerated file readable.
        out.write("{\n" + ",\n".join(json.dumps(k) + ":" + json.dumps(v, separators=(",", ":"))
                                      for k, v in props.items()) + "\n}\n")
    print(f"{len(texts)} strings; vocab.txt tokenizer differs on {n_vocab_diff}, "
          f"pure-Python tokenizer on {n_slow_diff}; python {platform.python_version()}, "
          f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
