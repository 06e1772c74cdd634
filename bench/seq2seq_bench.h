// `docsparse-bench seq2seq`: encoder time and per-step decoder time of an
// encoder-decoder summarizer with random weights (no download), shaped like
// LSG-BART-base (ccdv/lsg-bart-base-4096): d_model 768, 6 + 6 layers, 12
// heads, ffn 3072, vocab 50265, LSG block 128 / sparse block 128 / sparsity
// factor 2, norm sparsity, 1 global token.
//
//   docsparse-bench seq2seq [--s2s_tokens 4096,16384] [--s2s_rows 4]
//       [--s2s_steps 32] [--repeats 5] [--threads 2] [--json]
//
// One line per input length: encoder_ms (median of the repeats after one
// warm-up; one document), attach_ms (projecting every layer's
// cross-attention keys/values once), step_ms (median and mean over
// --s2s_steps decode steps of --s2s_rows rows, e.g. beams), the FLOPs
// behind each and peak_rss_mb (the process so far).
#ifndef DOCSPARSE_BENCH_SEQ2SEQ_BENCH_H_
#define DOCSPARSE_BENCH_SEQ2SEQ_BENCH_H_

namespace docsparse::bench {

// Runs the benchmark with the flags above; returns the process exit code.
int RunSeq2SeqBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_SEQ2SEQ_BENCH_H_
