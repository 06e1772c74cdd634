// Fault test: the real docsparse-server under 64 concurrent clients that send
// documents of random size with random deadlines (5 ms, 100 ms, 30 s) and
// random client-side cancellations, then SIGTERM while the load goes on.
//
// Phase 1 loads, stops the clients, waits for the server to go idle and holds
// docsparse_requests_total against what the clients saw. Phase 2 loads again
// and sends SIGTERM in the middle. Throughout: every call ends with a status a
// client can act on (never INTERNAL or UNKNOWN), none outlives its deadline by
// much, and the drain exits 0 within the grace period. A second test sends
// SIGTERM while one batch runs far longer than the grace period.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "docsparse/v1/docsparse.grpc.pb.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kClients = 64;
constexpr int kChannels = 4;  // the clients share a few HTTP/2 connections
constexpr seconds kPhase1(40);
constexpr seconds kPhase2BeforeSigterm(5);  // SIGTERM about 45 s into the load
constexpr seconds kPhase2(15);
constexpr int kGraceSeconds = 10;
constexpr double kExitMarginSeconds = 3;  // process teardown after the grace period
constexpr int kMaxQueue = 32;             // below kClients, so backpressure shows
constexpr std::array<milliseconds, 3> kDeadlines = {milliseconds(5), milliseconds(100),
                                                    milliseconds(30000)};
constexpr double kCancelChance = 0.2;
constexpr milliseconds kMaxCancelDelay(150);
// A call still outstanding this long after its deadline hangs.
constexpr seconds kHangSlack(10);

enum class Rpc { kEmbed, kClassify, kSummarize, kSummarizeStream };
constexpr int kRpcCount = 4;
// Also the server's "task" label.
constexpr std::array<const char*, kRpcCount> kRpcNames = {"embed", "classify", "summarize",
                                                          "summarize_stream"};
constexpr int kCodeCount = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED
constexpr int kAll = -1;
constexpr int kOk = static_cast<int>(grpc::StatusCode::OK);
constexpr int kCancelled = static_cast<int>(grpc::StatusCode::CANCELLED);
constexpr int kDeadlineExceeded = static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED);
constexpr int kResourceExhausted = static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED);
constexpr int kUnavailable = static_cast<int>(grpc::StatusCode::UNAVAILABLE);

// "OK", "CANCELLED", ...: the server's "code" label.
std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// The final statuses clients saw in one phase, by RPC and code. Thread-safe.
class StatusTally {
 public:
  void Add(Rpc rpc, const grpc::Status& status, Clock::duration past_deadline) {
    const int code = status.error_code();
    counts_[static_cast<size_t>(rpc)][static_cast<size_t>(code)].fetch_add(1);
    const int64_t late =
        std::chrono::duration_cast<std::chrono::microseconds>(past_deadline).count();
    int64_t seen = latest_us_.load();
    while (late > seen && !latest_us_.compare_exchange_weak(seen, late)) {
    }
    if (status.ok()) return;
    absl::MutexLock lock(&mu_);
    first_message_.try_emplace(code, absl::StrFormat("%s: %s", kRpcNames[static_cast<size_t>(rpc)],
                                                     status.error_message()));
  }

  // Calls of `rpc` that ended with `code`; kAll for either sums over it.
  int64_t Count(int rpc, int code) const {
    int64_t total = 0;
    for (size_t r = 0; r < kRpcCount; ++r) {
      for (size_t c = 0; c < kCodeCount; ++c) {
        if ((rpc == kAll || rpc == static_cast<int>(r)) &&
            (code == kAll || code == static_cast<int>(c))) {
          total += counts_[r][c].load();
        }
      }
    }
    return total;
  }
  std::string FirstMessage(int code) const {
    absl::MutexLock lock(&mu_);
    const auto it = first_message_.find(code);
    return it == first_message_.end() ? "" : it->second;
  }

