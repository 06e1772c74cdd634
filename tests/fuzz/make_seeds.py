#!/usr/bin/env python3
"""Writes the seeds of the tokenizer_json, sentencepiece, tokenizer_encode,
request_bytes and budget fuzz targets (tests/fuzz/<target>_seeds/) from
tests/fixtures/ and models/minilm (scripts/setup). Deterministic: a rerun
rewrites the same bytes. Every seed fits scripts/fuzz's -max_len (4096).

  ~/.cache/docsparse/test-venv/bin/python tests/fuzz/make_seeds.py

The request seeds need protobuf and grpcio-tools (the test venv has both);
the others only the standard library. The formats are the targets' own:
each *_fuzz.cc header says how it reads its input.
"""
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "fuzz"
MAX_LEN = 4096


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= MAX_LEN, f"{target}/{name}: {len(data)} bytes"
    folder = OUT / f"{target}_seeds"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------ tokenizer.json


def small_bart():
    """The BART fixture's tokenizer.json with the special tokens, the 256
    byte characters and the first merges that fit, renumbered; merges as
    "a b" strings (the fixture writes ["a", "b"])."""
    full = json.loads((FIXTURES / "bpe_spm/bart_tokenizer/tokenizer.json").read_text())
    model = full["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    vocab = {}
    for token, _ in by_id[:260]:  # <s> <pad> </s> <unk>, then the bytes
        vocab[token] = len(vocab)
    merges = []
    for left, right in model["merges"]:
        if left in vocab and right in vocab and left + right not in vocab:
            candidate = dict(vocab, **{left + right: len(vocab)})
            merged = merges + [f"{left} {right}"]
            trial = dict(full, model=dict(model, vocab=candidate, merges=merged))
            if len(compact(trial).encode()) > 3600:
                break
            vocab = candidate
            merges.append(f"{left} {right}")
    vocab["<mask>"] = len(vocab)
    for token in full["added_tokens"]:
        token["id"] = vocab[token["content"]]
    full["post_processor"]["cls"][1] = vocab["<s>"]
    full["post_processor"]["sep"][1] = vocab["</s>"]
    full["model"] = dict(model, vocab=vocab, merges=merges)
    return full


def small_minilm():
    """models/minilm's WordPiece tokenizer.json cut to its special tokens,
    characters, common words and continuations, renumbered."""
    full = json.loads((ROOT / "models/minilm/tokenizer.json").read_text())
    by_id = {i: token for token, i in full["model"]["vocab"].items()}
    keep = [0, 100, 101, 102, 103] + list(range(999, 1068)) + list(range(1996, 2060))
    keep += [2015, 2075, 2098, 4895, 3085]  # ##s ##ing ##ed un ##able
    vocab = {by_id[i]: n for n, i in enumerate(keep)}
    for token in full["added_tokens"]:
        token["id"] = vocab[token["content"]]
    full["padding"]["pad_id"] = vocab["[PAD]"]
    for name, special in full["post_processor"]["special_tokens"].items():
        special["ids"] = [vocab[name]]
    full["model"]["vocab"] = vocab
    return full


def tokenizer_json_seeds():
    lsg_input = FIXTURES / "lsg_converter"
    bert = json.loads((lsg_input / "bert/input/tokenizer.json").read_text())
    roberta = json.loads((lsg_input / "roberta/input/tokenizer.json").read_text())
    bart = small_bart()
    bart_config_path = FIXTURES / "bpe_spm/bart_tokenizer/tokenizer_config.json"
    bart_config = json.loads(bart_config_path.read_text())
    write("tokenizer_json", "wordpiece_tiny.json", compact(bert))
    write("tokenizer_json", "bpe_tiny.json", compact(roberta))
    write("tokenizer_json", "bart_small.json", compact(bart))
    write("tokenizer_json", "bart_small_with_config", compact(bart) + "\0" + compact(bart_config))
    write("tokenizer_json", "minilm_small.json", compact(small_minilm()))


# -------------------------------------------------------------- spiece.model


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire_type, payload):
    key = varint(number << 3 | wire_type)
    if wire_type == 0:
        return key + varint(payload)
    if wire_type == 2:
        return key + varint(len(payload)) + payload
    return key + payload  # 5: four bytes already packed


