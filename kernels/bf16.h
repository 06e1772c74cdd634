// bf16 as the kernels store it: the upper 16 bits of an fp32, held in a
// uint16_t (kernels see no torch types). Conversions round to nearest even,
// as LibTorch's do, so a kernel's bf16 output matches what .to(at::kBFloat16)
// of the same fp32 values would give.
//
// The AVX-512 and AVX2 forms carry their own target attribute (as
// vector_exp.h): callers compiled for the same instruction set inline them;
// the including file need not be.
#ifndef DOCSPARSE_KERNELS_BF16_H_
#define DOCSPARSE_KERNELS_BF16_H_

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace docsparse {

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

inline uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

// 16 bf16 values (the lanes in `mask`; the others read as 0) widened to fp32.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 LoadBf16x16(const uint16_t* src,
                                                                               __mmask16 mask) {
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, src);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The lanes in `mask` of 16 fp32 values rounded to bf16 (NaN is not handled:
// callers store finite scores and probabilities).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void StoreBf16x16(uint16_t* dst,
                                                                              __m512 value,
                                                                              __mmask16 mask) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  _mm256_mask_storeu_epi16(dst, mask, _mm512_cvtepi32_epi16(rounded));
}

// 8 kernel elements (bf16 bits or floats) as fp32 lanes, and back (AVX2):
// one name for kernels templated on the element type.
__attribute__((target("avx2"))) inline __m256 LoadElements8(const uint16_t* src) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
__attribute__((target("avx2"))) inline __m256 LoadElements8(const float* src) {
  return _mm256_loadu_ps(src);
}
// Rounded to bf16 as FloatToBf16 does for finite values.
__attribute__((target("avx2"))) inline void StoreElements8(uint16_t* dst, __m256 value) {
  const __m256i bits = _mm256_castps_si256(value);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  // Each 128-bit half packs to four words; the two lows side by side.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0b1000);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
}
__attribute__((target("avx2"))) inline void StoreElements8(float* dst, __m256 value) {
  _mm256_storeu_ps(dst, value);
}

// A kernel element as a float: bf16 bits (uint16_t) or a float.
inline float ElementToFloat(uint16_t bf16) { return Bf16ToFloat(bf16); }
inline float ElementToFloat(float value) { return value; }

// The first `remaining` of 16 lanes (all 16 when 16 or more remain).
inline __mmask16 FirstLanes(int64_t remaining) {
  return static_cast<__mmask16>(remaining >= 16 ? 0xFFFF
                                                : (1u << static_cast<unsigned>(remaining)) - 1);
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BF16_H_
