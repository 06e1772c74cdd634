// Mutation fuzzing of the files the BPE and SentencePiece tokenizers read:
// tokenizer.json (BpeTokenizer), tokenizer_config.json (both) and
// spiece.model (SentencePieceTokenizer). Seeded mutations of small valid
// files (byte flips, truncation, key deletion, type changes, huge and
// negative numbers, deep nesting) must each give a working tokenizer or an
// INVALID_ARGUMENT that names the file and a field: never a crash, an
// escaped exception, a runaway allocation or a hang. The approach is
// tests/model/checkpoint/config_fuzz_test.cc's, for these readers.
//
// Cases run in forked children with a cap on their address space (see
// tests/common/file_mutation_fuzz.h), so a crash or a hang fails the test
// naming the case (saved to a file) instead of taking the binary down.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/text/bpe_tokenizer.h"
#include "model/text/byte_level.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "model/text/unicode_text.h"
#include "nlohmann/json.hpp"
#include "tests/common/file_mutation_fuzz.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using Json = nlohmann::json;
using ::docsparse::testing::fuzz::Case;
using ::docsparse::testing::fuzz::CheckError;
using ::docsparse::testing::fuzz::FieldNames;
using ::docsparse::testing::fuzz::MakeCase;
using ::docsparse::testing::fuzz::Outcome;
using ::docsparse::testing::fuzz::Preview;
using ::docsparse::testing::fuzz::ReadText;
using ::docsparse::testing::fuzz::RunIsolated;
using ::docsparse::testing::fuzz::RunReport;
using ::docsparse::testing::fuzz::WriteText;

constexpr uint64_t kSeed = 0x62706531ULL;  // "bpe1"
constexpr int kTokenizerJsonCases = 3000;
constexpr int kConfigCases = 1000;
constexpr int kSpieceCases = 2000;

// A tokenizer that loaded must encode to ids it has, frame with ids it has,
// and decode to valid UTF-8.
std::string CheckTokenizer(const Tokenizer& t) {
  std::ostringstream bad;
  const int32_t size = t.vocab_size();
  if (size < 1) return "empty vocabulary; ";
  const SpecialTokenIds& s = t.special_tokens();
  for (const int32_t id : {s.cls, s.sep, s.pad, s.unk, s.mask}) {
    if (id < -1 || id >= size) bad << "special id " << id << "; ";
  }
  for (const std::string& text : std::vector<std::string>{
           "Hello, world! It's <mask> time", "\xe6\x97\xa5\xe6\x9c\xac <s></s> <unk>", "a  \t b",
           "", std::string(300, 'x'), std::string("\0 \x01\xff", 4), "\xf0\x9f\x98\x80 the"}) {
    const std::vector<int32_t> ids = t.Encode(text);
    for (const int32_t id : t.Frame(ids, 64)) {
      if (id < 0 || id >= size) {
        bad << "Encode/Frame(\"" << Preview(text, 30) << "\") gave id " << id << "; ";
        break;
      }
    }
    if (!ValidateUtf8(t.Decode(ids)).ok()) bad << "Decode gave invalid UTF-8; ";
  }
  std::vector<int32_t> every;
  for (int32_t id = -2; id < std::min(size + 2, 5000); ++id) every.push_back(id);
  if (!ValidateUtf8(t.Decode(every)).ok()) bad << "Decode(all ids) gave invalid UTF-8; ";
  return bad.str();
}

Outcome Judge(const absl::StatusOr<std::unique_ptr<Tokenizer>>& loaded, const std::string& file,
              const std::set<std::string>& fields) {
  Outcome outcome;
  outcome.accepted = loaded.ok();
  if (loaded.ok()) {
    const std::string bad = CheckTokenizer(**loaded);
    if (!bad.empty()) outcome.violation = "loaded but broken: " + bad;
  } else {
    outcome.error = std::string(loaded.status().message());
    outcome.violation = CheckError(loaded.status(), file, fields);
  }
  return outcome;
}