def read_fields(data):
    pos, fields = 0, []
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire_type == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire_type}")
        fields.append((number, wire_type, value))
    return fields


def read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def piece(text, score=0.0, kind=None):
    body = field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score))
    if kind is not None:
        body += field(3, 0, kind)
    return field(1, 2, body)


def darts_charsmap(rules):
    """sentencepiece's precompiled_charsmap for `rules` (source bytes ->
    replacement): <trie bytes, uint32 LE><Darts-clone double array of 256
    units><NUL-terminated replacements>, as SentencePieceModel reads it."""
    replacements, values = b"", {}
    for source, target in rules.items():
        values[source] = len(replacements)
        replacements += target + b"\0"
    units = [0] * 256
    used = {0}
    # A trie of the keys: node -> {label: child}, node -> value.
    children, value_of, root = {}, {}, b""
    for key, value in values.items():
        for i in range(len(key)):
            children.setdefault(key[:i], {})[key[i]] = key[:i + 1]
        value_of[key] = value

    def place(node, index):
        # The node's base: its children sit at base ^ label, its value at base.
        labels = sorted(children.get(node, {}))
        has_value = node in value_of
        for base in range(1, 256):
            slots = [base ^ label for label in labels] + ([base] if has_value else [])
            if all(slot not in used for slot in slots) and base != index:
                break
        else:
            raise ValueError("double array full")
        offset = index ^ base
        assert offset < 1 << 21
        if node == root:
            units[index] = offset << 10
        else:
            units[index] |= offset << 10 | (1 << 8 if has_value else 0)
        used.update(slots)
        if has_value:
            units[base] = 1 << 31 | value_of[node]
        for label in labels:
            child = children[node][label]
            units[base ^ label] = label
            place(child, base ^ label)

    place(root, 0)
    trie = b"".join(struct.pack("<I", unit) for unit in units)
    return struct.pack("<I", len(trie)) + trie + replacements


def sentencepiece_seeds():
    data = (FIXTURES / "bpe_spm/pegasus_tokenizer/spiece.model").read_bytes()
    top = read_fields(data)
    pieces = [field(1, 2, value) for number, _, value in top if number == 1]
    trainer = next(field(2, 2, value) for number, _, value in top if number == 2)
    # The normalizer's name and flags, without its 240 KB character map.
    normalizer_fields = [(n, w, v) for n, w, v in read_fields(
        next(value for number, _, value in top if number == 3)) if n != 2]
    normalizer = field(3, 2, b"".join(field(n, w, v) for n, w, v in normalizer_fields))
    cut = b""
    for count in range(len(pieces)):
        candidate = b"".join(pieces[:count]) + trainer + normalizer
        if len(candidate) > 3000:
            break
        cut = candidate
    write("sentencepiece", "pegasus_cut.model", cut)

    # Full-width letters, a ligature, a composed accent, an ideographic
    # space and a tab, as NFKC maps them; the longest rule wins.
    charsmap = darts_charsmap({
        "\uff21".encode(): b"A",
        "\uff42".encode(): b"b",
        "\ufb01".encode(): b"fi",
        "e\u0301".encode(): "\u00e9".encode(),
        "\u3000".encode(): b" ",
        b"\t": b" ",
    })
    normalizer = field(3, 2, field(1, 2, b"custom") + field(2, 2, charsmap))
    write("sentencepiece", "charsmap.model",
          b"".join(pieces[:60]) + piece("\u00e9", -5.0) + piece("fi", -6.0) + trainer + normalizer)

    # Every piece type but byte, and every normalizer and trainer flag
    # turned from its default.
    flagged = (piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) +
               piece("\u2581the", -1.0) + piece("\u2581a", -2.0) + piece("t", -3.0) +
               piece("h", -3.5) + piece("e", -3.2) + piece("<sep>", 0, 4) + piece("xyz", -9.0, 5) +
               piece("a\u2581b", -4.0) + piece("\u2581", -2.5))
    trainer = field(2, 2, field(3, 0, 1) + field(24, 0, 1) + field(44, 2, b"<?>"))
    normalizer = field(3, 2, field(1, 2, b"identity") + field(3, 0, 0) + field(4, 0, 0) +
                       field(5, 0, 1))
    write("sentencepiece", "flags.model", flagged + trainer + normalizer)


