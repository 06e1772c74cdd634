// `docsparse-bench fidelity`: every attention planner a model serves, at its
// native knobs and under density caps, on one held-out long document per
// length: density, attention GFLOP, forward time and the cosine of the mean
// pooled embedding to the same model with dense attention (DESIGN.md, the
// planner contract; issue "fidelity vs cost"). Engine only, no server.
//
//   docsparse-bench fidelity [--fid_model models/minilm-lsg]
//       [--fid_tokens 4096,16384] [--fid_caps 0.05,0.02] [--fid_precision fp32]
//       [--fid_text FILE,...] [--fid_planners longformer,...] [--fid_repeats 1]
//       [--threads 2] [--json]
//
// The text defaults to /usr/share/common-licenses, which no planner or
// calibration has seen (scripts/prepare-models calibrates SBM on
// /usr/share/doc). One line per (tokens, planner, cap). The model runs as
// the server runs it (its tokenizer, its checkpoint's own attention: a
// Longformer checkpoint's window and global projections).
#ifndef DOCSPARSE_BENCH_PATTERN_FIDELITY_H_
#define DOCSPARSE_BENCH_PATTERN_FIDELITY_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunFidelityBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_PATTERN_FIDELITY_H_
