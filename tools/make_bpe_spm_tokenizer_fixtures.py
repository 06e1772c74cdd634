#!/usr/bin/env python3
"""Write byte-level BPE (BART) and SentencePiece (Pegasus) tokenizer fixtures.

Developer-only. There is no model hub here, so the script trains two small tokenizers on
text every Debian machine has (/usr/share/common-licenses/*, plus a short multilingual
paragraph written below) and records what Hugging Face makes of a few hundred strings with
them. Usage (HF_HUB_OFFLINE=1 is set by the script):

    /root/.cache/docsparse/ref-venv/bin/python tools/make_bpe_spm_tokenizer_fixtures.py \
        --out tests/fixtures/bpe_spm --tf4-python /root/.cache/docsparse/ref-venv-tf4/bin/python

The main venv has transformers 5 / tokenizers 0.23 / sentencepiece (PyPI). transformers 5 no
longer has a sentencepiece-backed ("slow") PegasusTokenizer, so the slow reference comes
from a second venv with transformers 4.57 (`pip install "transformers<5" sentencepiece
protobuf`), run as a subprocess of this script (--tf4-worker). See
tests/fixtures/bpe_spm/README.md for what every file holds.
"""

import argparse
import glob
import io
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEED = 20240917
BPE_VOCAB_SIZE = 4000
SPM_VOCAB_SIZE = 2500  # The corpus is too small for a 3k unigram vocabulary.
LICENSES = "/usr/share/common-licenses"
# Framed ids (with the special tokens HF adds) are recorded for strings shorter than this.
FRAMED_MAX_CHARS = 200
# One long text per tokenizer, rebuilt by the tests from the case file, long enough that
# SentencePiece's running score passes 1e5 (where sentencepiece 0.2 re-bases it).
LONG_TEXT_RECIPE = "the texts of the string cases in file order, that list 3 times, joined by \\n"

# Seen in training, so that accents, Greek, Cyrillic, CJK and emoji get pieces of their own
# (each line three times: BPE merges need two occurrences).
SUPPLEMENT = """\
Le café crème et la crème brûlée sont délicieux ; naïve façade, où est l'hôtel ?
Größere Straßen führen über die Brücke nach Zürich; Äpfel, Öl und Übermut.
¿Dónde está la estación? El niño comió jalapeños en São Paulo y Bogotá.
Ελληνικά: η γλώσσα των φιλοσόφων, Αθήνα και Θεσσαλονίκη.
Русский текст: Москва, Санкт-Петербург, ёлка и съешь же ещё этих булок.
中文分词测试：我爱北京天安门。北京大学的学生在图书馆学习。
日本語のテキスト、ひらがなとカタカナ。東京タワーは高いです。
한국어 텍스트입니다. 서울특별시에서 만나요.
العربية لغة جميلة، مرحبا بكم. עברית: שלום עולם.
हिन्दी देवनागरी लिपि में लिखी जाती है। नमस्ते दुनिया।
Emoji: I love pizza 🍕 and 🎉 parties 😀😃 👍🏽 ❤️ ✨.
Math: ∀x ∈ ℝ, x² ≥ 0; ∑ aᵢ ≤ ∞; π ≈ 3.14159; €50, £20, ¥1000.
"""