# ---------------------------------------------------------- tokenizer_encode


def tokenizer_encode_seeds():
    # Selector 0: minilm tokenizer.json, 1: minilm vocab.txt, 2: BART, 3: Pegasus.
    family = {
        0: "[CLS] Hello, [MASK] world! Don't stop. [SEP]",
        1: "[CLS] unaffable [UNK] naïve [SEP]",
        2: "<s>Hello, <mask> world! Don't stop.</s> <pad>",
        3: "<pad></s><mask_1> Hello, <mask_2> world!<unk_5> <unk>",
    }
    shared = ("Caf\u00e9 na\u00efve \u65e5\u672c\u8a9e "
              "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac "
              "\u0440\u0443\u0441\u0441\u043a\u0438\u0439 \U0001F600 \ufb01ne \uff21  \t end")
    broken = b"abc\xff\xfe \xc3 \xe2\x96 def\x00\x01 \xf0\x9f\x98"
    for selector in range(4):
        write("tokenizer_encode", f"{selector}_family",
              bytes([selector, 40]) + family[selector].encode())
        write("tokenizer_encode", f"{selector}_unicode", bytes([selector, 7]) + shared.encode())
        write("tokenizer_encode", f"{selector}_invalid_utf8", bytes([selector, 0]) + broken)


# ------------------------------------------------------------ request_bytes


def request_bytes_seeds():
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                        f"--python_out={out}", "docsparse/v1/docsparse.proto"], check=True)
        sys.path.insert(0, out)
        from docsparse.v1 import docsparse_pb2 as v1

    text = "the cat is on the mat and it was not a dog . the end"
    embed = v1.EmbedRequest(document=v1.Document(text=text))
    embed.budget.max_density = 0.5
    write("request_bytes", "embed_text", b"E" + embed.SerializeToString())

    lsg = v1.EmbedRequest(model="lsg", document=v1.Document(text=text * 3))
    lsg.budget.knobs["block_size"] = 4
    lsg.budget.knobs["sparsity_factor"] = 2
    lsg.options.overflow = v1.OVERFLOW_REJECT
    write("request_bytes", "embed_lsg_knobs", b"E" + lsg.SerializeToString())

    ids = v1.EmbedRequest(model="tiny",
                          document=v1.Document(token_ids=v1.TokenIds(ids=[5, 6, 7, 1])))
    ids.options.overflow = v1.OVERFLOW_TRUNCATE
    write("request_bytes", "embed_token_ids", b"E" + ids.SerializeToString())

    pattern = v1.EmbedRequest(document=v1.Document(text=text * 4))
    pattern.budget.attention = v1.ATTENTION_KIND_LONGFORMER
    pattern.budget.knobs["window"] = 8
    pattern.budget.max_attention_gflops = 0.0001
    pattern.budget.strict = True
    pattern.options.request_id = "seed-1"
    write("request_bytes", "embed_longformer_strict", b"E" + pattern.SerializeToString())

    classify = v1.ClassifyRequest(document=v1.Document(text=text), labels=["law", "code"])
    classify.budget.attention = v1.ATTENTION_KIND_BIGBIRD
    classify.budget.seed = 7
    classify.temperature = 0.1
    write("request_bytes", "classify_bigbird", b"C" + classify.SerializeToString())

    # A knob name is echoed in the refusal: this one was, whole (2 KB).
    long_knob = v1.EmbedRequest(document=v1.Document(text=text))
    long_knob.budget.knobs["x" * 2000] = 1
    write("request_bytes", "embed_long_knob_name", b"E" + long_knob.SerializeToString())

    summarize = v1.SummarizeRequest(document=v1.Document(utf8_bytes=((text + " ") * 2).encode()))
    summarize.extractive.max_sentences = 2
    summarize.budget.edge_regularization = 1.5
    write("request_bytes", "summarize_bytes", b"S" + summarize.SerializeToString())


# ------------------------------------------------------------------- budget

