#include "server/label_embedding_cache.h"

#include <c10/core/InferenceMode.h>

namespace docsparse {

size_t LabelEmbeddingCache::EntryBytes(const std::string& label, const at::Tensor& embedding) {
  // The label is held twice: as the map's key and in the recency list.
  return 2 * label.size() + embedding.nbytes() + kEntryOverheadBytes;
}

std::vector<at::Tensor> LabelEmbeddingCache::Lookup(const std::vector<std::string>& labels) {
  std::vector<at::Tensor> rows(labels.size());
  MutexLock lock(&mu_);
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto it = entries_.find(labels[i]);
    if (it == entries_.end()) {
      ++misses_;
      continue;
    }
    ++hits_;
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    rows[i] = it->second.embedding;
  }
  return rows;
}

void LabelEmbeddingCache::Insert(const std::string& label, const at::Tensor& embedding) {
  c10::InferenceMode inference_mode;
  const size_t bytes = EntryBytes(label, embedding);
  if (bytes > capacity_bytes_) return;
  // Copied outside the lock: the caller's tensor may be a view of a batch.
  at::Tensor copy = embedding.clone();
  MutexLock lock(&mu_);
  if (const auto it = entries_.find(label); it != entries_.end()) {
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    return;
  }
  while (bytes_ + bytes > capacity_bytes_ && !recency_.empty()) {
    const auto oldest = entries_.find(recency_.back());
    bytes_ -= oldest->second.bytes;
    entries_.erase(oldest);
    recency_.pop_back();
    ++evictions_;
  }
  recency_.push_front(label);
  entries_.emplace(label, Entry{std::move(copy), bytes, recency_.begin()});
  bytes_ += bytes;
}

LabelCacheStats LabelEmbeddingCache::stats() const {
  MutexLock lock(&mu_);
  LabelCacheStats stats;
  stats.hits = hits_;
  stats.misses = misses_;
  stats.evictions = evictions_;
  stats.entries = entries_.size();
  stats.bytes = bytes_;
  stats.capacity_bytes = capacity_bytes_;
  return stats;
}

}  // namespace docsparse
