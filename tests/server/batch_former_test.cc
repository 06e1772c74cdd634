#include "server/batch_former.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace docsparse {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A fake clock: every time point is an offset from `kStart`.
const BatchClock::time_point kStart{};

class BatchFormerTest : public ::testing::Test {
 protected:
  PendingRequest Request(int enqueued_ms, int64_t tokens = 100, std::string task = "embed") {
    PendingRequest request;
    request.key = BatchKey{"minilm", std::move(task), "dense"};
    request.enqueued = kStart + milliseconds(enqueued_ms);
    request.tokens = tokens;
    request.longest_sequence = tokens;
    request.attention_flops = static_cast<double>(tokens) * 1000;
    return request;
  }

  BatchLimits limits_;  // 16 requests, 5 ms, 6144 tokens, 50 GFLOP, ratio 4
};

TEST_F(BatchFormerTest, EmptyQueueWaits) {
  const BatchDecision decision = FormBatch({}, kStart, limits_);
  EXPECT_THAT(decision.take, IsEmpty());
  EXPECT_THAT(decision.drop_expired, IsEmpty());
}

TEST_F(BatchFormerTest, WaitsUntilTheLeaderHasWaitedTheMaximumDelay) {
  const std::vector<PendingRequest> queue = {Request(0), Request(1)};
  BatchDecision early = FormBatch(queue, kStart + milliseconds(2), limits_);
  EXPECT_THAT(early.take, IsEmpty());
  EXPECT_EQ(early.wait, milliseconds(3));
  BatchDecision due = FormBatch(queue, kStart + milliseconds(5), limits_);
  EXPECT_THAT(due.take, ElementsAre(0, 1));
}

TEST_F(BatchFormerTest, SizeBoundRunsAFullBatchAtOnce) {
  limits_.max_batch_size = 3;
  std::vector<PendingRequest> queue;
  for (int i = 0; i < 5; ++i) queue.push_back(Request(0));
  const BatchDecision decision = FormBatch(queue, kStart, limits_);  // no waiting
  EXPECT_THAT(decision.take, ElementsAre(0, 1, 2));
}

TEST_F(BatchFormerTest, TokenCostBoundKeepsALongRequestFromRidingWithShortOnes) {
  limits_.max_length_ratio = 1000;  // isolate the cost cap
  // A 16k-token request and fifty short ones.
  std::vector<PendingRequest> queue = {Request(0, 16384)};
  for (int i = 0; i < 50; ++i) queue.push_back(Request(0, 200));
  const BatchDecision decision = FormBatch(queue, kStart, limits_);
  EXPECT_THAT(decision.take, ElementsAre(0));  // full by cost: runs alone, now

  std::vector<PendingRequest> shorts(queue.begin() + 1, queue.end());
  const BatchDecision next = FormBatch(shorts, kStart, limits_);
  EXPECT_EQ(next.take.size(), 16u);  // size cap; 16 x 200 tokens fit
}

TEST_F(BatchFormerTest, FlopCostBound) {
  limits_.max_batch_attention_flops = 250000;  // 2.5 requests of 100 tokens
  const std::vector<PendingRequest> queue = {Request(0), Request(0), Request(0)};
  const BatchDecision decision = FormBatch(queue, kStart, limits_);
  EXPECT_THAT(decision.take, ElementsAre(0, 1));
}

TEST_F(BatchFormerTest, LeaderOverTheCapsRunsAlone) {
  limits_.max_batch_tokens = 1000;
  const std::vector<PendingRequest> queue = {Request(0, 5000), Request(0, 5000)};
  EXPECT_THAT(FormBatch(queue, kStart, limits_).take, ElementsAre(0));
}

TEST_F(BatchFormerTest, IncompatibleRequestsAreNeverMixed) {
  std::vector<PendingRequest> queue = {Request(0, 100, "embed"), Request(0, 100, "classify"),
                                       Request(0, 100, "embed")};
  queue[2].key.attention = "lsg";
  queue.push_back(Request(0, 100, "embed"));
  queue[3].key.model = "other";
  queue.push_back(Request(0, 100, "embed"));
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(10), limits_);
  EXPECT_THAT(decision.take, ElementsAre(0, 4));
  // The others lead their own batches once they are the oldest.
  std::vector<PendingRequest> rest = {queue[1], queue[2], queue[3]};
  EXPECT_THAT(FormBatch(rest, kStart + milliseconds(10), limits_).take, ElementsAre(0));
}

TEST_F(BatchFormerTest, LengthAwareGroupingSkipsVeryDifferentLengths) {
  const std::vector<PendingRequest> queue = {Request(0, 100), Request(0, 1000), Request(0, 300)};
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(10), limits_);
  EXPECT_THAT(decision.take, ElementsAre(0, 2));
}

TEST_F(BatchFormerTest, ExpiredAndCancelledRequestsAreDroppedBeforeCompute) {
  std::vector<PendingRequest> queue = {Request(0), Request(0), Request(0), Request(0)};
  queue[0].deadline = kStart + milliseconds(3);
  queue[1].cancelled = true;
  queue[3].deadline = kStart + milliseconds(100);
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(6), limits_);
  EXPECT_THAT(decision.drop_expired, ElementsAre(0));
  EXPECT_THAT(decision.drop_cancelled, ElementsAre(1));
  EXPECT_THAT(decision.take, ElementsAre(2, 3));
}

// gRPC cancels a call when its deadline passes: such a request is counted
// as expired (DEADLINE_EXCEEDED), not as cancelled by its client.
TEST_F(BatchFormerTest, ACancelledRequestPastItsDeadlineCountsAsExpired) {
  std::vector<PendingRequest> queue = {Request(0), Request(0)};
  queue[0].deadline = kStart + milliseconds(3);
  queue[0].cancelled = true;
  queue[1].cancelled = true;
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(6), limits_);
  EXPECT_THAT(decision.drop_expired, ElementsAre(0));
  EXPECT_THAT(decision.drop_cancelled, ElementsAre(1));
}

// The client's copy of a deadline runs out before the server's (which
// started when the request arrived), and its gRPC library then cancels the
// call: a cancellation that close to the deadline is the deadline. Earlier,
// the client left.
TEST_F(BatchFormerTest, ACancellationJustBeforeTheDeadlineCountsAsExpired) {
  std::vector<PendingRequest> queue = {Request(0), Request(0)};
  queue[0].deadline = kStart + milliseconds(6) + kDeadlineCancelSlack / 2;
  queue[0].cancelled = true;
  queue[1].deadline = kStart + milliseconds(6) + 2 * kDeadlineCancelSlack;
  queue[1].cancelled = true;
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(6), limits_);
  EXPECT_THAT(decision.drop_expired, ElementsAre(0));
  EXPECT_THAT(decision.drop_cancelled, ElementsAre(1));
  // Not cancelled, the same request is still live.
  queue[0].cancelled = false;
  EXPECT_THAT(FormBatch(queue, kStart + milliseconds(6), limits_).drop_expired, IsEmpty());
}

TEST_F(BatchFormerTest, DropsAreReportedEvenWhenTheRestWaits) {
  std::vector<PendingRequest> queue = {Request(0), Request(4)};
  queue[0].cancelled = true;
  const BatchDecision decision = FormBatch(queue, kStart + milliseconds(5), limits_);
  EXPECT_THAT(decision.drop_cancelled, ElementsAre(0));
  EXPECT_THAT(decision.take, IsEmpty());
  EXPECT_EQ(decision.wait, milliseconds(4));
}

}  // namespace
}  // namespace docsparse
