// libFuzzer target for the tokenizer.json readers behind LoadTokenizer
// (model/text/tokenizer_loader.h): the model type switch, WordPiece
// (wordpiece_tokenizer), byte-level BPE (bpe_tokenizer, byte_level), the
// added tokens (added_vocabulary) and tokenizer_config.json
// (tokenizer_files). The input is tokenizer.json, optionally followed by a
// NUL and tokenizer_config.json (JSON text holds no NUL); both are written
// to a folder of this process's own, since the loader reads a model folder.
// Whatever the bytes, LoadTokenizer gives INVALID_ARGUMENT naming the file
// ("<dir>/tokenizer.json: ..." or ".../tokenizer_config.json: ..."), or a
// tokenizer whose special ids, encoded and framed ids lie in
// [0, vocab_size) and whose Decode gives valid UTF-8. Framed ids may also be
// -1, the interface's "absent": a WordPiece vocabulary without [CLS] or
// [SEP] loads and frames with it, and the encoder refuses the id (the
// suite's config_fuzz_test accepts this too). Regression cases live in
// tests/model/text/tokenizer_loader_test.cc (BPE ones in
// bpe_tokenizer_test.cc, WordPiece ones in wordpiece_tokenizer_test.cc).
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// tokenizer_json` builds and runs it from tests/fuzz/tokenizer_json_seeds/
// (tests/fuzz/make_seeds.py says how they were made).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/text/tokenizer_loader.h"
#include "model/text/unicode_text.h"
#include "tests/fuzz/scratch_dir.h"

namespace {

namespace fs = std::filesystem;

const fs::path& ScratchDir() { return docsparse::FuzzScratchDir("tokenizer-json"); }

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();  // The scratch folder must work, or nothing is tested.
}

// A refusal is INVALID_ARGUMENT and starts with the path of the file it is
// about.
void CheckRefusal(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  const std::string message(status.message());
  const std::string dir = ScratchDir().string() + "/";
  if (message.rfind(dir + "tokenizer.json: ", 0) != 0 &&
      message.rfind(dir + "tokenizer_config.json: ", 0) != 0) {
    std::abort();
  }
}

void CheckIds(const std::vector<int32_t>& ids, int32_t vocab_size, bool absent_ok = false) {
  for (const int32_t id : ids) {
    if ((id < 0 && !(absent_ok && id == -1)) || id >= vocab_size) std::abort();
  }
}

void CheckTokenizer(const docsparse::Tokenizer& tokenizer) {
  const int32_t size = tokenizer.vocab_size();
  if (size < 1) std::abort();
  const docsparse::SpecialTokenIds& s = tokenizer.special_tokens();
  for (const int32_t id : {s.cls, s.sep, s.pad, s.unk, s.mask}) {
    if (id < -1 || id >= size) std::abort();
  }
  // Special tokens of both families, accents, CJK, an emoji, runs of
  // spaces, a long word: what the readers' settings change the handling of.
  for (const char* text :
       {"Hello, world! It's <mask> [MASK] time.", "<s>caf\xc3\xa9 </s> [CLS]a[SEP] <unk>",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e  \t the\xf0\x9f\x98\x80 and",
        "supercalifragilisticexpialidocious-and-then-some-more-letters"}) {
    const std::vector<int32_t> ids = tokenizer.Encode(text);
    CheckIds(ids, size);
    CheckIds(tokenizer.Frame(ids, 8), size, /*absent_ok=*/true);
    if (!docsparse::ValidateUtf8(tokenizer.Decode(ids)).ok()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const fs::path& dir = ScratchDir();
  WriteFile(dir / "tokenizer.json", input.substr(0, split));
  if (split == std::string::npos) {
    fs::remove(dir / "tokenizer_config.json");
  } else {
    WriteFile(dir / "tokenizer_config.json", input.substr(split + 1));
  }
  auto tokenizer = docsparse::LoadTokenizer(dir.string());
  if (!tokenizer.ok()) {
    CheckRefusal(tokenizer.status());
    return 0;
  }
  CheckTokenizer(**tokenizer);
  return 0;
}
