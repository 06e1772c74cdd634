#include "client/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace docsparse {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxConcurrency = 1024;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Milliseconds(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

RequestSample FromCost(const v1::CostReport& cost) {
  RequestSample sample;
  sample.input_tokens = cost.input_tokens();
  sample.queue_ms = cost.timings().queue_ms();
  sample.inference_ms = cost.timings().inference_ms();
  sample.device_ms = cost.timings().device_ms();
  sample.density = cost.mean_density();
  sample.attention_flops = cost.attention_flops();
  sample.total_flops = cost.total_flops();
  sample.batch_size = cost.batch_size();
  if (!cost.precision().empty()) {
    sample.served_by =
        cost.isa().empty() ? cost.precision() : absl::StrCat(cost.precision(), " on ", cost.isa());
  }
  return sample;
}

template <typename Request>
Request MakeRequest(const LoadOptions& options, const std::string& document) {
  Request request;
  request.set_model(options.model);
  request.mutable_document()->set_utf8_bytes(document);
  *request.mutable_budget() = options.budget;
  *request.mutable_options() = options.request_options;
  return request;
}

// Arrival gaps of the open loop, seeded; exponential for Poisson arrivals.
class ArrivalClock {
 public:
  ArrivalClock(double rate, ArrivalProcess process, uint64_t seed)
      : mean_gap_s_(1.0 / rate), process_(process), state_(seed) {}

  Clock::duration NextGap() {
    double gap = mean_gap_s_;
    if (process_ == ArrivalProcess::kPoisson) {
      // SplitMix64 -> u in (0, 1] -> -ln(u) * mean.
      uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      const double u = (static_cast<double>(z >> 11) + 1.0) * 0x1.0p-53;
      gap = -std::log(u) * mean_gap_s_;
    }
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap));
  }

 private:
  const double mean_gap_s_;
  const ArrivalProcess process_;
  uint64_t state_;
};

}  // namespace

absl::StatusOr<LoadTask> ParseLoadTask(const std::string& name) {
  if (name == "embed") return LoadTask::kEmbed;
  if (name == "classify") return LoadTask::kClassify;
  if (name == "summarize") return LoadTask::kSummarize;
  return absl::InvalidArgumentError(
      absl::StrCat("task: expected embed, classify or summarize, got '", name, "'"));
}

std::string LoadTaskName(LoadTask task) {
  switch (task) {
    case LoadTask::kEmbed:
      return "embed";
    case LoadTask::kClassify:
      return "classify";
    case LoadTask::kSummarize:
      return "summarize";
  }
  return "?";
}

absl::StatusOr<std::vector<std::string>> ReadDocuments(const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return absl::NotFoundError(absl::StrCat("documents: ", directory, " is not a folder"));
  }
  std::vector<fs::path> paths;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error)) paths.push_back(it->path());
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("documents: cannot list ", directory, ": ", error.message()));
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> documents;
  for (const fs::path& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("documents: cannot read ", path.string()));
    std::string text(std::istreambuf_iterator<char>(in), {});
    if (!text.empty()) documents.push_back(std::move(text));
  }
  if (documents.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("documents: ", directory, " holds no non-empty regular file"));
  }
  return documents;
}

// The shared state of one Run(): workers, the open-loop dispatcher and the
// progress loop.
class LoadGenerator::RunState {
 public:
  explicit RunState(const LoadGenerator& generator)
      : generator_(generator),
        options_(generator.options_),
        results_(static_cast<size_t>(options_.concurrency)),
        start_(Clock::now()),
        end_(start_ + absl::ToChronoNanoseconds(options_.duration)) {}

