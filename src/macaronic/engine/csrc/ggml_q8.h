// The integer register kernels for Q8_0, Q5_0, Q4_K and Q6_K rows against x rounded to 8 bits (Q8Rows),
// included twice by ggml.cpp, each time inside its own namespace with Q8_KERNEL (the target attribute)
// and Q8_VNNI defined: once for AVX2 (maddubs + madd), once for AVX-512 VNNI + BW (vpdpbusd, masked ops, on 256-bit
// registers, which AVX-512 VL allows). Both sum the same exact int32 products, so their results are
// bit-identical; only the instruction count differs. No include guard, on purpose.

// the 32 signed weights of a Q8_0 or Q5_0 block
template <int T>
Q8_KERNEL inline __m256i block_q2(const uint8_t* blk) {
  if constexpr (T == 8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else {  // Q5_0: nibbles (weight j low, j + 16 high), bit j of qh as the fifth bit, minus 16
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 6));
    const __m128i m = _mm_set1_epi8(15);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
#if Q8_VNNI  // AVX-512 BW: minus 16 where bit j of qh is clear, in one masked op
    return _mm256_mask_sub_epi8(q, __mmask32(~qh), q, _mm256_set1_epi8(16));
#else
    // byte j <- bit j of qh: broadcast, pick byte j / 8, test bit j % 8
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(qh)),
                                       _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i sel = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
    bits = _mm256_cmpeq_epi8(_mm256_and_si256(bits, sel), sel);
    return _mm256_sub_epi8(_mm256_or_si256(q, _mm256_and_si256(bits, _mm256_set1_epi8(16))), _mm256_set1_epi8(16));
#endif
  }
}

// 8 int32 sums of 4 products each (lane m: bytes 4m..4m+3): w signed (-128..127), x signed (-127..127).
// |w| <= 128 and |x| <= 127, so maddubs' int16 pair sums (at most 2 * 128 * 127) never saturate.
Q8_KERNEL inline __m256 dot_i8(__m256i w, __m256i x) {
#if Q8_VNNI
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)));
#else
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}
// the same for w unsigned 0..15
Q8_KERNEL inline __m256 dot_u4(__m256i w, __m256i x) {
#if Q8_VNNI
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x));
#else
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
#endif
}
Q8_KERNEL inline __m256i load_q(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

template <int T, int R>
Q8_KERNEL void rows_dot2(const uint8_t* row, const Q8Rows& x, int64_t n0, int64_t K, float* out) {
  constexpr int64_t kBytes = T == 8 ? 34 : 22;
  const int64_t runs = K / 32;
  __m256 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < runs; ++b) {
    const uint8_t* blk = row + b * kBytes;
    const __m256i q = block_q2<T>(blk);
    const float d = f16_avx2(blk);
    for (int r = 0; r < R; ++r) {
      const int64_t at = (n0 + r) * runs + b;
      a[r] = _mm256_fmadd_ps(dot_i8(q, load_q(x.q.data() + 32 * at)), _mm256_set1_ps(d * x.d[at]), a[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = macaronic::avx2::hsum(a[r]);
}

template <int T, int R>
Q8_KERNEL void rows_dot_k2(const uint8_t* row, const Q8Rows& x, int64_t n0, int64_t K, float* out) {
  constexpr int64_t kBytes = T == 12 ? 144 : 210;
  const int64_t runs = K / 32;
  const __m256i low4 = _mm256_set1_epi8(15), low2 = _mm256_set1_epi8(3);
  __m256 a[R];
  float mins[R] = {};
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < K / 256; ++b) {
    const uint8_t* blk = row + b * kBytes;
    if constexpr (T == 12) {
      const float d = f16_avx2(blk), dmin = f16_avx2(blk + 2);
      const uint8_t* sb = blk + 4;
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_k4(sb, j, sc, m);
        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * (j / 2)));
        q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(q, 4) : q, low4);
        for (int r = 0; r < R; ++r) {
          const int64_t at = (n0 + r) * runs + 8 * b + j;
          a[r] = _mm256_fmadd_ps(dot_u4(q, load_q(x.q.data() + 32 * at)), _mm256_set1_ps(d * float(sc) * x.d[at]), a[r]);
          mins[r] += dmin * float(m) * x.s[at];
        }
      }
    } else {
      const float d = f16_avx2(blk + 208);
      for (int n = 0; n < 2; ++n) {
        const uint8_t* ql = blk + 64 * n;
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n));
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n);
        for (int g = 0; g < 4; ++g) {
          __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (g % 2)));
          q = _mm256_and_si256(g / 2 ? _mm256_srli_epi16(q, 4) : q, low4);
          const __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), low2);
          q = _mm256_sub_epi8(_mm256_or_si256(q, _mm256_slli_epi16(h, 4)), _mm256_set1_epi8(32));
          // bytes 0..15 (lanes 0..3) take scale 2g, bytes 16..31 scale 2g + 1
          const __m256 s = _mm256_set_m128(_mm_set1_ps(d * float(sc[2 * g + 1])), _mm_set1_ps(d * float(sc[2 * g])));
          for (int r = 0; r < R; ++r) {
            const int64_t at = (n0 + r) * runs + 8 * b + 4 * n + g;
            a[r] = _mm256_fmadd_ps(dot_i8(q, load_q(x.q.data() + 32 * at)), _mm256_mul_ps(s, _mm256_set1_ps(x.d[at])), a[r]);
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = macaronic::avx2::hsum(a[r]) - mins[r];
}

template <int T>
constexpr Dot8Fn kDots2[kTile2] = {rows_dot2<T, 1>, rows_dot2<T, 2>, rows_dot2<T, 3>, rows_dot2<T, 4>};
template <int T>
constexpr Dot8Fn kDotsK2[kTile2] = {rows_dot_k2<T, 1>, rows_dot_k2<T, 2>, rows_dot_k2<T, 3>, rows_dot_k2<T, 4>};

const Dot8Fn* dots_for2(int64_t type) {
  switch (type) {
    case 8: return kDots2<8>;
    case 6: return kDots2<6>;
    case 12: return kDotsK2<12>;
    case 14: return kDotsK2<14>;
  }
  return nullptr;
}
