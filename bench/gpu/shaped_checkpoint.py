#!/usr/bin/env python3
"""Write a random-weight model.safetensors with the tensor names and shapes of another.

The GPU machine has no model registry and takes 64 MiB of files per call, so the
end-to-end GPU benchmark (bench/gpu/serve_on_gpu.sh) brings each model's header
(names, dtypes, shapes: a few KB) and its small files, and fills the weights here
with random values. Speed does not depend on the values: the same shapes run the
same products and, for LSG, the same plans (the norm sparsity picks other keys, as
many). A header may be scaled to a bigger model of the same architecture with
--dims OLD=NEW,... (every dimension equal to OLD becomes NEW), e.g. a tiny
LSG-BART fixture's to BART-base with 16,384 positions.

    shaped_checkpoint.py header SRC.safetensors OUT.json     # here: keep the header
    shaped_checkpoint.py fill OUT.json DEST.safetensors [--dims 32=768,...] [--seed S]

LayerNorm scales are 1 and every bias and LayerNorm shift 0; the rest is
N(0, 0.02^2), BERT's and BART's initialisation. fill needs numpy; header needs nothing.
"""
import argparse
import json
import struct
import sys


def read_header(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def parse_dims(text):
    dims = {}
    for pair in filter(None, (text or "").split(",")):
        old, new = pair.split("=")
        dims[int(old)] = int(new)
    return dims


def values_for(name, shape, rng):
    import numpy as np

    count = int(np.prod(shape)) if shape else 1
    lowered = name.lower()
    is_norm = "norm" in lowered  # LayerNorm, layer_norm, layernorm_embedding
    if name.endswith(".bias") or name.endswith("final_logits_bias") or (
            is_norm and name.endswith(".beta")):
        return np.zeros(count, np.float32)
    if is_norm and (name.endswith(".weight") or name.endswith(".gamma")):
        return np.ones(count, np.float32)
    return rng.standard_normal(count, dtype=np.float32) * np.float32(0.02)


def fill(header_path, out_path, dims, seed):
    import numpy as np

    header = json.load(open(header_path))
    header.pop("__metadata__", None)
    rng = np.random.default_rng(seed)
    layout, offset = {}, 0
    for name in sorted(header):
        shape = [dims.get(d, d) for d in header[name]["shape"]]
        nbytes = 4 * int(np.prod(shape)) if shape else 4
        layout[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    encoded = json.dumps(layout, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    total, shown = 0, 0
    with open(out_path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for name in sorted(layout):
            data = values_for(name, layout[name]["shape"], rng)
            f.write(data.tobytes())
            total += data.size
            if total - shown >= 20_000_000:
                shown = total
                print(f"{out_path}: {total / 1e6:.0f} M parameters", file=sys.stderr)
    print(f"{out_path}: {total / 1e6:.0f} M parameters, done", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    keep = sub.add_parser("header")
    keep.add_argument("source")
    keep.add_argument("out")
    make = sub.add_parser("fill")
    make.add_argument("header")
    make.add_argument("out")
    make.add_argument("--dims", default="")
    make.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "header":
        header = read_header(args.source)
        header.pop("__metadata__", None)
        for entry in header.values():
            entry.pop("data_offsets", None)
        json.dump(header, open(args.out, "w"), indent=0, sort_keys=True)
    else:
        fill(args.header, args.out, parse_dims(args.dims), args.seed)


if __name__ == "__main__":
    main()
