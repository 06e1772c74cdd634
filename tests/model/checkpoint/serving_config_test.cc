#include "model/checkpoint/serving_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(ServingConfigTest, EmptyObjectGivesDefaults) {
  auto config = ParseServingConfig(json::object(), "docsparse.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->tasks, ElementsAre(Task::kEmbed, Task::kClassify, Task::kSummarize));
  EXPECT_EQ(config->pooling, PoolingMode::kMean);
  EXPECT_TRUE(config->normalize);
  EXPECT_EQ(config->attention.kind, "native");
  EXPECT_EQ(config->precision, Precision::kAuto);
  EXPECT_EQ(config->max_document_tokens, 65536);
  EXPECT_EQ(config->overflow, OverflowPolicy::kChunk);
  EXPECT_DOUBLE_EQ(config->zero_shot.temperature, 0.05);
  EXPECT_EQ(config->zero_shot.hypothesis_template, "This text is about {}.");
  EXPECT_TRUE(config->zero_shot.labels.empty());
  EXPECT_EQ(config->extractive.max_sentences, 5);
  EXPECT_DOUBLE_EQ(config->extractive.diversity, 0.3);
  EXPECT_EQ(config->batching.max_batch_size, 16);
  EXPECT_EQ(config->batching.max_queue_size, 256);
  EXPECT_EQ(config->batching.max_queue_delay_ms, 0);
}

json Full() {
  return json::parse(R"({
    "tasks": ["classify", "embed"],
    "pooling": "cls",
    "normalize": false,
    "attention": {"kind": "union", "union": ["longformer", "sbm"],
                  "knobs": {"sbm.target_density": 0.05}},
    "precision": "bf16",
    "max_document_tokens": 4096,
    "overflow": "reject",
    "zero_shot": {
      "temperature": 0.1,
      "hypothesis_template": "A document about {}",
      "labels": [
        {"name": "software license",
         "description": "A software license: terms of use and redistribution."},
        {"name": "recipe"}
      ]
    },
    "extractive": {"max_sentences": 3, "diversity": 0},
    "batching": {"max_batch_size": 8, "max_queue_size": 8,
                 "max_queue_delay_ms": 7}
  })");
}

