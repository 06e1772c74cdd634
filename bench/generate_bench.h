// `docsparse-bench generate`: milliseconds per generated token of a real
// BART checkpoint folder (Hugging Face format), greedy or beam search, for a
// batch of random source documents, encoding included: the decode loop as
// CTranslate2's translate_batch and transformers' generate are timed
// (bench/peers/run --summarize runs them beside this on the same checkpoint).
// Every text runs to exactly --gen_new_tokens (no end-of-sequence id), as
// the peers' min_decoding_length forces.
#ifndef DOCSPARSE_BENCH_GENERATE_BENCH_H_
#define DOCSPARSE_BENCH_GENERATE_BENCH_H_

namespace docsparse::bench {

int RunGenerateBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_GENERATE_BENCH_H_