  LoadReport Run() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      live_workers_ = options_.concurrency;
    }
    const bool open_loop = options_.rate > 0;
    for (int w = 0; w < options_.concurrency; ++w) {
      threads.emplace_back([this, w, open_loop] {
        open_loop ? OpenLoopWorker(results_[w]) : ClosedLoopWorker(results_[w]);
        absl::MutexLock lock(&mu_);
        --live_workers_;
      });
    }
    if (open_loop) threads.emplace_back([this] { Dispatch(); });
    ReportProgressUntilDone();
    for (std::thread& thread : threads) thread.join();
    return Collect();
  }

 private:
  struct WorkerResult {
    SampleAccumulator samples;
    std::map<absl::StatusCode, int64_t> errors;
    Clock::time_point last_answer{};
  };

  // Sends one document, timed from `sent` (the arrival time in open loop).
  void SendOne(Clock::time_point sent, WorkerResult& result) {
    const size_t index = next_document_.fetch_add(1) % generator_.num_documents_;
    ++sent_;
    ++in_flight_;
    absl::StatusOr<RequestSample> sample = generator_.Send(index);
    const Clock::time_point answered = Clock::now();
    --in_flight_;
    result.last_answer = std::max(result.last_answer, answered);
    if (!sample.ok()) {
      ++result.errors[sample.status().code()];
      ++errors_;
      return;
    }
    sample->latency_ms = Milliseconds(answered - sent);
    result.samples.Add(*sample);
    ++ok_;
  }

  void ClosedLoopWorker(WorkerResult& result) {
    for (Clock::time_point now = Clock::now(); now < end_; now = Clock::now()) {
      SendOne(now, result);
    }
  }

  void OpenLoopWorker(WorkerResult& result) {
    for (;;) {
      mu_.LockWhen(absl::Condition(this, &RunState::HasWorkOrDone));
      if (pending_.empty()) {
        mu_.Unlock();
        return;
      }
      const Clock::time_point arrival = pending_.front();
      pending_.pop_front();
      mu_.Unlock();
      SendOne(arrival, result);
      absl::MutexLock lock(&mu_);
      --busy_;
    }
  }

  // Open loop: makes arrivals until the end and hands each to an idle worker
  // or sheds it.
  void Dispatch() {
    ArrivalClock arrivals(options_.rate, options_.arrivals, options_.seed);
    for (Clock::time_point next = start_ + arrivals.NextGap(); next < end_;
         next += arrivals.NextGap()) {
      std::this_thread::sleep_until(next);
      absl::MutexLock lock(&mu_);
      if (busy_ < options_.concurrency) {
        ++busy_;
        pending_.push_back(next);
      } else {
        ++shed_;
      }
    }
    absl::MutexLock lock(&mu_);
    arrivals_done_ = true;
  }

  void ReportProgressUntilDone() {
    Clock::time_point last_time = start_;
    int64_t last_ok = 0;
    mu_.Lock();
    while (!mu_.AwaitWithTimeout(absl::Condition(this, &RunState::AllWorkersDone),
                                 options_.progress_interval)) {
      mu_.Unlock();
      if (options_.on_progress) {
        const Clock::time_point now = Clock::now();
        LoadProgress progress;
        progress.elapsed_s = Seconds(now - start_);
        progress.sent = sent_.load();
        progress.ok = ok_.load();
        progress.errors = errors_.load();
        progress.shed = shed_.load();
        progress.in_flight = in_flight_.load();
        const double interval = Seconds(now - last_time);
        progress.current_rps =
            interval > 0 ? static_cast<double>(progress.ok - last_ok) / interval : 0;
        last_time = now;
        last_ok = progress.ok;
        options_.on_progress(progress);
      }
      mu_.Lock();
    }
    mu_.Unlock();
  }

  LoadReport Collect() const {
    LoadReport report;
    report.server = options_.server;
    report.model = options_.model;
    report.task = LoadTaskName(options_.task);
    report.mode = options_.rate > 0 ? "open" : "closed";
    if (options_.rate > 0) {
      report.arrivals = options_.arrivals == ArrivalProcess::kPoisson ? "poisson" : "fixed";
    }
    report.concurrency = options_.concurrency;
    report.rate = options_.rate;
    report.duration_s = absl::ToDoubleSeconds(options_.duration);
    report.documents = options_.documents_description.empty()
                           ? absl::StrCat(generator_.num_documents_, " document(s)")
                           : options_.documents_description;
    SampleAccumulator samples;
    Clock::time_point last_answer = start_;
    for (const WorkerResult& result : results_) {
      samples.Merge(result.samples);
      for (const auto& [code, count] : result.errors) {
        report.errors_by_code[absl::StatusCodeToString(code)] += count;
        report.errors += count;
      }
      last_answer = std::max(last_answer, result.last_answer);
    }
    report.ok = samples.count();
    report.requests = report.ok + report.errors;
    report.shed = shed_.load();
    samples.Summarize(Seconds(last_answer - start_), &report);
    return report;
  }

  bool HasWorkOrDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !pending_.empty() || arrivals_done_;
  }
  bool AllWorkersDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_workers_ == 0; }

  const LoadGenerator& generator_;
  const LoadOptions& options_;
  // Worker w writes results_[w] only; read after the workers are joined.
  std::vector<WorkerResult> results_;
  const Clock::time_point start_;
  const Clock::time_point end_;

  // Live counters for the progress line; the report counts from results_.
  std::atomic<uint64_t> next_document_{0};
  std::atomic<int64_t> sent_{0}, ok_{0}, errors_{0}, shed_{0}, in_flight_{0};

  absl::Mutex mu_;
  // Open loop: arrivals handed to workers and not yet taken.
  std::deque<Clock::time_point> pending_ ABSL_GUARDED_BY(mu_);
  // Open loop: arrivals pending or being sent.
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool arrivals_done_ ABSL_GUARDED_BY(mu_) = false;
  int live_workers_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<LoadGenerator>> LoadGenerator::Create(LoadOptions options) {
  if (options.concurrency < 1 || options.concurrency > kMaxConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("concurrency: expected 1..", kMaxConcurrency, ", got ", options.concurrency));
  }
  if (!(options.rate >= 0) || !std::isfinite(options.rate)) {
    return absl::InvalidArgumentError("rate: expected a number of requests/s >= 0");
  }
  if (options.duration <= absl::ZeroDuration() || options.duration > absl::Hours(24)) {
    return absl::InvalidArgumentError("duration: expected more than 0 s and at most 24 h");
  }
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadline: expected more than 0 ms");
  }
  if (options.documents.empty()) {
    return absl::InvalidArgumentError("documents: at least one document is needed");
  }
  if (options.progress_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("progress_interval: expected more than 0");
  }
  absl::StatusOr<std::unique_ptr<DocsparseClient>> client = DocsparseClient::Connect(
      options.server, options.connect_timeout, options.bearer_token, options.credentials);
  if (!client.ok()) return client.status();
  return std::unique_ptr<LoadGenerator>(new LoadGenerator(std::move(options), *std::move(client)));
}

