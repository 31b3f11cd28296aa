// y = x @ W.T (+ b) straight from a GGUF's own quantized blocks, x bf16 [N, K], W in ggml's layouts.
//
// W is given as parts stacked along the outputs (a fused projection: q, k and v may each have their
// own type), part i a uint8 [O_i, row_bytes] holding each output row's blocks exactly as the GGUF
// stores them, types[i] its ggml type id:
//   Q4_0 (2):  32 weights in 18 bytes: fp16 d, 16 bytes of nibbles;          w = d * (q - 8)
//   Q4_1 (3):  32 weights in 20 bytes: fp16 d, fp16 m, 16 bytes of nibbles;  w = d * q + m
//   Q5_0 (6):  32 weights in 22 bytes: fp16 d, 32 high bits, 16 bytes;       w = d * (q - 16)
//   Q8_0 (8):  32 weights in 34 bytes: fp16 d, 32 int8;                      w = d * q
//   Q4_K (12): 256 weights in 144 bytes: fp16 d, fp16 dmin, 12 bytes of eight 6-bit (scale, min)
//              pairs, 128 bytes of nibbles;                                  w = d*sc * q - dmin*m
//   Q6_K (14): 256 weights in 210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales,
//              fp16 d;                                                        w = d*sc * (q - 32)
// In every type the nibbles of a 32-weight run hold weight j in the low half of byte j and weight j + 16
// (j + 32 in the k-quants' 64-weight runs) in the high half, as ggml's dequantize_row_* reads them.
// Each row is dequantised to fp32 exactly as ggml (and gguf.quants, the twin's reference) does, then:
// - up to 32 rows (decode; the default family, csrc/ggml_q8.h): as llama.cpp's own kernels, x is rounded
//   to 8 bits as llama.cpp's x86 code rounds it for the weight's type (q8_0 for Q8_0 and Q5_0, q8_K for
//   Q4_K and Q6_K) and Q8_0, Q5_0, Q4_K and Q6_K runs meet it in integer dot products (AVX-512 VNNI's vpdpbusd where the CPU has it, else AVX2's maddubs + madd; the
//   same exact sums), scaled in fp32 (twin: engine/ggml.py's q8_rows on x, then dequantize + matmul);
//   Q4_0 and Q4_1 rows are dequantised into L1 and meet x as it is;
// - the fp32 family (`ggml_kernels(1)`, for benches and tests), up to 8 rows on AVX-512: Q8_0, Q5_0, Q4_K
//   and Q6_K blocks are widened in registers and meet every x row, as it is, in fp32 FMAs;
// - more rows (prefill): chunks of rows dequantised to fp32 and multiplied by at::mm in fp32.
// No weight is rounded: the twin is engine/ggml.py's dequantize + matmul.
// Knows nothing about models, adapters or Python.

#include <ATen/ATen.h>
#include <torch/library.h>

#include "avx2.h"
#include "pool.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

#define KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))

constexpr int kFewRows = 8;    // AVX-512: x rows up to this meet the blocks in registers
constexpr int kFewRows2 = 32;  // AVX2: up to this many, in tiles of 4, in integer dot products
constexpr int64_t kChunkBytes = int64_t(1) << 20;  // a dequantised fp32 chunk for at::mm stays in L2

struct Type {
  int64_t id, elems, bytes;
};
constexpr Type kTypes[] = {{2, 32, 18}, {3, 32, 20}, {6, 32, 22}, {8, 32, 34}, {12, 256, 144}, {14, 256, 210}};