HANDWRITTEN = [
    "",
    " ",
    "  ",
    "\n",
    "Hello, world!",
    "Hello world",
    " Hello world",
    "Hello world ",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX, the Quick Brown Fox.",
    # Contractions: the GPT-2 regex splits 's 't 're 've 'm 'll 'd, lowercase only.
    "I can't believe it's not butter; they're here, we've won, I'm done, you'll see, he'd go.",
    "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D",
    "'s 't 're 've 'm 'll 'd 'x '' ''s 'S ' s",
    "don’t it’s rock ’n’ roll ‘quoted’",
    "rock'n'roll o'clock y'all ma'am 'tis '90s",
    "Don't do not stop -- 'quoted' and \"double\" ... ok?!",
    "Hello , world . Isn ' t it ? Yes ! I ' m sure",
    # Whitespace runs.
    "two  spaces   three    four",
    "   leading and trailing   ",
    "tab\tseparated\tvalues\t",
    "line one\nline two\n\nparagraph\n\n\n",
    "windows\r\nline\r\nendings\rcarriage",
    " \t \n mixed \n\t whitespace \t\n ",
    "non\u00a0breaking\u00a0space and\u2003em\u2002en\u2009thin\u3000ideographic",
    "\u0085nel\u2028line sep\u2029para sep\u1680ogham\u202fnarrow\u205fmath",
    "zero\u200bwidth\u200cnon\u200djoiner \ufeffBOM",
    "word \u200b word\u200b \u200b",
    "a \nb  \n c",
    "x" + " " * 20 + "y",
    # Punctuation runs.
    "Wait...what?!?! (really) [no] {yes} <maybe>",
    "!!!???,,,;;;:::---___***",
    "«guillemets» „Anführung“ ‚single‘ 「括弧」 『二重』 【】",
    "em—dash en–dash ‐hyphen ‑nb ‒figure ―bar … ‥ ·middle· •bullet",
    "¡Hola! ¿Qué tal? §1 ¶2 †‡ ※ ‼ ⁉",
    "$100 €50 £20 ¥1000 ₹500 ₿1 ¢ ¤",
    "a.b,c;d:e!f?g",
    "-- -> <- => <= != == === !== && || ::",
    # Numbers.
    "0123456789 3.14159 1,000,000 1e-10 -42 +7 0x1F 0b1010",
    "٠١٢٣٤٥٦٧٨٩ ०१२३ ０１２３ ¹²³ ½ ¾ Ⅻ ① ⅷ",
    "Phone: +1 (555) 123-4567, ISBN 978-3-16-148410-0",
    "year2024 2024year v1.2.3 3rd 21st 1990s",
    # Accents and combining marks (NFC and NFD forms).
    "Café crème brûlée à la mode, naïve façade, jalapeño, São Paulo",
    "CAFÉ CRÈME BRÛLÉE ÀÉÎÕÜ Ñ Ç Ø Å Æ Œ",
    "e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 u\u030a i\u0302",
    "a\u0315\u0300\u0323 \u1e9b\u0323 q\u0307\u0323 \u1e0b\u0323",
    "Zalgo: h\u0336\u0358e\u0334\u0361l\u0335\u035cl\u0337o\u0338",
    "ﬁ ﬂ ﬃ Ⅻ ① ㎏ ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "Ångström, Øresund, Þórsmörk, Ðað, İstanbul, ıslak, Straße, ẞ",
    # Scripts.
    "Ελληνικά: ΟΔΥΣΣΕΥΣ ὀδυσσεύς Σίσυφος ς σ",
    "Русский текст: ПРИВЕТ, мир! Ёжик в тумане.",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、ひらがなとカタカナ。東京タワー！",
    "한국어 텍스트입니다. 서울특별시",
    "混合English和中文mixed",
    "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 𰀀 丽 刃",
    # Right-to-left text and bidi controls.
    "العربية: مرحبا بكم في عالم النصوص",
    "עברית עם ניקוד: שָׁלוֹם; العربية: مَرْحَبًا",
    "mixed English עברית and العربية 123",
    "\u202eRLO override\u202c and \u2066isolate\u2069 \u200fRLM\u200e",
    "हिन्दी देवनागरी, বাংলা, தமிழ், ไทย ภาษา, ລາວ",
    "ქართული, Հայերեն, አማርኛ, ᏣᎳᎩ, ᚠᚢᚦ",
    # Emoji.
    "I love pizza 🍕 and 🎉 parties 😀😃😄",
    "family 👨\u200d👩\u200d👧\u200d👦 and 🏳\ufe0f\u200d🌈 flag",
    "thumbs 👍🏻👍🏼👍🏽👍🏾👍🏿 wave 👋🏽",
    "recent 🥰 🫠 🫶 🪿 🩷 🫨 🐦\u200d🔥 🍋\u200d🟩",
    "keycaps 1\ufe0f\u20e3 #\ufe0f\u20e3 flags 🇫🇷🇯🇵",
    "😀" * 12,
    # Control characters, U+FFFD, private use, noncharacters.
    "ctrl\x00null\x01soh\x07bell\x08bs\x0bvt\x0cff\x1bescape\x7fdel",
    "c1\x80\x85\x9f controls \x1c\x1d\x1e\x1f",
    "replacement \ufffd char \ufffd\ufffd",
    "soft\u00adhyphen",
    "private use \ue000\uf8ff\U000f0000 end",
    "noncharacters \ufdd0 \uffff \U0010fffe",
    "tags \U000e0001\U000e0041 and variation \ufe00 \U000e0100",
    # Code and markup.
    "https://example.com/path?query=1&x=y#frag",
    "mailto:someone@example.org and ftp://files.example.net/a_b-c.txt",
    "int main(int argc, char** argv) { return argv[0][0] == '-'; }",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x**2}  # comment",
    "<div class=\"x\">Hello &amp; goodbye</div>",
    "snake_case_name camelCaseName PascalCase kebab-case SCREAMING_CASE",
    "∀x ∈ ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≤ ∞ ⇒ ∫₀¹ f(x) dx ≈ π",
    # Very long words.
    "a" * 100,
    "a" * 1000,
    "supercalifragilisticexpialidocious" * 3,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "é" * 200,
    "中" * 150,
    "x" * 300 + " short",
    "ab" * 250,
    # Sentences.
    "Sparse attention lets transformers read documents of 64k tokens.",
    "On 12 March 2024, the committee approved the €2.5bn budget (see §4.2).",
    "Dr. Smith's patients—aged 18–65—reported fewer side-effects.",
    "\"Are you sure?\" she asked. \"Yes,\" he replied, \"I'm certain.\"",
    "The U.S.A. and the U.K. signed the agreement in N.Y.C. at 3 p.m.",
    "Permission is hereby granted, free of charge, to any person obtaining a copy",
    "THIS SOFTWARE IS PROVIDED \"AS IS\" AND ANY EXPRESS OR IMPLIED WARRANTIES",
]

