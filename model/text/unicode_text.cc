#include "model/text/unicode_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf16.h"

namespace docsparse {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Checks the sequence starting at text[pos] (whose lead byte is >= 0x80).
// Returns its length, or 0 and sets *why. Encodes table 3-7 of the Unicode
// standard: the second byte's range depends on the lead byte, which is what
// excludes overlong forms, surrogates and values above U+10FFFF.
size_t CheckSequence(std::string_view text, size_t pos, const char** why) {
  const uint8_t lead = static_cast<uint8_t>(text[pos]);
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (lead < 0xC0) {
    *why = "unexpected continuation byte";
    return 0;
  } else if (lead < 0xC2) {
    *why = "overlong encoding";
    return 0;
  } else if (lead < 0xE0) {
    len = 2;
  } else if (lead < 0xF0) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;  // Below: an overlong 3-byte form.
    if (lead == 0xED) hi = 0x9F;  // Above: UTF-16 surrogates.
  } else if (lead < 0xF5) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;  // Below: an overlong 4-byte form.
    if (lead == 0xF4) hi = 0x8F;  // Above: beyond U+10FFFF.
  } else {
    *why = "invalid lead byte";
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (pos + k >= text.size()) {
      *why = "truncated sequence";
      return 0;
    }
    const uint8_t b = static_cast<uint8_t>(text[pos + k]);
    if (k == 1 && IsContinuation(b) && (b < lo || b > hi)) {
      *why = lead == 0xED   ? "surrogate code point"
             : lead == 0xF4 ? "code point above U+10FFFF"
                            : "overlong encoding";
      return 0;
    }
    if (!IsContinuation(b)) {
      *why = "truncated sequence";
      return 0;
    }
  }
  return len;
}

// Whether `c` was assigned in Unicode 8.0, the version of the
// unicode_categories tables HF tokenizers uses (verified code point by code
// point against HF in the tests; 9.0 additions such as U+08D4 are unknown to
// it).
bool AssignedByUnicode8(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] != 0 && age[0] < 9;
}

const icu::Normalizer2& Nfd() {
  static const icu::Normalizer2* const nfd = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* instance = icu::Normalizer2::getNFDInstance(status);
    // Only fails when ICU's data library is missing: nothing can work then.
    if (U_FAILURE(status)) std::abort();
    return instance;
  }();
  return *nfd;
}

// Lowercase mappings that the Rust standard library HF tokenizers 0.23 was
// built with (Unicode 17) has and ICU 72 (Unicode 15) lacks: letters added in
// Unicode 16 and 17.
char32_t NewerLowercase(char32_t c) {
  static constexpr char32_t kPairs[][2] = {{0x1C89, 0x1C8A}, {0xA7CB, 0x0264}, {0xA7CC, 0xA7CD},
                                           {0xA7CE, 0xA7CF}, {0xA7D2, 0xA7D3}, {0xA7D4, 0xA7D5},
                                           {0xA7DA, 0xA7DB}, {0xA7DC, 0x019B}};
  for (const auto& [upper, lower] : kPairs) {
    if (c == upper) return lower;
  }
  if (c >= 0x10D50 && c <= 0x10D65) return c + 0x20;  // Garay.
  if (c >= 0x16EA0 && c <= 0x16EB8) return c + 0x1B;  // Beria Erfe.
  return c;
}

// HF's NFD tables (unicode-normalization-alignments) predate Unicode 13, so
// this Dives Akuru vowel sign, the one decomposition Unicode 13-15 added, is
// left whole. Its combining class is 0, so nothing reorders across it.
constexpr char32_t kUndecomposedByHf = 0x11938;

void AppendIcuNfd(std::u32string_view text, std::u32string* out) {
  const icu::UnicodeString in = icu::UnicodeString::fromUTF32(
      reinterpret_cast<const UChar32*>(text.data()), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString nfd = Nfd().normalize(in, status);
  if (U_FAILURE(status)) {  // Only on allocation failure: keep the text as is.
    out->append(text);
    return;
  }
  for (int32_t i = 0; i < nfd.length();) {
    const UChar32 c = nfd.char32At(i);
    out->push_back(static_cast<char32_t>(c));
    i += U16_LENGTH(c);
  }
}

}  // namespace

absl::Status ValidateUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const char* why = "";
    const size_t len = CheckSequence(text, pos, &why);
    if (len == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("invalid UTF-8 at byte offset %d: %s (byte 0x%02X)", pos, why,
                          static_cast<uint8_t>(text[pos])));
    }
    pos += len;
  }
  return absl::OkStatus();
}

char32_t DecodeUtf8At(std::string_view text, size_t* pos) {
  const uint8_t lead = static_cast<uint8_t>(text[*pos]);
  if (lead < 0x80) {
    ++*pos;
    return lead;
  }
  const char* why = "";
  const size_t len = CheckSequence(text, *pos, &why);
  if (len == 0) {
    ++*pos;
    return 0xFFFD;
  }
  char32_t cp = lead & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[*pos + k]) & 0x3F);
  }
  *pos += len;
  return cp;
}

absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text) {
  const absl::Status valid = ValidateUtf8(text);
  if (!valid.ok()) return valid;
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) out.push_back(DecodeUtf8At(text, &pos));
  return out;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) AppendUtf8(cp, &out);
  return out;
}

bool IsBertWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsBertRemovedControl(char32_t c) {
  if (c < 0x80) return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
  if (c < 0xA0 || c == 0xFFFD) return true;  // C1 controls.
  if ((c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000) {
    return (c & 0xFFFF) <= 0xFFFD;  // Private use; U+xFFFE/F are not.
  }
  return u_charType(static_cast<UChar32>(c)) == U_FORMAT_CHAR && AssignedByUnicode8(c);
}

bool IsBertPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  }
  // Punctuation in Unicode 8.0 that later versions recategorised.
  if (c == 0x166D || c == 0x111C9) return true;
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0 && AssignedByUnicode8(c);
}

bool IsBertChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsBertNonspacingMark(char32_t c) {
  if (c < 0x300) return false;
  // Unicode 8.0 categories that later versions changed: U+1734 was Mn (now
  // Mc); U+1885/6 (Lo), U+A9BD (Mc) and U+111C9 (Po) became Mn later.
  if (c == 0x1734) return true;
  if (c == 0x1885 || c == 0x1886 || c == 0xA9BD || c == 0x111C9) return false;
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK && AssignedByUnicode8(c);
}

bool IsWordCharacter(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  const UChar32 u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
         (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

void AppendLowercase(char32_t c, std::u32string* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x130) {
    // The one unconditional multi-character lowercase mapping.
    out->push_back('i');
    out->push_back(0x307);
  } else {
    const char32_t newer = NewerLowercase(c);
    out->push_back(newer != c ? newer : static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
  }
}

void AppendNfd(std::u32string_view text, std::u32string* out) {
  bool inert = true;  // Below U+00C0 nothing decomposes or combines.
  for (char32_t c : text) inert = inert && c < 0xC0;
  if (inert) {
    out->append(text);
    return;
  }
  for (size_t start = 0; start < text.size();) {
    const size_t stop = std::min(text.find(kUndecomposedByHf, start), text.size());
    AppendIcuNfd(text.substr(start, stop - start), out);
    if (stop < text.size()) out->push_back(kUndecomposedByHf);
    start = stop + 1;
  }
}

std::string BertNormalize(std::string_view text, const BertNormalizerOptions& norm) {
  std::string out;
  out.reserve(text.size() + 8);
  const bool ascii =
      std::all_of(text.begin(), text.end(), [](char b) { return static_cast<uint8_t>(b) < 0x80; });
  if (ascii) {  // No CJK, no accents, one-to-one case mapping.
    for (const char b : text) {
      const char32_t c = static_cast<uint8_t>(b);
      if (norm.clean_text && IsBertRemovedControl(c)) continue;
      char kept = norm.clean_text && IsBertWhitespace(c) ? ' ' : b;
      if (norm.lowercase && kept >= 'A' && kept <= 'Z') kept = static_cast<char>(kept + 32);
      out.push_back(kept);
    }
    return out;
  }
  std::u32string chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = DecodeUtf8At(text, &pos);
    if (norm.clean_text) {
      if (IsBertRemovedControl(c)) continue;
      if (IsBertWhitespace(c)) c = ' ';
    }
    if (norm.handle_chinese_chars && IsBertChineseChar(c)) {
      chars.append({U' ', c, U' '});
    } else {
      chars.push_back(c);
    }
  }
  if (norm.strip_accents) {
    // NFD never moves anything across an ASCII character (a starter with no
    // decomposition), so only the non-ASCII runs go through ICU.
    std::u32string decomposed;
    decomposed.reserve(chars.size() + 8);
    for (size_t i = 0; i < chars.size();) {
      size_t j = i;
      while (j < chars.size() && chars[j] >= 0x80) ++j;
      if (j == i) {
        decomposed.push_back(chars[i++]);
        continue;
      }
      AppendNfd(std::u32string_view(chars).substr(i, j - i), &decomposed);
      i = j;
    }
    chars.clear();
    for (const char32_t c : decomposed) {
      if (!IsBertNonspacingMark(c)) chars.push_back(c);
    }
  }
  if (norm.lowercase) {
    std::u32string lowered;
    lowered.reserve(chars.size());
    for (const char32_t c : chars) AppendLowercase(c, &lowered);
    chars.swap(lowered);
  }
  for (const char32_t c : chars) AppendUtf8(c, &out);
  return out;
}

}  // namespace docsparse
