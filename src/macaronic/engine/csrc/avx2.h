// The kernels' second instruction set: AVX2 + FMA + F16C, for x86-64 CPUs without AVX-512 BF16 (most
// laptops, AMD Zen 2/3, Intel consumer parts). Each file keeps its AVX-512 kernels as they were and adds
// twins built on these helpers, 8 fp32 lanes at a time; the ops pick once per process (`wide()`).
// Without native bf16 arithmetic, products run in fp32 on bf16 inputs widened exactly (a bf16 is the top
// half of an fp32); results round to bf16 to nearest even, as the AVX-512 kernels and c10 round.

#pragma once

#include <ATen/ATen.h>

#include <immintrin.h>

#include <cstdint>

#define AVX2_KERNEL __attribute__((target("avx2,fma,f16c")))

namespace macaronic {

inline bool cpu_avx512_bf16() {  // what the AVX-512 kernels need
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return ok;
}

inline bool cpu_avx2() {  // what these twins need
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return ok;
}

inline bool cpu_avx512_vnni() {  // vpdpbusd and masked byte ops on 256-bit registers (csrc/ggml_q8.h)
  static const bool ok = cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return ok;
}

// true: the AVX-512 kernels run; false: the AVX2 twins. Decided once.
inline bool wide() { return cpu_avx512_bf16(); }

namespace avx2 {

AVX2_KERNEL inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
AVX2_KERNEL inline __m256 load8(const at::BFloat16* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
AVX2_KERNEL inline __m256 load8(const at::Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
AVX2_KERNEL inline __m256 load8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// 8 fp32 -> 8 bf16, nearest even (NaN stays a quiet NaN)
AVX2_KERNEL inline __m128i to_bf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), 16);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8));
}

AVX2_KERNEL inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
AVX2_KERNEL inline void store8(at::BFloat16* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16(v)); }

AVX2_KERNEL inline __m256 round8(__m256 v) {  // fp32 -> nearest bf16 -> fp32, as a bf16 tensor op's result
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(to_bf16(v)), 16));
}

AVX2_KERNEL inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace avx2
}  // namespace macaronic
