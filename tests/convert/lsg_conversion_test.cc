// convert/lsg_conversion.h: parity with the reference converter's outputs
// (tests/fixtures/lsg_converter, made by tools/make_lsg_converter_fixtures.py),
// the checkpoint cases the fixtures do not cover, and errors.
#include "convert/lsg_conversion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_join.h"
#include "convert/model_files.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/common/fixture_paths.h"
#include "tests/convert/convert_test_util.h"

namespace docsparse::convert {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
namespace fs = std::filesystem;

json ReadJson(const std::string& path) { return json::parse(testing::ReadFile(path)); }

// The LsgOptions a fixture case was converted with (cases.json "knobs").
LsgOptions OptionsFor(const json& c) {
  LsgOptions options;
  options.max_length = c["max_length"].get<int64_t>();
  options.name_or_path = c["reference_name_or_path"].get<std::string>();
  const json& knobs = c["knobs"];
  if (knobs.contains("block_size")) options.block_size = knobs["block_size"].get<int64_t>();
  if (knobs.contains("sparse_block_size")) {
    options.sparse_block_size = knobs["sparse_block_size"].get<int64_t>();
  }
  if (knobs.contains("sparsity_factor")) {
    options.sparsity_factor = knobs["sparsity_factor"].get<int64_t>();
  }
  if (knobs.contains("sparsity_type")) {
    options.sparsity_type = knobs["sparsity_type"].get<std::string>();
  }
  if (knobs.contains("num_global_tokens")) {
    options.num_global_tokens = knobs["num_global_tokens"].get<int64_t>();
  }
  if (knobs.contains("mask_first_token")) {
    options.mask_first_token = knobs["mask_first_token"].get<bool>();
  }
  if (knobs.contains("pass_global_tokens_to_decoder")) {
    options.pass_global_tokens_to_decoder = knobs["pass_global_tokens_to_decoder"].get<bool>();
  }
  return options;
}

// Largest |a - b| over two F32 tensors of equal shape.
double MaxAbsDiff(const TensorView& a, const TensorView& b) {
  std::vector<float> x(a.numel()), y(b.numel());
  std::memcpy(x.data(), a.data, a.nbytes);
  std::memcpy(y.data(), b.data, b.nbytes);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::abs(x[i] - y[i])));
  return worst;
}

class LsgParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LsgParityTest, MatchesTheReferenceConverter) {
  const std::string name = GetParam();
  const json cases = ReadJson(testing::LsgFixture("cases.json"));
  ASSERT_TRUE(cases["cases"].contains(name));
  const json& c = cases["cases"][name];
  testing::TempDir out;
  absl::StatusOr<LsgFolderSummary> summary =
      ConvertLsgFolder(testing::LsgFixture(name + "/input"), out.path(), OptionsFor(c));
  ASSERT_TRUE(summary.ok()) << summary.status();

  // Weights: the same tensors, shapes, dtypes and values.
  const std::string reference_dir = testing::LsgFixture(name + "/reference");
  absl::StatusOr<std::unique_ptr<Checkpoint>> ours = Checkpoint::Open(out.path());
  absl::StatusOr<std::unique_ptr<Checkpoint>> theirs = Checkpoint::Open(reference_dir);
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ((*ours)->names(), (*theirs)->names());
  for (const std::string& tensor : (*theirs)->names()) {
    const TensorView a = *(*theirs)->Get(tensor);
    absl::StatusOr<TensorView> b = (*ours)->Get(tensor);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a.dtype, b->dtype) << tensor;
    ASSERT_EQ(a.shape, b->shape) << tensor;
    EXPECT_EQ(MaxAbsDiff(a, *b), 0.0) << tensor;
    EXPECT_EQ(std::memcmp(a.data, b->data, a.nbytes), 0) << tensor;
  }
  // Same writer layout as Python's safetensors: the whole file is identical.
  EXPECT_TRUE(testing::ReadFile(out.Join("model.safetensors")) ==
              testing::ReadFile(reference_dir + "/model.safetensors"));

  // config.json: every key and value; also the bytes (sorted keys, indent 2).
  EXPECT_EQ(ReadJson(out.Join("config.json")), ReadJson(reference_dir + "/config.json"));
  EXPECT_EQ(testing::ReadFile(out.Join("config.json")),
            testing::ReadFile(reference_dir + "/config.json"));
  EXPECT_EQ(ReadJson(out.Join("tokenizer_config.json")),
            ReadJson(reference_dir + "/tokenizer_config.json"));
  // The tokenizer files the reference rewrites unchanged are copied.
  for (const char* file : {"tokenizer.json", "special_tokens_map.json"}) {
    EXPECT_TRUE(fs::exists(out.Join(file))) << file;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LsgParityTest,
                         ::testing::Values("bert", "bert_classifier", "roberta", "distilbert",
                                           "bart"));