const Type* find_type(int64_t id) {
  for (const Type& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// The 6-bit scale and min of run j of a Q4_K block (ggml's get_scale_min_k4); s: the block's 12 bytes.
inline void scale_min_k4(const uint8_t* s, int j, int& sc, int& m) {
  sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
  m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

KERNEL inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

AVX2_KERNEL inline float f16_avx2(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One row of K weights (row: its blocks) -> out[K] in fp32, in ggml's arithmetic. The body is compiled
// twice, for the AVX-512 kernels (dequant_row) and for the AVX2 ones (dequant_row2).
template <float (*f16)(const uint8_t*)>
__attribute__((always_inline)) inline void dequant_row_body(int64_t type, const uint8_t* row, int64_t K, float* out) {
  switch (type) {
    case 2:  // Q4_0
      for (int64_t b = 0; b < K / 32; ++b, row += 18, out += 32) {
        const float d = f16(row);
        const uint8_t* q = row + 2;
        for (int j = 0; j < 16; ++j) {
          out[j] = float(int(q[j] & 15) - 8) * d;
          out[j + 16] = float(int(q[j] >> 4) - 8) * d;
        }
      }
      break;
    case 3:  // Q4_1
      for (int64_t b = 0; b < K / 32; ++b, row += 20, out += 32) {
        const float d = f16(row), m = f16(row + 2);
        const uint8_t* q = row + 4;
        for (int j = 0; j < 16; ++j) {
          out[j] = float(q[j] & 15) * d + m;
          out[j + 16] = float(q[j] >> 4) * d + m;
        }
      }
      break;
    case 6:  // Q5_0
      for (int64_t b = 0; b < K / 32; ++b, row += 22, out += 32) {
        const float d = f16(row);
        uint32_t qh;
        std::memcpy(&qh, row + 2, 4);
        const uint8_t* q = row + 6;
        for (int j = 0; j < 16; ++j) {
          out[j] = float(int((q[j] & 15) | (((qh >> j) & 1) << 4)) - 16) * d;
          out[j + 16] = float(int((q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * d;
        }
      }
      break;
    case 8:  // Q8_0
      for (int64_t b = 0; b < K / 32; ++b, row += 34, out += 32) {
        const float d = f16(row);
        const int8_t* q = reinterpret_cast<const int8_t*>(row + 2);
        for (int j = 0; j < 32; ++j) out[j] = float(q[j]) * d;
      }
      break;
    case 12:  // Q4_K
      for (int64_t b = 0; b < K / 256; ++b, row += 144) {
        const float d = f16(row), dmin = f16(row + 2);
        const uint8_t* s = row + 4;
        const uint8_t* q = row + 16;
        for (int j = 0; j < 8; ++j) {  // the 6-bit scale and min of run j (ggml's get_scale_min_k4)
          int sc, m;
          scale_min_k4(s, j, sc, m);
          const float ds = d * float(sc), dm = dmin * float(m);
          const uint8_t* qj = q + 32 * (j / 2);
          const int shift = 4 * (j % 2);
          for (int l = 0; l < 32; ++l) out[l] = ds * float((qj[l] >> shift) & 15) - dm;
          out += 32;
        }
      }
      break;
    case 14:  // Q6_K
      for (int64_t b = 0; b < K / 256; ++b, row += 210) {
        const uint8_t* ql = row;
        const uint8_t* qh = row + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(row + 192);
        const float d = f16(row + 208);
        for (int n = 0; n < 2; ++n, ql += 64, qh += 32, sc += 8, out += 128) {
          float ds[8];
          for (int i = 0; i < 8; ++i) ds[i] = d * float(sc[i]);
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            out[l] = ds[is] * float(int((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
            out[l + 32] = ds[is + 2] * float(int((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            out[l + 64] = ds[is + 4] * float(int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            out[l + 96] = ds[is + 6] * float(int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          }
        }
      }
      break;
  }
}

KERNEL void dequant_row(int64_t type, const uint8_t* row, int64_t K, float* out) { dequant_row_body<f16>(type, row, K, out); }
AVX2_KERNEL void dequant_row2(int64_t type, const uint8_t* row, int64_t K, float* out) {
  dequant_row_body<f16_avx2>(type, row, K, out);
}

AVX2_KERNEL float dot2(const float* a, const float* b, int64_t K) {  // K a multiple of 32
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = 0; k < K; k += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), s3);
  }
  return macaronic::avx2::hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

// Q8_0 and Q5_0 rows (the bulk of a "Q4_K_M" file whose width is no multiple of 256) against R rows
// of x without a row buffer: each block's 32 weights become two fp32 vectors, d * q exactly as
// dequant_row computes them, and meet every x row in FMAs.
template <int T>
KERNEL inline void block_weights(const uint8_t* blk, __m512& w0, __m512& w1) {
  const __m512 d = _mm512_set1_ps(f16(blk));
  __m256i q;  // 32 signed weights
  if constexpr (T == 8) {
    q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else {  // Q5_0: nibbles (weight j low, j + 16 high) plus bit j of qh as the fifth bit, minus 16
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 6));
    const __m128i m = _mm_set1_epi8(15);
    q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
    q = _mm256_mask_add_epi8(q, __mmask32(qh), q, _mm256_set1_epi8(16));
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  }
  w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), d);
  w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), d);
}

template <int T, int R>
KERNEL void rows_dot(const uint8_t* row, const float* x, int64_t K, float* out) {
  constexpr int64_t kBytes = T == 8 ? 34 : 22;
  __m512 a0[R], a1[R];  // two chains per row: one row alone would wait on the FMA's latency
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < K / 32; ++b) {
    __m512 w0, w1;
    block_weights<T>(row + b * kBytes, w0, w1);
    for (int r = 0; r < R; ++r) {
      a0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * K + 32 * b), a0[r]);
      a1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * K + 32 * b + 16), a1[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
}

KERNEL inline __m512 widen_u8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)); }
KERNEL inline __m512 widen_i8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

template <int R>
KERNEL inline void fma_run(__m512* a0, __m512* a1, const float* x, int64_t K, __m512 w0, __m512 w1, int64_t off) {
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * K + off), a0[r]);
    a1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * K + off + 16), a1[r]);
  }
}

