// A model folder that does not load — a truncated checkpoint, a config that
// is not JSON — fails only its model: the server starts, serves the others,
// lists the broken ones as not ready, and answers their requests UNAVAILABLE
// (HTTP 503) saying why. Only a repository where nothing loads stops it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

// minilm as it is, and two broken copies of it.
fs::path BrokenRepository() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("docsparse-broken-models." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_directory_symlink(testing::MiniLmDir(), dir / "minilm");
  for (const char* name : {"truncated", "bad-config"}) {
    fs::create_directories(dir / name);
    for (const auto& entry : fs::directory_iterator(testing::MiniLmDir())) {
      fs::create_symlink(entry.path(), dir / name / entry.path().filename());
    }
  }
  // Half the checkpoint: its header promises tensors the file no longer has.
  const fs::path weights = dir / "truncated" / "model.safetensors";
  const std::string checkpoint = testing::ReadFile(fs::read_symlink(weights).string());
  fs::remove(weights);
  std::ofstream(weights, std::ios::binary)
      .write(checkpoint.data(), static_cast<std::streamsize>(checkpoint.size() / 2));
  fs::remove(dir / "bad-config" / "config.json");
  std::ofstream(dir / "bad-config" / "config.json") << "{ not json";
  return dir;
}

TEST(BrokenModelTest, OnlyTheBrokenModelsFailAndSayWhy) {
  ASSERT_TRUE(testing::MiniLmPresent());
  const fs::path repository = BrokenRepository();
  testing::RunningServer server;
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(repository.string(), {"--threads=2"}, &server));
  EXPECT_NE(server.process->output().find("model 'truncated' failed to load"), std::string::npos)
      << server.process->output();

  v1::EmbedRequest request;
  request.mutable_document()->set_text("a short document");
  request.set_model("minilm");
  auto good = server.client->Embed(request);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->embedding_size(), 384);
  for (const char* broken : {"truncated", "bad-config"}) {
    SCOPED_TRACE(broken);
    request.set_model(broken);
    auto answer = server.client->Embed(request);
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(
        answer.status().message().find(std::string("model '") + broken + "' failed to load: "),
        std::string::npos)
        << answer.status();
  }
  auto models = server.client->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  std::map<std::string, bool> ready;
  for (const v1::ModelInfo& model : models->models()) ready[model.name()] = model.ready();
  EXPECT_EQ(ready, (std::map<std::string, bool>{
                       {"minilm", true}, {"truncated", false}, {"bad-config", false}}));

  httplib::Client http = testing::HttpClient(server.process->http_address());
  auto unavailable =
      http.Post("/embed", R"({"model": "truncated", "inputs": "x"})", "application/json");
  ASSERT_TRUE(unavailable);
  EXPECT_EQ(unavailable->status, 503) << unavailable->body;
  EXPECT_NE(
      nlohmann::json::parse(unavailable->body)["error"].get<std::string>().find("failed to load"),
      std::string::npos);
  fs::remove_all(repository);
}

TEST(BrokenModelTest, ARepositoryWhereNothingLoadsStopsTheServer) {
  ASSERT_TRUE(testing::MiniLmPresent());
  const fs::path repository = BrokenRepository();
  fs::remove(repository / "minilm");
  testing::ServerProcess server;
  EXPECT_FALSE(server.Start(testing::ServerBinary(),
                            testing::LoopbackFlags(repository.string(), {"--threads=2"})));
  EXPECT_NE(server.output().find("no model loaded: "), std::string::npos) << server.output();
  EXPECT_NE(server.output().find("model 'bad-config' failed to load"), std::string::npos);
  fs::remove_all(repository);
}

}  // namespace
}  // namespace docsparse