# Special tokens of each tokenizer inside text: alone, glued to words, with spaces around
# (BART's <mask> has lstrip=True), in other cases, nested and repeated.
BART_SPECIAL_TEXTS = [
    "<mask>", " <mask>", "<mask> ", "  <mask>  ", "The capital of France is <mask>.",
    "The capital of France is<mask>.", "a <mask> b <mask>c<mask> d", "<mask><mask> <mask>",
    "\t<mask>\n<mask>\u3000<mask>", "<s>Hello</s>", "<s> Hello </s>", "Hello <s> world",
    "<pad><pad> x <unk> y </s>", "<MASK> <Mask> < mask> <mask", "<<mask>> <s<mask>>",
    "text</s><s>more text", "<s>" * 3 + "x" + "</s>" * 3, "email <me@x.org> <mask>@<mask>",
]
PEGASUS_SPECIAL_TEXTS = [
    "<mask_1>", "<mask_2>", " <mask_1> ", "The capital of France is <mask_2>.",
    "<mask_1> It is sunny. <mask_1> It rains.", "a<mask_2>b <mask_2> c", "</s>", "x </s> y",
    "<pad> x <unk> y </s>", "<unk_2> <unk_10>x<unk_102> <unk_103> <unk_1> <unk_0>",
    "<s> is not special here </s>", "<MASK_1> <mask_3> <mask_12> <mask_", "<<mask_1>>",
    "<unk>" * 3, "text</s>more", "  </s>  ", "\t<mask_2>\n",
]

WORDS = (
    "the of and to in is was for on that with as by at from his her an were are which "
    "this be or has had not but what all when can there who been one so if would more "
    "license software copyright distribute modify warranty permission source notice "
    "transformer attention sparse document embedding tokenizer model budget density "
    "running jumped unbelievable preprocessing internationalization misunderstanding"
).split()
FRAGMENTS = [
    "café", "naïve", "Zürich", "Ærøskøbing", "İstanbul", "Straße", "ΣΟΦΙΑ", "σοφία",
    "Москва", "Ёлка", "東京", "北京大学", "ひらがな", "カタカナ", "서울", "한글", "مرحبا", "שלום",
    "🍕", "👍🏽", "👨\u200d💻", "🏳\ufe0f\u200d⚧\ufe0f", "🥰", "🫠", "...", "?!", "—", "«", "»",
    "„", "\u00a0", "\u2003", "\u200b", "\u200d", "\ufeff", "\t", "\r\n", "\n", "  ", "   ",
    "\x00", "\x07", "\ufffd", "\u0301", "\u0308", "\u0327", "3.14", "1,000", "42", "2024",
    "https://ex.am/ple", "a_b", "x<=y", "f(x)", "∑", "≠", "√", "½", "ﬁ", "e\u0301", "o\u0308",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't", "'S", "’s", "''",
]
# Blocks sampled for random code point strings: (first, last).
BLOCKS = [
    (0x0020, 0x007E), (0x00A0, 0x024F), (0x0250, 0x036F), (0x0370, 0x052F),
    (0x0590, 0x06FF), (0x0900, 0x0DFF), (0x0E00, 0x0EFF), (0x1000, 0x1FFF),
    (0x2000, 0x2BFF), (0x2C00, 0x2E7F), (0x2E80, 0x33FF), (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF), (0xA000, 0xABFF), (0xAC00, 0xD7AF), (0xF900, 0xFFFD),
    (0x10000, 0x1FFFF), (0x1F300, 0x1FAFF), (0x20000, 0x3134F), (0xE0000, 0xE01EF),
    (0x0000, 0x001F), (0x007F, 0x009F),
    # Letters and digits assigned in Unicode 15.1-16.0 (newer than ICU 72).
    (0x105C0, 0x105F3), (0x11380, 0x113D3), (0x16D40, 0x16D79), (0x2EBF0, 0x2EE5D),
]