// Q4_K and Q6_K rows against R rows of x: per run of 32 weights two fp32 vectors in ggml's arithmetic
// (Q4_K: d*sc * q - dmin*m; Q6_K: d*sc * (q - 32), the scale changing every 16 weights).
template <int T, int R>
KERNEL void rows_dot_k(const uint8_t* row, const float* x, int64_t K, float* out) {
  constexpr int64_t kBytes = T == 12 ? 144 : 210;
  const __m256i low4 = _mm256_set1_epi8(15), low2 = _mm256_set1_epi8(3);
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < K / 256; ++b) {
    const uint8_t* blk = row + b * kBytes;
    if constexpr (T == 12) {
      const float d = f16(blk), dmin = f16(blk + 2);
      const uint8_t* sb = blk + 4;
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_k4(sb, j, sc, m);
        const __m512 ds = _mm512_set1_ps(d * float(sc)), dm = _mm512_set1_ps(dmin * float(m));
        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * (j / 2)));
        q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(q, 4) : q, low4);
        fma_run<R>(a0, a1, x, K, _mm512_sub_ps(_mm512_mul_ps(ds, widen_u8(_mm256_castsi256_si128(q))), dm),
                _mm512_sub_ps(_mm512_mul_ps(ds, widen_u8(_mm256_extracti128_si256(q, 1))), dm), 256 * b + 32 * j);
      }
    } else {
      const float d = f16(blk + 208);
      for (int n = 0; n < 2; ++n) {
        const uint8_t* ql = blk + 64 * n;
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n));
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n);
        for (int g = 0; g < 4; ++g) {  // run g: ql[32 (g % 2) ...] nibble g / 2, qh bits 2g..2g+1
          __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (g % 2)));
          q = _mm256_and_si256(g / 2 ? _mm256_srli_epi16(q, 4) : q, low4);
          const __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), low2);
          q = _mm256_sub_epi8(_mm256_or_si256(q, _mm256_slli_epi16(h, 4)), _mm256_set1_epi8(32));
          fma_run<R>(a0, a1, x, K, _mm512_mul_ps(_mm512_set1_ps(d * float(sc[2 * g])), widen_i8(_mm256_castsi256_si128(q))),
                  _mm512_mul_ps(_mm512_set1_ps(d * float(sc[2 * g + 1])), widen_i8(_mm256_extracti128_si256(q, 1))),
                  256 * b + 128 * n + 32 * g);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
}

using DotFn = void (*)(const uint8_t*, const float*, int64_t, float*);
template <int T>
constexpr DotFn kDots[kFewRows] = {rows_dot<T, 1>, rows_dot<T, 2>, rows_dot<T, 3>, rows_dot<T, 4>,
                                   rows_dot<T, 5>, rows_dot<T, 6>, rows_dot<T, 7>, rows_dot<T, 8>};
template <int T>
constexpr DotFn kDotsK[kFewRows] = {rows_dot_k<T, 1>, rows_dot_k<T, 2>, rows_dot_k<T, 3>, rows_dot_k<T, 4>,
                                    rows_dot_k<T, 5>, rows_dot_k<T, 6>, rows_dot_k<T, 7>, rows_dot_k<T, 8>};

// The register kernel for a type, or none (then the row is dequantised into L1 first).
const DotFn* dots_for(int64_t type) {
  switch (type) {
    case 8: return kDots<8>;
    case 6: return kDots<6>;
    case 12: return kDotsK<12>;
    case 14: return kDotsK<14>;
  }
  return nullptr;
}