  // Counts by code (rows) and RPC (columns), then one message per error code.
  std::string Table() const {
    std::string out = absl::StrFormat("  %-20s", "code");
    for (const char* name : kRpcNames) absl::StrAppendFormat(&out, "%17s", name);
    absl::StrAppendFormat(&out, "%9s\n", "total");
    for (int code = 0; code < kCodeCount; ++code) {
      if (Count(kAll, code) == 0) continue;
      absl::StrAppendFormat(&out, "  %-20s", CodeName(code));
      for (int rpc = 0; rpc < kRpcCount; ++rpc) {
        absl::StrAppendFormat(&out, "%17d", Count(rpc, code));
      }
      absl::StrAppendFormat(&out, "%9d\n", Count(kAll, code));
    }
    absl::StrAppendFormat(&out, "  %-20s%77d\n", "all", Count(kAll, kAll));
    for (int code = 1; code < kCodeCount; ++code) {
      if (Count(kAll, code) > 0) absl::StrAppendFormat(&out, "  e.g. %s\n", FirstMessage(code));
    }
    absl::StrAppendFormat(&out, "  latest return after a deadline: %.1f ms\n", latest_us_ / 1e3);
    return out;
  }

 private:
  std::array<std::array<std::atomic<int64_t>, kCodeCount>, kRpcCount> counts_{};
  std::atomic<int64_t> latest_us_{INT64_MIN};
  mutable absl::Mutex mu_;
  std::map<int, std::string> first_message_ ABSL_GUARDED_BY(mu_);
};

// Documents of random size: ~20 tokens, a few hundred, or the 6.9k-token
// GPL-3 (chunked) now and then.
class DocumentSource {
 public:
  explicit DocumentSource(std::string long_text) : long_text_(std::move(long_text)) {
    static constexpr std::array<const char*, 16> kWords = {
        "attention", "document", "sparse", "model", "server", "request", "budget", "window",
        "license",   "recipe",   "market", "river", "signal", "queue",   "client", "report"};
    std::mt19937_64 rng(7);
    const auto sentence = [&rng] {
      std::string text;
      const int words = std::uniform_int_distribution<int>(6, 14)(rng);
      for (int i = 0; i < words; ++i) {
        text += (i == 0 ? "The " : " ");
        text += kWords[std::uniform_int_distribution<size_t>(0, kWords.size() - 1)(rng)];
      }
      return text + ". ";
    };
    for (int i = 0; i < 32; ++i) {
      std::string text = sentence() + sentence();
      short_.push_back(text);
      const size_t bytes = std::uniform_int_distribution<size_t>(1200, 3000)(rng);
      while (text.size() < bytes) text += sentence();
      medium_.push_back(text);
    }
  }

  const std::string& Pick(std::mt19937_64& rng) const {
    const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
    const size_t index = std::uniform_int_distribution<size_t>(0, short_.size() - 1)(rng);
    if (draw < 0.005) return long_text_;
    return draw < 0.6 ? short_[index] : medium_[index];
  }

 private:
  std::string long_text_;
  std::vector<std::string> short_;
  std::vector<std::string> medium_;
};

template <typename Request>
void SetDocument(const std::string& text, Request* request) {
  request->mutable_document()->set_text(text);
  request->mutable_options()->set_overflow(v1::OVERFLOW_CHUNK);
}

// One call of `rpc`; the stream is read to its end.
grpc::Status Invoke(v1::DocumentService::Stub& stub, Rpc rpc, const std::string& text,
                    grpc::ClientContext* context) {
  switch (rpc) {
    case Rpc::kEmbed: {
      v1::EmbedRequest request;
      SetDocument(text, &request);
      v1::EmbedResponse response;
      return stub.Embed(context, request, &response);
    }
    case Rpc::kClassify: {
      v1::ClassifyRequest request;
      SetDocument(text, &request);
      for (const char* label : {"software license", "recipe", "news article"}) {
        request.add_labels(label);
      }
      v1::ClassifyResponse response;
      return stub.Classify(context, request, &response);
    }
    case Rpc::kSummarize:
    case Rpc::kSummarizeStream: {
      v1::SummarizeRequest request;
      SetDocument(text, &request);
      request.mutable_extractive()->set_max_sentences(2);
      if (rpc == Rpc::kSummarize) {
        v1::SummarizeResponse response;
        return stub.Summarize(context, request, &response);
      }
      std::unique_ptr<grpc::ClientReader<v1::SummarizeChunk>> reader =
          stub.SummarizeStream(context, request);
      v1::SummarizeChunk chunk;
      while (reader->Read(&chunk)) {
      }
      return reader->Finish();
    }
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, "unreachable");
}

