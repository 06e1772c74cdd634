#include "client/load_generator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "client/synthetic_document.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

LoadOptions Options(const std::string& server, int tokens) {
  LoadOptions options;
  options.server = server;
  options.documents = SyntheticDocuments(tokens, 4, 1);
  options.duration = absl::Seconds(1);
  return options;
}

TEST(LoadGeneratorOptionsTest, ParsesTasks) {
  EXPECT_EQ(*ParseLoadTask("embed"), LoadTask::kEmbed);
  EXPECT_EQ(*ParseLoadTask("classify"), LoadTask::kClassify);
  EXPECT_EQ(*ParseLoadTask("summarize"), LoadTask::kSummarize);
  EXPECT_EQ(ParseLoadTask("translate").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTaskName(LoadTask::kClassify), "classify");
}

TEST(LoadGeneratorOptionsTest, RejectsBadOptionsBeforeConnecting) {
  auto expect_invalid = [](LoadOptions options, const std::string& field) {
    const absl::Status status = LoadGenerator::Create(std::move(options)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(field), std::string::npos) << status;
  };
  LoadOptions options = Options("127.0.0.1:1", 16);
  options.concurrency = 0;
  expect_invalid(options, "concurrency");
  options = Options("127.0.0.1:1", 16);
  options.concurrency = 5000;
  expect_invalid(options, "concurrency");
  options = Options("127.0.0.1:1", 16);
  options.rate = -1;
  expect_invalid(options, "rate");
  options = Options("127.0.0.1:1", 16);
  options.duration = absl::ZeroDuration();
  expect_invalid(options, "duration");
  options = Options("127.0.0.1:1", 16);
  options.deadline = absl::ZeroDuration();
  expect_invalid(options, "deadline");
  options = Options("127.0.0.1:1", 16);
  options.documents.clear();
  expect_invalid(options, "documents");
}