KERNEL inline float dot(const float* a, const float* b, int64_t K) {  // K a multiple of 32
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// ---- the integer register kernels for Q8_0, Q5_0, Q4_K and Q6_K rows (csrc/ggml_q8.h) ----
// As llama.cpp's kernels do, x is rounded to 8 bits first, the way llama.cpp's own x86 code rounds it for
// the weight's type: for Q8_0 and Q5_0 as q8_0 (per run of 32, d = fp16(max|x| / 127),
// q = nearest(x * (127 / max|x|))); for Q4_K and Q6_K as q8_K (per 256, iscale = -127 / m where m is the
// element of largest magnitude, q = min(127, nearest(iscale * x)), d = 1 / iscale). Then every run of 32
// weights meets it in integer multiply-adds (exact), scaled once in fp32: Q8_0 and Q5_0
// d_w * d_x * sum(q_w q_x); Q4_K d*sc * d_x * sum(q q_x) - dmin*m * d_x * sum(q_x); Q6_K
// d*sc * d_x * sum((q - 32) q_x), the scale changing every 16 weights. The twin of this path is
// engine/ggml.py's `q8_rows` then the fp32 product; up to 4 rows of x a call.

struct Q8Rows {  // x rounded to 8 bits: q [N, K], d and d * sum(q) per run of 32 [N, K / 32]
  std::vector<int8_t> q;
  std::vector<float> d, s;
};

// q8_0 (k_quant false) or q8_K (true; K a multiple of 256) rows of x [N, K], d repeated per run of 32.
AVX2_KERNEL Q8Rows q8_rows(const float* x, int64_t N, int64_t K, bool k_quant) {
  Q8Rows o;
  o.q.resize(N * K), o.d.resize(N * K / 32), o.s.resize(N * K / 32);
  const int64_t group = k_quant ? 256 : 32;
  for (int64_t g = 0; g < N * K / group; ++g) {
    const float* v = x + group * g;
    float amax = 0.f, m = 0.f;
    for (int i = 0; i < group; ++i) {
      const float a = std::fabs(v[i]);
      if (a > amax) amax = a, m = v[i];
    }
    float d, mul;
    if (k_quant) {
      mul = amax > 0.f ? -127.f / m : 0.f;
      d = amax > 0.f ? 1.f / mul : 0.f;
    } else {
      d = float(at::Half(amax / 127.f));
      mul = amax > 0.f ? 127.f / amax : 0.f;
    }
    for (int64_t r = 0; r < group / 32; ++r) {
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int q = std::min(127, int(std::nearbyint(v[32 * r + i] * mul)));
        o.q[group * g + 32 * r + i] = int8_t(q);
        sum += q;
      }
      const int64_t at = g * (group / 32) + r;
      o.d[at] = d, o.s[at] = d * float(sum);
    }
  }
  return o;
}

constexpr int kTile2 = 4;  // rows of x a call
using Dot8Fn = void (*)(const uint8_t*, const Q8Rows&, int64_t, int64_t, float*);

namespace q8_avx2 {
#define Q8_KERNEL AVX2_KERNEL
#define Q8_VNNI 0
#include "ggml_q8.h"
#undef Q8_KERNEL
#undef Q8_VNNI
}  // namespace q8_avx2

namespace q8_vnni {
#define Q8_KERNEL __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define Q8_VNNI 1
#include "ggml_q8.h"
#undef Q8_KERNEL
#undef Q8_VNNI
}  // namespace q8_vnni

// Which kernels the few-row path (up to kFewRows2 rows of x) uses: x rounded to 8 bits and integer dot
// products with VNNI (3) or AVX2 (2), or fp32 products on x as it is (1; then only up to kFewRows rows on
// AVX-512, the rest take the many-row path). 0: the fastest the CPU has (VNNI, else AVX2). Set per process
// by `ggml_kernels`, for benches and for the tests that hold each family to its twin.
std::atomic<int> g_kernels{0};
enum Kernels { kAuto = 0, kFp32 = 1, kIntAvx2 = 2, kIntVnni = 3 };

int kernels() {
  const int k = g_kernels.load(std::memory_order_relaxed);
  if (k != kAuto) return k;
  static const int best = macaronic::cpu_avx512_vnni() ? kIntVnni : kIntAvx2;
  return best;
}

