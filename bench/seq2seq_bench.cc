#include "bench/seq2seq_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "kernels/cpu_features.h"
#include "model/attention/cost_model.h"
#include "model/attention/lsg_attention.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/precision.h"
#include "model/encoder/linear_precision.h"
#include "model/seq2seq/bart_decoder.h"
#include "model/seq2seq/bart_encoder.h"
#include "model/seq2seq/seq2seq_model.h"

ABSL_FLAG(std::vector<std::string>, s2s_tokens, std::vector<std::string>({"4096", "16384"}),
          "seq2seq: input lengths (tokens, special tokens included)");
ABSL_FLAG(int, s2s_rows, 4, "seq2seq: decoder rows (beams) of the one document");
ABSL_FLAG(int, s2s_steps, 32, "seq2seq: decode steps timed");
ABSL_FLAG(std::vector<std::string>, s2s_precision, std::vector<std::string>({"fp32"}),
          "seq2seq: precisions (fp32, bf16, int8, auto), a model each");
// Shared with `docsparse-bench attention` (bench/attention_bench_main.cc).
ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

BartConfig LsgBartBaseConfig(int max_tokens) {
  BartConfig config;
  config.architecture = Seq2SeqArchitecture::kBart;
  config.vocab_size = 50265;
  config.hidden_size = 768;
  config.num_layers = 6;
  config.num_heads = 12;
  config.intermediate_size = 3072;
  config.max_position_embeddings = max_tokens;
  // As the checkpoint reader sets it where config.json names no decoder
  // limit (bart_config.cc); left 0, every decode step was refused.
  config.decoder_max_position_embeddings = max_tokens;
  config.pad_token_id = 1;
  config.scale_embedding = false;
  config.activation = Activation::kGelu;
  config.decoder_layers = 6;
  config.decoder_heads = 12;
  config.decoder_ffn_size = 3072;
  LsgConfig lsg;
  lsg.block_size = 128;
  lsg.sparse_block_size = 128;
  lsg.sparsity_factor = 2;
  lsg.sparsity_type = LsgSparsity::kNorm;
  lsg.num_global_tokens = 1;
  config.lsg = lsg;
  return config;
}

// HF's initialisation (N(0, 0.02²) matrices, zero biases, unit norms): the
// numbers do not matter for timing, only the shapes.
at::Tensor Matrix(int64_t rows, int64_t cols) { return at::randn({rows, cols}) * 0.02; }

BartLayerWeights RandomLayer(int64_t h, int64_t ffn) {
  BartLayerWeights w;
  w.qkv_weight = Matrix(3 * h, h);
  w.qkv_bias = at::zeros({3 * h});
  w.out_weight = Matrix(h, h);
  w.out_bias = at::zeros({h});
  w.attention_norm_weight = at::ones({h});
  w.attention_norm_bias = at::zeros({h});
  w.fc1_weight = Matrix(ffn, h);
  w.fc1_bias = at::zeros({ffn});
  w.fc2_weight = Matrix(h, ffn);
  w.fc2_bias = at::zeros({h});
  w.final_norm_weight = at::ones({h});
  w.final_norm_bias = at::zeros({h});
  return w;
}