LoadGenerator::LoadGenerator(LoadOptions options, std::unique_ptr<DocsparseClient> client)
    : options_(std::move(options)), client_(std::move(client)) {
  for (const std::string& document : options_.documents) {
    switch (options_.task) {
      case LoadTask::kEmbed:
        embed_.push_back(MakeRequest<v1::EmbedRequest>(options_, document));
        break;
      case LoadTask::kClassify:
        classify_.push_back(MakeRequest<v1::ClassifyRequest>(options_, document));
        for (const std::string& label : options_.labels) classify_.back().add_labels(label);
        break;
      case LoadTask::kSummarize:
        summarize_.push_back(MakeRequest<v1::SummarizeRequest>(options_, document));
        summarize_.back().mutable_extractive()->set_max_sentences(options_.max_sentences);
        break;
    }
  }
  num_documents_ = options_.documents.size();
  options_.documents.clear();
  options_.documents.shrink_to_fit();
}

absl::StatusOr<LoadReport> LoadGenerator::Run() {
  RunState state(*this);
  return state.Run();
}

absl::StatusOr<RequestSample> LoadGenerator::Send(size_t index) const {
  switch (options_.task) {
    case LoadTask::kEmbed: {
      absl::StatusOr<v1::EmbedResponse> response = client_->Embed(embed_[index], options_.deadline);
      if (!response.ok()) return response.status();
      return FromCost(response->cost());
    }
    case LoadTask::kClassify: {
      absl::StatusOr<v1::ClassifyResponse> response =
          client_->Classify(classify_[index], options_.deadline);
      if (!response.ok()) return response.status();
      return FromCost(response->cost());
    }
    case LoadTask::kSummarize: {
      absl::StatusOr<v1::SummarizeResponse> response =
          client_->Summarize(summarize_[index], options_.deadline);
      if (!response.ok()) return response.status();
      return FromCost(response->cost());
    }
  }
  return absl::InternalError("unknown task");
}

}  // namespace docsparse