// The integer kernel for a type, or none.
const Dot8Fn* dots_for2(int64_t type, int k) { return k == kIntVnni ? q8_vnni::dots_for2(type) : q8_avx2::dots_for2(type); }

// Where each output row lives: its part's data, row stride and type.
struct Rows {
  std::vector<const uint8_t*> data;
  std::vector<int64_t> stride, type, start;  // start: first output of each part; one more entry: O
  int64_t find(int64_t o) const { return int64_t(std::upper_bound(start.begin(), start.end(), o) - start.begin()) - 1; }
  const uint8_t* row(int64_t p, int64_t o) const { return data[p] + (o - start[p]) * stride[p]; }
};

at::Tensor ggml_linear(const at::Tensor& x, at::TensorList parts, at::IntArrayRef types, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kBFloat16 && x.is_contiguous(), "ggml_linear: x must be a contiguous bf16 [N, K]");
  TORCH_CHECK(!parts.empty() && parts.size() == types.size(), "ggml_linear: one type per part");
  const int64_t N = x.size(0), K = x.size(1);
  TORCH_CHECK(K % 32 == 0, "ggml_linear: the input width must be a multiple of 32");
  Rows r;
  int64_t O = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Type* t = find_type(types[i]);
    TORCH_CHECK(t, "ggml_linear: unsupported ggml type ", types[i]);
    TORCH_CHECK(K % t->elems == 0, "ggml_linear: type ", t->id, " needs inputs in multiples of ", t->elems, ", got ", K);
    const at::Tensor& p = parts[i];
    TORCH_CHECK(p.dim() == 2 && p.scalar_type() == at::kByte && p.is_contiguous() && p.size(1) == K / t->elems * t->bytes,
                "ggml_linear: part ", i, " must be a contiguous uint8 [O_i, ", K / t->elems * t->bytes, "]");
    r.data.push_back(p.data_ptr<uint8_t>());
    r.stride.push_back(p.size(1));
    r.type.push_back(t->id);
    r.start.push_back(O);
    O += p.size(0);
  }
  r.start.push_back(O);
  if (bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == O && bias->scalar_type() == at::kBFloat16 && bias->is_contiguous(),
                "ggml_linear: bias must be a contiguous bf16 [O]");
  }
  at::Tensor xf = x.to(at::kFloat);
  const float* xp = xf.data_ptr<float>();
  const at::BFloat16* bp = bias ? bias->data_ptr<at::BFloat16>() : nullptr;
  at::Tensor y = at::empty({N, O}, x.options());
  at::BFloat16* yp = y.data_ptr<at::BFloat16>();
  if (N == 0 || O == 0) return y;
  const bool wide = macaronic::wide();  // the AVX-512 kernels, else their AVX2 twins
  const int k = kernels();
  if (N <= kFewRows2 && k != kFp32) {
    auto k_quant = [](int64_t t) { return t == 12 || t == 14; };  // Q4_K, Q6_K: they meet q8_K x
    bool any_q8 = false, any_k = false;  // Q8_0, Q5_0 meet q8_0 x; Q4_0 and Q4_1 x as it is
    for (const int64_t t : r.type) {
      any_q8 = any_q8 || (dots_for2(t, k) != nullptr && !k_quant(t));
      any_k = any_k || k_quant(t);
    }
    const Q8Rows x0 = any_q8 ? q8_rows(xp, N, K, false) : Q8Rows{};
    const Q8Rows xk = any_k ? q8_rows(xp, N, K, true) : Q8Rows{};
    macaronic::parallel_for(0, O, 16, [&](int64_t o0, int64_t o1) {
      thread_local std::vector<float> w;
      if (w.size() < size_t(K)) w.resize(K);
      float out[kFewRows2];
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t p = r.find(o);
        const float b = bp ? float(bp[o]) : 0.f;
        if (const Dot8Fn* f = dots_for2(r.type[p], k)) {
          const Q8Rows& xq = k_quant(r.type[p]) ? xk : x0;
          for (int64_t n0 = 0; n0 < N; n0 += kTile2) f[std::min<int64_t>(kTile2, N - n0) - 1](r.row(p, o), xq, n0, K, out + n0);
          for (int64_t n = 0; n < N; ++n) yp[n * O + o] = at::BFloat16(out[n] + b);
          continue;
        }
        (wide ? dequant_row : dequant_row2)(r.type[p], r.row(p, o), K, w.data());
        for (int64_t n = 0; n < N; ++n) yp[n * O + o] = at::BFloat16((wide ? dot : dot2)(xp + n * K, w.data(), K) + b);
      }
    });
    return y;
  }
  if (N <= kFewRows && wide) {
    macaronic::parallel_for(0, O, 16, [&](int64_t o0, int64_t o1) {
      thread_local std::vector<float> w;
      if (w.size() < size_t(K)) w.resize(K);
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t p = r.find(o);
        const float b = bp ? float(bp[o]) : 0.f;
        if (const DotFn* f = dots_for(r.type[p])) {
          float out[kFewRows];
          f[N - 1](r.row(p, o), xp, K, out);
          for (int64_t n = 0; n < N; ++n) yp[n * O + o] = at::BFloat16(out[n] + b);
          continue;
        }
        dequant_row(r.type[p], r.row(p, o), K, w.data());
        for (int64_t n = 0; n < N; ++n) yp[n * O + o] = at::BFloat16(dot(xp + n * K, w.data(), K) + b);
      }
    });
    return y;
  }
  // many rows: chunks of fp32 rows [chunk, K] and one fp32 at::mm each
  const int64_t chunk = std::max<int64_t>(16, kChunkBytes / (K * 4));
  at::Tensor wbuf = at::empty({std::min(chunk, O), K}, xf.options());
  float* wp = wbuf.data_ptr<float>();
  for (int64_t c0 = 0; c0 < O; c0 += chunk) {
    const int64_t c1 = std::min(O, c0 + chunk);
    macaronic::parallel_for(c0, c1, 8, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t p = r.find(o);
        (wide ? dequant_row : dequant_row2)(r.type[p], r.row(p, o), K, wp + (o - c0) * K);
      }
    });
    at::Tensor part = at::mm(xf, wbuf.narrow(0, 0, c1 - c0).t());  // [N, c1 - c0] fp32
    if (bias) part.add_(bias->narrow(0, c0, c1 - c0).to(at::kFloat));
    y.narrow(1, c0, c1 - c0).copy_(part);
  }
  return y;
}