def random_codepoint(rng):
    lo, hi = rng.choice(BLOCKS)
    while True:
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def random_strings(rng, specials, count):
    out = []
    for _ in range(count):  # Mixes of words, tricky fragments and special tokens.
        parts = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            if r < 0.45:
                w = rng.choice(WORDS)
                parts.append(w.upper() if rng.random() < 0.15 else w.capitalize()
                             if rng.random() < 0.2 else w)
            elif r < 0.8:
                parts.append(rng.choice(FRAGMENTS))
            elif r < 0.88:
                parts.append(rng.choice(specials))
            else:
                parts.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 4))))
        seps = [" ", " ", " ", "", "  ", "\t", "\n", ", ", ". ", "-", "'"]
        out.append("".join(p + rng.choice(seps) for p in parts))
    for _ in range(count // 2):  # Random code points, dense in odd blocks.
        out.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 24))))
    return out


def license_texts():
    """Regular files of /usr/share/common-licenses, sorted by name."""
    out = []
    for path in sorted(glob.glob(os.path.join(LICENSES, "*"))):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                out.append(f.read())
    return out


def corpus_lines():
    lines = []
    for text in license_texts():
        lines += [line for line in text.split("\n") if line.strip()]
    return lines + [line for line in SUPPLEMENT.split("\n") if line] * 3


def fixture_texts(specials, rng):
    """The strings of one tokenizer: hand-written, special tokens, license excerpts, random."""
    texts = HANDWRITTEN + specials
    licenses = license_texts()
    for _ in range(20):  # License excerpts of 1 to 30 lines, whitespace kept.
        lines = rng.choice(licenses).split("\n")
        start = rng.randrange(len(lines))
        texts.append("\n".join(lines[start:start + rng.randint(1, 30)]))
    texts += random_strings(rng, specials, 150)
    with open(os.path.join(LICENSES, "Apache-2.0"), encoding="utf-8") as f:
        texts.append(f.read())  # One long document.
    return texts


def random_id_lists(rng, vocab_size, special_ids, count):
    """Id sequences for decode-only cases: random pieces (so partial UTF-8 sequences for
    byte-level BPE) with special ids mixed in."""
    out = []
    for _ in range(count):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randint(0, 30))]
        for _ in range(rng.randint(0, 3)):
            ids.insert(rng.randint(0, len(ids)), rng.choice(special_ids))
        out.append(ids)
    return out


# ------------------------------------------------------------------------------ BPE --