TEST(ServingConfigTest, EveryKeyIsRead) {
  auto config = ParseServingConfig(Full(), "docsparse.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->tasks, ElementsAre(Task::kClassify, Task::kEmbed));
  EXPECT_TRUE(config->HasTask(Task::kEmbed));
  EXPECT_FALSE(config->HasTask(Task::kSummarize));
  EXPECT_EQ(config->pooling, PoolingMode::kCls);
  EXPECT_FALSE(config->normalize);
  EXPECT_EQ(config->attention.kind, "union");
  EXPECT_THAT(config->attention.union_parts, ElementsAre("longformer", "sbm"));
  EXPECT_DOUBLE_EQ(config->attention.knobs.at("sbm.target_density"), 0.05);
  EXPECT_EQ(config->precision, Precision::kBf16);
  EXPECT_EQ(config->max_document_tokens, 4096);
  EXPECT_EQ(config->overflow, OverflowPolicy::kReject);
  EXPECT_DOUBLE_EQ(config->zero_shot.temperature, 0.1);
  ASSERT_EQ(config->zero_shot.labels.size(), 2u);
  EXPECT_EQ(config->zero_shot.labels[0].name, "software license");
  EXPECT_EQ(config->zero_shot.LabelText(config->zero_shot.labels[0]),
            "A software license: terms of use and redistribution.");
  EXPECT_EQ(config->zero_shot.LabelText(config->zero_shot.labels[1]), "A document about recipe");
  EXPECT_EQ(config->extractive.max_sentences, 3);
  EXPECT_DOUBLE_EQ(config->extractive.diversity, 0.0);
  EXPECT_EQ(config->batching.max_batch_size, 8);
  EXPECT_EQ(config->batching.max_queue_size, 8);
  EXPECT_EQ(config->batching.max_queue_delay_ms, 7);
}

TEST(ServingConfigTest, EnumNames) {
  EXPECT_EQ(TaskName(Task::kSummarize), "summarize");
  EXPECT_EQ(PoolingModeName(PoolingMode::kCls), "cls");
  EXPECT_EQ(OverflowPolicyName(OverflowPolicy::kTruncate), "truncate");
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_EQ(ParsePrecision("fp32"), Precision::kFp32);
  EXPECT_EQ(ParsePrecision("int8"), Precision::kInt8);
  EXPECT_EQ(PrecisionName(Precision::kInt8), "int8");
  EXPECT_EQ(ParsePrecision("fp16"), Precision::kFp16);
  EXPECT_EQ(PrecisionName(Precision::kFp16), "fp16");
  EXPECT_EQ(ParsePrecision("fp8"), std::nullopt);
}

struct BadCase {
  std::string json_pointer;  // where to put `value` in Full()
  json value;
  std::string expected;  // the whole message after "docsparse.json: "
};

TEST(ServingConfigTest, InvalidValuesNameTheKeyPath) {
  const std::vector<BadCase> cases = {
      {"/tasks", "embed", "tasks: expected array, got string"},
      {"/tasks", json::array(), "tasks: must name at least one task"},
      {"/tasks",
       {"embed", "translate"},
       "tasks[1]: unsupported value \"translate\" (expected \"embed\" or "
       "\"classify\" or \"summarize\")"},
      {"/tasks", {"embed", "embed"}, "tasks[1]: duplicate task \"embed\""},
      {"/tasks", {"embed", 1}, "tasks[1]: expected string, got integer"},
      {"/pooling", "max", "pooling: unsupported value \"max\" (expected \"mean\" or \"cls\")"},
      {"/normalize", 1, "normalize: expected boolean, got integer"},
      {"/attention", "dense", "attention: expected object, got string"},
      {"/attention/kind", "reformer",
       "attention.kind: unsupported value \"reformer\" (expected \"native\" or \"dense\" or "
       "\"lsg\" or \"sbm\" or \"longformer\" or \"bigbird\" or \"sparse_transformer\" or "
       "\"star\" or \"modernbert\" or \"etc\" or \"lsh\" or \"routing\" or \"union\")"},
      {"/attention/knobs", "64", "attention.knobs: expected object, got string"},
      {"/attention/union", "sbm", "attention.union: expected array, got string"},
      {"/attention/union", {"sbm"}, "attention.union: has 1 planners; a union takes 2 to 4"},
      {"/attention/union",
       {"longformer", "lsg"},
       "attention.union[1]: unsupported value \"lsg\" (expected \"sbm\" or \"longformer\" or "
       "\"bigbird\" or \"sparse_transformer\" or \"star\" or \"modernbert\" or \"etc\" or "
       "\"lsh\" or \"routing\")"},
      {"/attention/union",
       {"routing", "routing"},
       "attention.union[1]: \"routing\" is listed twice"},
      {"/default", "yes", "default: expected boolean, got string"},
      {"/precision", "fp8",
       "precision: unsupported value \"fp8\" (expected \"auto\" or \"fp32\" or \"bf16\" or "
       "\"int8\" or \"fp16\")"},
      {"/precision", 16, "precision: expected string, got integer"},
      {"/attention/block_size", 64, "attention.block_size: unknown key"},
      {"/max_document_tokens", 0, "max_document_tokens: 0 is out of range [1, 16777216]"},
      {"/max_document_tokens", 1.5, "max_document_tokens: expected integer, got number"},
      {"/max_document_tokens", 18446744073709551615ull,
       "max_document_tokens: 18446744073709551615 is out of range [1, "
       "16777216]"},
      {"/overflow", "split",
       "overflow: unsupported value \"split\" (expected \"reject\" or "
       "\"truncate\" or \"chunk\")"},
      {"/zero_shot", json::array(), "zero_shot: expected object, got array"},
      {"/zero_shot/temperature", 0, "zero_shot.temperature: 0 is out of range [0.0001, 10000]"},
      {"/zero_shot/temperature", -1, "zero_shot.temperature: -1 is out of range [0.0001, 10000]"},
      {"/zero_shot/temperature", "hot", "zero_shot.temperature: expected number, got string"},
      {"/zero_shot/hypothesis_template", "About this.",
       "zero_shot.hypothesis_template: must contain \"{}\" exactly once (the "
       "label name goes there)"},
      {"/zero_shot/hypothesis_template", "{} and {}",
       "zero_shot.hypothesis_template: must contain \"{}\" exactly once (the "
       "label name goes there)"},
      {"/zero_shot/labels", {{"name", "x"}}, "zero_shot.labels: expected array, got object"},
      {"/zero_shot/labels/1", "recipe", "zero_shot.labels[1]: expected object, got string"},
      {"/zero_shot/labels/1",
       {{"description", "food"}},
       "zero_shot.labels[1].name: missing (every label needs one)"},
      {"/zero_shot/labels/1/name", "", "zero_shot.labels[1].name: must not be empty"},
      {"/zero_shot/labels/1/name", "software license",
       "zero_shot.labels[1].name: duplicate label \"software license\""},
      {"/zero_shot/labels/1/description", 7,
       "zero_shot.labels[1].description: expected string, got integer"},
      {"/zero_shot/labels/1/weight", 2.0, "zero_shot.labels[1].weight: unknown key"},
      {"/zero_shot/labelz", json::array(), "zero_shot.labelz: unknown key"},
      {"/extractive/max_sentences", 0, "extractive.max_sentences: 0 is out of range [1, 1000]"},
      {"/extractive/diversity", 1.5, "extractive.diversity: 1.5 is out of range [0, 1]"},
      {"/extractive/diversity", -0.1, "extractive.diversity: -0.1 is out of range [0, 1]"},
      {"/extractive/diversity", true, "extractive.diversity: expected number, got boolean"},
      {"/extractive/mmr", true, "extractive.mmr: unknown key"},
      {"/batching/max_batch_size", 0, "batching.max_batch_size: 0 is out of range [1, 4096]"},
      {"/batching/max_batch_size", 16,
       "batching.max_queue_size: 8 is smaller than max_batch_size 16"},
      {"/batching/max_queue_size", -1, "batching.max_queue_size: -1 is out of range [1, 1048576]"},
      {"/batching/max_queue_delay_ms", 60000,
       "batching.max_queue_delay_ms: 60000 is out of range [0, 10000]"},
      {"/batching/max_wait", 1, "batching.max_wait: unknown key"},
      {"/model", "minilm", "model: unknown key"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.json_pointer + " = " + c.value.dump());
    json raw = Full();
    raw[json::json_pointer(c.json_pointer)] = c.value;
    auto config = ParseServingConfig(raw, "docsparse.json");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(config.status().message(), "docsparse.json: " + c.expected);
  }
}

TEST(ServingConfigTest, TopLevelMustBeObject) {
  auto config = ParseServingConfig(json::array(), "docsparse.json");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("docsparse.json: expected a JSON object"));
}

class ServingConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("docsparse_" + std::to_string(::getpid()) + ".json"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(ServingConfigFileTest, LoadsFile) {
  Write(Full().dump(2));
  auto config = LoadServingConfig(path_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_document_tokens, 4096);
}

TEST_F(ServingConfigFileTest, MissingFileIsNotFoundNamingThePath) {
  auto config = LoadServingConfig(path_);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path_));
}

TEST_F(ServingConfigFileTest, BadJsonAndDuplicateKeysAreRefused) {
  Write(R"({"pooling": "cls",)");
  auto bad = LoadServingConfig(path_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not valid JSON"));

  Write(R"({"batching": {"max_batch_size": 4, "max_batch_size": 64}})");
  auto duplicate = LoadServingConfig(path_);
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(duplicate.status().message()),
              HasSubstr("key 'max_batch_size' appears twice"));

  // Equal keys in different objects are not duplicates.
  Write(R"({"zero_shot": {"labels": [{"name": "a"}, {"name": "b"}]}})");
  auto fine = LoadServingConfig(path_);
  EXPECT_TRUE(fine.ok()) << fine.status();
}

}  // namespace
}  // namespace docsparse