// The rows dequantised to fp32 [O, K], for tests against the PyTorch twin.
at::Tensor ggml_dequantize(const at::Tensor& part, int64_t type, int64_t K) {
  const Type* t = find_type(type);
  TORCH_CHECK(t && K % t->elems == 0, "ggml_dequantize: unsupported type ", type, " or width ", K);
  TORCH_CHECK(part.dim() == 2 && part.scalar_type() == at::kByte && part.is_contiguous() && part.size(1) == K / t->elems * t->bytes,
              "ggml_dequantize: part must be a contiguous uint8 [O, row bytes]");
  at::Tensor out = at::empty({part.size(0), K}, part.options().dtype(at::kFloat));
  for (int64_t o = 0; o < part.size(0); ++o)
    (macaronic::wide() ? dequant_row : dequant_row2)(type, part.data_ptr<uint8_t>() + o * part.size(1), K,
                                                     out.data_ptr<float>() + o * K);
  return out;
}

int64_t ggml_kernels(int64_t which) {
  TORCH_CHECK(which >= kAuto && which <= kIntVnni, "ggml_kernels: 0 auto, 1 fp32, 2 AVX2 integer, 3 VNNI integer; got ", which);
  TORCH_CHECK(which != kIntVnni || macaronic::cpu_avx512_vnni(), "ggml_kernels: this CPU has no AVX-512 VNNI");
  return g_kernels.exchange(int(which));
}

}  // namespace

namespace macaronic {
// For csrc/decode.cpp: the projection call GGMLLinear makes.
at::Tensor ggml_linear(const at::Tensor& x, at::TensorList parts, at::IntArrayRef types, const std::optional<at::Tensor>& bias) {
  return ::ggml_linear(x, parts, types, bias);
}
}  // namespace macaronic

TORCH_LIBRARY_FRAGMENT(macaronic, m) {
  m.def("ggml_linear(Tensor x, Tensor[] parts, int[] types, Tensor? bias) -> Tensor", &ggml_linear);
  m.def("ggml_dequantize(Tensor part, int type, int K) -> Tensor", &ggml_dequantize);
  m.def("ggml_kernels(int which) -> int", &ggml_kernels);
  m.def("vnni_supported() -> bool", &macaronic::cpu_avx512_vnni);
}
