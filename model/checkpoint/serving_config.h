// `docsparse.json`: how one model folder is served (tasks, pooling, attention,
// limits, zero-shot labels, extractive summaries, batching).
//
// Our own format, so validated strictly: every key is optional (defaults in
// the structs below), but an unknown key, a value of the wrong JSON type, an
// unsupported enum value, a duplicate key or a value out of range is an
// INVALID_ARGUMENT error naming the key path, e.g.
//   "docsparse.json: zero_shot.labels[2].description: expected string, got
//   number"
//   "docsparse.json: batching.max_batch_size: 0 is out of range [1, 4096]"
//   "docsparse.json: attention.lsg_block: unknown key"
// Example with every key:
//   {
//     "default": true,                   // requests naming no model come here
//     "tasks": ["embed", "classify", "summarize"],
//     "pooling": "mean",                 // "mean" | "cls"
//     "normalize": true,
//     "attention": {"kind": "native"},   // "native" | "dense" | "lsg" | "sbm" | a pattern
//     "precision": "auto",               // "auto" | "fp32" | "bf16" (encoders)
//     "max_document_tokens": 65536,      // hard cap per request
//     "overflow": "chunk",               // "reject" | "truncate" | "chunk"
//     "zero_shot": {
//       "temperature": 0.05,
//       "hypothesis_template": "This text is about {}.",
//       "labels": [{"name": "software license",
//                   "description": "A software license: terms ..."}]
//     },
//     "extractive": {"max_sentences": 5, "diversity": 0.3},
//     "batching": {"max_batch_size": 16, "max_queue_size": 256,
//                  "max_queue_delay_ms": 0, "max_batch_tokens": 6144,
//                  "max_batch_attention_gflops": 50}
//   }
// Checks that need other files (e.g. that "classify" has labels from here, the
// request or a classifier head in config.json) belong to the model registry.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_SERVING_CONFIG_H_
#define DOCSPARSE_MODEL_CHECKPOINT_SERVING_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/precision.h"
#include "nlohmann/json_fwd.hpp"

namespace docsparse {

enum class Task { kEmbed, kClassify, kSummarize };
enum class PoolingMode { kMean, kCls };
// What to do with a document longer than the model's sequence length:
// refuse it, cut it, or split it into windows whose outputs are combined.
enum class OverflowPolicy { kReject, kTruncate, kChunk };

std::string_view TaskName(Task task);                   // "embed", ...
std::string_view PoolingModeName(PoolingMode pooling);  // "mean", "cls"
std::string_view OverflowPolicyName(OverflowPolicy overflow);

// The attention planner a model serves with by default:
//   "native" (default): LSG when config.json is an LSG checkpoint (its own
//            LSG fields), else dense;
//   "dense":  full attention (on an LSG checkpoint: over [global ; tokens],
//            what the reference runs on short inputs);
//   "lsg":    requires an LSG checkpoint (docsparse-convert lsg makes one);
//   "sbm":    requires sbm.safetensors beside the checkpoint;
//   "longformer", "bigbird", "sparse_transformer", "star", "modernbert", "etc": the position
//            patterns, on any encoder (model/attention/*_pattern.h);
//   "lsh", "routing": the content patterns, on any encoder;
//   "union":  the union of the planners listed in "union" (default
//            longformer and sbm where sbm.safetensors is present, else
//            longformer and lsh), each pair computed once.
// "knobs" sets the native values of that planner's knobs by name, e.g.
// {"kind": "longformer", "knobs": {"window": 256, "global_tokens": 1}};
// a union's knobs are its parts' as "<part>.<knob>" ("sbm.target_density").
// Names and ranges are checked against the planner when the model loads.
struct AttentionChoice {
  std::string kind = "native";
  std::map<std::string, double> knobs;
  // 2 to 4 distinct planners whose plans are token pairs: sbm and the
  // position and content patterns (not dense, lsg or union). Empty: the
  // default above.
  std::vector<std::string> union_parts;
};

struct ZeroShotLabel {
  std::string name;         // non-empty, unique within the list
  std::string description;  // optional; empty means "use the template"
};

struct ZeroShotConfig {
  // Softmax temperature over cosine similarities, in [1e-4, 1e4].
  double temperature = 0.05;
  // Contains "{}" exactly once; the label name replaces it.
  std::string hypothesis_template = "This text is about {}.";
  std::vector<ZeroShotLabel> labels;  // default labels; requests may override

