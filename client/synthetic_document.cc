#include "client/synthetic_document.h"

#include <algorithm>
#include <cctype>

namespace docsparse {
namespace {

// Common English words, roughly by frequency; each is a single token of the
// bert-base-uncased vocabulary (checked against models/minilm/vocab.txt by
// tests/client/synthetic_document_test.cc).
constexpr const char* kWords[] = {
    "the",         "of",       "and",        "to",          "in",         "a",         "is",
    "that",        "for",      "it",         "as",          "was",        "with",      "be",
    "by",          "on",       "not",        "he",          "this",       "are",       "or",
    "his",         "from",     "at",         "which",       "but",        "have",      "an",
    "they",        "you",      "were",       "her",         "she",        "there",     "one",
    "been",        "all",      "their",      "has",         "would",      "when",      "if",
    "will",        "we",       "more",       "no",          "can",        "who",       "said",
    "its",         "so",       "other",      "what",        "time",       "about",     "into",
    "than",        "them",     "only",       "some",        "could",      "these",     "two",
    "may",         "first",    "then",       "do",          "any",        "like",      "my",
    "now",         "over",     "such",       "our",         "man",        "me",        "even",
    "most",        "made",     "after",      "also",        "did",        "many",      "before",
    "must",        "through",  "back",       "years",       "where",      "much",      "your",
    "way",         "well",     "down",       "should",      "because",    "each",      "just",
    "those",       "people",   "how",        "too",         "little",     "state",     "good",
    "very",        "make",     "world",      "still",       "own",        "see",       "men",
    "work",        "long",     "get",        "here",        "between",    "both",      "life",
    "being",       "under",    "never",      "day",         "same",       "another",   "know",
    "while",       "last",     "might",      "us",          "great",      "old",       "year",
    "off",         "come",     "since",      "against",     "go",         "came",      "right",
    "used",        "take",     "three",      "states",      "himself",    "few",       "house",
    "use",         "during",   "without",    "again",       "place",      "american",  "around",
    "however",     "home",     "small",      "found",       "thought",    "went",      "say",
    "part",        "once",     "general",    "high",        "upon",       "school",    "every",
    "does",        "got",      "united",     "left",        "number",     "course",    "war",
    "until",       "always",   "away",       "something",   "fact",       "though",    "water",
    "less",        "public",   "put",        "think",       "almost",     "hand",      "enough",
    "far",         "took",     "head",       "yet",         "government", "system",    "better",
    "set",         "told",     "nothing",    "night",       "end",        "why",       "called",
    "find",        "going",    "look",       "asked",       "later",      "knew",      "point",
    "next",        "program",  "city",       "business",    "give",       "group",     "toward",
    "young",       "days",     "let",        "room",        "president",  "side",      "social",
    "given",       "present",  "several",    "order",       "national",   "possible",  "rather",
    "second",      "face",     "per",        "among",       "form",       "important", "often",
    "things",      "looked",   "early",      "white",       "case",       "john",      "become",
    "large",       "big",      "need",       "four",        "within",     "felt",      "along",
    "children",    "saw",      "best",       "church",      "ever",       "least",     "power",
    "development", "thing",    "light",      "seemed",      "family",     "interest",  "want",
    "members",     "mind",     "country",    "area",        "others",     "done",      "turned",
    "although",    "open",     "god",        "service",     "problem",    "certain",   "kind",
    "different",   "thus",     "began",      "door",        "help",       "means",     "sense",
    "whole",       "matter",   "perhaps",    "itself",      "york",       "times",     "law",
    "human",       "line",     "above",      "name",        "example",    "action",    "company",
    "hands",       "local",    "show",       "whether",     "five",       "history",   "gave",
    "today",       "either",   "act",        "feet",        "across",     "taken",     "past",
    "quite",       "anything", "seen",       "having",      "death",      "week",      "experience",
    "body",        "word",     "half",       "really",      "field",      "am",        "car",
    "words",       "already",  "themselves", "information", "tell",       "together",  "college",
    "shall",       "money",    "period",     "held",        "keep",       "sure",      "free",
    "seems",       "real",     "probably",   "behind",      "clear",      "level",     "office",
    "miss",        "fire",     "river",
};
constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// SplitMix64: tiny, well mixed, and the same everywhere.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi].
  int Between(int lo, int hi) { return lo + static_cast<int>(Next() % (hi - lo + 1)); }

 private:
  uint64_t state_;
};

// Skewed towards the front of the list (u² has density 1/(2√x)), so that the
// text has frequent and rare words as prose does.
const char* PickWord(SplitMix64& rng) {
  const double u = rng.Uniform();
  return kWords[std::min(kNumWords - 1, static_cast<int>(u * u * kNumWords))];
}

}  // namespace

std::string SyntheticDocument(int tokens, uint64_t seed) {
  SplitMix64 rng(seed);
  // [CLS] and [SEP] are two of the tokens.
  int remaining = std::max(1, tokens - 2);
  std::string text;
  text.reserve(static_cast<size_t>(remaining) * 6);
  while (remaining > 0) {
    // A sentence costs its words, its full stop and its comma if any.
    int words = rng.Between(6, 18);
    const bool comma = words >= 10 && rng.Uniform() < 0.5;
    const int cost = words + 1 + (comma ? 1 : 0);
    bool full_stop = true;
    if (cost > remaining) {
      // The last sentence takes exactly what is left.
      words = remaining > 1 ? remaining - 1 : 1;
      full_stop = remaining > 1;
    }
    const bool use_comma = comma && cost <= remaining;
    for (int i = 0; i < words; ++i) {
      if (!text.empty()) text += ' ';
      std::string word = PickWord(rng);
      if (i == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      text += word;
      if (use_comma && i == words / 2 - 1) text += ',';
    }
    if (full_stop) text += '.';
    remaining -= words + (full_stop ? 1 : 0) + (use_comma ? 1 : 0);
  }
  return text;
}

std::vector<std::string> SyntheticDocuments(int tokens, int count, uint64_t seed) {
  std::vector<std::string> documents;
  documents.reserve(static_cast<size_t>(std::max(0, count)));
  for (int i = 0; i < count; ++i) documents.push_back(SyntheticDocument(tokens, seed + i));
  return documents;
}

absl::Span<const char* const> SyntheticWords() { return absl::MakeConstSpan(kWords, kNumWords); }

}  // namespace docsparse
