// `docsparse-bench lsg_plan`: what an LSG layer's plan costs on the host,
// built (the validity from the layout, then PlanLsgSequence) and taken from
// the plan cache that keeps it across
// layers (model/attention/lsg_plan_cache.h), for minilm-lsg's attention
// (blocks of 128, sparse blocks of 128, sparsity factor 2, norm, one global
// token) at each length. On a GPU the host builds the plan while the device
// waits, so this is time the device forward cannot hide.
//
//   docsparse-bench lsg_plan [--seq 4096,16384] [--heads 12] [--repeats 5]
//       [--json]
#ifndef DOCSPARSE_BENCH_LSG_PLAN_BENCH_H_
#define DOCSPARSE_BENCH_LSG_PLAN_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunLsgPlanBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_LSG_PLAN_BENCH_H_
