// libFuzzer target for the tokenizers themselves (model/text/): each kind
// the server runs, loaded once from real files, encodes arbitrary bytes
// (invalid UTF-8 included, though callers validate first) and decodes ids.
// The first byte picks the tokenizer: WordPiece from models/minilm's
// tokenizer.json, WordPiece from its vocab.txt (BertTokenizer's path),
// byte-level BPE from tests/fixtures/bpe_spm/bart_tokenizer, SentencePiece
// unigram from tests/fixtures/bpe_spm/pegasus_tokenizer; the second sets
// the Frame limit; the rest is the text. Invariants (model/text/tokenizer.h):
// every encoded id in [0, vocab_size); Frame keeps FramePrefix, at most
// max_tokens - overhead ids of the text in order, then FrameSuffix; Decode
// of the encoded ids, and of ids read from the input (out-of-range ones
// included), gives valid UTF-8. Regression cases live in the tokenizer's
// own test file under tests/model/text/ (wordpiece_tokenizer_test.cc,
// bpe_tokenizer_test.cc, sentencepiece_tokenizer_test.cc).
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// tokenizer_encode` builds it with DOCSPARSE_SOURCE_DIR set to the
// repository (libFuzzer runs in the corpus folder) and runs it from
// tests/fuzz/tokenizer_encode_seeds/. models/minilm comes from
// scripts/setup.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/text/tokenizer_loader.h"
#include "model/text/unicode_text.h"
#include "model/text/wordpiece_tokenizer.h"

#ifndef DOCSPARSE_SOURCE_DIR
#error "build with -DDOCSPARSE_SOURCE_DIR=\"/path/to/repo\" (scripts/fuzz does)"
#endif

namespace {

std::vector<std::unique_ptr<docsparse::Tokenizer>>* tokenizers = nullptr;

[[noreturn]] void Die(const absl::Status& status) {
  std::fprintf(stderr, "tokenizer_encode_fuzz: %s\n", status.ToString().c_str());
  std::abort();
}

template <typename T>
std::unique_ptr<docsparse::Tokenizer> OrDie(absl::StatusOr<std::unique_ptr<T>> loaded) {
  if (!loaded.ok()) Die(loaded.status());
  return std::move(*loaded);
}

// BertTokenizer's way: vocab.txt with tokenizer_config.json's options.
std::unique_ptr<docsparse::Tokenizer> VocabTxtTokenizer(const std::string& dir) {
  auto options = docsparse::WordPieceTokenizer::ReadTokenizerConfig(dir + "/tokenizer_config.json");
  if (!options.ok()) Die(options.status());
  return OrDie(docsparse::WordPieceTokenizer::FromVocabTxt(dir + "/vocab.txt", *options));
}

void CheckFrame(const docsparse::Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                size_t max_tokens) {
  const std::vector<int32_t> prefix = tokenizer.FramePrefix();
  const std::vector<int32_t> suffix = tokenizer.FrameSuffix();
  const std::vector<int32_t> framed = tokenizer.Frame(ids, max_tokens);
  const size_t kept = std::min(ids.size(), max_tokens - prefix.size() - suffix.size());
  if (framed.size() != prefix.size() + kept + suffix.size()) std::abort();
  for (size_t i = 0; i < framed.size(); ++i) {
    const int32_t expected = i < prefix.size()          ? prefix[i]
                             : i < prefix.size() + kept ? ids[i - prefix.size()]
                                                        : suffix[i - prefix.size() - kept];
    if (framed[i] != expected) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string root = DOCSPARSE_SOURCE_DIR;
  tokenizers = new std::vector<std::unique_ptr<docsparse::Tokenizer>>();
  tokenizers->push_back(OrDie(docsparse::LoadTokenizer(root + "/models/minilm")));
  tokenizers->push_back(VocabTxtTokenizer(root + "/models/minilm"));
  tokenizers->push_back(
      OrDie(docsparse::LoadTokenizer(root + "/tests/fixtures/bpe_spm/bart_tokenizer")));
  tokenizers->push_back(
      OrDie(docsparse::LoadTokenizer(root + "/tests/fixtures/bpe_spm/pegasus_tokenizer")));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const docsparse::Tokenizer& tokenizer = *(*tokenizers)[data[0] % tokenizers->size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const int32_t vocab = tokenizer.vocab_size();

  const std::vector<int32_t> ids = tokenizer.Encode(text);
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab) std::abort();
  }
  const size_t overhead = tokenizer.FramePrefix().size() + tokenizer.FrameSuffix().size();
  CheckFrame(tokenizer, ids, overhead + data[1] % 64);
  if (!docsparse::ValidateUtf8(tokenizer.Decode(ids)).ok()) std::abort();

  // Ids as a generator might emit them, from the input's byte pairs.
  std::vector<int32_t> arbitrary;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const int32_t raw = static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8;
    arbitrary.push_back(raw % (vocab + 4) - 2);
  }
  if (!docsparse::ValidateUtf8(tokenizer.Decode(arbitrary)).ok()) std::abort();
  return 0;
}
