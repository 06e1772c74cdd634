// docsparse-server's /metrics against the real Prometheus tools (Debian
// package prometheus): under load, the exposition passes `promtool check
// metrics` (parse and lint), and a real Prometheus server scraping it every
// second sees every metric family through its HTTP API.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/docsparse_client.h"
#include "tests/common/exposition.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";
constexpr char kPrometheus[] = "/usr/bin/prometheus";

// Every family of DESIGN.md, by a series name that has samples (a
// histogram's _count).
const std::vector<std::string> kFamilyQueries = {
    "docsparse_build_info",
    "docsparse_requests_total",
    "docsparse_request_duration_seconds_count",
    "docsparse_queue_duration_seconds_count",
    "docsparse_inference_duration_seconds_count",
    "docsparse_input_tokens_count",
    "docsparse_batch_size_count",
    "docsparse_queue_depth",
    "docsparse_inflight_requests",
    "docsparse_mask_density_count",
    "docsparse_attention_flops_total",
    "docsparse_flops_total",
    "docsparse_dense_equivalent_flops_total",
    "docsparse_request_flops_count",
    "docsparse_budget_unmet_total",
    "docsparse_dropped_requests_total",
    "docsparse_generated_tokens_total",
    "docsparse_time_to_first_token_seconds_count",
    "docsparse_decode_step_seconds_count",
    "docsparse_generation_cancelled_total",
    "docsparse_model_load_seconds",
};

// Queries the load must make non-empty: the wiring, not just the families.
const std::vector<std::string> kMovedByLoad = {
    "up{job=\"docsparse\"} == 1",
    // Requests name no model: the default, models/minilm-lsg.
    "docsparse_requests_total{model=\"minilm-lsg\",task=\"embed\",code=\"OK\"} > 0",
    "docsparse_requests_total{model=\"unknown\",code=\"NOT_FOUND\"} > 0",
    "docsparse_queue_duration_seconds_count{model=\"minilm-lsg\"} > 0",
    "docsparse_inference_duration_seconds_count{task=\"summarize_stream\"} > 0",
    "docsparse_mask_density_count{task=\"classify\",attention=\"lsg\"} > 0",
    "docsparse_flops_total{task=\"summarize\"} > 0",
    "docsparse_batch_size_count > 0",
};

::testing::AssertionResult Installed(const char* path) {
  if (access(path, X_OK) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << path << " is missing: run scripts/setup (Debian package prometheus)";
}

// A loopback port that was free a moment ago.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "docsparse-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A child process writing to `log`; SIGTERM (then SIGKILL) on destruction,
// and killed with the test process if that dies first.
class ChildProcess {
 public:
  bool Start(const std::vector<std::string>& argv, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    return pid_ > 0;
  }
  ~ChildProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
};

// `command` through the shell: exit status and stdout+stderr.
std::pair<int, std::string> RunShell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class PrometheusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::MiniLmPresent());
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(
        server_->Start(testing::ServerBinary(),
                       testing::LoopbackFlags(testing::SourcePath("models"), {"--threads=2"})))
        << server_->output();
    auto client = DocsparseClient::Connect(server_->grpc_address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }

  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
    delete server_;
    server_ = nullptr;
  }

  // One request of each task, and one for a model that does not exist.
  static void RequestEveryTask() {
    v1::Document document;
    document.set_text(
        "Sparse attention lets encoders read long documents. Each query attends to a few keys. "
        "The cost report says how many. Prometheus scrapes the totals.");
    v1::EmbedRequest embed;
    *embed.mutable_document() = document;
    EXPECT_TRUE(client_->Embed(embed).ok());
    v1::ClassifyRequest classify;
    *classify.mutable_document() = document;
    classify.add_labels("machine learning");
    classify.add_labels("cooking");
    EXPECT_TRUE(client_->Classify(classify).ok());
    v1::SummarizeRequest summarize;
    *summarize.mutable_document() = document;
    summarize.mutable_extractive()->set_max_sentences(2);
    EXPECT_TRUE(client_->Summarize(summarize).ok());
    EXPECT_TRUE(client_->SummarizeStream(summarize, [](const v1::SummarizeChunk&) {}).ok());
    embed.set_model("no-such-model");
    EXPECT_EQ(client_->Embed(embed).status().code(), absl::StatusCode::kNotFound);
  }

  // Requests from two threads until destroyed.
  class Load {
   public:
    Load() {
      for (int i = 0; i < 2; ++i) {
        threads_.emplace_back([this] {
          while (!stop_.load()) RequestEveryTask();
        });
      }
    }
    ~Load() {
      stop_.store(true);
      for (std::thread& thread : threads_) thread.join();
    }

   private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
  };

  static httplib::Client MetricsEndpoint() { return testing::HttpClient(server_->http_address()); }

  static testing::ServerProcess* server_;
  static DocsparseClient* client_;
};

