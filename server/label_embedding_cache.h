// Label embeddings for zero-shot classification, computed on first use and
// kept: a label's embedding depends only on the model and its prompt.
// Requests embed the labels they miss together with their document (in the
// same batch) and insert them afterwards.
//
// Callers' label sets are unbounded over time and memory is not: the cache
// holds at most a number of bytes and evicts the least recently used labels
// to make room, so that the labels in use stay cached however many others
// came before them.
#ifndef DOCSPARSE_SERVER_LABEL_EMBEDDING_CACHE_H_
#define DOCSPARSE_SERVER_LABEL_EMBEDDING_CACHE_H_

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace docsparse {

struct LabelCacheStats {
  uint64_t hits = 0;       // labels found by Lookup
  uint64_t misses = 0;     // labels Lookup did not find
  uint64_t evictions = 0;  // labels dropped to make room
  size_t entries = 0;
  size_t bytes = 0;  // what the entries hold, as counted against the capacity
  size_t capacity_bytes = 0;
};

// Thread-safe.
class LabelEmbeddingCache {
 public:
  static constexpr size_t kDefaultCapacityBytes = size_t{64} << 20;
  // What an entry costs besides its label and embedding: the map and list
  // nodes and the tensor's header, roughly.
  static constexpr size_t kEntryOverheadBytes = 256;

  explicit LabelEmbeddingCache(size_t capacity_bytes = kDefaultCapacityBytes)
      : capacity_bytes_(capacity_bytes) {}

  // Each label's cached embedding, or an undefined tensor where there is
  // none; counts a hit or a miss per label, and makes the hits the most
  // recently used. The tensors stay valid whatever is evicted later.
  std::vector<at::Tensor> Lookup(const std::vector<std::string>& labels) ABSL_LOCKS_EXCLUDED(mu_);

  // Keeps a copy of `embedding` for `label` as the most recently used entry,
  // evicting the least recently used ones until everything fits. A label
  // already cached keeps its embedding (and becomes the most recent); an
  // entry larger than the whole capacity is not kept.
  void Insert(const std::string& label, const at::Tensor& embedding) ABSL_LOCKS_EXCLUDED(mu_);

  LabelCacheStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    at::Tensor embedding;
    size_t bytes = 0;
    std::list<std::string>::iterator recency;  // its place in recency_
  };
  static size_t EntryBytes(const std::string& label, const at::Tensor& embedding);

  const size_t capacity_bytes_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // most recently used first
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_LABEL_EMBEDDING_CACHE_H_
