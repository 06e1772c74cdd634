// The Routing Transformer's attention pattern (Roy, Saffar, Vaswani &
// Grangier 2021), one head at a time: queries and keys are clustered by
// spherical k-means and a query attends the keys routed to its cluster.
// Centroids are fitted on the input (the paper keeps them as model
// parameters updated online; a converted encoder has none stored):
//   vectors: the 2n unit-normalised queries and keys;
//   start:   k' = min(k, n) distinct vectors drawn from the seed;
//   each of `iterations` Lloyd steps: every vector to its nearest centroid
//            (largest dot product, the lowest index on ties), each centroid
//            the normalised sum of its members (kept when it has none).
// Routing, balanced as the paper's implementation is (each cluster takes
// its top w = ⌈n / k'⌉ keys):
//   c(i)  = argmax_c μ_c · q̂_i            (each query to one cluster)
//   K(c)  = the w keys with the largest μ_c · k̂_j (the lower index on ties)
//   query i attends exactly K(c(i)).
// Every row has w keys: density ⌈n / k'⌉ / n, known before the input is.
#ifndef DOCSPARSE_MODEL_ATTENTION_ROUTING_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_ROUTING_PATTERN_H_

#include <cstdint>
#include <vector>

#include "model/attention/edge_plan.h"

namespace docsparse {

struct RoutingKnobs {
  int32_t clusters = 16;   // k >= 1
  int32_t iterations = 2;  // Lloyd steps >= 0
};

// k' unit centroids [k', head_dim] fitted as above on queries and keys
// ([n, head_dim] row-major each), n >= 1.
std::vector<float> FitRoutingCentroids(const RoutingKnobs& knobs, const float* queries,
                                       const float* keys, int32_t n, int32_t head_dim,
                                       uint64_t head_key);

// Σ over the 2n unit vectors of their largest dot product with a centroid:
// what each Lloyd step does not decrease.
double RoutingObjective(const std::vector<float>& centroids, const float* queries,
                        const float* keys, int32_t n, int32_t head_dim);

// One head's keys per query routed through `centroids` (as above).
HeadEdgeList RouteHead(const std::vector<float>& centroids, const float* queries, const float* keys,
                       int32_t n, int32_t head_dim);

// The key of `head` at `layer` for a request's seed.
uint64_t RoutingHeadKey(uint64_t seed, int32_t layer, int32_t head);

// Keys per query: ⌈n / min(k, n)⌉ (0 for n = 0).
int64_t RoutingKeysPerQuery(const RoutingKnobs& knobs, int64_t n);

// Clustering and routing work for one head: (2·iterations + 2)·n·k'·head_dim·2
// FLOPs (each Lloyd step scores 2n vectors, routing scores n queries and n
// keys against k' centroids).
double RoutingPlannerFlops(const RoutingKnobs& knobs, int64_t n, int32_t head_dim);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ROUTING_PATTERN_H_
