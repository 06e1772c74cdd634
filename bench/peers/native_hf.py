#!/usr/bin/env python3
"""Time Hugging Face transformers' own long-document encoders on the CPU: what their users run.

The peer of `docsparse-bench fidelity --fid_model DIR --fid_planners NAME` in
docs/BENCHMARKS.md, on the same checkpoint (tools/make_shaped_checkpoints.py): one document of
each length, fp32, the given threads, transformers' default attention implementation for the
class. Longformer gets global attention on the first token (as
LongformerForSequenceClassification sets it); ModernBERT runs as AutoModel loads it (sdpa,
its sliding window as a mask); BigBird runs its block-sparse attention (eval mode: random
blocks at block 0, as docsparse's native plan); LED and BigBird-Pegasus generate one token
greedily, LED with the first token global (the time to first token: the encoder and one decoder
step, as docsparse's cost report counts it for a streamed summary). Prints one line per length: the median ms of --repeats passes
after one warm-up.

    python bench/peers/native_hf.py {longformer,modernbert,led,bigbird,bigbird_pegasus} DIR
        [--tokens 4096,16384]
        [--threads 2] [--repeats 3]
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    BigBirdModel,
    BigBirdPegasusForConditionalGeneration,
    LEDForConditionalGeneration,
    LongformerModel,
    ModernBertModel,
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind",
                        choices=["longformer", "modernbert", "led", "bigbird", "bigbird_pegasus"])
    parser.add_argument("model")
    parser.add_argument("--tokens", default="4096,16384")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.kind == "longformer":
        model = LongformerModel.from_pretrained(args.model, add_pooling_layer=False).eval()
    elif args.kind == "led":
        model = LEDForConditionalGeneration.from_pretrained(args.model).eval()
    elif args.kind == "bigbird":
        model = BigBirdModel.from_pretrained(args.model, add_pooling_layer=False).eval()
    elif args.kind == "bigbird_pegasus":
        model = BigBirdPegasusForConditionalGeneration.from_pretrained(args.model).eval()
    else:
        model = ModernBertModel.from_pretrained(args.model).eval()
    generator = torch.Generator().manual_seed(0)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, attention {model.config._attn_implementation}")
    for tokens in (int(t) for t in args.tokens.split(",")):
        ids = torch.randint(3, 4001, (1, tokens), generator=generator)
        ids[0, 0], ids[0, -1] = 0, 2
        kwargs = {"input_ids": ids}
        if args.kind in ("longformer", "led"):
            kwargs["global_attention_mask"] = torch.zeros_like(ids)
            kwargs["global_attention_mask"][0, 0] = 1
        run = model
        if args.kind in ("led", "bigbird_pegasus"):
            kwargs.update(max_new_tokens=1, num_beams=1, do_sample=False)
            run = model.generate
        times = []
        with torch.inference_mode():
            for i in range(args.repeats + 1):
                start = time.perf_counter()
                run(**kwargs)
                if i > 0:
                    times.append((time.perf_counter() - start) * 1e3)
        print(f"| {tokens} | transformers {type(model).__name__} fp32 | "
              f"{statistics.median(times):.0f} ms |")


if __name__ == "__main__":
    main()
