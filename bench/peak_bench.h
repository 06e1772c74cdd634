// `docsparse-bench peak`: the ceilings our layers are measured against (issue
// 20's item 6: achieved FLOP/s against the large-matrix product's rate in the
// same precision), on this machine and --threads threads:
//   - the vector FMA rate: each thread runs a loop of independent fp32 FMAs
//     in registers (AVX-512 where the CPU has it, else AVX2), nothing else;
//   - the rate of our linear layers (model/encoder/linear.h: oneDNN, weights
//     packed at load) on large products of the encoder's feed-forward shapes,
//     [rows x 384] x [384 x 1536] and [rows x 1536] x [1536 x 384], in each
//     precision.
//
//   docsparse-bench peak [--peak_rows 4096] [--peak_precision fp32,bf16,int8]
//       [--repeats 5] [--threads 2] [--json]
#ifndef DOCSPARSE_BENCH_PEAK_BENCH_H_
#define DOCSPARSE_BENCH_PEAK_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunPeakBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_PEAK_BENCH_H_