// A copy of a fixture input with its weights replaced, for cases the
// reference fixtures do not cover.
class LsgConversionTest : public ::testing::Test {
 protected:
  // Copies fixture `name`'s input folder into in_ and rewrites its weights:
  // every tensor through `edit` (which may rename, retype or drop), plus
  // `extra`.
  void CopyInput(const std::string& name,
                 const std::function<std::optional<TensorBytes>(TensorBytes)>& edit,
                 const std::vector<TensorBytes>& extra = {}) {
    input_ = in_.path();
    fs::copy(testing::LsgFixture(name + "/input"), input_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    absl::StatusOr<std::unique_ptr<Checkpoint>> source =
        Checkpoint::Open(testing::LsgFixture(name + "/input"));
    ASSERT_TRUE(source.ok()) << source.status();
    std::vector<TensorBytes> tensors;
    for (const std::string& tensor : (*source)->names()) {
      std::optional<TensorBytes> edited = edit(TensorBytes::FromView(*(*source)->Get(tensor)));
      if (edited.has_value()) tensors.push_back(*edited);
    }
    tensors.insert(tensors.end(), extra.begin(), extra.end());
    ASSERT_TRUE(
        WriteSafetensorsFile(in_.Join("model.safetensors"), tensors, {{"format", "pt"}}).ok());
  }

  // An LSG model: the reference's output for "bert" plus the input's
  // tokenizer files (the fixture keeps only the files that differ).
  void CopyLsgInput() {
    input_ = in_.path();
    fs::copy(testing::LsgFixture("bert/input"), input_, fs::copy_options::recursive);
    fs::copy(testing::LsgFixture("bert/reference"), input_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }

  absl::StatusOr<LsgFolderSummary> Convert(const LsgOptions& options) {
    return ConvertLsgFolder(input_, out_.path(), options);
  }

  testing::TempDir in_, out_;
  std::string input_;
};

TEST_F(LsgConversionTest, DropsStaleBuffersAsTheLsgClassesDoNotSaveThem) {
  // MiniLM's checkpoint (older transformers) carries embeddings.position_ids.
  std::vector<int64_t> ids(512);
  for (int i = 0; i < 512; ++i) ids[i] = i;
  CopyInput("bert", [](TensorBytes t) { return t; },
            {{"embeddings.position_ids",
              DType::kI64,
              {1, 512},
              reinterpret_cast<const uint8_t*>(ids.data()),
              ids.size() * 8}});
  LsgOptions options;
  options.max_length = 1024;
  absl::StatusOr<LsgFolderSummary> summary = Convert(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)->Has("embeddings.position_ids"));
  EXPECT_THAT(absl::StrJoin(summary->conversion.notes, "\n"),
              HasSubstr("dropped (not saved by LSGBertModel): embeddings.position_ids"));
}

TEST_F(LsgConversionTest, KeepsHalfPrecisionTablesInHalfPrecision) {
  std::vector<std::vector<uint16_t>> halves;
  CopyInput("bert", [&](TensorBytes t) -> std::optional<TensorBytes> {
    if (t.dtype != DType::kF32) return t;
    const at::Tensor f =
        at::from_blob(const_cast<uint8_t*>(t.data), {int64_t(t.nbytes / 4)}, at::kFloat)
            .to(at::kHalf);
    halves.emplace_back(f.numel());
    std::memcpy(halves.back().data(), f.data_ptr(), f.nbytes());
    t.dtype = DType::kF16;
    t.data = reinterpret_cast<const uint8_t*>(halves.back().data());
    t.nbytes = f.nbytes();
    return t;
  });
  LsgOptions options;
  options.max_length = 1536;
  ASSERT_TRUE(Convert(options).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  ASSERT_TRUE(out.ok()) << out.status();
  for (const std::string& name : (*out)->names()) {
    EXPECT_EQ((*out)->Get(name)->dtype, DType::kF16) << name;
  }
  // Close to the reference's float32 globals (computed from float32 inputs).
  absl::StatusOr<std::unique_ptr<Checkpoint>> ref =
      Checkpoint::Open(testing::LsgFixture("bert/reference"));
  const TensorView g16 = *(*out)->Get("embeddings.global_embeddings.weight");
  const TensorView g32 = *(*ref)->Get("embeddings.global_embeddings.weight");
  const at::Tensor a =
      at::from_blob(const_cast<uint8_t*>(g16.data), g16.shape, at::kHalf).to(at::kFloat);
  const at::Tensor b = at::from_blob(const_cast<uint8_t*>(g32.data), g32.shape, at::kFloat);
  EXPECT_LT((a - b).abs().max().item<float>(), 5e-3);
}

TEST_F(LsgConversionTest, RenamesABaseCheckpointIntoATaskArchitecture) {
  input_ = testing::LsgFixture("bert/input");
  LsgOptions options;
  options.max_length = 1024;
  options.architecture = "BertForMaskedLM";
  absl::StatusOr<LsgFolderSummary> summary = Convert(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->conversion.lsg_architecture, "LSGBertForMaskedLM");
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  EXPECT_TRUE((*out)->Has("bert.embeddings.global_embeddings.weight"));
  EXPECT_TRUE((*out)->Has("bert.encoder.layer.0.output.dense.weight"));
  EXPECT_FALSE((*out)->Has("embeddings.word_embeddings.weight"));
  EXPECT_EQ(ReadJson(out_.Join("config.json"))["architectures"][0], "LSGBertForMaskedLM");
}

TEST_F(LsgConversionTest, BaseArchitectureFromATaskCheckpointDropsTheHead) {
  input_ = testing::LsgFixture("bert_classifier/input");
  LsgOptions options;
  options.max_length = 1024;
  options.architecture = "BertModel";
  absl::StatusOr<LsgFolderSummary> summary = Convert(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  EXPECT_TRUE((*out)->Has("embeddings.global_embeddings.weight"));
  EXPECT_TRUE((*out)->Has("pooler.dense.weight"));
  EXPECT_FALSE((*out)->Has("classifier.weight"));
}

TEST_F(LsgConversionTest, ResizesAnLsgModelKeepingItsGlobalsAndSettings) {
  // The reference's own LSG output, extended again.
  CopyLsgInput();
  LsgOptions options;
  options.max_length = 4096;
  options.resize_lsg = true;
  absl::StatusOr<LsgFolderSummary> summary = Convert(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  absl::StatusOr<std::unique_ptr<Checkpoint>> in = Checkpoint::Open(input_);
  const TensorView before = *(*in)->Get("embeddings.global_embeddings.weight");
  const TensorView after = *(*out)->Get("embeddings.global_embeddings.weight");
  EXPECT_EQ(std::memcmp(before.data, after.data, before.nbytes), 0);
  EXPECT_EQ((*out)->Get("embeddings.position_embeddings.weight")->shape[0], 4096);
  const json config = ReadJson(out_.Join("config.json"));
  EXPECT_EQ(config["max_position_embeddings"], 4096);
  EXPECT_EQ(config["block_size"], 64);  // the LSG input's, not the default
  EXPECT_EQ(config["sparsity_type"], "pooling");
  EXPECT_EQ(config["architectures"][0], "LSGBertModel");
}

TEST_F(LsgConversionTest, KeepFirstGlobalTokenKeepsRowZeroOfAnLsgModel) {
  CopyLsgInput();
  LsgOptions options;
  options.max_length = 3072;
  options.keep_first_global_token = true;
  // A 1536-row table: order_positions keeps every 3rd row, and stride / 3
  // must divide 512 (the default 64 gives 21: refused, as torch's reshape).
  options.global_positional_stride = 64;
  EXPECT_THAT(std::string(Convert(options).status().message()),
              HasSubstr("stride / 3 = 21 must be a positive divisor of 512"));
  options.global_positional_stride = 96;
  const absl::StatusOr<LsgFolderSummary> summary = Convert(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<std::unique_ptr<Checkpoint>> out = Checkpoint::Open(out_.path());
  absl::StatusOr<std::unique_ptr<Checkpoint>> in = Checkpoint::Open(input_);
  const TensorView before = *(*in)->Get("embeddings.global_embeddings.weight");
  const TensorView after = *(*out)->Get("embeddings.global_embeddings.weight");
  const size_t row = before.nbytes / 512;
  EXPECT_EQ(std::memcmp(before.data, after.data, row), 0);
  EXPECT_NE(std::memcmp(before.data + row, after.data + row, before.nbytes - row), 0);
}

// --- errors ------------------------------------------------------------------

absl::Status ConvertError(const std::string& input, const LsgOptions& options,
                          const std::string& output = "") {
  testing::TempDir out;
  return ConvertLsgFolder(input, output.empty() ? out.path() : output, options).status();
}

LsgOptions Length(int64_t n) {
  LsgOptions options;
  options.max_length = n;
  return options;
}

TEST(LsgConversionErrorsTest, NamesTheMissingFile) {
  testing::TempDir empty;
  absl::Status s = ConvertError(empty.path(), Length(1024));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("config.json: not found"));

  fs::copy_file(testing::LsgFixture("bert/input/config.json"), empty.Join("config.json"));
  s = ConvertError(empty.path(), Length(1024));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no weights"));

  fs::copy_file(testing::LsgFixture("bert/input/model.safetensors"),
                empty.Join("model.safetensors"));
  s = ConvertError(empty.path(), Length(1024));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no tokenizer vocabulary"));

  EXPECT_EQ(ConvertError(empty.Join("nope"), Length(1024)).code(), absl::StatusCode::kNotFound);
}

TEST(LsgConversionErrorsTest, RefusesToShrinkOrToGuessShortTables) {
  absl::Status s = ConvertError(testing::LsgFixture("bert/input"), Length(256));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-length"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("smaller than the 512 positions"));
  // 64-position BERT: order_positions would pad with random draws.
  testing::TempDir tiny;
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::copy_file(testing::FixturePath(std::string("tiny_encoders/bert/") + file), tiny.Join(file));
  }
  fs::copy_file(testing::LsgFixture("bert/input/vocab.txt"), tiny.Join("vocab.txt"));
  s = ConvertError(tiny.path(), Length(1024));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fewer than 512"));
}

TEST(LsgConversionErrorsTest, RefusesToOverwriteTheInput) {
  const std::string input = testing::LsgFixture("bert/input");
  absl::Status s = ConvertError(input, Length(1024), input + "/.");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is the input folder"));
}

TEST(LsgConversionErrorsTest, ChecksTheLsgSettingsAsTheLsgConfigDoes) {
  const std::string input = testing::LsgFixture("bert/input");
  struct Case {
    std::function<void(LsgOptions&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](LsgOptions& o) { o.sparsity_factor = 3; }, "--sparsity-factor: 3 does not divide"},
      {[](LsgOptions& o) { o.sparsity_type = "random"; }, "--sparsity-type: unsupported value"},
      {[](LsgOptions& o) { o.num_global_tokens = 0; }, "--num-global-tokens: 0 is out of range"},
      {[](LsgOptions& o) { o.num_global_tokens = 513; }, "out of range [1, 512]"},
      {[](LsgOptions& o) { o.block_size = 0; }, "--block-size"},
      {[](LsgOptions& o) { o.sparse_block_size = -1; }, "--sparse-block-size: -1 must not be"},
      {[](LsgOptions& o) {
         o.mask_first_token = true;
         o.pool_with_global = false;
       },
       "--mask-first-token needs --pool-with-global"},
      {[](LsgOptions& o) { o.architecture = "BertForNextSentencePrediction"; },
       "cannot be converted to LSG"},
      {[](LsgOptions& o) { o.max_length = 0; }, "--max-length: 0 must be positive"},
      {[](LsgOptions& o) { o.global_positional_stride = 3; }, "global positional stride 3"},
  };
  for (const Case& c : cases) {
    LsgOptions options = Length(1024);
    c.set(options);
    const absl::Status s = ConvertError(input, options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

// The reference converter accepts sparse_block_size 0: local and global
// attention only, no sparse keys. The model it writes loads as such.
TEST(LsgSparsityTest, SparseBlockSizeZeroMeansLocalAttentionOnly) {
  testing::TempDir out;
  LsgOptions options = Length(1024);
  options.sparse_block_size = 0;
  absl::StatusOr<LsgFolderSummary> summary =
      ConvertLsgFolder(testing::LsgFixture("bert/input"), out.path(), options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(ReadJson(out.Join("config.json"))["sparse_block_size"], 0);
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(out.Join("config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->lsg.has_value());
  EXPECT_EQ(config->lsg->sparse_block_size, 0);
  EXPECT_FALSE(config->lsg->HasSparseKeys());
}

TEST(LsgConversionErrorsTest, NamesUnsupportedModelTypesAndMissingTokens) {
  testing::TempDir dir;
  fs::copy(testing::LsgFixture("bert/input"), dir.path(), fs::copy_options::recursive);
  json config = json::parse(testing::ReadFile(dir.Join("config.json")));
  config["model_type"] = "gpt2";
  ASSERT_TRUE(WriteFileAtomically(dir.Join("config.json"), config.dump()).ok());
  absl::Status s = ConvertError(dir.path(), Length(1024));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("\"gpt2\" cannot be converted to LSG (supported: bert, roberta, "
                        "distilbert, bart)"));

  config["model_type"] = "bert";
  ASSERT_TRUE(WriteFileAtomically(dir.Join("config.json"), config.dump()).ok());
  json special = json::parse(testing::ReadFile(dir.Join("special_tokens_map.json")));
  special["mask_token"] = "[NOT-A-TOKEN]";
  ASSERT_TRUE(WriteFileAtomically(dir.Join("special_tokens_map.json"), special.dump()).ok());
  s = ConvertError(dir.path(), Length(1024));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("mask token \"[NOT-A-TOKEN]\" is not in the tokenizer's vocabulary"));
}

}  // namespace
}  // namespace docsparse::convert