// kClients threads calling in a loop until Stop(), and a monitor thread that
// cancels calls when their client gives up (ClientContext::TryCancel from
// another thread) and reports calls outstanding kHangSlack past their deadline.
class Load {
 public:
  Load(const std::vector<std::unique_ptr<v1::DocumentService::Stub>>& stubs,
       const DocumentSource& documents, uint64_t seed, StatusTally* tally)
      : stubs_(stubs), documents_(documents), tally_(*tally) {
    for (int i = 0; i < kClients; ++i) clients_.emplace_back([this, i, seed] { Client(i, seed); });
    monitor_ = std::thread([this] { Monitor(); });
  }
  ~Load() { Stop(seconds(0)); }

  // Starts no more calls, gives the outstanding ones `patience` to end by
  // themselves, cancels the rest and joins every client. A call that never
  // returns cannot be joined: that aborts the test binary after saying so.
  void Stop(Clock::duration patience) {
    if (stop_.exchange(true)) return;
    if (!AwaitClients(patience)) {
      cancel_all_.store(true);
      if (!AwaitClients(kDeadlines.back() + kHangSlack)) {
        absl::MutexLock lock(&mu_);
        std::cerr << "fault_test: " << running_ << " clients never returned; hangs:\n";
        for (const std::string& hang : hangs_) std::cerr << "  " << hang << "\n";
        std::abort();
      }
    }
    for (std::thread& client : clients_) client.join();
    monitor_.join();
  }

  std::vector<std::string> hangs() const {
    absl::MutexLock lock(&mu_);
    return hangs_;
  }
  int64_t cancels_sent() const { return cancels_sent_.load(); }

 private:
  // The call one client is waiting for.
  struct Slot {
    absl::Mutex mu;
    grpc::ClientContext* context ABSL_GUARDED_BY(mu) = nullptr;  // null while idle
    Clock::time_point cancel_at ABSL_GUARDED_BY(mu);
    Clock::time_point deadline ABSL_GUARDED_BY(mu);
    bool cancelled ABSL_GUARDED_BY(mu) = false;
    bool reported ABSL_GUARDED_BY(mu) = false;
  };

  // Whether every client returned within `timeout`.
  bool AwaitClients(Clock::duration timeout) {
    const auto all_returned = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return running_ == 0; };
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&all_returned), absl::FromChrono(timeout));
  }

  void Client(int index, uint64_t seed) {
    std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(index));
    v1::DocumentService::Stub& stub = *stubs_[static_cast<size_t>(index) % stubs_.size()];
    Slot& slot = slots_[static_cast<size_t>(index)];
    while (!stop_.load()) {
      const Rpc rpc = static_cast<Rpc>(std::uniform_int_distribution<int>(0, kRpcCount - 1)(rng));
      const milliseconds timeout =
          kDeadlines[std::uniform_int_distribution<size_t>(0, kDeadlines.size() - 1)(rng)];
      const bool cancel = std::bernoulli_distribution(kCancelChance)(rng);
      const milliseconds cancel_delay(
          std::uniform_int_distribution<int64_t>(0, kMaxCancelDelay.count())(rng));
      const std::string& text = documents_.Pick(rng);

      grpc::ClientContext context;
      const Clock::time_point start = Clock::now();
      context.set_deadline(std::chrono::system_clock::now() + timeout);
      {
        absl::MutexLock lock(&slot.mu);
        slot.context = &context;
        slot.cancel_at = cancel ? start + cancel_delay : Clock::time_point::max();
        slot.deadline = start + timeout;
        slot.cancelled = slot.reported = false;
      }
      const grpc::Status status = Invoke(stub, rpc, text, &context);
      {
        absl::MutexLock lock(&slot.mu);
        slot.context = nullptr;
      }
      tally_.Add(rpc, status, Clock::now() - (start + timeout));
      // Clients back off when refused, as real ones should.
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
          status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(20, 100)(rng)));
      }
    }
    absl::MutexLock lock(&mu_);
    --running_;
  }

  void Monitor() {
    while (!AwaitClients(milliseconds(1))) {
      const Clock::time_point now = Clock::now();
      for (size_t i = 0; i < kClients; ++i) {
        Slot& slot = slots_[i];
        absl::MutexLock lock(&slot.mu);
        if (slot.context == nullptr) continue;
        if (!slot.cancelled && (now >= slot.cancel_at || cancel_all_.load())) {
          slot.context->TryCancel();
          slot.cancelled = true;
          cancels_sent_.fetch_add(1);
        }
        if (slot.reported || now - slot.deadline < kHangSlack) continue;
        slot.reported = true;
        const std::string hang =
            absl::StrFormat("client %d: a call is still outstanding %.1f s after its deadline", i,
                            std::chrono::duration<double>(now - slot.deadline).count());
        ADD_FAILURE() << "hang: " << hang;
        absl::MutexLock hangs_lock(&mu_);
        hangs_.push_back(hang);
      }
    }
  }

  const std::vector<std::unique_ptr<v1::DocumentService::Stub>>& stubs_;
  const DocumentSource& documents_;
  StatusTally& tally_;
  std::array<Slot, kClients> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancel_all_{false};
  std::atomic<int64_t> cancels_sent_{0};
  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = kClients;
  std::vector<std::string> hangs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> clients_;
  std::thread monitor_;
};