// Fuzzes one file of a model folder: `base_dir` holds the valid files, the
// mutated `file_name` replaces its own in a scratch copy, and `load` loads
// that copy.
void Fuzz(
    const std::string& name, const std::string& base_dir, const std::string& file_name, int cases,
    bool json,
    const std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(const std::string&)>& load) {
  const std::string dir =
      ::testing::TempDir() + "bpe_tokenizer_fuzz_" + name + "_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(base_dir)) {
    std::filesystem::copy_file(entry.path(), dir + "/" + entry.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  const std::string path = dir + "/" + file_name;
  const std::string base = ReadText(path);
  ASSERT_FALSE(base.empty()) << path;
  const auto start = std::chrono::steady_clock::now();
  const RunReport report = RunIsolated(cases, [&](int index) {
    const Case c = MakeCase(base, kSeed, index, json);
    WriteText(path, c.text);
    return Judge(load(dir), file_name, json ? FieldNames(base, c.text) : std::set<std::string>{});
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ fuzz ] " << name << " " << file_name << ": " << cases << " cases (seed " << kSeed
            << ") in " << seconds << " s: " << report.accepted << " accepted, " << report.rejected
            << " rejected, " << report.violations.size() << " violations\n";
  std::set<std::string> reported;
  for (const auto& [index, what] : report.violations) {
    if (!reported.insert(what.substr(0, 50)).second) continue;  // One per kind.
    if (index < 0 || index >= cases) {
      ADD_FAILURE() << name << ": " << what;
      continue;
    }
    const Case c = MakeCase(base, kSeed, index, json);
    const std::string saved = dir + "/case_" + std::to_string(index) + "_" + file_name;
    WriteText(saved, c.text);
    ADD_FAILURE() << name << " case " << index << " (" << c.what << "): " << what
                  << "\n  input saved to " << saved;
  }
  WriteText(path, base);
}

// ----------------------------------------------------------------- tests --

// A small BART-style tokenizer.json: every byte, some merges of both
// formats' worth, added tokens with flags, a RobertaProcessing.
std::string SmallBartFolder() {
  const std::string dir =
      ::testing::TempDir() + "bpe_tokenizer_fuzz_base_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  Json vocab = Json::object();
  for (const char* special : {"<s>", "<pad>", "</s>", "<unk>"}) {
    vocab[special] = static_cast<int>(vocab.size());
  }
  for (int b = 0; b < 256; ++b) vocab[ByteLevelChars()[b]] = static_cast<int>(vocab.size());
  const std::string g = ByteLevelChars()[' '];
  Json merges = Json::array();
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {g, "t"}, {g + "t", "h"}, {g + "th", "e"}, {"i", "n"}, {g, "a"}, {"e", "r"}}) {
    merges.push_back(Json::array({a, b}));
    vocab[a + b] = static_cast<int>(vocab.size());
  }
  vocab["<mask>"] = static_cast<int>(vocab.size());
  Json added = Json::array();
  for (const char* special : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}) {
    added.push_back({{"id", vocab[special]},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", std::string(special) == "<mask>"},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  added.push_back({{"id", 999},
                   {"content", "hello world"},
                   {"single_word", true},
                   {"lstrip", false},
                   {"rstrip", true},
                   {"normalized", true},
                   {"special", false}});
  const Json tokenizer = {{"version", "1.0"},
                          {"truncation", nullptr},
                          {"padding", nullptr},
                          {"added_tokens", added},
                          {"normalizer", nullptr},
                          {"pre_tokenizer",
                           {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", true},
                            {"use_regex", true}}},
                          {"post_processor",
                           {{"type", "RobertaProcessing"},
                            {"sep", {"</s>", 2}},
                            {"cls", {"<s>", 0}},
                            {"trim_offsets", true},
                            {"add_prefix_space", false}}},
                          {"decoder",
                           {{"type", "ByteLevel"},
                            {"add_prefix_space", true},
                            {"trim_offsets", true},
                            {"use_regex", true}}},
                          {"model",
                           {{"type", "BPE"},
                            {"dropout", nullptr},
                            {"unk_token", nullptr},
                            {"continuing_subword_prefix", ""},
                            {"end_of_word_suffix", ""},
                            {"fuse_unk", false},
                            {"byte_fallback", false},
                            {"ignore_merges", false},
                            {"vocab", vocab},
                            {"merges", merges}}}};
  WriteText(dir + "/tokenizer.json", tokenizer.dump(1));
  WriteText(dir + "/tokenizer_config.json",
            ReadText(::docsparse::testing::FixturePath("bpe_spm/bart_tokenizer/"
                                                       "tokenizer_config.json")));
  return dir;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBpe(const std::string& dir) {
  return BpeTokenizer::FromModelDir(dir);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& dir) {
  return SentencePieceTokenizer::FromModelDir(dir);
}

TEST(BpeTokenizerFuzzTest, TokenizerJsonMutationsGiveAWorkingTokenizerOrANamedError) {
  const std::string base = SmallBartFolder();
  auto valid = BpeTokenizer::FromModelDir(base);
  ASSERT_TRUE(valid.ok()) << valid.status();
  Fuzz("bpe", base, "tokenizer.json", kTokenizerJsonCases, /*json=*/true, LoadBpe);
}

TEST(BpeTokenizerFuzzTest, TokenizerConfigMutationsGiveAWorkingTokenizerOrANamedError) {
  Fuzz("bpe_config", SmallBartFolder(), "tokenizer_config.json", kConfigCases, /*json=*/true,
       LoadBpe);
  Fuzz("pegasus_config", ::docsparse::testing::FixturePath("bpe_spm/pegasus_tokenizer"),
       "tokenizer_config.json", kConfigCases, /*json=*/true, LoadSentencePiece);
}

TEST(BpeTokenizerFuzzTest, SpieceModelMutationsGiveAWorkingTokenizerOrANamedError) {
  Fuzz("spiece", ::docsparse::testing::FixturePath("bpe_spm/pegasus_tokenizer"), "spiece.model",
       kSpieceCases, /*json=*/false, LoadSentencePiece);
}

// What the fuzzer found: a model whose pieces are not UTF-8 loaded (as it
// does in libsentencepiece), and Decode then returned invalid UTF-8.
TEST(BpeTokenizerFuzzTest, SpieceModelWithANonUtf8PieceIsRefused) {
  std::string model =
      ReadText(::docsparse::testing::FixturePath("bpe_spm/pegasus_tokenizer/spiece.model"));
  const std::string piece = "\xe2\x96\x81the";  // "▁the", piece 3: same length, bad lead byte.
  const size_t at = model.find(piece);
  ASSERT_NE(at, std::string::npos);
  model[at] = '\xff';
  const std::string dir =
      ::testing::TempDir() + "bpe_tokenizer_fuzz_regression_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  WriteText(dir + "/spiece.model", model);
  auto loaded = SentencePieceTokenizer::FromModelDir(dir);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find(
                "spiece.model: not a SentencePiece model (piece 3 is not valid UTF-8)"),
            std::string::npos)
      << loaded.status();
}

}  // namespace
}  // namespace docsparse