# The planners' knob names, sorted as std::map keeps them: a name byte k
# picks names[k], k == len(names) a name no planner has.
KINDS = ["dense", "lsg", "sbm", "longformer", "bigbird", "sparse_transformer", "star"]
KNOBS = {
    "dense": [],
    "lsg": ["block_size", "num_global_tokens", "sparse_block_size", "sparsity_factor"],
    "sbm": ["edge_regularization", "target_density"],
    "longformer": ["dilated_heads", "dilation", "global_tokens", "window"],
    "bigbird": ["block_size", "dense_up_to", "global_blocks", "last_block_global",
                "random_at_first_block", "random_blocks", "window_blocks"],
    "sparse_transformer": ["fixed_heads", "stride", "summary"],
    "star": ["radius", "relay_tokens"],
}
SPARSITIES = ["none", "norm", "pooling", "lsh", "stride", "block_stride", "bos_pooling"]


def number(value):
    """budget_fuzz.cc's Input::Number encoding of `value`."""
    if value != value:
        return bytes([2])
    if value == float("inf"):
        return bytes([3])
    if value == 0.5:
        return bytes([9])
    if float(value).is_integer() and 0 <= value < 256:
        return bytes([11, int(value)])
    return bytes([14]) + struct.pack("<d", value)


def tokens(count):
    """Input::Tokens: the two-byte form, count % 16385."""
    return bytes([3]) + struct.pack("<H", count)


def budget_seed(kind, shape=0, lsg=None, configured=(), request=(), cap=(0, 0), lengths=(512,)):
    names = KNOBS[kind]
    out = bytes([KINDS.index(kind), shape])
    out += bytes([SPARSITIES.index(lsg[0]), lsg[1] - 1]) if lsg else bytes([200])
    if kind != "sbm":  # SBM's planner is made once, without docsparse.json knobs.
        out += bytes([len(configured)])
        for name, value in configured:
            out += bytes([names.index(name) if name in names else len(names)]) + number(value)
    out += bytes([len(request)])
    for name, value in request:
        out += bytes([names.index(name) if name in names else len(names)]) + number(value)
    out += bytes([cap[0]]) + number(cap[1])
    out += bytes([len(lengths) - 1]) + b"".join(tokens(n) for n in lengths)
    return out


def budget_seeds():
    seeds = {
        "dense_density": budget_seed("dense", cap=(1, 0.5), lengths=(512, 100)),
        "lsg_norm_density": budget_seed("lsg", lsg=("norm", 1), request=[("block_size", 64)],
                                        cap=(1, 0.05), lengths=(1024, 1000)),
        "lsg_pooling_gflops": budget_seed("lsg", 2, lsg=("pooling", 4),
                                          configured=[("sparse_block_size", 32)],
                                          cap=(2, 0.5), lengths=(16384,)),
        "sbm_density": budget_seed("sbm", request=[("edge_regularization", 2)], cap=(1, 0.5),
                                   lengths=(3000, 511)),
        "longformer_window": budget_seed("longformer", 1, request=[("window", 64), ("dilation", 2)],
                                         cap=(1, 0.1), lengths=(1500,)),
        "bigbird_configured": budget_seed("bigbird", lsg=("stride", 2),
                                          configured=[("block_size", 32)],
                                          request=[("random_blocks", 2)], cap=(2, 0.01),
                                          lengths=(2000, 1)),
        # transformers' layout, as a BigBird checkpoint's native plan has it.
        "bigbird_transformers_layout": budget_seed(
            "bigbird", configured=[("last_block_global", 1), ("random_at_first_block", 1),
                                   ("dense_up_to", 704)],
            request=[("random_blocks", 1)], cap=(1, 0.05), lengths=(4096, 700)),
        "sparse_transformer_nan": budget_seed("sparse_transformer", 2,
                                              request=[("stride", 64), ("summary", 8)],
                                              cap=(1, float("nan")), lengths=(1024, 0)),
        "star_unknown_knob": budget_seed("star", request=[("radius", 3), ("bogus", 1)],
                                         lengths=(100,)),
    }
    for name, data in seeds.items():
        write("budget", name, data)


def main():
    tokenizer_json_seeds()
    sentencepiece_seeds()
    tokenizer_encode_seeds()
    budget_seeds()
    request_bytes_seeds()


if __name__ == "__main__":
    main()