// docsparse_requests_total by task and code summed over models, and the
// in-flight and queue gauges summed over models, from one /metrics scrape.
struct ServerCounters {
  std::map<std::pair<std::string, std::string>, int64_t> requests;  // by (task, code)
  int64_t inflight = 0;
  int64_t queue_depth = 0;

  // Requests of `rpc` answered with `code`; kAll for either sums over it.
  int64_t Requests(int rpc, int code) const {
    int64_t total = 0;
    for (const auto& [key, value] : requests) {
      if ((rpc == kAll || key.first == kRpcNames[static_cast<size_t>(rpc)]) &&
          (code == kAll || key.second == CodeName(code))) {
        total += value;
      }
    }
    return total;
  }
};

std::optional<ServerCounters> Scrape(const std::string& http_address) {
  httplib::Client http = testing::HttpClient(http_address);
  const auto response = http.Get("/metrics");
  if (!response || response->status != 200) return std::nullopt;
  ServerCounters counters;
  const std::regex label(R"re((\w+)="([^"]*)")re");
  std::istringstream lines(response->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    const int64_t value = static_cast<int64_t>(std::stod(line.substr(line.rfind(' ') + 1)));
    std::map<std::string, std::string> labels;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), label);
         it != std::sregex_iterator(); ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    if (name == "docsparse_requests_total")
      counters.requests[{labels["task"], labels["code"]}] += value;
    if (name == "docsparse_inflight_requests") counters.inflight += value;
    if (name == "docsparse_queue_depth") counters.queue_depth += value;
  }
  return counters;
}

// The statuses a client may see; UNAVAILABLE only once the server drains.
bool Allowed(grpc::StatusCode code, bool draining) {
  using grpc::StatusCode;
  return code == StatusCode::OK || code == StatusCode::CANCELLED ||
         code == StatusCode::DEADLINE_EXCEEDED || code == StatusCode::RESOURCE_EXHAUSTED ||
         (draining && code == StatusCode::UNAVAILABLE);
}

void ExpectOnlyAllowedStatuses(const StatusTally& tally, bool draining) {
  for (int code = 0; code < kCodeCount; ++code) {
    EXPECT_TRUE(tally.Count(kAll, code) == 0 ||
                Allowed(static_cast<grpc::StatusCode>(code), draining))
        << tally.Count(kAll, code) << " calls ended with " << CodeName(code) << ", e.g. "
        << tally.FirstMessage(code);
  }
}