def train_bpe(out_dir):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import AddedToken, BartTokenizerFast

    tok = ByteLevelBPETokenizer(add_prefix_space=False, trim_offsets=True)
    tok.train_from_iterator(corpus_lines(), vocab_size=BPE_VOCAB_SIZE, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                            show_progress=False)
    trained = json.loads(tok.to_str())
    vocab = dict(trained["model"]["vocab"])
    vocab["<mask>"] = len(vocab)  # Last, as in facebook/bart-*.
    merges = [tuple(m) for m in trained["model"]["merges"]]
    bart = BartTokenizerFast(
        vocab=vocab, merges=merges, model_max_length=1024,
        mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False,
                              special=True))
    bart.save_pretrained(out_dir)
    config_path = os.path.join(out_dir, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    for key in ("is_local", "local_files_only"):  # Where it was loaded from: not config.
        config.pop(key, None)
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def added(content, special=False, normalized=False, lstrip=False, rstrip=False,
          single_word=False):
    return {"id": 0, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def bytes_to_unicode():
    """GPT-2's byte -> character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def apply_bpe_patch(base, patch):
    """`base` (a tokenizer.json) with `patch` applied: "set" maps JSON pointers to new values,
    "remove_vocab" lists tokens to drop, "legacy_merges" writes merges as "a b" strings,
    "append_added_tokens" extends added_tokens. The C++ test applies the same patches."""
    out = json.loads(json.dumps(base))
    for pointer, value in patch.get("set", {}).items():
        *path, last = pointer.lstrip("/").split("/")
        node = out
        for key in path:
            node = node[key]
        node[last] = value
    for token in patch.get("remove_vocab", []):
        del out["model"]["vocab"][token]
    if patch.get("legacy_merges"):
        out["model"]["merges"] = [" ".join(m) for m in out["model"]["merges"]]
    out["added_tokens"] += patch.get("append_added_tokens", [])
    return out


def bpe_variants(base, config, texts):
    """The same tokenizer.json with other settings; reference = `tokenizers` on the patched
    file (what the file says), and transformers' decode for the tokenizer_config.json flags."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    byte_chars = bytes_to_unicode()
    removable = [c for c in (byte_chars[b] for b in range(0x80, 0xC0))
                 if c in base["model"]["vocab"]
                 and not any(c in a or c in b for a, b in base["model"]["merges"])]
    assert len(removable) >= 4, removable
    removed = removable[:4]
    variants = [
        ("add_prefix_space", {"set": {"/pre_tokenizer/add_prefix_space": True}}, {}),
        ("no_regex", {"set": {"/pre_tokenizer/use_regex": False}}, {}),
        ("no_regex_prefix_space", {"set": {"/pre_tokenizer/use_regex": False,
                                           "/pre_tokenizer/add_prefix_space": True}}, {}),
        ("legacy_merges", {"legacy_merges": True}, {}),
        ("ignore_merges", {"set": {"/model/ignore_merges": True}}, {}),
        ("unk_token", {"set": {"/model/unk_token": "<unk>"}, "remove_vocab": removed}, {}),
        ("unk_token_fused", {"set": {"/model/unk_token": "<unk>", "/model/fuse_unk": True},
                             "remove_vocab": removed}, {}),
        ("no_unk_token", {"remove_vocab": removed}, {}),
        ("no_decoder", {"set": {"/decoder": None}}, {}),
        ("added_tokens", {"append_added_tokens": [
            added("<ent>", lstrip=True, rstrip=True),
            added("Hello World", normalized=True),
            added("wow", single_word=True),
            added("[SPECIAL]", special=True),
            added("<ent>x"),
            added("Ünï", normalized=True, single_word=True),
            added(" spaced token "),
            added("the"),  # Already in the vocabulary: keeps its id.
        ]}, {}),
        # transformers 5 skips clean_up_tokenization for BPE models unless told twice.
        ("cleanup_flag_ignored", {}, {"clean_up_tokenization_spaces": True}),
        ("cleanup_forced", {}, {
            "clean_up_tokenization_spaces": True,
            "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True}),
    ]
    variant_texts = [
        "a <ent> b", "x<ent>y", "  <ent>  ", "<ent><ent> <ent>x <ent>xy", "\t<ent>\u3000z",
        "Hello World hello world HELLO WORLD HelloWorld", "say Hello   World",
        "wow wowza swow wow! _wow wow_ 1wow wow1 éwow wow\u0301 (wow)",
        "[SPECIAL] text [special] [SPECIAL][SPECIAL]", "ünï Ünï UNI xÜnï",
        "a spaced token b  spaced token  the theory", "🍕🍕 x 😀 é ñ ü 中文",
    ] + [t for t in texts if len(t) < 200][:70]
    out = []
    tmp = tempfile.mkdtemp()
    for name, patch, config_patch in variants:
        tok_json = apply_bpe_patch(base, patch)
        tok = Tokenizer.from_str(json.dumps(tok_json))
        cleanup = None
        if config_patch:  # Decode through transformers, which reads these flags.
            folder = os.path.join(tmp, name)
            os.makedirs(folder)
            with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
                json.dump(tok_json, f)
            with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(dict(config, **config_patch), f)
            cleanup = AutoTokenizer.from_pretrained(folder)
        cases = []
        for text in variant_texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = (cleanup.decode(ids, skip_special_tokens=True) if cleanup
                       else tok.decode(ids, skip_special_tokens=True))
            cases.append({"text": text, "ids": ids, "decoded": decoded})
        out.append({"name": name, "patch": patch, "config_patch": config_patch, "cases": cases})
    shutil.rmtree(tmp)
    return out


# ---------------------------------------------------------------------- SentencePiece --


def train_spm(out_dir):
    import sentencepiece as spm

    model = io.BytesIO()
    # Pegasus' layout: <pad>=0, </s>=1, <unk>=2, no <s>; NFKC normalization (nmt_nfkc, the
    # default), a dummy prefix and whitespace collapsing. One thread and no shuffling make
    # the model the same on every run.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines()), model_writer=model, model_type="unigram",
        vocab_size=SPM_VOCAB_SIZE, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=1.0, num_threads=1, shuffle_input_sentence=False, minloglevel=2)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "spiece.model"), "wb") as f:
        f.write(model.getvalue())


def write_pegasus_config(out_dir):
    """tokenizer_config.json as transformers 5 writes it for PegasusTokenizer (less the
    load-time keys), with Pegasus' model_max_length."""
    from transformers import PegasusTokenizer

    tok = PegasusTokenizer.from_pretrained(out_dir)
    tmp = tempfile.mkdtemp()
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    shutil.rmtree(tmp)
    for key in ("is_local", "local_files_only"):
        config.pop(key, None)
    config["model_max_length"] = 1024
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


# ------------------------------------------------------------- transformers 4 worker --


def tf4_worker(in_path, out_path):
    """Runs in the transformers 4 venv: slow (sentencepiece) and fast PegasusTokenizer, and
    the pure-Python BartTokenizer, on the strings and id lists of `in_path`."""
    import sentencepiece
    import tokenizers
    import transformers
    from transformers import BartTokenizer, PegasusTokenizer, PegasusTokenizerFast

    with open(in_path, encoding="utf-8") as f:
        job = json.load(f)
    slow = PegasusTokenizer(vocab_file=job["spiece"])
    fast = PegasusTokenizerFast(vocab_file=job["spiece"], from_slow=True)
    bart = BartTokenizer(vocab_file=job["bart_vocab"], merges_file=job["bart_merges"])
    result = {"versions": {"transformers": transformers.__version__,
                           "tokenizers": tokenizers.__version__,
                           "sentencepiece": sentencepiece.__version__,
                           "python": platform.python_version()},
              "pegasus": [], "pegasus_decode": [], "bart": []}
    for text in job["pegasus_texts"]:
        ids = slow(text, add_special_tokens=False)["input_ids"]
        fast_ids = fast(text, add_special_tokens=False)["input_ids"]
        result["pegasus"].append({
            "ids": ids, "decoded": slow.decode(ids, skip_special_tokens=True),
            "decoded_cleanup": slow.decode(ids, skip_special_tokens=True,
                                           clean_up_tokenization_spaces=True),
            "framed": slow(text)["input_ids"],
            "fast_ids": fast_ids,
            "fast_decoded": fast.decode(fast_ids, skip_special_tokens=True)})
    for ids in job["pegasus_decode_ids"]:
        result["pegasus_decode"].append(slow.decode(ids, skip_special_tokens=True))
    for text in job["bart_texts"]:
        result["bart"].append(bart(text, add_special_tokens=False)["input_ids"])
    text = long_text(job["pegasus_texts"])
    ids = slow(text, add_special_tokens=False)["input_ids"]
    result["pegasus_long"] = {"ids": ids, "decoded": slow.decode(ids, skip_special_tokens=True),
                              "fast_ids": fast(text, add_special_tokens=False)["input_ids"]}
    result["bart_long"] = bart(long_text(job["bart_texts"]), add_special_tokens=False)["input_ids"]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


def run_tf4_worker(python, job):
    tmp = tempfile.mkdtemp()
    in_path, out_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
    with open(in_path, "w", encoding="utf-8") as f:
        json.dump(job, f)
    subprocess.run([python, os.path.abspath(__file__), "--tf4-worker", in_path, out_path],
                   check=True)
    with open(out_path, encoding="utf-8") as f:
        result = json.load(f)
    shutil.rmtree(tmp)
    return result


# ------------------------------------------------------------------------ Unicode --


def gpt2_regex_classes():
    """\\p{L}, \\p{N} and \\s as the GPT-2 split regex of `tokenizers` (Oniguruma) sees them,
    as [first, last] code point ranges."""
    from tokenizers import Regex, normalizers

    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)

    def ranges(negated_class):
        kept = normalizers.Replace(Regex(negated_class), "").normalize_str(everything)
        out = []
        for cp in map(ord, kept):
            if out and out[-1][1] == cp - 1:
                out[-1][1] = cp
            else:
                out.append([cp, cp])
        return out

    return {"letter": ranges(r"[^\p{L}]"), "number": ranges(r"[^\p{N}]"),
            "whitespace": ranges(r"\S")}


