// libFuzzer target for the budget solvers of the attention planners
// (model/attention/: MakeAttentionPlanner, CheckRequestKnobs, each
// planner's ValidateKnobs, Price and FitBudget, LSG's lsg_budget, the
// position patterns' knob_lattice) on extreme values. The input decodes
// (see Input below) into a planner kind, an encoder shape, an LSG
// checkpoint's config or none, docsparse.json knobs, a request's knobs and
// cap, and one to four sequence lengths; numbers include 0, -0, NaN, ±inf,
// the smallest denormal, ±DBL_MAX and raw bits, lengths 0, 1 and up to
// 16384 (see kMaxTokens). Invariants: a planner the model lacks is
// FAILED_PRECONDITION; knobs are refused INVALID_ARGUMENT under their field
// ("budget.knobs.window: ...", "budget.knobs: ..." for a combination,
// "attention.knobs" for docsparse.json's); knobs that pass give a fit whose
// price is finite and non-negative, whose `fits` says whether that price is
// within the cap (no cap: fits), which the planner's own Price reproduces
// (SBM prices the floor it raises to instead) and, for a cap the server
// accepts (max_density in (0, 1], max_attention_gflops > 0), whose density
// is at most 1 and whose knobs pass CheckRequestKnobs again. Regression
// cases live in tests/model/attention/planner_registry_test.cc.
//
// SBM needs its parameters: models/minilm-sbm/sbm.safetensors (from
// scripts/setup), read once for MiniLM's shape when present (then without
// docsparse.json knobs); without it SBM is fuzzed as a model lacking it.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// budget` builds it (DOCSPARSE_SOURCE_DIR set to the repository; the
// planners link LibTorch through their mechanisms) and runs it from
// tests/fuzz/budget_seeds/ (tests/fuzz/make_seeds.py writes them).
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "model/attention/planner_registry.h"

#ifndef DOCSPARSE_SOURCE_DIR
#error "build with -DDOCSPARSE_SOURCE_DIR=\"/path/to/repo\" (scripts/fuzz does)"
#endif

namespace {

using docsparse::AttentionKind;

// Planners price an encoder's windows, not whole documents, and 16384 is the
// longest window of the LSG checkpoints published. Pricing builds each
// sequence's plan on every lattice point, LSG's too, so longer ones are
// slow here (a 2^24-token sequence, docsparse.json's longest document,
// takes LSG ~15 s; 2^16 the Sparse Transformer ~25 s under a NaN cap).
constexpr int64_t kMaxTokens = int64_t{1} << 14;

const docsparse::EncoderShape kShapes[] = {
    {6, 12, 32, 384, 1536},   // MiniLM (SBM's parameters are for it)
    {2, 4, 8, 32, 37},        // the tiny test encoders
    {12, 16, 64, 1024, 4096}  // BART-large's encoder
};

const docsparse::LsgSparsity kSparsities[] = {
    docsparse::LsgSparsity::kNone,      docsparse::LsgSparsity::kNorm,
    docsparse::LsgSparsity::kPooling,   docsparse::LsgSparsity::kLsh,
    docsparse::LsgSparsity::kStride,    docsparse::LsgSparsity::kBlockStride,
    docsparse::LsgSparsity::kBosPooling};

// SBM's planner for MiniLM without LSG, or null when models/ lacks it.
const docsparse::AttentionPlanner* sbm = nullptr;

// Reads the input front to back; zeros once it runs out.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint64_t Bytes(int n) {
    uint64_t value = 0;
    for (int i = 0; i < n; ++i) value |= static_cast<uint64_t>(Byte()) << (8 * i);
    return value;
  }

  // A tag byte picks an extreme value, a small integer, a power of two or
  // raw bits.
  double Number() {
    switch (Byte() % 16) {
      case 0:
        return 0;
      case 1:
        return -0.0;
      case 2:
        return std::numeric_limits<double>::quiet_NaN();
      case 3:
        return std::numeric_limits<double>::infinity();
      case 4:
        return -std::numeric_limits<double>::infinity();
      case 5:
        return std::numeric_limits<double>::denorm_min();
      case 6:
        return DBL_MAX;
      case 7:
        return -DBL_MAX;
      case 8:
        return -1;
      case 9:
        return 0.5;
      case 10:
        return 1e-300;
      case 11:
        return static_cast<double>(Byte());
      case 12:
        return -static_cast<double>(Byte());
      case 13:
        return std::ldexp(1.0, Byte() % 80);
      default: {
        const uint64_t bits = Bytes(8);
        double value = 0;
        std::memcpy(&value, &bits, sizeof(value));
        return value;
      }
    }
  }

  // A sequence length in [0, most]; mostly short ones, which price fast.
  int64_t Tokens(int64_t most) {
    const uint8_t tag = Byte() % 16;
    if (tag == 0) return 0;
    if (tag == 1) return 1;
    if (tag == 2) return most;
    if (tag == 3) return static_cast<int64_t>(Bytes(2)) % (most + 1);
    if (tag < 8) return 2 + Byte() % 8;
    const int64_t low = Byte();
    return low + 256 * (Byte() % 4);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Knob values by name: a name byte picks one of `names` or, past them, a
// name no planner has.
docsparse::AttentionKnobValues ReadKnobs(Input& in, const std::vector<std::string>& names,
                                         int most) {
  docsparse::AttentionKnobValues knobs;
  const int count = in.Byte() % (most + 1);
  for (int i = 0; i < count; ++i) {
    const size_t pick = in.Byte() % (names.size() + 1);
    knobs[pick < names.size() ? names[pick] : "no_such_knob"] = in.Number();
  }
  return knobs;
}

// INVALID_ARGUMENT under the knobs' field: "budget.knobs.window: ..." for
// one knob, "budget.knobs: ..." for a combination ValidateKnobs refuses.
void CheckKnobRefusal(const absl::Status& status, const std::string& prefix) {
  const std::string message(status.message());
  const std::string field = prefix.substr(0, prefix.size() - 1);
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      (message.rfind(prefix, 0) != 0 && message.rfind(field + ": ", 0) != 0)) {
    std::fprintf(stderr, "budget_fuzz: bad refusal: %s\n", status.ToString().c_str());
    std::abort();
  }
}

