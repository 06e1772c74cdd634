// `docsparse-bench sbm_tiles`: whether SBM's sampled edges could run as
// dense tiles on tensor cores, as block-sparse patterns do. For a calibrated
// SBM model on real text (held-out licenses), per layer and tile shape: the
// share of (query tile, key tile) pairs at least one edge falls in, with the
// tokens in order and with queries and keys each sorted by their dominant
// cluster (the argmax of MLP(x)·Cᵀ, the planner's membership logits), and
// how full the touched tiles are. A tile kernel computes every pair of a
// touched tile, so its work is that share of dense attention: a share near
// 1 means no tiling of this model's graphs saves work over dense, whatever
// the kernel (docs/BENCHMARKS.md, "GPU": why SBM stays a gather on the GPU).
//
//   docsparse-bench sbm_tiles [--tiles_model models/minilm-sbm]
//       [--seq 1024,4096,16384] [--density 0.01,0.05] [--tiles 16x64,64x64,128x64]
//       [--seed 1] [--threads 2] [--json]
#ifndef DOCSPARSE_BENCH_SBM_TILES_BENCH_H_
#define DOCSPARSE_BENCH_SBM_TILES_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunSbmTilesBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_SBM_TILES_BENCH_H_
