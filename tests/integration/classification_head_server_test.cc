// A fine-tuned sequence classifier served end to end: a temporary model
// repository holds the tiny HF BertForSequenceClassification fixture, and
// Classify without labels must give Hugging Face's probabilities.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

class ClassificationHeadServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repository_ = fs::temp_directory_path() /
                  ("docsparse-head-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const fs::path model = repository_ / "tinybert";
    fs::create_directories(model);
    const fs::path fixture = testing::FixturePath("tiny_classifiers/bert");
    fs::copy_file(fixture / "config.json", model / "config.json");
    fs::copy_file(fixture / "model.safetensors", model / "model.safetensors");
    // The fixture frames sequences with ids 2 ... 3; a 97-token vocabulary
    // with the special tokens at those ids lets the server frame them alike.
    std::ofstream vocab(model / "vocab.txt");
    vocab << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 97; ++i) vocab << "tok" << i << "\n";
    vocab.close();
    std::ofstream(model / "docsparse.json") << R"({"tasks": ["classify", "embed"]})";
    ASSERT_TRUE(
        server_.Start(testing::ServerBinary(), testing::LoopbackFlags(
                                                   // fp32: compared with HF at 1e-4.
                                                   repository_.string(), {"--precision=fp32"})))
        << server_.output();
    auto client = DocsparseClient::Connect(server_.grpc_address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override {
    client_.reset();
    server_.Stop();
    fs::remove_all(repository_);
  }

  fs::path repository_;
  testing::ServerProcess server_;
  std::unique_ptr<DocsparseClient> client_;
};

TEST_F(ClassificationHeadServerTest, HeadProbabilitiesMatchTransformers) {
  const nlohmann::json expected = nlohmann::json::parse(
      testing::ReadFile(testing::FixturePath("tiny_classifiers/bert/expected.json")));
  const nlohmann::json& single = expected["cases"][1];
  ASSERT_EQ(single["name"], "single");
  const auto ids = single["input_ids"][0].get<std::vector<int32_t>>();
  const auto probabilities = single["probabilities"][0].get<std::vector<float>>();
  const auto labels = expected["id2label"];

  v1::ClassifyRequest request;
  auto* token_ids = request.mutable_document()->mutable_token_ids();
  for (size_t i = 1; i + 1 < ids.size(); ++i) token_ids->add_ids(ids[i]);  // unframed
  auto response = client_->Classify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->method(), v1::CLASSIFICATION_METHOD_HEAD);
  ASSERT_EQ(response->scores_size(), static_cast<int>(probabilities.size()));
  for (const v1::LabelScore& score : response->scores()) {
    bool found = false;
    for (size_t id = 0; id < probabilities.size(); ++id) {
      if (labels[id] == score.label()) {
        EXPECT_NEAR(score.score(), probabilities[id], 1e-4) << score.label();
        found = true;
      }
    }
    EXPECT_TRUE(found) << score.label();
  }
  EXPECT_GE(response->scores(0).score(), response->scores(1).score());
  EXPECT_EQ(response->cost().input_tokens(), static_cast<int64_t>(ids.size()));

  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->models(0).default_labels_size(), 3);
  EXPECT_EQ(models->models(0).default_labels(0), labels[0]);
}

TEST_F(ClassificationHeadServerTest, LabelsInTheRequestMeanZeroShot) {
  v1::ClassifyRequest request;
  request.mutable_document()->mutable_token_ids()->add_ids(10);
  request.add_labels("tok11");
  request.add_labels("tok12");
  auto response = client_->Classify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->method(), v1::CLASSIFICATION_METHOD_ZERO_SHOT);
  EXPECT_EQ(response->scores_size(), 2);

  v1::SummarizeRequest summarize;
  summarize.mutable_document()->set_text("tok5 tok6.");
  auto refused = client_->Summarize(summarize);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("does not serve summarize"), std::string::npos);
}

}  // namespace
}  // namespace docsparse