# -------------------------------------------------------------------------- main --


def fnv1a64(data):
    """FNV-1a (64 bit) of bytes: a checksum the C++ tests recompute, so that long outputs
    need not be stored."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def long_text(texts):
    return "\n".join(texts * 3)


def long_case(ids, decoded):
    """A summary of HF's output for long_text(): sizes, checksums (ids as little-endian
    uint32, text as UTF-8) and both ends of the ids."""
    return {"recipe": LONG_TEXT_RECIPE, "n_ids": len(ids),
            "ids_fnv1a64": fnv1a64(b"".join(i.to_bytes(4, "little") for i in ids)),
            "first_ids": ids[:32], "last_ids": ids[-32:],
            "decoded_bytes": len(decoded.encode("utf-8")),
            "decoded_fnv1a64": fnv1a64(decoded.encode("utf-8"))}


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/bpe_spm")
    parser.add_argument("--tf4-python", default="/root/.cache/docsparse/ref-venv-tf4/bin/python")
    parser.add_argument("--tf4-worker", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf4_worker:
        tf4_worker(*args.tf4_worker)
        return

    import sentencepiece
    import tokenizers
    import transformers
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PegasusTokenizer

    bart_dir = os.path.join(args.out, "bart_tokenizer")
    pegasus_dir = os.path.join(args.out, "pegasus_tokenizer")
    for folder in (bart_dir, pegasus_dir):
        shutil.rmtree(folder, ignore_errors=True)
    train_bpe(bart_dir)
    train_spm(pegasus_dir)
    write_pegasus_config(pegasus_dir)

    bart = AutoTokenizer.from_pretrained(bart_dir)
    bart_raw = Tokenizer.from_file(os.path.join(bart_dir, "tokenizer.json"))
    pegasus = PegasusTokenizer.from_pretrained(pegasus_dir)
    bart_texts = fixture_texts(BART_SPECIAL_TEXTS, random.Random(SEED))
    pegasus_texts = fixture_texts(PEGASUS_SPECIAL_TEXTS, random.Random(SEED + 1))
    bart_decode_ids = random_id_lists(random.Random(SEED + 2), len(bart), [0, 1, 2, 3, 4000], 40)
    pegasus_decode_ids = random_id_lists(random.Random(SEED + 3), len(pegasus),
                                         [0, 1, 2, 3, 4, 50, 104, 105], 40)

    # transformers 4's BartTokenizer reads vocab.json + merges.txt.
    tmp = tempfile.mkdtemp()
    with open(os.path.join(bart_dir, "tokenizer.json"), encoding="utf-8") as f:
        bart_json = json.load(f)
    with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(bart_json["model"]["vocab"], f)
    with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in bart_json["model"]["merges"]))
    tf4 = run_tf4_worker(args.tf4_python, {
        "spiece": os.path.abspath(os.path.join(pegasus_dir, "spiece.model")),
        "bart_vocab": os.path.join(tmp, "vocab.json"),
        "bart_merges": os.path.join(tmp, "merges.txt"),
        "pegasus_texts": pegasus_texts, "pegasus_decode_ids": pegasus_decode_ids,
        "bart_texts": bart_texts})
    shutil.rmtree(tmp)

    stats = {}
    rows = []
    for text, slow_ids in zip(bart_texts, tf4["bart"]):
        ids = bart(text, add_special_tokens=False)["input_ids"]
        assert bart_raw.encode(text, add_special_tokens=False).ids == ids, text
        row = {"text": text, "ids": ids, "decoded": bart.decode(ids, skip_special_tokens=True)}
        if len(text) < FRAMED_MAX_CHARS:
            row["framed"] = bart(text)["input_ids"]
        if slow_ids != ids:
            row["tf4_slow_ids"] = slow_ids
        rows.append(row)
    for ids in bart_decode_ids:
        rows.append({"decode_ids": ids, "decoded": bart.decode(ids, skip_special_tokens=True)})
    write_jsonl(os.path.join(args.out, "bart_cases.jsonl"), rows)
    stats["bart"] = {"strings": len(bart_texts), "decode_only": len(bart_decode_ids),
                     "tf4_slow_differs": sum("tf4_slow_ids" in r for r in rows)}

    variants = bpe_variants(bart_json, json.load(open(os.path.join(bart_dir,
                                                                   "tokenizer_config.json"))),
                            bart_texts)
    with open(os.path.join(args.out, "bart_variants.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in variants) + "\n]\n")

    rows = []
    counts = {"fast5_ids": 0, "fast5_decoded": 0, "fast4_ids": 0, "fast4_decoded": 0}
    for text, ref in zip(pegasus_texts, tf4["pegasus"]):
        ids = ref["ids"]
        row = {"text": text, "ids": ids, "decoded": ref["decoded"]}
        if len(text) < FRAMED_MAX_CHARS:
            row["framed"] = ref["framed"]
        if ref["decoded_cleanup"] != ref["decoded"]:
            row["decoded_cleanup"] = ref["decoded_cleanup"]
        fast5_ids = pegasus(text, add_special_tokens=False)["input_ids"]
        fast5_decoded = pegasus.decode(fast5_ids, skip_special_tokens=True)
        for key, value, same in (
                ("fast5_ids", fast5_ids, fast5_ids == ids),
                ("fast5_decoded", fast5_decoded, fast5_decoded == ref["decoded"]),
                ("fast4_ids", ref["fast_ids"], ref["fast_ids"] == ids),
                ("fast4_decoded", ref["fast_decoded"], ref["fast_decoded"] == ref["decoded"])):
            if not same:
                row[key] = value
                counts[key] += 1
        rows.append(row)
    for ids, decoded in zip(pegasus_decode_ids, tf4["pegasus_decode"]):
        rows.append({"decode_ids": ids, "decoded": decoded})
    write_jsonl(os.path.join(args.out, "pegasus_cases.jsonl"), rows)
    stats["pegasus"] = dict(strings=len(pegasus_texts), decode_only=len(pegasus_decode_ids),
                            **counts)

    text = long_text(bart_texts)
    ids = bart(text, add_special_tokens=False)["input_ids"]
    assert bart_raw.encode(text, add_special_tokens=False).ids == ids
    long_cases = {"bart": dict(long_case(ids, bart.decode(ids, skip_special_tokens=True)),
                               tf4_slow_agrees=tf4["bart_long"] == ids)}
    ref = tf4["pegasus_long"]
    text = long_text(pegasus_texts)
    long_cases["pegasus"] = dict(
        long_case(ref["ids"], ref["decoded"]), fast4_agrees=ref["fast_ids"] == ref["ids"],
        fast5_agrees=pegasus(text, add_special_tokens=False)["input_ids"] == ref["ids"])
    with open(os.path.join(args.out, "long_cases.json"), "w", encoding="utf-8") as f:
        json.dump(long_cases, f, indent=1)
        f.write("\n")
    stats["long"] = {k: {"chars": len(long_text(t)), "ids": long_cases[k]["n_ids"]}
                     for k, t in (("bart", bart_texts), ("pegasus", pegasus_texts))}

    with open(os.path.join(args.out, "gpt2_regex_classes.json"), "w", encoding="utf-8") as f:
        classes = gpt2_regex_classes()
        f.write("{\n" + ",\n".join(json.dumps(k) + ":" + json.dumps(v, separators=(",", ":"))
                                    for k, v in classes.items()) + "\n}\n")

    meta = {"seed": SEED, "bpe_vocab_size": BPE_VOCAB_SIZE, "spm_vocab_size": SPM_VOCAB_SIZE,
            "stats": stats,
            "versions": {"python": platform.python_version(),
                         "transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__,
                         "sentencepiece": sentencepiece.__version__},
            "tf4_versions": tf4["versions"]}
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(meta, indent=2), file=sys.stderr)


if __name__ == "__main__":
    main()
