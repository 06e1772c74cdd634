// Test helper for the pattern planners: expands a PatternPlan into a dense
// mask per head over the real tokens (gathered copies mapped back through
// key_gather) and reports every structural fault on the way, so that a test
// can compare the plan with a mask built straight from a paper's definition.
#ifndef DOCSPARSE_TESTS_MODEL_ATTENTION_PATTERN_MASK_H_
#define DOCSPARSE_TESTS_MODEL_ATTENTION_PATTERN_MASK_H_

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/attention/pattern_plan.h"

namespace docsparse::testing {

struct PatternMask {
  int32_t length = 0;
  int32_t heads = 0;
  // [heads][length][length]: how many times (query, token) is computed, 0
  // where it is not (more than 1 only for a plan that repeats keys on
  // purpose, ExpandPatternPlan's `repeats`).
  std::vector<uint8_t> allowed;
  std::vector<int64_t> edges;  // [heads]: computed pairs, repeats included
  // Structural faults, empty for a well-formed plan; at most kMaxFaults
  // described, then one line with how many more.
  std::vector<std::string> faults;

  int Count(int32_t head, int32_t query, int32_t token) const {
    return allowed[(static_cast<size_t>(head) * length + query) * length + token];
  }
  bool At(int32_t head, int32_t query, int32_t token) const {
    return Count(head, query, token) > 0;
  }
};

inline constexpr int kMaxFaults = 10;

// Collects fault descriptions, keeping the first kMaxFaults (a broken
// planner can produce one per mask entry).
class FaultLog {
 public:
  template <typename... Parts>
  void Add(const Parts&... parts) {
    if (static_cast<int>(faults_.size()) >= kMaxFaults) {
      ++dropped_;
      return;
    }
    std::ostringstream line;
    (line << ... << parts);
    faults_.push_back(line.str());
  }
  std::vector<std::string> Take() {
    if (dropped_ > 0) faults_.push_back("... and " + std::to_string(dropped_) + " more");
    dropped_ = 0;
    return std::move(faults_);
  }

