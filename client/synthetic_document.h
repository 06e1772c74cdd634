// Synthetic English documents of a chosen length for load tests: sentences of
// common English words, deterministic for a seed.
#ifndef DOCSPARSE_CLIENT_SYNTHETIC_DOCUMENT_H_
#define DOCSPARSE_CLIENT_SYNTHETIC_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace docsparse {

// A document of `tokens` tokens as an uncased BERT WordPiece tokenizer counts
// them, [CLS] and [SEP] included: every word of the built-in list is one
// whole-word token of that vocabulary and every '.' or ',' one more, so the
// count is exact for bert-base-uncased / all-MiniLM-L6-v2. Other tokenizers
// (cased WordPiece, BPE, SentencePiece) split a few of the words and count
// roughly 5-25% more. At least one word is produced. Same (tokens, seed): same
// text, on every platform (own PRNG, no <random> distributions).
std::string SyntheticDocument(int tokens, uint64_t seed);

// `count` documents with seeds seed, seed+1, ...
std::vector<std::string> SyntheticDocuments(int tokens, int count, uint64_t seed);

// The built-in word list, most frequent first (for tests).
absl::Span<const char* const> SyntheticWords();

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_SYNTHETIC_DOCUMENT_H_