testing::ServerProcess* PrometheusTest::server_ = nullptr;
DocsparseClient* PrometheusTest::client_ = nullptr;

TEST_F(PrometheusTest, PromtoolAcceptsTheExpositionUnderLoad) {
  ASSERT_TRUE(Installed(kPromtool));
  RequestEveryTask();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const Load load;
  httplib::Client http = MetricsEndpoint();
  for (int scrape = 0; scrape < 5; ++scrape) {
    SCOPED_TRACE(scrape);
    auto response = http.Get("/metrics");
    ASSERT_TRUE(response);
    ASSERT_EQ(response->status, 200);
    EXPECT_NE(response->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
    const std::string file = dir.path() + "/metrics.txt";
    std::ofstream(file) << response->body;
    // promtool prints parse errors and lint problems; a clean exposition
    // gives no output at all.
    const auto [status, output] = RunShell(std::string(kPromtool) + " check metrics < " + file);
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(output, "");
    const testing::Exposition exposition(response->body);
    EXPECT_TRUE(exposition.errors().empty()) << ::testing::PrintToString(exposition.errors());
    EXPECT_TRUE(
        exposition.Has("docsparse_requests_total{model=\"minilm\",task=\"embed\",code=\"OK\"}"));
    EXPECT_TRUE(exposition.Has(
        "docsparse_requests_total{model=\"unknown\",task=\"embed\",code=\"NOT_FOUND\"}"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

TEST_F(PrometheusTest, RealPrometheusScrapesEveryFamily) {
  ASSERT_TRUE(Installed(kPrometheus));
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::ofstream(dir.path() + "/prometheus.yml") << "global:\n"
                                                   "  scrape_interval: 1s\n"
                                                   "  scrape_timeout: 1s\n"
                                                   "  evaluation_interval: 1s\n"
                                                   "scrape_configs:\n"
                                                   "  - job_name: docsparse\n"
                                                   "    static_configs:\n"
                                                   "      - targets: ['"
                                                << server_->http_address() << "']\n";
  const std::string log = dir.path() + "/prometheus.log";
  ChildProcess prometheus;
  ASSERT_TRUE(prometheus.Start({kPrometheus, "--config.file=" + dir.path() + "/prometheus.yml",
                                "--storage.tsdb.path=" + dir.path() + "/data",
                                "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                               log));
  const Load load;

  httplib::Client api("127.0.0.1", port);
  api.set_connection_timeout(std::chrono::seconds(2));
  // The query's instant vector, or an empty array (not up yet, or no data).
  const auto query = [&api](const std::string& promql) {
    auto response = api.Get("/api/v1/query", httplib::Params{{"query", promql}}, {});
    if (!response || response->status != 200) return nlohmann::json::array();
    const nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
    if (body.is_discarded() || body.value("status", "") != "success") {
      return nlohmann::json::array();
    }
    return body["data"]["result"];
  };
  std::set<std::string> missing(kFamilyQueries.begin(), kFamilyQueries.end());
  missing.insert(kMovedByLoad.begin(), kMovedByLoad.end());
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(60);
  while (!missing.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = missing.begin(); it != missing.end();) {
      it = query(*it).empty() ? std::next(it) : missing.erase(it);
    }
    if (!missing.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(missing.empty()) << "Prometheus has no samples for "
                               << ::testing::PrintToString(missing) << " after " << waited
                               << " s; its log:\n"
                               << testing::ReadFile(log);
  std::cout << "Prometheus saw every family after " << waited << " s\n";
  // Every family came from one target, scraped without errors.
  const nlohmann::json up = query("up{job=\"docsparse\"}");
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0]["value"][1], "1");
}

}  // namespace
}  // namespace docsparse
