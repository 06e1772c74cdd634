#!/usr/bin/env python3
"""Write random-weight checkpoints shaped like published long-document models, for benchmarks.

Developer-only (torch, transformers 5; no network). No hub is reachable, so the benchmarks of
the native patterns (docs/BENCHMARKS.md) run on these shapes; speed does not depend on the
values. The tokenizer is tests/fixtures/bpe_spm/bart_tokenizer (byte-level BPE, ids below
every model's vocabulary).

  longformer  allenai/longformer-base-4096: 12 layers, hidden 768, 12 heads, intermediate
              3,072, attention_window 512, with 16,386 position rows (16,384 tokens) instead
              of 4,098.
  led         allenai/led-base-16384: d_model 768, 6 + 6 layers, 12 heads, ffn 3,072, 16,384
              encoder and 1,024 decoder positions, attention_window 1,024; with a
              generation_config.json (greedy) and a docsparse.json serving "summarize".
  modernbert  answerdotai/ModernBERT-base: 22 layers, hidden 768, 12 heads, intermediate
              1,152 (GeGLU), every third layer global, local_attention 128, 8,192 positions.
  bigbird     google/bigbird-roberta-base: 12 layers, hidden 768, 12 heads, intermediate 3,072,
              gelu_new, block_size 64, num_random_blocks 3, with 16,384 position rows instead
              of 4,096.
  bigbird_pegasus
              google/bigbird-pegasus-large-arxiv: d_model 1,024, 16 + 16 layers, 16 heads, ffn
              4,096, 4,096 positions, gelu_new, block_size 64, num_random_blocks 3, no
              attention biases; with a generation_config.json (greedy) and a docsparse.json
              serving "summarize".

    python tools/make_shaped_checkpoints.py {longformer,led,modernbert,bigbird,bigbird_pegasus} \
        OUT_DIR
"""
import argparse
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    BigBirdConfig,
    BigBirdModel,
    BigBirdPegasusConfig,
    BigBirdPegasusForConditionalGeneration,
    GenerationConfig,
    LEDConfig,
    LEDForConditionalGeneration,
    LongformerConfig,
    LongformerModel,
    ModernBertConfig,
    ModernBertModel,
)

TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                         "bpe_spm", "bart_tokenizer")


def save_summarizer(model, out):
    """The checkpoint, a greedy generation_config.json and a docsparse.json serving "summarize"."""
    model.eval().save_pretrained(out, safe_serialization=True)
    GenerationConfig(decoder_start_token_id=2, bos_token_id=0, eos_token_id=2, pad_token_id=1,
                     num_beams=1, max_length=128).save_pretrained(out)
    with open(os.path.join(out, "docsparse.json"), "w") as f:
        f.write('{"tasks": ["summarize"], "precision": "fp32"}\n')


def longformer(out):
    config = LongformerConfig(
        vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=16386, type_vocab_size=1,
        hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        sep_token_id=2, attention_window=[512] * 12)
    LongformerModel(config, add_pooling_layer=False).eval().save_pretrained(
        out, safe_serialization=True)


def led(out):
    config = LEDConfig(
        vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
        decoder_ffn_dim=3072, max_encoder_position_embeddings=16384,
        max_decoder_position_embeddings=1024, attention_window=[1024] * 6,
        activation_function="gelu", pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2)
    save_summarizer(LEDForConditionalGeneration(config), out)


def modernbert(out):
    config = ModernBertConfig(
        vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
        intermediate_size=1152, max_position_embeddings=8192, global_attn_every_n_layers=3,
        local_attention=128, pad_token_id=1, bos_token_id=0, eos_token_id=2, cls_token_id=0,
        sep_token_id=2)
    ModernBertModel(config).eval().save_pretrained(out, safe_serialization=True)


def bigbird(out):
    config = BigBirdConfig(
        vocab_size=50358, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=16384, type_vocab_size=2,
        hidden_act="gelu_new", layer_norm_eps=1e-12, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, sep_token_id=2, attention_type="block_sparse", block_size=64,
        num_random_blocks=3)
    BigBirdModel(config, add_pooling_layer=False).eval().save_pretrained(
        out, safe_serialization=True)


def bigbird_pegasus(out):
    config = BigBirdPegasusConfig(
        vocab_size=96103, d_model=1024, encoder_layers=16, decoder_layers=16,
        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
        decoder_ffn_dim=4096, max_position_embeddings=4096, activation_function="gelu_new",
        scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, attention_type="block_sparse", block_size=64,
        num_random_blocks=3, use_bias=False)
    save_summarizer(BigBirdPegasusForConditionalGeneration(config), out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind",
                        choices=["longformer", "led", "modernbert", "bigbird", "bigbird_pegasus"])
    parser.add_argument("out")
    args = parser.parse_args()
    torch.manual_seed(0)
    {"longformer": longformer, "led": led, "modernbert": modernbert, "bigbird": bigbird,
     "bigbird_pegasus": bigbird_pegasus}[args.kind](args.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, name), os.path.join(args.out, name))
    print(args.out)


if __name__ == "__main__":
    main()