  // The text embedded for `label`: its description, or else the template
  // with the name in place of "{}".
  std::string LabelText(const ZeroShotLabel& label) const;
};

struct ExtractiveConfig {
  int max_sentences = 5;   // [1, 1000]
  double diversity = 0.3;  // [0, 1]: MMR trade-off, 0 = relevance only
};

struct BatchingConfig {
  int max_batch_size = 16;   // [1, 4096]
  int max_queue_size = 256;  // [max_batch_size, 1048576]
  // [0, 10000]: how long the oldest request may wait for others to join its
  // batch. 0 (Triton's default): an idle engine starts a lone request at once,
  // and batches form from what queued while the engine was busy.
  int max_queue_delay_ms = 0;
  // Priced-cost caps of one batch (a request over them runs alone). On CPU
  // one sequence of ~4k tokens already keeps every core busy: batching two
  // of them only added waiting (bench/serving_batching.sh, 4,096 tokens:
  // 1-7% fewer requests/s than unbatched under caps of 16,384 and 8,192),
  // while twelve 512-token documents still share a batch. Unset: the
  // device's default (kCpu... on the CPU, kCpuOneThread... where a batch
  // computes on one thread, kGpu... on a GPU).
  std::optional<int64_t> max_batch_tokens;           // [1, 2^30]
  std::optional<double> max_batch_attention_gflops;  // [1e-6, 1e9]

  static constexpr int64_t kCpuMaxBatchTokens = 6144;
  // Where a batch computes on one thread (model instances of one thread
  // each, the 2-core CPU's default), it has no barriers between cores to
  // spread over more rows, and company only lengthens the wait: 512-token
  // documents at 16 in flight on the 2-core AVX2 CPU gave the same
  // documents/s under caps of 6,144 and 1,024 tokens (int8 19.01 / 19.00,
  // fp32 11.36 / 11.35, means of 3 and 4 alternated rounds) and a p99 of
  // 1.5-1.7 s against 0.88-0.97 s (int8; fp32 2.3-2.8 s against 1.4-1.8 s).
  static constexpr int64_t kCpuOneThreadMaxBatchTokens = 1024;
  static constexpr double kCpuMaxBatchAttentionGflops = 50.0;
  // On the H100 (bench/gpu/serve_on_gpu.sh, docs/BENCHMARKS.md) long
  // documents gained nothing from company: minilm-lsg at 4,096 tokens
  // +4% / -8% docs/s in batches of 8 against alone (two runs), at 16,384
  // tokens -14% in pairs and -39% in batches of 6 (the LSG executor runs a
  // batch item by item, and a long item already fills the GPU's products).
  // Short documents still share batches up to max_batch_size.
  static constexpr int64_t kGpuMaxBatchTokens = 8192;
  static constexpr double kGpuMaxBatchAttentionGflops = 1000.0;
};

struct ServingConfig {
  // The model requests without a model name go to; at most one per
  // repository (else the first by name).
  bool default_model = false;
  std::vector<Task> tasks = {Task::kEmbed, Task::kClassify, Task::kSummarize};
  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = true;  // L2-normalise embeddings
  AttentionChoice attention;
  // The encoder's precision; "auto" is bf16 where the CPU multiplies
  // bf16 natively (AMX, AVX512-BF16), int8 on AVX2 without AVX-512, else
  // fp32 (model/encoder/linear_precision.h). The server's --precision
  // overrides it for every model.
  Precision precision = Precision::kAuto;
  int64_t max_document_tokens = 65536;  // [1, 16777216], whole document
  OverflowPolicy overflow = OverflowPolicy::kChunk;
  ZeroShotConfig zero_shot;
  ExtractiveConfig extractive;
  BatchingConfig batching;

  bool HasTask(Task task) const;
};

// Validates a parsed docsparse.json (rules above); `source` (usually the
// path) prefixes every error message.
absl::StatusOr<ServingConfig> ParseServingConfig(const nlohmann::json& config,
                                                 std::string_view source);

// Reads and validates `path`. Every model folder must have one: a missing file
// is NOT_FOUND naming the path, not a silent fall-back to defaults. Duplicate
// keys (which JSON parsers resolve silently) are refused.
absl::StatusOr<ServingConfig> LoadServingConfig(const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_SERVING_CONFIG_H_