std::unique_ptr<Seq2SeqModel> RandomModel(const BartConfig& config, Precision precision) {
  const int64_t h = config.hidden_size;
  const int64_t positions = config.max_position_embeddings + config.position_offset();
  const at::Tensor shared = Matrix(config.vocab_size, h);
  BartEncoderWeights encoder;
  encoder.token_embeddings = shared;
  encoder.position_embeddings = Matrix(positions, h);
  encoder.embedding_norm_weight = at::ones({h});
  encoder.embedding_norm_bias = at::zeros({h});
  encoder.global_embeddings = Matrix(512, h);
  for (int i = 0; i < config.num_layers; ++i) {
    encoder.layers.push_back(RandomLayer(h, config.intermediate_size));
  }
  BartDecoderWeights decoder;
  decoder.token_embeddings = shared;
  decoder.position_embeddings = Matrix(positions, h);
  decoder.embedding_norm_weight = at::ones({h});
  decoder.embedding_norm_bias = at::zeros({h});
  for (int i = 0; i < config.decoder_layers; ++i) {
    BartDecoderLayerWeights layer;
    layer.self = RandomLayer(h, config.decoder_ffn_size);
    layer.cross.q_weight = Matrix(h, h);
    layer.cross.q_bias = at::zeros({h});
    layer.cross.kv_weight = Matrix(2 * h, h);
    layer.cross.kv_bias = at::zeros({2 * h});
    layer.cross.out_weight = Matrix(h, h);
    layer.cross.out_bias = at::zeros({h});
    layer.cross.norm_weight = at::ones({h});
    layer.cross.norm_bias = at::zeros({h});
    decoder.layers.push_back(std::move(layer));
  }
  decoder.lm_head = shared;
  decoder.final_logits_bias = at::zeros({config.vocab_size});
  return std::make_unique<Seq2SeqModel>(
      std::make_unique<BartEncoder>(config, std::move(encoder),
                                    MakeLsgAttention(*config.lsg, absl::GetFlag(FLAGS_threads)),
                                    at::kCPU, precision),
      std::make_unique<BartDecoder>(config, std::move(decoder), at::kCPU, precision));
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int RunCase(const Seq2SeqModel& model, int64_t tokens, Precision precision) {
  const BartConfig& config = model.config();
  EncoderBatch batch;
  std::vector<int32_t> ids(tokens);
  at::Tensor random_ids = at::randint(4, config.vocab_size, {tokens}, at::kLong);
  for (int64_t i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>(random_ids[i].item<int64_t>());
  ids.front() = 0;  // <s>
  ids.back() = 2;   // </s>
  batch.sequences.push_back(ids);

  std::vector<double> encoder_ms;
  absl::StatusOr<Seq2SeqEncoding> encoding;
  CostAccount cost(model.encoder().shape());
  for (int i = 0; i <= absl::GetFlag(FLAGS_repeats); ++i) {
    CostAccount run_cost(model.encoder().shape());
    const auto start = Clock::now();
    encoding = model.Encode(batch, {&run_cost});
    if (!encoding.ok()) {
      std::fprintf(stderr, "seq2seq --s2s_tokens %lld: %s\n", static_cast<long long>(tokens),
                   encoding.status().ToString().c_str());
      return 1;
    }
    if (i > 0) encoder_ms.push_back(MsSince(start));  // the first run warms caches and pools
    cost = run_cost;
  }

  const int rows = absl::GetFlag(FLAGS_s2s_rows);
  auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper = model.StartDecoding(*encoding, rows);
  const double attach_ms = MsSince(start);
  if (!stepper.ok()) {
    std::fprintf(stderr, "seq2seq: %s\n", stepper.status().ToString().c_str());
    return 1;
  }
  const double attach_flops = (*stepper)->flops();
  std::vector<double> step_ms;
  at::Tensor next = at::full({rows}, 2, at::kLong);  // decoder_start_token_id
  for (int step = 0; step < absl::GetFlag(FLAGS_s2s_steps); ++step) {
    start = Clock::now();
    absl::StatusOr<at::Tensor> logits = (*stepper)->Step(next);
    if (!logits.ok()) {
      std::fprintf(stderr, "seq2seq step %d: %s\n", step, logits.status().ToString().c_str());
      return 1;
    }
    next = logits->argmax(-1);
    step_ms.push_back(MsSince(start));
  }
  const double step_flops =
      ((*stepper)->flops() - attach_flops) / static_cast<double>(step_ms.size());
  const double step_mean =
      std::accumulate(step_ms.begin(), step_ms.end(), 0.0) / static_cast<double>(step_ms.size());
  const double encoder_median = Median(encoder_ms);
  const double step_median = Median(step_ms);
  const std::string isa(IsaName(HostCpuFeatures()));
  const std::string precision_name(PrecisionName(precision));
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"bench\": \"seq2seq\", \"model\": \"lsg-bart-base-random\", \"tokens\": %lld, "
        "\"precision\": \"%s\", \"threads\": %d, \"encoder_ms\": %.3f, \"encoder_gflop\": %.3f, "
        "\"encoder_attention_density\": %.6f, \"attach_ms\": %.3f, \"attach_gflop\": %.3f, "
        "\"rows\": %d, \"steps\": %zu, \"step_ms_median\": %.3f, \"step_ms_mean\": %.3f, "
        "\"step_gflop\": %.4f, \"peak_rss_mb\": %.1f, \"isa\": \"%s\"}\n",
        static_cast<long long>(tokens), precision_name.c_str(), absl::GetFlag(FLAGS_threads),
        encoder_median, cost.TotalFlops() / 1e9, cost.MeanDensity(), attach_ms, attach_flops / 1e9,
        rows, step_ms.size(), step_median, step_mean, step_flops / 1e9, PeakRssMb(), isa.c_str());
  } else {
    std::printf(
        "lsg-bart-base tokens %6lld  %s  encoder %9.1f ms (%.1f GFLOP, density %.4f)  attach %7.1f "
        "ms  step[%d rows] median %7.2f ms mean %7.2f ms (%.3f GFLOP)  peak %8.1f MB  isa %s\n",
        static_cast<long long>(tokens), precision_name.c_str(), encoder_median,
        cost.TotalFlops() / 1e9, cost.MeanDensity(), attach_ms, rows, step_median, step_mean,
        step_flops / 1e9, PeakRssMb(), isa.c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunSeq2SeqBench() {
  std::vector<int64_t> lengths;
  for (const std::string& text : absl::GetFlag(FLAGS_s2s_tokens)) {
    int64_t tokens = 0;
    if (!absl::SimpleAtoi(text, &tokens) || tokens < 2) {
      std::fprintf(stderr, "bad --s2s_tokens %s\n", text.c_str());
      return 2;
    }
    lengths.push_back(tokens);
  }
  if (lengths.empty() || absl::GetFlag(FLAGS_s2s_rows) < 1 || absl::GetFlag(FLAGS_s2s_steps) < 1 ||
      absl::GetFlag(FLAGS_repeats) < 1) {
    std::fprintf(stderr, "need --s2s_tokens, and --s2s_rows, --s2s_steps, --repeats >= 1\n");
    return 2;
  }
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  at::manual_seed(absl::GetFlag(FLAGS_seed));
  c10::InferenceMode inference_mode;
  // One model for every length: the position tables cover the longest input
  // plus LSG's block padding.
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const BartConfig config = LsgBartBaseConfig(static_cast<int>((longest / 128 + 1) * 128));
  int status = 0;
  for (const std::string& text : absl::GetFlag(FLAGS_s2s_precision)) {
    const std::optional<Precision> requested = ParsePrecision(text);
    if (!requested.has_value() || *requested == Precision::kFp16) {
      std::fprintf(stderr, "bad --s2s_precision %s (fp32, bf16, int8, auto)\n", text.c_str());
      return 2;
    }
    const Precision precision = ResolvePrecision(*requested, HostCpuFeatures());
    const std::unique_ptr<Seq2SeqModel> model = RandomModel(config, precision);
    for (int64_t tokens : lengths) status |= RunCase(*model, tokens, precision);
  }
  return status;
}

}  // namespace docsparse::bench
