// `docsparse-bench encoder`: a real encoder checkpoint (e.g. models/minilm,
// models/minilm-lsg) on one document of each length, in each precision, and
// where its time goes: the layers' linear products measured alone at the same
// shapes, the attention mechanism alone on random q/k/v, and the rest
// (embeddings, LayerNorm, GELU, residuals, copies). Prints the CPU's ISA.
//
//   docsparse-bench encoder --enc_model models/minilm-lsg
//       [--enc_tokens 512,4096,16384] [--enc_precision fp32,bf16]
//       [--enc_attention checkpoint|sbm] [--enc_density D]
//       [--repeats 5] [--threads 2] [--json]
//
// --enc_attention sbm runs SBM from the folder's sbm.safetensors (e.g.
// models/minilm-sbm) instead of the checkpoint's own attention, at the
// calibrated model's density or --enc_density's target; seed 1.
//
// One line per (tokens, precision): forward_ms (median after one warm-up),
// docs_per_s, model GFLOP/s (cost model FLOPs / time), and per layer type the
// milliseconds of all layers and the achieved GFLOP/s: linear (qkv, out,
// intermediate, ffn_out), attention, other = forward - linear - attention.
#ifndef DOCSPARSE_BENCH_ENCODER_BENCH_H_
#define DOCSPARSE_BENCH_ENCODER_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunEncoderBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_ENCODER_BENCH_H_