// What the clients saw against what the server counted, per RPC. A call the
// client saw end with a code only the server makes (OK, RESOURCE_EXHAUSTED)
// was counted by the server with that code. A call the client saw end with
// CANCELLED or DEADLINE_EXCEEDED was counted with any code, or not at all: it
// may not have reached the handler, and the server counts the answer it gave
// when its work ended, which can be after the client left (OK for a batch
// already computing, or a response in flight when the deadline hit).
void ExpectCountersAddUp(const StatusTally& tally, const ServerCounters& server) {
  std::cout << absl::StrFormat("  %-17s%10s%12s%12s%12s%12s%12s\n", "task", "calls", "left early",
                               "server", "client OK", "server OK", "OK unseen");
  for (int rpc = 0; rpc < kRpcCount; ++rpc) {
    SCOPED_TRACE(kRpcNames[static_cast<size_t>(rpc)]);
    const int64_t left_early = tally.Count(rpc, kCancelled) + tally.Count(rpc, kDeadlineExceeded);
    const int64_t answered = tally.Count(rpc, kAll) - left_early;
    for (int code = 0; code < kCodeCount; ++code) {
      if (code == kCancelled || code == kDeadlineExceeded) continue;
      EXPECT_GE(server.Requests(rpc, code), tally.Count(rpc, code))
          << "clients saw more " << CodeName(code) << " than the server counted";
    }
    EXPECT_GE(server.Requests(rpc, kAll), answered);
    EXPECT_LE(server.Requests(rpc, kAll), tally.Count(rpc, kAll))
        << "the server counted more requests than clients made";
    std::cout << absl::StrFormat(
        "  %-17s%10d%12d%12d%12d%12d%12d\n", kRpcNames[static_cast<size_t>(rpc)],
        tally.Count(rpc, kAll), left_early, server.Requests(rpc, kAll), tally.Count(rpc, kOk),
        server.Requests(rpc, kOk), server.Requests(rpc, kOk) - tally.Count(rpc, kOk));
  }
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MiniLmPresent());
    gpl3_ = testing::ReadFile("/usr/share/common-licenses/GPL-3");
    ASSERT_GT(gpl3_.size(), 30000u) << "/usr/share/common-licenses/GPL-3 is missing";
  }

  void StartServer(int grace_seconds) {
    ASSERT_TRUE(server_.Start(
        testing::ServerBinary(),
        testing::LoopbackFlags(testing::SourcePath("models"),
                               {"--threads=2", "--max_queue=" + std::to_string(kMaxQueue),
                                "--shutdown_grace_seconds=" + std::to_string(grace_seconds)})))
        << server_.output();
    for (int i = 0; i < kChannels; ++i) {
      grpc::ChannelArguments args;
      // A connection per channel rather than one shared subchannel.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto channel = grpc::CreateCustomChannel(server_.grpc_address(),
                                               grpc::InsecureChannelCredentials(), args);
      ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + seconds(10)));
      stubs_.push_back(v1::DocumentService::NewStub(channel));
    }
  }

  // Scrapes /metrics until `done` holds for the counters; the last counters
  // read, or nullopt, after `timeout` (a test failure naming `what`).
  template <typename Done>
  std::optional<ServerCounters> ScrapeUntil(Done done, seconds timeout, const char* what) {
    const Clock::time_point start = Clock::now();
    std::optional<ServerCounters> counters;
    while (Clock::now() - start < timeout) {
      counters = Scrape(server_.http_address());
      if (counters && done(*counters)) return counters;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ADD_FAILURE() << "not " << what << " after " << timeout.count() << " s: "
                  << (counters ? absl::StrFormat("inflight %d, queue depth %d", counters->inflight,
                                                 counters->queue_depth)
                               : "no /metrics");
    return std::nullopt;
  }

  testing::ServerProcess server_;
  std::string gpl3_;
  std::vector<std::unique_ptr<v1::DocumentService::Stub>> stubs_;
};