// Says which invariant broke and on what, so a crash reads without a
// debugger, then aborts.
[[noreturn]] void Fail(const char* what, const docsparse::AttentionPlanner& planner,
                       const docsparse::AttentionCap& cap, const std::vector<int64_t>& tokens,
                       const docsparse::BudgetFit& fit) {
  std::string knobs, lengths;
  for (const auto& [name, value] : fit.knobs) knobs += " " + name + "=" + std::to_string(value);
  for (const int64_t n : tokens) lengths += " " + std::to_string(n);
  std::fprintf(stderr,
               "budget_fuzz: %s: %s planner, cap density %g gflops %g, tokens%s; fit%s: "
               "density %g, GFLOP %g, edges %g, fits %d\n",
               what, std::string(planner.name()).c_str(), cap.max_density.value_or(-1),
               cap.max_attention_gflops.value_or(-1), lengths.c_str(), knobs.c_str(),
               fit.price.density, fit.price.attention_flops / 1e9, fit.price.edges, fit.fits);
  std::abort();
}

bool Finite(const docsparse::AttentionPrice& price) {
  return std::isfinite(price.edges) && std::isfinite(price.density) &&
         std::isfinite(price.attention_flops) && price.edges >= 0 && price.density >= 0 &&
         price.attention_flops >= 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  docsparse::PlannerSource source;
  source.model_dir = std::string(DOCSPARSE_SOURCE_DIR) + "/models/minilm-sbm";
  source.shape = kShapes[0];
  if (!docsparse::HasSbmParameters(source)) {
    std::fprintf(stderr, "budget_fuzz: no %s/sbm.safetensors (scripts/setup): SBM not fuzzed\n",
                 source.model_dir.c_str());
    return 0;
  }
  auto planner = docsparse::MakeAttentionPlanner(AttentionKind::kSbm, source);
  if (!planner.ok()) {
    std::fprintf(stderr, "budget_fuzz: %s\n", planner.status().ToString().c_str());
    std::abort();
  }
  sbm = planner->release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const std::vector<AttentionKind>& kinds = docsparse::AllAttentionKinds();
  const AttentionKind kind = kinds[in.Byte() % kinds.size()];
  docsparse::PlannerSource source;
  const uint8_t shape = in.Byte() % (sizeof(kShapes) / sizeof(kShapes[0]));
  source.shape = kShapes[shape];
  const uint8_t lsg = in.Byte();
  if (lsg < 128) {  // An LSG checkpoint, as its config.json reader allows.
    docsparse::LsgConfig config;
    config.sparsity_type = kSparsities[lsg % 7];
    config.num_global_tokens = 1 + in.Byte() % 8;
    if (!docsparse::ValidateLsgConfig(config, "fuzz").ok()) return 0;
    source.lsg = config;
  }

  // The planner as the model registry makes it, with docsparse.json knobs
  // named after those of the same planner made without them.
  std::unique_ptr<docsparse::AttentionPlanner> made;
  const docsparse::AttentionPlanner* planner = nullptr;
  std::vector<std::string> names;
  if (kind == AttentionKind::kSbm && sbm != nullptr && shape == 0 && !source.lsg) {
    planner = sbm;
    for (const auto& [name, range] : planner->Knobs()) names.push_back(name);
  } else {
    auto plain = docsparse::MakeAttentionPlanner(kind, source);
    if (!plain.ok()) {
      // The model lacks what the planner needs (LSG's config, SBM's file).
      if (plain.status().code() != absl::StatusCode::kFailedPrecondition) std::abort();
      return 0;
    }
    for (const auto& [name, range] : (*plain)->Knobs()) names.push_back(name);
    source.configured_knobs = ReadKnobs(in, names, 3);
    for (const auto& [name, value] : source.configured_knobs) {
      // docsparse.json's reader refuses anything else (serving_config.cc).
      if (!(value >= -1e9 && value <= 1e9)) return 0;
    }
    auto configured = docsparse::MakeAttentionPlanner(kind, source);
    if (!configured.ok()) {
      CheckKnobRefusal(configured.status(), "attention.knobs.");
      return 0;
    }
    made = *std::move(configured);
    planner = made.get();
  }

  const docsparse::AttentionKnobValues request = ReadKnobs(in, names, 4);
  if (const absl::Status checked = CheckRequestKnobs(*planner, request, "budget.knobs.");
      !checked.ok()) {
    CheckKnobRefusal(checked, "budget.knobs.");
    return 0;
  }
  docsparse::AttentionCap cap;
  const uint8_t cap_kind = in.Byte() % 3;
  const double cap_value = in.Number();
  if (cap_kind == 1) cap.max_density = cap_value;
  if (cap_kind == 2) cap.max_attention_gflops = cap_value;
  std::vector<int64_t> tokens(1 + in.Byte() % 4);
  for (int64_t& n : tokens) n = in.Tokens(kMaxTokens);

  const docsparse::AttentionKnobValues start = docsparse::StartingKnobs(*planner, request);
  const docsparse::BudgetFit fit = planner->FitBudget(cap, start, tokens, source.shape);
  const bool accepted_cap = cap_kind == 0 || (cap_kind == 1 && cap_value > 0 && cap_value <= 1) ||
                            (cap_kind == 2 && cap_value > 0);
  // SBM's fit takes a density cap as its density target as it is, relying
  // on CheckBudget's ranges: it is held to them.
  if (kind == AttentionKind::kSbm && !accepted_cap) return 0;
  if (!Finite(fit.price)) Fail("price not finite", *planner, cap, tokens, fit);
  bool within = true;
  if (cap.max_density) within = fit.price.density <= *cap.max_density;
  if (cap.max_attention_gflops) {
    within = fit.price.attention_flops / 1e9 <= *cap.max_attention_gflops;
  }
  // SBM decides `fits` under a GFLOP cap on a density target that counts
  // its planner's own work (SbmTargetDensityForAttentionFlops), which its
  // Price leaves out: its floor can be priced within the cap and still not
  // fit (tests/fuzz/README.md, findings). Not checked until that is settled.
  const bool sbm_gflops = kind == AttentionKind::kSbm && cap.max_attention_gflops.has_value();
  if (!sbm_gflops && fit.fits != within) {
    Fail("fits disagrees with the cap", *planner, cap, tokens, fit);
  }
  if (kind != AttentionKind::kSbm) {
    const docsparse::AttentionPrice again = planner->Price(fit.knobs, tokens, source.shape);
    if (again.edges != fit.price.edges || again.density != fit.price.density ||
        again.attention_flops != fit.price.attention_flops) {
      Fail("Price differs from the fit's price", *planner, cap, tokens, fit);
    }
  }
  if (accepted_cap) {
    // LSG prices every derived key (pooled, normed) as attendable, padded
    // chunks' too (lsg_budget.h: an upper bound): a short sequence can price
    // above 1 (271 tokens at its native config: 1.07).
    if (fit.price.density > 1 && kind != AttentionKind::kLsg) {
      Fail("density above 1", *planner, cap, tokens, fit);
    }
    if (const absl::Status runnable = CheckRequestKnobs(*planner, fit.knobs, "fit.");
        !runnable.ok()) {
      Fail(std::string(runnable.message()).c_str(), *planner, cap, tokens, fit);
    }
  }
  return 0;
}