 private:
  std::vector<std::string> faults_;
  int64_t dropped_ = 0;
};

// The plan's mask and faults. Checks: query blocks cover exactly [0, length)
// in increasing order; span_offsets has heads·blocks + 1 non-decreasing
// entries from 0 to spans.size(); key_gather names real tokens; no span is
// empty or leaves [0, extended_keys()); a cell's spans ascend; no (head,
// query, token) pair is covered twice (copies included) unless `repeats`
// allows it (BigBird's random_at_first_block); head_edges has one entry per
// head, each equal to the mask's count. The mask is only built when the
// block and offset structure is sound.
inline PatternMask ExpandPatternPlan(const PatternPlan& plan, bool repeats = false) {
  PatternMask mask;
  mask.length = plan.length;
  mask.heads = plan.heads;
  FaultLog log;
  if (plan.length < 0 || plan.heads < 0) {
    log.Add("length ", plan.length, " or heads ", plan.heads, " negative");
    mask.faults = log.Take();
    return mask;
  }

  const std::vector<int32_t>& starts = plan.query_block_starts;
  bool blocks_sound = !starts.empty() && starts.front() == 0 && starts.back() == plan.length;
  for (size_t b = 1; b < starts.size(); ++b) {
    blocks_sound = blocks_sound && starts[b - 1] < starts[b];
  }
  if (!blocks_sound) {
    log.Add("query blocks do not cover [0, ", plan.length, ") in increasing order");
  }
  const int64_t cells = static_cast<int64_t>(plan.heads) * plan.num_query_blocks();
  bool offsets_sound = blocks_sound && static_cast<int64_t>(plan.span_offsets.size()) == cells + 1;
  if (blocks_sound && !offsets_sound) {
    log.Add("span_offsets has ", plan.span_offsets.size(),
            " entries, not heads·blocks+1 = ", cells + 1);
  }
  if (offsets_sound) {
    bool monotone = plan.span_offsets.front() == 0 &&
                    plan.span_offsets.back() == static_cast<int32_t>(plan.spans.size());
    for (size_t c = 1; c < plan.span_offsets.size(); ++c) {
      monotone = monotone && plan.span_offsets[c - 1] <= plan.span_offsets[c];
    }
    if (!monotone) {
      log.Add("span_offsets do not rise from 0 to spans.size() = ", plan.spans.size());
      offsets_sound = false;
    }
  }
  for (size_t p = 0; p < plan.key_gather.size(); ++p) {
    if (plan.key_gather[p] < 0 || plan.key_gather[p] >= plan.length) {
      log.Add("key_gather[", p, "] = ", plan.key_gather[p], " is not a token");
    }
  }
  if (!offsets_sound) {
    mask.faults = log.Take();
    return mask;
  }

  const int32_t n = plan.length;
  mask.allowed.assign(static_cast<size_t>(plan.heads) * n * n, 0);
  mask.edges.assign(plan.heads, 0);
  const int32_t blocks = plan.num_query_blocks();
  for (int32_t head = 0; head < plan.heads; ++head) {
    for (int32_t block = 0; block < blocks; ++block) {
      const int32_t cell = head * blocks + block;
      int64_t previous_end = 0;
      for (int32_t s = plan.span_offsets[cell]; s < plan.span_offsets[cell + 1]; ++s) {
        const KeySpan span = plan.spans[s];
        const int64_t end = int64_t{span.begin} + span.length;
        if (span.length <= 0) {
          log.Add("head ", head, " block ", block, ": empty span at ", span.begin);
          continue;
        }
        if (span.begin < 0 || end > plan.extended_keys()) {
          log.Add("head ", head, " block ", block, ": span [", span.begin, ", ", end,
                  ") outside [0, ", plan.extended_keys(), ")");
          continue;
        }
        if (span.begin < previous_end) {
          log.Add("head ", head, " block ", block, ": span at ", span.begin,
                  " starts before the previous one ends (", previous_end, ")");
        }
        previous_end = end;
        const KeySlide slide = plan.slides.empty() ? KeySlide{0, 0} : plan.slides[s];
        for (int32_t query = starts[block]; query < starts[block + 1]; ++query) {
          for (int32_t key = span.begin; key < end; ++key) {
            // A sliding span, by its definition: the keys within
            // [query + offset, query + offset + width).
            if (slide.width != 0 &&
                (key < query + slide.offset || key >= query + slide.offset + slide.width)) {
              continue;
            }
            const int32_t token = key < n ? key : plan.key_gather[key - n];
            if (token < 0 || token >= n) continue;  // reported with key_gather
            uint8_t& entry = mask.allowed[(static_cast<size_t>(head) * n + query) * n + token];
            if (entry != 0 && !repeats) {
              log.Add("head ", head, " query ", query, " token ", token, " covered twice (key ",
                      key, ")");
              continue;
            }
            ++entry;
            ++mask.edges[head];
          }
        }
      }
    }
  }

  if (!plan.slides.empty() && plan.slides.size() != plan.spans.size()) {
    log.Add("slides has ", plan.slides.size(), " entries for ", plan.spans.size(), " spans");
  }
  for (int32_t head = 0; head < plan.heads && !mask.edges.empty(); ++head) {
    for (int32_t query = 0; query < n; ++query) {
      bool any = false;
      for (int32_t token = 0; token < n && !any; ++token) any = mask.At(head, query, token);
      if (!any) log.Add("head ", head, " query ", query, " has no key");
    }
  }
  if (static_cast<int32_t>(plan.head_edges.size()) != plan.heads) {
    log.Add("head_edges has ", plan.head_edges.size(), " entries for ", plan.heads, " heads");
  } else {
    for (int32_t head = 0; head < plan.heads; ++head) {
      if (plan.head_edges[head] != mask.edges[head]) {
        log.Add("head ", head, ": head_edges ", plan.head_edges[head], ", mask count ",
                mask.edges[head]);
      }
    }
  }
  mask.faults = log.Take();
  return mask;
}

inline std::string DescribeFaults(const std::vector<std::string>& faults) {
  std::string text;
  for (const std::string& fault : faults) text += "\n  " + fault;
  return text;
}

// "" when the plan is well formed and its mask equals `allows(head, query,
// token)` everywhere; otherwise its faults, or the first disagreement and
// how many there are.
template <typename Allows>
std::string PlanMismatch(const PatternPlan& plan, Allows allows) {
  const PatternMask mask = ExpandPatternPlan(plan);
  if (!mask.faults.empty()) return "faults:" + DescribeFaults(mask.faults);
  std::ostringstream first;
  int64_t differences = 0;
  for (int32_t head = 0; head < mask.heads; ++head) {
    for (int32_t query = 0; query < mask.length; ++query) {
      for (int32_t token = 0; token < mask.length; ++token) {
        const bool expected = allows(head, query, token);
        if (mask.At(head, query, token) == expected) continue;
        if (differences++ == 0) {
          first << "head " << head << " query " << query << " token " << token << ": plan "
                << (expected ? "misses" : "adds") << " it";
        }
      }
    }
  }
  if (differences == 0) return "";
  return first.str() + " (" + std::to_string(differences) + " differences)";
}

// As PlanMismatch, for a plan that repeats keys on purpose: "" when it is
// well formed and computes each (head, query, token) exactly `times(head,
// query, token)` times (0: not at all).
template <typename Times>
std::string PlanCountMismatch(const PatternPlan& plan, Times times) {
  const PatternMask mask = ExpandPatternPlan(plan, /*repeats=*/true);
  if (!mask.faults.empty()) return "faults:" + DescribeFaults(mask.faults);
  for (int32_t head = 0; head < mask.heads; ++head) {
    for (int32_t query = 0; query < mask.length; ++query) {
      for (int32_t token = 0; token < mask.length; ++token) {
        const int want = times(head, query, token);
        const int got = mask.Count(head, query, token);
        if (got != want) {
          return "head " + std::to_string(head) + " query " + std::to_string(query) + " token " +
                 std::to_string(token) + ": computed " + std::to_string(got) + " times, not " +
                 std::to_string(want);
        }
      }
    }
  }
  return "";
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_MODEL_ATTENTION_PATTERN_MASK_H_
