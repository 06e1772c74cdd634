// `docsparse-bench edges`: the CPU edge executor alone (kernels/edge_attention.h,
// what SBM, lsh, routing and unions attend with), on rows of distinct random
// keys drawn once, so that no planner's time is in the figure:
// `docsparse-bench attention --impl sbm` times sampling and attention
// together. Each case prints ms a call, ns an edge and GFLOP/s (4·head_dim
// FLOPs an edge: q·k and p·v).
//
//   docsparse-bench edges [--seq 1024,4096,16384] [--heads 12] [--dim 64]
//       [--density 0.05,0.2] [--repeats 5] [--threads 2] [--seed 1] [--json]
#ifndef DOCSPARSE_BENCH_EDGE_EXECUTOR_BENCH_H_
#define DOCSPARSE_BENCH_EDGE_EXECUTOR_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunEdgeExecutorBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_EDGE_EXECUTOR_BENCH_H_