TEST(LoadGeneratorOptionsTest, UnreachableServerIsUnavailable) {
  LoadOptions options = Options("127.0.0.1:1", 16);
  options.connect_timeout = absl::Milliseconds(300);
  EXPECT_EQ(LoadGenerator::Create(std::move(options)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(LoadGeneratorOptionsTest, ReadsEveryNonEmptyRegularFileInPathOrder) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("load_generator_documents." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "b.txt") << "second";
  std::ofstream(dir / "a.txt") << "first";
  std::ofstream(dir / "sub" / "c.txt") << "third";
  std::ofstream(dir / "empty.txt").flush();
  auto documents = ReadDocuments(dir.string());
  ASSERT_TRUE(documents.ok()) << documents.status();
  EXPECT_EQ(*documents, (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_EQ(ReadDocuments((dir / "missing").string()).status().code(), absl::StatusCode::kNotFound);
  fs::remove_all(dir / "sub");
  fs::remove(dir / "a.txt");
  fs::remove(dir / "b.txt");
  EXPECT_EQ(ReadDocuments(dir.string()).status().code(), absl::StatusCode::kInvalidArgument);
}

// Runs against the real docsparse-server on loopback.
class LoadGeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::MiniLmPresent());
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(
        server_->Start(testing::ServerBinary(),
                       {"--host=127.0.0.1", "--port=0", "--metrics_port=0",
                        "--model_repository=" + testing::MiniLmOnlyRepository(), "--threads=2"}))
        << server_->output();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static LoadReport RunLoad(LoadOptions options) {
    auto generator = LoadGenerator::Create(std::move(options));
    EXPECT_TRUE(generator.ok()) << generator.status();
    if (!generator.ok()) return LoadReport();
    auto report = (*generator)->Run();
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : LoadReport();
  }

  static testing::ServerProcess* server_;
};

testing::ServerProcess* LoadGeneratorTest::server_ = nullptr;

TEST_F(LoadGeneratorTest, ClosedLoopCountsAddUp) {
  LoadOptions options = Options(server_->grpc_address(), 128);
  options.concurrency = 4;
  options.duration = absl::Seconds(3);
  int progress_reports = 0;
  int64_t last_sent = 0;
  options.on_progress = [&](const LoadProgress& progress) {
    ++progress_reports;
    EXPECT_GE(progress.sent, last_sent);
    EXPECT_LE(progress.in_flight, 4);
    last_sent = progress.sent;
  };
  const LoadReport report = RunLoad(std::move(options));
  EXPECT_GT(report.requests, 0);
  EXPECT_EQ(report.ok + report.errors, report.requests);
  EXPECT_EQ(report.errors, 0) << FormatLoadReport(report);
  EXPECT_EQ(report.shed, 0);
  EXPECT_GE(progress_reports, 2);
  EXPECT_GE(report.elapsed_s, 2.9);
  EXPECT_LT(report.elapsed_s, 3.0 + 30.0);
  EXPECT_GT(report.latency.p50_ms, 0);
  EXPECT_LE(report.latency.p50_ms, report.latency.p95_ms);
  EXPECT_LE(report.latency.p95_ms, report.latency.p99_ms);
  EXPECT_LE(report.latency.p99_ms, report.latency.max_ms);
  EXPECT_GT(report.requests_per_s, 0);
  // The synthetic documents have exactly 128 tokens for this vocabulary.
  EXPECT_DOUBLE_EQ(report.mean_input_tokens, 128);
  EXPECT_NEAR(report.tokens_per_s, 128 * report.requests_per_s, 1e-6 * report.tokens_per_s);
  EXPECT_GT(report.mean_density, 0);
  EXPECT_GT(report.mean_attention_gflops, 0);
  EXPECT_GT(report.mean_total_gflops, report.mean_attention_gflops);
  EXPECT_GE(report.mean_batch_size, 1);
  // One server, one precision and ISA: "bf16 on avx512_bf16" and the like.
  ASSERT_EQ(report.served_by.size(), 1u) << FormatLoadReport(report);
  EXPECT_NE(report.served_by[0].find(" on "), std::string::npos) << report.served_by[0];
  EXPECT_EQ(report.mode, "closed");
  EXPECT_EQ(report.task, "embed");
}

TEST_F(LoadGeneratorTest, OpenLoopShedsArrivalsWhenAllWorkersAreBusy) {
  LoadOptions options = Options(server_->grpc_address(), 1024);
  options.concurrency = 1;
  options.rate = 50;
  options.arrivals = ArrivalProcess::kFixed;
  options.duration = absl::Seconds(2);
  const LoadReport report = RunLoad(std::move(options));
  // Arrivals every 20 ms in (0 s, 2 s): 99 of them, each sent or shed.
  EXPECT_EQ(report.requests + report.shed, 99) << FormatLoadReport(report);
  EXPECT_EQ(report.ok + report.errors, report.requests);
  EXPECT_GT(report.ok, 0);
  EXPECT_GT(report.shed, 0) << "a 1024-token embedding should take longer than 20 ms";
  EXPECT_EQ(report.mode, "open");
  EXPECT_EQ(report.arrivals, "fixed");
}

TEST_F(LoadGeneratorTest, ClassifiesAndSummarizes) {
  for (LoadTask task : {LoadTask::kClassify, LoadTask::kSummarize}) {
    LoadOptions options = Options(server_->grpc_address(), 200);
    options.task = task;
    options.concurrency = 2;
    const LoadReport report = RunLoad(std::move(options));
    EXPECT_GT(report.ok, 0) << LoadTaskName(task);
    EXPECT_EQ(report.errors, 0) << FormatLoadReport(report);
  }
}

// Requests that miss their deadline may still occupy the server's queue, so
// this runs against a server of its own.
class LoadGeneratorErrorTest : public LoadGeneratorTest {
 protected:
  static void SetUpTestSuite() { LoadGeneratorTest::SetUpTestSuite(); }
  static void TearDownTestSuite() { LoadGeneratorTest::TearDownTestSuite(); }
};

TEST_F(LoadGeneratorErrorTest, ErrorsAreCountedByStatusCode) {
  LoadOptions options = Options(server_->grpc_address(), 2048);
  options.concurrency = 2;
  options.rate = 20;
  options.arrivals = ArrivalProcess::kFixed;
  options.deadline = absl::Milliseconds(1);
  const LoadReport report = RunLoad(std::move(options));
  // Arrivals every 50 ms in (0 s, 1 s): 19, none shed since each request
  // gives up after 1 ms.
  EXPECT_EQ(report.requests, 19) << FormatLoadReport(report);
  EXPECT_EQ(report.shed, 0);
  EXPECT_EQ(report.ok, 0);
  EXPECT_EQ(report.errors, report.requests);
  EXPECT_EQ(report.errors_by_code.size(), 1u);
  EXPECT_EQ(report.errors_by_code.at("DEADLINE_EXCEEDED"), report.errors);
  EXPECT_LT(report.elapsed_s, 2);
  EXPECT_NE(FormatLoadReport(report).find("DEADLINE_EXCEEDED 19"), std::string::npos);
}

}  // namespace
}  // namespace docsparse
