// libFuzzer target for the SentencePiece model reader
// (model/text/sentencepiece_model.cc: ModelProto's wire format, the piece
// checks, the precompiled character map) and what is built on what it
// accepts: the unigram search (unigram_model) and Pegasus' tokenizer
// (sentencepiece_tokenizer, which reads the file from a folder of this
// process's own). Any bytes must be refused INVALID_ARGUMENT as
// "<source>: not a SentencePiece model (...)", or give a model whose unknown
// piece exists, whose pieces are found by their text, whose normalizer and
// search run on any text (ASan and UBSan watching the character map's
// double array) with piece ids in range, and a tokenizer that loads with
// ids in [0, vocab_size) and decodes to valid UTF-8. Regression cases live
// in tests/model/text/sentencepiece_tokenizer_test.cc.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// sentencepiece` builds and runs it from tests/fuzz/sentencepiece_seeds/:
// tests/fixtures' Pegasus spiece.model cut to fit -max_len, with and
// without a small character map (tests/fuzz/make_seeds.py).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/sentencepiece_model.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "model/text/unicode_text.h"
#include "model/text/unigram_model.h"
#include "tests/fuzz/scratch_dir.h"

namespace {

namespace fs = std::filesystem;

constexpr char kSource[] = "fuzz/spiece.model";

// Whitespace runs, a character map's favourites (full-width letters, a
// ligature, a combining accent), an emoji, the "▁" itself, control bytes
// and malformed UTF-8 (the normalizer must step over it).
constexpr char kMalformed[] = "\x01\x00\x7f \xff\xc3 \xe2\x96 tail";
constexpr std::string_view kTexts[] = {
    "  Hello,\t\tworld!  The\xe3\x80\x80"
    "end. ",
    "\xef\xbc\xa1\xef\xbc\xa2 \xef\xac\x81ne cafe\xcc\x81 \xf0\x9f\x98\x80",
    "\xe2\x96\x81\xe2\x96\x81x\xe2\x96\x81 <pad></s><mask_1><mask_2><unk_7><unk>",
    std::string_view(kMalformed, sizeof(kMalformed) - 1),
};

const fs::path& ScratchDir() { return docsparse::FuzzScratchDir("sentencepiece"); }

void CheckModel(const docsparse::SentencePieceModel& model) {
  const std::vector<docsparse::SentencePieceEntry>& pieces = model.pieces();
  const int count = static_cast<int>(pieces.size());
  if (count == 0 || model.unk_id() < 0 || model.unk_id() >= count ||
      pieces[static_cast<size_t>(model.unk_id())].type != docsparse::PieceType::kUnknown) {
    std::abort();
  }
  for (const docsparse::SentencePieceEntry& entry : pieces) {
    const int id = model.PieceToId(entry.piece);
    if (id < 0 || id >= count || pieces[static_cast<size_t>(id)].piece != entry.piece) {
      std::abort();
    }
  }
  const docsparse::UnigramModel unigram(pieces, model.unk_id());
  std::string normalized;
  std::vector<int> ids;
  for (const std::string_view text : kTexts) {
    model.Normalize(text, &normalized);
    ids.clear();
    unigram.Encode(normalized, &ids);
    if (ids.empty() != normalized.empty()) std::abort();
    for (const int id : ids) {
      if (id < 0 || id >= count) std::abort();
    }
    model.Decode(ids);
  }
  // Ids out of range are skipped, never read.
  model.Decode({-1, count, count + 1000, 0});
}

void CheckTokenizer(const std::string& bytes) {
  const fs::path path = ScratchDir() / "spiece.model";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();  // The scratch folder must work, or nothing is tested.
  }
  // The model parsed, and the default config is Pegasus': it must load.
  auto tokenizer = docsparse::SentencePieceTokenizer::FromSpieceModel(path.string());
  if (!tokenizer.ok()) std::abort();
  const int32_t size = (*tokenizer)->vocab_size();
  for (const std::string_view text : kTexts) {
    const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
    for (const int32_t id : (*tokenizer)->Frame(ids, 16)) {
      if (id < 0 || id >= size) std::abort();
    }
    if (!docsparse::ValidateUtf8((*tokenizer)->Decode(ids)).ok()) std::abort();
  }
  std::vector<int32_t> every;
  for (int32_t id = -2; id < std::min(size + 2, 4096); ++id) every.push_back(id);
  if (!docsparse::ValidateUtf8((*tokenizer)->Decode(every)).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = docsparse::SentencePieceModel::Parse(bytes, kSource);
  if (!model.ok()) {
    if (model.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    const std::string prefix = std::string(kSource) + ": not a SentencePiece model (";
    if (std::string(model.status().message()).rfind(prefix, 0) != 0) std::abort();
    return 0;
  }
  CheckModel(**model);
  CheckTokenizer(bytes);
  return 0;
}
