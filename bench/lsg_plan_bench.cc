#include "bench/lsg_plan_bench.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "bench/median_ms.h"
#include "kernels/cpu_features.h"
#include "model/attention/lsg_plan_cache.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, seq);
ABSL_DECLARE_FLAG(int, heads);
ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {

int RunLsgPlanBench() {
  const LsgConfig config;  // its defaults are the converter's: minilm-lsg's
  const int heads = absl::GetFlag(FLAGS_heads);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  for (const std::string& text : absl::GetFlag(FLAGS_seq)) {
    int32_t tokens = 0;
    if (!absl::SimpleAtoi(text, &tokens) || tokens < 1) {
      std::fprintf(stderr, "bad --seq %s\n", text.c_str());
      return 2;
    }
    const LsgLayout layout = LayoutLsgSequence(config, config.num_global_tokens, tokens);
    // What a layer did before the cache: the validity, then the plan.
    const double build_ms = MedianMs(repeats * 20, [&] {
      const LsgPlan plan =
          PlanLsgSequence(config, layout, heads, LsgValidFromLayout(config, layout, heads), false);
      if (plan.span_offsets.empty()) std::abort();
    });
    LsgPlanCache cache;
    const double cached_ms = MedianMs(repeats * 20, [&] {
      if (cache.Get(config, layout, heads, false) == nullptr) std::abort();
    });
    const std::string isa(IsaName(HostCpuFeatures()));
    if (absl::GetFlag(FLAGS_json)) {
      std::printf(
          "{\"bench\": \"lsg_plan\", \"tokens\": %d, \"heads\": %d, \"build_ms\": %.4f, "
          "\"cached_ms\": %.4f, \"isa\": \"%s\"}\n",
          tokens, heads, build_ms, cached_ms, isa.c_str());
    } else {
      std::printf("lsg plan  %6d tokens, %d heads: built %.3f ms, from the cache %.4f ms  isa %s\n",
                  tokens, heads, build_ms, cached_ms, isa.c_str());
    }
  }
  return 0;
}

}  // namespace docsparse::bench
