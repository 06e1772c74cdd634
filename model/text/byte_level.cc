#include "model/text/byte_level.h"

#include <cstdint>

#include "model/text/unicode_text.h"
#include "unicode/uchar.h"

namespace docsparse {
namespace {

// Letters and digits that Unicode 15.1 and 16.0 added: in HF's Oniguruma
// tables (Unicode 16.0), not in ICU 72's (Unicode 15.0). The test compares
// every code point with what HF's regex engine says
// (tests/fixtures/bpe_spm/gpt2_regex_classes.json).
constexpr char32_t kNewerLetters[][2] = {
    {0x1C89, 0x1C8A},   {0xA7CB, 0xA7CD},   {0xA7DA, 0xA7DC},   {0x105C0, 0x105F3},
    {0x10D4A, 0x10D65}, {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x11380, 0x11389},
    {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7},
    {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0}, {0x13460, 0x143FA},
    {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF}, {0x1E5D0, 0x1E5ED},
    {0x1E5F0, 0x1E5F0}, {0x2EBF0, 0x2EE5D}};
constexpr char32_t kNewerNumbers[][2] = {{0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9},
                                         {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9},
                                         {0x1E5F1, 0x1E5FA}};

template <size_t N>
bool InRanges(char32_t c, const char32_t (&ranges)[N][2]) {
  for (const auto& range : ranges) {
    if (c >= range[0] && c <= range[1]) return true;
  }
  return false;
}

bool IsContinuationByte(uint8_t b) { return (b & 0xC0) == 0x80; }

// The end (exclusive) of the run of `cls` characters that starts at `i`.
size_t RunEnd(const std::vector<Gpt2CharClass>& classes, size_t i, Gpt2CharClass cls) {
  while (i < classes.size() && classes[i] == cls) ++i;
  return i;
}

// The length of the contraction ('s 't 'm 'd 're 've 'll, lower case only)
// at chars[i], or 0: the regex's first alternatives.
size_t ContractionLength(const std::u32string& chars, size_t i) {
  if (chars[i] != U'\'' || i + 1 >= chars.size()) return 0;
  const char32_t a = chars[i + 1];
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= chars.size()) return 0;
  const char32_t b = chars[i + 2];
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

}  // namespace

Gpt2CharClass ClassifyForGpt2(char32_t c) {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Gpt2CharClass::kLetter;
    if (c >= '0' && c <= '9') return Gpt2CharClass::kNumber;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return Gpt2CharClass::kWhitespace;
    return Gpt2CharClass::kOther;
  }
  const UChar32 u = static_cast<UChar32>(c);
  const uint32_t category = U_GET_GC_MASK(u);
  if ((category & U_GC_L_MASK) != 0) return Gpt2CharClass::kLetter;
  if ((category & U_GC_N_MASK) != 0) return Gpt2CharClass::kNumber;
  if (u_hasBinaryProperty(u, UCHAR_WHITE_SPACE)) return Gpt2CharClass::kWhitespace;
  if (InRanges(c, kNewerLetters)) return Gpt2CharClass::kLetter;
  if (InRanges(c, kNewerNumbers)) return Gpt2CharClass::kNumber;
  return Gpt2CharClass::kOther;
}

void SplitGpt2Words(std::string_view text, std::vector<std::string_view>* words) {
  std::u32string chars;
  std::vector<size_t> offsets;  // Byte offset of each character, and the end.
  std::vector<Gpt2CharClass> classes;
  chars.reserve(text.size());
  offsets.reserve(text.size() + 1);
  classes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    offsets.push_back(pos);
    chars.push_back(DecodeUtf8At(text, &pos));
    classes.push_back(ClassifyForGpt2(chars.back()));
  }
  offsets.push_back(text.size());

  const size_t n = chars.size();
  for (size_t i = 0; i < n;) {
    size_t end = i + ContractionLength(chars, i);
    if (end == i) {
      const Gpt2CharClass cls = classes[i];
      if (chars[i] == U' ' && i + 1 < n && classes[i + 1] != Gpt2CharClass::kWhitespace) {
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` with their space.
        end = RunEnd(classes, i + 1, classes[i + 1]);
      } else if (cls != Gpt2CharClass::kWhitespace) {
        end = RunEnd(classes, i, cls);
      } else {
        // `\s+(?!\S)`: a run of whitespace, less its last character when a
        // non-space follows (that one goes with the next word); `\s+` when
        // the run is a single character before a non-space.
        const size_t run_end = RunEnd(classes, i, cls);
        end = run_end == n || run_end - i == 1 ? run_end : run_end - 1;
      }
    }
    words->push_back(text.substr(offsets[i], offsets[end] - offsets[i]));
    i = end;
  }
}

const std::array<std::string, 256>& ByteLevelChars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> chars;
    char32_t next = 0x100;  // Stand-ins for the bytes that are not printable.
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      AppendUtf8(printable ? static_cast<char32_t>(b) : next++, &chars[b]);
    }
    return chars;
  }();
  return table;
}

int ByteOfByteLevelChar(char32_t c) {
  if ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) {
    return static_cast<int>(c);
  }
  if (c < 0x100 || c >= 0x100 + 68) return -1;  // 68 bytes are not printable.
  // The n-th stand-in is the n-th non-printable byte.
  int n = static_cast<int>(c - 0x100);
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable && n-- == 0) return b;
  }
  return -1;
}

std::string Utf8Lossy(std::string_view bytes) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    // Table 3-7 of the Unicode standard: the length, and the range of the
    // second byte (which excludes overlong forms, surrogates, > U+10FFFF).
    size_t length = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    }
    size_t valid = length == 0 ? 0 : 1;
    while (valid > 0 && valid < length && i + valid < bytes.size()) {
      const uint8_t b = static_cast<uint8_t>(bytes[i + valid]);
      const bool ok = valid == 1 ? b >= lo && b <= hi : IsContinuationByte(b);
      if (!ok) break;
      ++valid;
    }
    if (length != 0 && valid == length) {
      out.append(bytes.substr(i, length));
      i += length;
    } else {
      out += kReplacement;  // One for the maximal prefix of a sequence.
      i += valid == 0 ? 1 : valid;
    }
  }
  return out;
}

}  // namespace docsparse