TEST_F(FaultTest, RandomDeadlinesCancellationsAndSigtermUnderLoad) {
  ASSERT_NO_FATAL_FAILURE(StartServer(kGraceSeconds));
  const DocumentSource documents(gpl3_);
  const char* seed_text = std::getenv("DOCSPARSE_FAULT_SEED");
  const uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 10) : std::random_device()();
  std::cout << "seed " << seed << " (set DOCSPARSE_FAULT_SEED to repeat)\n";
  const Clock::time_point test_start = Clock::now();

  // Phase 1: load, then stop it and hold the counters against the tallies.
  StatusTally phase1;
  {
    Load load(stubs_, documents, seed, &phase1);
    std::this_thread::sleep_for(kPhase1);
    load.Stop(seconds(3));
    EXPECT_TRUE(load.hangs().empty());
    std::cout << absl::StrFormat("phase 1: %d calls in %.1f s, %d client cancels sent\n",
                                 phase1.Count(kAll, kAll), SecondsSince(test_start),
                                 load.cancels_sent())
              << phase1.Table();
  }
  ExpectOnlyAllowedStatuses(phase1, /*draining=*/false);
  for (int code : {kOk, kCancelled, kDeadlineExceeded, kResourceExhausted}) {
    EXPECT_GT(phase1.Count(kAll, code), 0) << "the load never saw " << CodeName(code);
  }
  // The server answers what it accepted, some of it after the clients left.
  const std::optional<ServerCounters> counters =
      ScrapeUntil([](const ServerCounters& c) { return c.inflight == 0 && c.queue_depth == 0; },
                  seconds(20), "idle after the load stopped");
  if (counters) {
    std::cout << "phase 1 counters (server) against client tallies:\n";
    ExpectCountersAddUp(phase1, *counters);
  }

  // Phase 2: load again, SIGTERM in the middle of it.
  StatusTally phase2;
  const Clock::time_point phase2_start = Clock::now();
  Load load(stubs_, documents, seed + 1, &phase2);
  std::this_thread::sleep_for(kPhase2BeforeSigterm);
  const Clock::time_point sigterm = Clock::now();
  const std::optional<int> exit_code = server_.Stop(SIGTERM, seconds(kGraceSeconds + 20));
  const double exit_seconds = SecondsSince(sigterm);
  // Clients keep calling the stopped server for a while: connection refused.
  std::this_thread::sleep_for(
      std::max<Clock::duration>(seconds(1), kPhase2 - (Clock::now() - phase2_start)));
  load.Stop(seconds(3));
  EXPECT_TRUE(load.hangs().empty());
  std::cout << absl::StrFormat(
                   "phase 2: %d calls in %.1f s, %d client cancels sent, SIGTERM after %.1f s, "
                   "exit %s %.2f s after SIGTERM (grace %d s)\n",
                   phase2.Count(kAll, kAll), SecondsSince(phase2_start), load.cancels_sent(),
                   std::chrono::duration<double>(sigterm - phase2_start).count(),
                   exit_code ? std::to_string(*exit_code) : "none", exit_seconds, kGraceSeconds)
            << phase2.Table();
  ExpectOnlyAllowedStatuses(phase2, /*draining=*/true);
  EXPECT_GT(phase2.Count(kAll, kUnavailable), 0);
  ASSERT_TRUE(exit_code.has_value())
      << "still running " << exit_seconds << " s after SIGTERM; output:\n"
      << server_.output();
  EXPECT_EQ(*exit_code, 0) << server_.output();
  EXPECT_LE(exit_seconds, kGraceSeconds + kExitMarginSeconds) << server_.output();
  std::cout << absl::StrFormat("fault test took %.1f s\n", SecondsSince(test_start));
}

// A batch that runs far longer than the grace period (one ~28k-token
// document, chunked) must not hold the drain: its client is answered when the
// grace period ends, and the process must exit then too.
TEST_F(FaultTest, SigtermDuringALongBatchExitsWithinTheGracePeriod) {
  constexpr int kShortGrace = 1;
  ASSERT_NO_FATAL_FAILURE(StartServer(kShortGrace));
  grpc::Status status;
  Clock::time_point answered;
  std::atomic<bool> done{false};
  std::thread client([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(120));
    status = Invoke(*stubs_[0], Rpc::kEmbed, gpl3_ + gpl3_ + gpl3_ + gpl3_, &context);
    answered = Clock::now();
    done.store(true);
  });
  // Running: taken from the queue, not yet answered (or, on a machine fast
  // enough, already answered: then the drain has nothing to wait for).
  const auto running_or_done = [&done](const ServerCounters& c) {
    return (c.inflight == 1 && c.queue_depth == 0) || done.load();
  };
  const bool caught =
      ScrapeUntil(running_or_done, seconds(30), "running the long request").has_value();
  const Clock::time_point sigterm = Clock::now();
  const std::optional<int> exit_code = server_.Stop(SIGTERM, seconds(120));
  const double exit_seconds = SecondsSince(sigterm);
  client.join();
  std::cout << absl::StrFormat(
      "long batch: %s %.2f s after SIGTERM (%s), exit %s %.2f s after SIGTERM (grace %d s)\n",
      CodeName(status.error_code()), std::chrono::duration<double>(answered - sigterm).count(),
      status.error_message(), exit_code ? std::to_string(*exit_code) : "none", exit_seconds,
      kShortGrace);
  ASSERT_TRUE(caught);
  EXPECT_TRUE(Allowed(status.error_code(), /*draining=*/true)) << status.error_message();
  ASSERT_TRUE(exit_code.has_value()) << server_.output();
  // Work cut off at the end of the grace period exits 1; a batch that ended
  // in time (a fast machine) leaves a clean drain, exit 0.
  const bool cut_off = server_.output().find("grace period over") != std::string::npos;
  EXPECT_EQ(*exit_code, cut_off ? 1 : 0) << server_.output();
  EXPECT_LE(exit_seconds, kShortGrace + kExitMarginSeconds)
      << "the drain waited for the running batch instead of ending with the grace period";
}

}  // namespace
}  // namespace docsparse
