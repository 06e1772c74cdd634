// Reformer's LSH attention pattern (Kitaev, Kaiser & Levskaya 2020), one
// head at a time. Reformer shares queries and keys; a converted encoder has
// separate ones, so queries and keys are hashed with the same random
// rotations (angular LSH of q·k) and a query is placed among the sorted keys.
// Per round r, with R_r a [head_dim, b/2] matrix of N(0, 1) entries drawn
// from the seed:
//   h_r(x) = argmax [xR_r ; −xR_r]                     (b buckets)
//   keys sorted by (h_r(k_j), j), cut into chunks of c (the last may be short)
//   query i's place p = #{j : (h_r(k_j), j) < (h_r(q_i), i)}, its chunk
//   t = min(⌊p / c⌋, chunks − 1)
//   query i attends every key of sorted chunks t and t − 1 (chunk 1 for
//   t = 0, as Reformer's own chunk and the one before, without wrapping).
// A query's keys are the union over rounds. Each row has at most 2c keys
// per round, so the cost is linear in n.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSH_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_LSH_PATTERN_H_

#include <cstdint>
#include <vector>

#include "model/attention/edge_plan.h"

namespace docsparse {

inline constexpr int32_t kLshMaxBuckets = 1024;

struct LshKnobs {
  int32_t buckets = 32;  // b: even, in [2, kLshMaxBuckets]
  int32_t chunk = 64;    // c >= 1
  int32_t rounds = 2;    // >= 1
};

// Round r's rotation for one head, [head_dim, buckets/2] row-major, from
// the counter-based stream of `head_key` (DeriveKey(head_key, r)).
std::vector<float> LshRotation(int32_t head_dim, int32_t buckets, uint64_t head_key, int32_t round);

// h(x) for one vector of head_dim floats: the index of the largest of
// [xR ; −xR] (the lowest index on ties).
int32_t LshBucket(const float* x, const float* rotation, int32_t head_dim, int32_t buckets);

// One head's keys per query over n tokens: queries and keys [n, head_dim]
// row-major float32.
HeadEdgeList PlanLshHead(const LshKnobs& knobs, const float* queries, const float* keys, int32_t n,
                         int32_t head_dim, uint64_t head_key);

// The key of `head` at `layer` for a request's seed.
uint64_t LshHeadKey(uint64_t seed, int32_t layer, int32_t head);

// Hashing work for one head: 2·n·head_dim·(b/2)·2 FLOPs per round (queries
// and keys).
double LshPlannerFlops(const LshKnobs& knobs, int64_t n, int32_t head_dim);

// The most pairs one head can compute over n tokens: n · min(n, rounds·2c).
double LshMaxHeadEdges(const LshKnobs& knobs, int64_t n);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSH_PATTERN_H_
