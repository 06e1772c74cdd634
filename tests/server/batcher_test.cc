// The batcher with a real (tiny, HF-made) encoder: jobs are batched, each
// gets its own rows and cost, and dropped jobs are answered without compute.
#include "server/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/synchronization/notification.h"
#include "model/text/wordpiece_tokenizer.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::FixturePath("tiny_encoders/bert");
    auto config = LoadEncoderConfig(dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    auto encoder = Encoder::Create(dir, *config, MakeDenseAttention());
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    encoder_ = *std::move(encoder);
    auto tokenizer = WordPieceTokenizer::FromVocabTxt(MakeVocab(), WordPieceOptions{});
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    text_ = std::make_unique<TextEncoder>(*tokenizer_, *encoder_, 4);
  }

  std::string MakeVocab() {
    const std::string path = ::testing::TempDir() + "/batcher_test_vocab.txt";
    std::ofstream vocab(path);
    vocab << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 97; ++i) vocab << "w" << i << "\n";
    return path;
  }

  std::unique_ptr<EncodeJob> Job(int length, std::atomic<int>* ok, std::atomic<int>* batch_sizes,
                                 absl::StatusCode* last_error = nullptr) {
    auto job = std::make_unique<EncodeJob>(encoder_->shape());
    job->pending.key = BatchKey{"tiny", "embed", "dense"};
    job->pending.enqueued = BatchClock::now();
    job->pending.tokens = length;
    job->pending.longest_sequence = length;
    std::vector<int32_t> sequence = {2};
    for (int i = 0; i < length - 2; ++i) sequence.push_back(5 + i % 90);
    sequence.push_back(3);
    job->sequences = {sequence, sequence};
    job->done = [ok, batch_sizes, last_error, length](EncodeJob& job,
                                                      absl::StatusOr<EncodeResult> result) {
      if (!result.ok()) {
        if (last_error != nullptr) *last_error = result.status().code();
        return;
      }
      EXPECT_EQ(result->pooled.mean.size(0), 2);
      // Both sequences are the same: the same rows (up to padding round-off).
      EXPECT_TRUE(result->pooled.mean[0].allclose(result->pooled.mean[1], 1e-5, 1e-5));
      EXPECT_EQ(job.cost.input_tokens(), 2 * length);
      batch_sizes->fetch_add(result->batch_size);
      ok->fetch_add(1);
    };
    return job;
  }

  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
  std::unique_ptr<TextEncoder> text_;
};

TEST_F(BatcherTest, QueuedJobsShareBatchesAndEachGetsItsRows) {
  std::atomic<int> ok{0}, batch_sizes{0}, batches{0};
  BatchLimits limits;
  limits.max_batch_size = 8;
  limits.max_queue_delay = std::chrono::milliseconds(50);
  BatcherHooks hooks;
  hooks.on_batch = [&batches](int) { ++batches; };
  {
    Batcher batcher(*text_, limits, 64, hooks);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(batcher.Submit(Job(10 + i, &ok, &batch_sizes)));
  }  // the destructor drains
  EXPECT_EQ(ok.load(), 8);
  EXPECT_LT(batches.load(), 8);              // some requests shared a batch
  EXPECT_GT(batch_sizes.load(), ok.load());  // sum of sizes seen > count
}

TEST_F(BatcherTest, FullQueueRefusesAndCancelledJobsAreDropped) {
  std::atomic<int> ok{0}, sizes{0};
  std::atomic<int> drops{0};
  BatchLimits limits;
  limits.max_queue_delay = std::chrono::milliseconds(200);
  BatcherHooks hooks;
  hooks.on_drop = [&drops](DropReason) { ++drops; };
  absl::StatusCode cancelled_code = absl::StatusCode::kOk;
  absl::StatusCode expired_code = absl::StatusCode::kOk;
  {
    Batcher batcher(*text_, limits, 3, hooks);
    auto cancelled = Job(8, &ok, &sizes, &cancelled_code);
    cancelled->is_cancelled = [] { return true; };
    auto expired = Job(8, &ok, &sizes, &expired_code);
    expired->pending.deadline = BatchClock::now();
    ASSERT_TRUE(batcher.Submit(std::move(cancelled)));
    ASSERT_TRUE(batcher.Submit(std::move(expired)));
    ASSERT_TRUE(batcher.Submit(Job(8, &ok, &sizes)));
    // The queue may still hold three: a fourth may be refused.
    batcher.Submit(Job(8, &ok, &sizes));
  }
  EXPECT_EQ(cancelled_code, absl::StatusCode::kCancelled);
  EXPECT_EQ(expired_code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(ok.load(), 1);
  EXPECT_GE(drops.load(), 2);
}

// The encoder's runner, slowed and watched: how many batches ran at once.
class WatchedRunner final : public BatchRunner {
 public:
  WatchedRunner(const TextEncoder& encoder, std::atomic<int>* most_at_once)
      : inner_(encoder), most_at_once_(most_at_once) {}
  void Run(std::vector<std::unique_ptr<EncodeJob>> batch) override {
    const int now = ++running_;
    int most = most_at_once_->load();
    while (now > most && !most_at_once_->compare_exchange_weak(most, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    inner_.Run(std::move(batch));
    --running_;
  }

 private:
  EncoderBatchRunner inner_;
  std::atomic<int> running_{0};
  std::atomic<int>* const most_at_once_;
};

// Each compute thread is a model instance: with two, a model's next batch
// forms and computes while its last one runs, and every job still gets its
// own rows.
TEST_F(BatcherTest, TwoComputeThreadsComputeTwoBatchesOfOneModelAtOnce) {
  for (const int instances : {1, 2}) {
    std::atomic<int> ok{0}, batch_sizes{0}, most_at_once{0};
    BatchLimits limits;
    limits.max_batch_size = 1;
    {
      ComputeThreads compute(instances);
      Batcher batcher(std::make_unique<WatchedRunner>(*text_, &most_at_once), limits, 64,
                      BatcherHooks{}, &compute);
      for (int i = 0; i < 6; ++i) ASSERT_TRUE(batcher.Submit(Job(10 + i, &ok, &batch_sizes)));
    }  // the batcher's destructor drains, then the compute threads stop
    EXPECT_EQ(ok.load(), 6) << instances;
    EXPECT_EQ(batch_sizes.load(), 6) << instances;
    EXPECT_EQ(most_at_once.load(), instances);
  }
}

}  // namespace
}  // namespace docsparse
