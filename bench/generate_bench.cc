#include "bench/generate_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/median_ms.h"
#include "kernels/cpu_features.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/generation_config.h"
#include "model/checkpoint/precision.h"
#include "model/encoder/encoder.h"
#include "model/seq2seq/generator.h"
#include "model/seq2seq/seq2seq_model.h"

ABSL_FLAG(std::string, gen_model, "", "generate: a BART checkpoint folder (config.json + weights)");
ABSL_FLAG(int, gen_src_tokens, 512, "generate: source tokens per document, </s> included");
ABSL_FLAG(int, gen_new_tokens, 64, "generate: tokens generated per text");
ABSL_FLAG(std::vector<std::string>, gen_beams, std::vector<std::string>({"1", "4"}),
          "generate: beam counts (1 = greedy)");
ABSL_FLAG(std::vector<std::string>, gen_batches, std::vector<std::string>({"1", "4"}),
          "generate: documents per call");
ABSL_FLAG(std::vector<std::string>, gen_precision, std::vector<std::string>({"fp32"}),
          "generate: precisions (fp32, bf16, int8)");

ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

// Positive integers, or an error naming the flag and the bad value.
absl::StatusOr<std::vector<int>> PositiveInts(const char* flag,
                                              const std::vector<std::string>& texts) {
  std::vector<int> values;
  for (const std::string& text : texts) {
    int value = 0;
    if (!absl::SimpleAtoi(text, &value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --", flag, " value '", text, "' (a positive integer)"));
    }
    values.push_back(value);
  }
  return values;
}

// One call: encode the batch, then decode every text to new_tokens.
absl::StatusOr<int64_t> GenerateOnce(const Seq2SeqModel& model, const EncoderBatch& batch,
                                     const GenerationConfig& config) {
  absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(batch, {});
  if (!encoding.ok()) return encoding.status();
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
      model.StartDecoding(*encoding, /*rows_per_sequence=*/1);
  if (!stepper.ok()) return stepper.status();
  const std::vector<GenerationConfig> configs(batch.sequences.size(), config);
  absl::StatusOr<GenerationResult> result = Generate(**stepper, configs, {});
  if (!result.ok()) return result.status();
  return static_cast<int64_t>(result->sequences[0].hypotheses[0].token_ids.size());
}

// Every (batch, beams) case on one model.
int RunModel(const Seq2SeqModel& model, const std::string& dir, const std::vector<int>& batch_sizes,
             const std::vector<int>& beam_counts) {
  const std::string precision(PrecisionName(model.precision()));
  const BartConfig& config = model.config();
  const int src_tokens = absl::GetFlag(FLAGS_gen_src_tokens);
  const int new_tokens = absl::GetFlag(FLAGS_gen_new_tokens);
  std::mt19937 rng(0);
  std::uniform_int_distribution<int32_t> token(4, static_cast<int32_t>(config.vocab_size) - 1);
  const std::string isa(IsaName(HostCpuFeatures()));
  for (int batch_size : batch_sizes) {
    EncoderBatch batch;
    for (int b = 0; b < batch_size; ++b) {
      std::vector<int32_t> ids(src_tokens);
      for (int32_t& id : ids) id = token(rng);
      ids.front() = 0;  // <s>
      ids.back() = 2;   // </s>
      batch.sequences.push_back(std::move(ids));
    }
    for (int beams : beam_counts) {
      GenerationConfig generation;
      generation.num_beams = beams;
      generation.max_new_tokens = new_tokens;
      generation.decoder_start_token_id = 2;
      generation.eos_token_ids.clear();  // every text runs to max_new_tokens
      generation.pad_token_id = 1;
      absl::StatusOr<int64_t> generated = 0;
      const double ms = MedianMs(absl::GetFlag(FLAGS_repeats),
                                 [&] { generated = GenerateOnce(model, batch, generation); });
      if (!generated.ok()) {
        std::fprintf(stderr, "generate: %s\n", generated.status().ToString().c_str());
        return 1;
      }
      const double per_token = ms / static_cast<double>(std::max<int64_t>(1, *generated));
      if (absl::GetFlag(FLAGS_json)) {
        std::printf(
            "{\"impl\": \"docsparse\", \"precision\": \"%s\", \"task\": \"summarize\", "
            "\"beams\": %d, \"batch\": %d, \"source_tokens\": %d, \"new_tokens\": %lld, "
            "\"ms_per_token\": %.2f, \"tokens_per_s\": %.1f, \"isa\": \"%s\", \"threads\": %d}\n",
            precision.c_str(), beams, batch_size, src_tokens, static_cast<long long>(*generated),
            per_token, 1000.0 / per_token * batch_size, isa.c_str(), absl::GetFlag(FLAGS_threads));
      } else {
        std::printf(
            "generate %s %s  batch %d  beams %d  %d -> %lld tokens  %8.2f ms/token  %7.1f "
            "tokens/s\n",
            dir.c_str(), precision.c_str(), batch_size, beams, src_tokens,
            static_cast<long long>(*generated), per_token, 1000.0 / per_token * batch_size);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int RunGenerateBench() {
  const std::string dir = absl::GetFlag(FLAGS_gen_model);
  if (dir.empty()) {
    std::fprintf(stderr, "generate: --gen_model is required (a BART checkpoint folder)\n");
    return 2;
  }
  const absl::StatusOr<std::vector<int>> batch_sizes =
      PositiveInts("gen_batches", absl::GetFlag(FLAGS_gen_batches));
  const absl::StatusOr<std::vector<int>> beam_counts =
      PositiveInts("gen_beams", absl::GetFlag(FLAGS_gen_beams));
  for (const absl::Status& status : {batch_sizes.status(), beam_counts.status()}) {
    if (!status.ok()) {
      std::fprintf(stderr, "generate: %s\n", std::string(status.message()).c_str());
      return 2;
    }
  }
  std::vector<Precision> precisions;
  for (const std::string& name : absl::GetFlag(FLAGS_gen_precision)) {
    const std::optional<Precision> precision = ParsePrecision(name);
    if (!precision.has_value()) {
      std::fprintf(stderr, "generate: bad --gen_precision value '%s' (fp32, bf16, int8)\n",
                   name.c_str());
      return 2;
    }
    precisions.push_back(*precision);
  }
  at::set_num_threads(std::max(1, absl::GetFlag(FLAGS_threads)));
  c10::InferenceMode inference_mode;
  const absl::StatusOr<BartConfig> config = LoadBartConfig(dir + "/config.json");
  if (!config.ok()) {
    std::fprintf(stderr, "generate: %s\n", config.status().ToString().c_str());
    return 1;
  }
  for (const Precision precision : precisions) {
    absl::StatusOr<std::unique_ptr<Seq2SeqModel>> model =
        Seq2SeqModel::Create(dir, *config, /*attention=*/nullptr, at::kCPU, precision);
    if (!model.ok()) {
      std::fprintf(stderr, "generate: %s\n", model.status().ToString().c_str());
      return 1;
    }
    const int status = RunModel(**model, dir, *batch_sizes, *beam_counts);
    if (status != 0) return status;
  }
  return 0;
}

}  // namespace docsparse::bench
