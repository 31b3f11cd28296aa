// One decode step through every decoder layer in one native call (bf16 activations).
//
// For B sequences that each add one token: per layer, RMSNorm, the fused qkv projection (+ its
// LoRA delta), rotary embedding, the new K/V written into each sequence's buffer, attention of the
// one query over the buffer, o projection and residual, RMSNorm, gate/up, SiLU * up, down and
// residual. The projections are the same calls the Python path makes (int4_linear, ggml_linear or
// at::linear, then lora_delta), and the element-wise steps round to bf16 where the PyTorch ops do, so the two
// paths agree up to the attention's summation order. The Python forward in engine/model.py is the
// reference twin; this file only removes its ~40 dispatches per layer. Knows nothing about
// tokenizers, scheduling or where the weights and adapters come from.
//
// Arguments (engine/model.py `_fused_decode` builds them):
//   x: bf16 [B, D], the embedded tokens;
//   w: 11 per layer: attn_norm, qkv weight, qkv scales, qkv bias, o weight, o scales, ffn_norm,
//      gate_up weight, gate_up scales, down weight, down scales. A weight with scales is native int4
//      (quant.pack_int4's layout), one with empty scales a dense bf16 [out, in], one whose scales are
//      int64 [first, count] the GGUF's own blocks: gparts[first, first + count) with their ggml types
//      gtypes (engine/ggml.py's GGMLLinear); an empty bias is none;
//   lora: empty, or per layer for each of the 4 fused projections its A then its n_targets[f] Bs;
//   slots: 4 int64 [B] slot indices (lora_delta's), an empty one where that projection adds nothing;
//   ks, vs: per sequence its K/V buffer [L, n_kv, capacity, head_dim] (any strides but the last);
//   lengths: per sequence the position of its new token; cos, sin: bf16 [B, head_dim] at those positions;
//   gparts, gtypes: the GGUF projections' parts (uint8 blocks) and types, empty where none;
//   int4_path: what the native int4 projections ask int4_linear for (0, or 5: x rounded to 8 bits on few rows).
// Returns the residual stream after the last layer, bf16 [B, D] (before the final norm).

#include <ATen/ATen.h>
#include <torch/library.h>

#include "avx2.h"
#include "pool.h"

#include <immintrin.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

namespace macaronic {
void lora_delta_into(at::Tensor y, const at::Tensor& x, const at::Tensor& A, at::TensorList Bs, const at::Tensor& slots);
at::Tensor int4_matmul(const at::Tensor& x, const at::Tensor& qw, const at::Tensor& sc, const std::optional<at::Tensor>& bias,
                       int64_t path);
at::Tensor ggml_linear(const at::Tensor& x, at::TensorList parts, at::IntArrayRef types, const std::optional<at::Tensor>& bias);
}  // namespace macaronic

namespace {

using bf16 = at::BFloat16;

#define KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

KERNEL inline __m512 load16(const bf16* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
KERNEL inline void store16(bf16* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v)); }
KERNEL inline __m512 round16(__m512 v) {  // fp32 -> nearest bf16 -> fp32, as a bf16 tensor op's result
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
}

// Hugging Face's half-precision RMSNorm (model.rms_norm): normalise in fp32, round, scale by w.
KERNEL void rms_norm(const bf16* x, const bf16* w, int64_t D, float eps, bf16* out) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < D; k += 16) {
    const __m512 v = load16(x + k);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  const __m512 r = _mm512_set1_ps(1.f / std::sqrt(_mm512_reduce_add_ps(acc) / float(D) + eps));
  for (int64_t k = 0; k < D; k += 16) store16(out + k, _mm512_mul_ps(load16(w + k), round16(_mm512_mul_ps(load16(x + k), r))));
}

// Rotate-half rotary embedding of one head in place (model.apply_rope's bf16 rounding: each
// product and the sum round to bf16). Scalar; the body is compiled for both targets (rope, rope2).
__attribute__((always_inline)) inline void rope_body(bf16* x, const bf16* cos, const bf16* sin, int64_t hd) {
  const int64_t half = hd / 2;
  alignas(64) float tmp[256];
  for (int64_t i = 0; i < hd; ++i) {
    const float xi = float(x[i]), rot = i < half ? -float(x[i + half]) : float(x[i - half]);
    tmp[i] = float(bf16(float(bf16(xi * float(cos[i]))) + float(bf16(rot * float(sin[i])))));
  }
  for (int64_t i = 0; i < hd; ++i) x[i] = bf16(tmp[i]);
}
KERNEL void rope(bf16* x, const bf16* cos, const bf16* sin, int64_t hd) { rope_body(x, cos, sin, hd); }

// Cephes' expf, 16 lanes: x = n ln 2 + r (ln 2 in two parts, |r| <= ln 2 / 2), a degree-6 polynomial for
// exp(r) (about 1 ulp, as glibc's expf and PyTorch's vectorised exp), then scalef by 2^n, which overflows to
// inf and underflows to 0 as expf does. For the softmax and the SiLU: a scalar std::exp in the SiLU alone cost a
// quarter of a 16-stream decode step on the default base (perf, docs/LOG.md 2026-12-07, twenty-first session).
constexpr float kExpLo = -104.f, kExpHi = 89.f, kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f,
                kLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                               1.6666665459e-1f, 5.0000001201e-1f};  // exp(r) = 1 + r + r^2 (p5 + r (p4 + ...))

KERNEL inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));  // keeps r small
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x));
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

// s[j] = exp(s[j] - mx) in place over j < n, 16 at a time (the tail scalar); returns their sum. The softmax's
// exponentials, vectorised as the SiLU's: a scalar std::exp per score was most of a long context's decode step.
KERNEL float exp_shift(float* s, int64_t n, float mx) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 p = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
    _mm512_storeu_ps(s + j, p);
    acc = _mm512_add_ps(acc, p);
  }
  float sum = _mm512_reduce_add_ps(acc);
  for (; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
  return sum;
}

// One query head over keys 0..n-1 of one K/V head (rows `kstride` apart); out = softmax(q.K / sqrt(hd)) V.
// Like the flash-attention CPU kernel for bf16: fp32 scores and sums, probabilities rounded to bf16
// before they weight V.
KERNEL void attend(const bf16* q, const bf16* k, const bf16* v, int64_t kstride, int64_t n, int64_t hd, float scale,
                   std::vector<float>& s, bf16* out) {
  s.resize(n);
  __m512 qv[16];
  const int64_t nv = hd / 16;
  for (int64_t c = 0; c < nv; ++c) qv[c] = load16(q + 16 * c);
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const bf16* kj = k + j * kstride;
    __m512 a = _mm512_mul_ps(qv[0], load16(kj));
    for (int64_t c = 1; c < nv; ++c) a = _mm512_fmadd_ps(qv[c], load16(kj + 16 * c), a);
    s[j] = _mm512_reduce_add_ps(a) * scale;
    mx = std::max(mx, s[j]);
  }
  const float sum = exp_shift(s.data(), n, mx);
  __m512 acc[16];
  for (int64_t c = 0; c < nv; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m512 pv = _mm512_set1_ps(float(bf16(s[j])));
    const bf16* vj = v + j * kstride;
    for (int64_t c = 0; c < nv; ++c) acc[c] = _mm512_fmadd_ps(pv, load16(vj + 16 * c), acc[c]);
  }
  const __m512 inv = _mm512_set1_ps(1.f / sum);
  for (int64_t c = 0; c < nv; ++c) store16(out + 16 * c, _mm512_mul_ps(acc[c], inv));
}

inline bool given(const at::Tensor& t) { return t.defined() && t.numel() > 0; }

// H query heads that share one K/V head (GQA), NV = head_dim / 16: each key and value row is read
// and widened once for all H; per head the arithmetic is attend's, in the same order.
template <int NV, int H>
KERNEL void attend_heads(const bf16* q, const bf16* k, const bf16* v, int64_t kstride, int64_t n, float scale,
                         std::vector<float>& s, bf16* out) {
  s.resize(H * n);
  __m512 qv[H][NV];
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < NV; ++c) qv[h][c] = load16(q + h * NV * 16 + 16 * c);
  float mx[H], sum[H];
  for (int h = 0; h < H; ++h) mx[h] = -INFINITY, sum[h] = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    __m512 kv[NV];
    for (int c = 0; c < NV; ++c) kv[c] = load16(k + j * kstride + 16 * c);
    for (int h = 0; h < H; ++h) {
      __m512 a = _mm512_mul_ps(qv[h][0], kv[0]);
      for (int c = 1; c < NV; ++c) a = _mm512_fmadd_ps(qv[h][c], kv[c], a);
      const float sj = _mm512_reduce_add_ps(a) * scale;
      s[h * n + j] = sj;
      mx[h] = std::max(mx[h], sj);
    }
  }
  for (int h = 0; h < H; ++h) sum[h] = exp_shift(s.data() + h * n, n, mx[h]);
  __m512 acc[H][NV];
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < NV; ++c) acc[h][c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = load16(v + j * kstride + 16 * c);
    for (int h = 0; h < H; ++h) {
      const __m512 pv = _mm512_set1_ps(float(bf16(s[h * n + j])));
      for (int c = 0; c < NV; ++c) acc[h][c] = _mm512_fmadd_ps(pv, vv[c], acc[h][c]);
    }
  }
  for (int h = 0; h < H; ++h) {
    const __m512 inv = _mm512_set1_ps(1.f / sum[h]);
    for (int c = 0; c < NV; ++c) store16(out + h * NV * 16 + 16 * c, _mm512_mul_ps(acc[h][c], inv));
  }
}

using HeadsFn = void (*)(const bf16*, const bf16*, const bf16*, int64_t, int64_t, float, std::vector<float>&, bf16*);

// The grouped kernel for head_dim 64 or 128 (up to 4 or 2 heads a call: their q stays in registers), else none.
HeadsFn heads_fn(int64_t hd, int64_t h) {
  if (hd == 64) {
    constexpr HeadsFn f[4] = {attend_heads<4, 1>, attend_heads<4, 2>, attend_heads<4, 3>, attend_heads<4, 4>};
    return h >= 1 && h <= 4 ? f[h - 1] : nullptr;
  }
  if (hd == 128) {
    constexpr HeadsFn f[2] = {attend_heads<8, 1>, attend_heads<8, 2>};
    return h >= 1 && h <= 2 ? f[h - 1] : nullptr;
  }
  return nullptr;
}

// y = x @ W.T (+ b) plus the LoRA delta: the calls Block's _proj makes. The weight is dense (sc empty),
// native int4 (sc its scales) or the GGUF's own blocks (sc int64 [first, count]: its parts in gparts, gtypes).
at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& sc, const at::Tensor& b, at::TensorList lora,
                int64_t a_at, int64_t n_b, const at::Tensor& slots, at::TensorList gparts, at::IntArrayRef gtypes,
                int64_t int4_path) {
  const std::optional<at::Tensor> bias = given(b) ? std::optional<at::Tensor>(b) : std::nullopt;
  at::Tensor y;
  if (given(sc) && sc.scalar_type() == at::kLong) {
    TORCH_CHECK(sc.numel() == 2 && sc.is_contiguous() && sc.device().is_cpu(),
                "decode_layers: a GGUF projection's sc must be a contiguous CPU int64 [first part, count]");
    const int64_t first = sc.data_ptr<int64_t>()[0], count = sc.data_ptr<int64_t>()[1];
    TORCH_CHECK(first >= 0 && count > 0 && first + count <= int64_t(gparts.size()) && gparts.size() == gtypes.size(),
                "decode_layers: a GGUF projection's parts [", first, ", ", first + count, ") are not in gparts (",
                gparts.size(), ") and gtypes (", gtypes.size(), ")");
    y = macaronic::ggml_linear(x, gparts.slice(first, count), gtypes.slice(first, count), bias);
  } else {
    y = given(sc) ? macaronic::int4_matmul(x, w, sc, bias, int4_path) : at::linear(x, w, bias);
  }
  if (given(slots)) macaronic::lora_delta_into(y, x, lora[a_at], lora.slice(a_at + 1, n_b), slots);
  return y;
}

KERNEL void add_into(bf16* x, const bf16* y, int64_t n) {  // x = bf16(x + y)
  for (int64_t k = 0; k < n; k += 16) store16(x + k, _mm512_add_ps(load16(x + k), load16(y + k)));
}

// bf16(bf16(silu(g)) * u), silu(g) = g / (1 + exp(-g)) in fp32 as F.silu computes it; the scalar body ends a
// row whose width is not a multiple of the vector's (silu_mul, silu_mul2)
__attribute__((always_inline)) inline void silu_mul_body(const bf16* gu, int64_t I, int64_t from, bf16* out) {
  for (int64_t k = from; k < I; ++k) {
    const float g = float(gu[k]);
    out[k] = bf16(float(bf16(g / (1.f + std::exp(-g)))) * float(gu[I + k]));
  }
}

KERNEL void silu_mul(const bf16* gu, int64_t I, bf16* out) {
  const __m512 one = _mm512_set1_ps(1.f);
  int64_t k = 0;
  for (; k + 16 <= I; k += 16) {
    const __m512 g = load16(gu + k);
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    store16(out + k, _mm512_mul_ps(round16(s), load16(gu + I + k)));
  }
  silu_mul_body(gu, I, k, out);
}

// ---- AVX2 + FMA (no AVX-512 BF16): the element-wise steps and attention, 8 lanes at a time ----
// The same arithmetic and bf16 rounding points as the kernels above.

AVX2_KERNEL void rms_norm2(const bf16* x, const bf16* w, int64_t D, float eps, bf16* out) {
  using namespace macaronic::avx2;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < D; k += 8) {
    const __m256 v = load8(x + k);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const __m256 r = _mm256_set1_ps(1.f / std::sqrt(hsum(acc) / float(D) + eps));
  for (int64_t k = 0; k < D; k += 8) store8(out + k, _mm256_mul_ps(load8(w + k), round8(_mm256_mul_ps(load8(x + k), r))));
}

// exp16's twin, 8 lanes: 2^n built in the exponent bits (x clamped first so that n stays in [-150, 128]);
// n = 128 is 2^127 times 2 (a finite exp near FLT_MAX, or inf where expf overflows); n below -126 gives 0
// where expf gives a subnormal
AVX2_KERNEL inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x));
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-127.f)), _mm256_set1_ps(127.f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nc), _mm256_set1_epi32(127)), 23);
  const __m256 twice = _mm256_blendv_ps(_mm256_set1_ps(1.f), _mm256_set1_ps(2.f), _mm256_cmp_ps(n, nc, _CMP_GT_OQ));
  return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), twice);
}

// exp_shift's twin, 8 lanes
AVX2_KERNEL float exp_shift2(float* s, int64_t n, float mx) {
  using namespace macaronic::avx2;
  const __m256 m = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, p);
    acc = _mm256_add_ps(acc, p);
  }
  float sum = hsum(acc);
  for (; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
  return sum;
}

// H query heads over keys 0..n-1 of their shared K/V head: each key and value row is widened once
// for all H; per head the arithmetic is attend's (fp32 scores, probabilities rounded to bf16).
AVX2_KERNEL void attend2(const bf16* q, int64_t H, const bf16* k, const bf16* v, int64_t kstride, int64_t n, int64_t hd,
                         float scale, std::vector<float>& s, bf16* out) {
  using namespace macaronic::avx2;
  s.resize(H * n + H * hd * 2 + hd);
  float* qf = s.data() + H * n;  // [H, hd] fp32 queries, then [H, hd] accumulators, then one widened row
  float* acc = qf + H * hd;
  float* row = acc + H * hd;
  for (int64_t i = 0; i < H * hd; i += 8) _mm256_storeu_ps(qf + i, load8(q + i));
  float mx[8], sum[8];  // H <= 8
  for (int64_t h = 0; h < H; ++h) mx[h] = -INFINITY, sum[h] = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const bf16* kj = k + j * kstride;
    for (int64_t c = 0; c < hd; c += 8) _mm256_storeu_ps(row + c, load8(kj + c));
    for (int64_t h = 0; h < H; ++h) {
      __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(qf + h * hd), _mm256_loadu_ps(row)), a1 = _mm256_setzero_ps();
      int64_t c = 8;
      for (; c + 16 <= hd; c += 16) {
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + h * hd + c), _mm256_loadu_ps(row + c), a1);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + h * hd + c + 8), _mm256_loadu_ps(row + c + 8), a0);
      }
      for (; c < hd; c += 8) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + h * hd + c), _mm256_loadu_ps(row + c), a1);
      const float sj = hsum(_mm256_add_ps(a0, a1)) * scale;
      s[h * n + j] = sj;
      mx[h] = std::max(mx[h], sj);
    }
  }
  for (int64_t h = 0; h < H; ++h) sum[h] = exp_shift2(s.data() + h * n, n, mx[h]);
  for (int64_t i = 0; i < H * hd; ++i) acc[i] = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const bf16* vj = v + j * kstride;
    for (int64_t c = 0; c < hd; c += 8) _mm256_storeu_ps(row + c, load8(vj + c));
    for (int64_t h = 0; h < H; ++h) {
      const __m256 pv = _mm256_set1_ps(float(bf16(s[h * n + j])));
      for (int64_t c = 0; c < hd; c += 8)
        _mm256_storeu_ps(acc + h * hd + c, _mm256_fmadd_ps(pv, _mm256_loadu_ps(row + c), _mm256_loadu_ps(acc + h * hd + c)));
    }
  }
  for (int64_t h = 0; h < H; ++h) {
    const __m256 inv = _mm256_set1_ps(1.f / sum[h]);
    for (int64_t c = 0; c < hd; c += 8) store8(out + h * hd + c, _mm256_mul_ps(_mm256_loadu_ps(acc + h * hd + c), inv));
  }
}

AVX2_KERNEL void add_into2(bf16* x, const bf16* y, int64_t n) {  // x = bf16(x + y)
  using namespace macaronic::avx2;
  for (int64_t k = 0; k < n; k += 8) store8(x + k, _mm256_add_ps(load8(x + k), load8(y + k)));
}

// rope compiled without the AVX-512 target, so the compiler cannot use it here
AVX2_KERNEL void rope2(bf16* x, const bf16* cos, const bf16* sin, int64_t hd) { rope_body(x, cos, sin, hd); }

AVX2_KERNEL void silu_mul2(const bf16* gu, int64_t I, bf16* out) {
  using namespace macaronic::avx2;
  const __m256 one = _mm256_set1_ps(1.f);
  int64_t k = 0;
  for (; k + 8 <= I; k += 8) {
    const __m256 g = load8(gu + k);
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    store8(out + k, _mm256_mul_ps(round8(s), load8(gu + I + k)));
  }
  silu_mul_body(gu, I, k, out);
}

constexpr int64_t kPerLayer = 11;

at::Tensor decode_layers(const at::Tensor& x_in, at::TensorList w, at::TensorList lora, at::TensorList slots,
                         at::TensorList ks, at::TensorList vs, at::IntArrayRef lengths, const at::Tensor& cos,
                         const at::Tensor& sin, at::IntArrayRef n_targets, int64_t n_heads, int64_t n_kv, double eps,
                         at::TensorList gparts, at::IntArrayRef gtypes, int64_t int4_path) {
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == at::kBFloat16, "decode_layers: x must be bf16 [B, D]");
  const int64_t B = x_in.size(0), D = x_in.size(1), hd = cos.size(1);
  TORCH_CHECK(w.size() % kPerLayer == 0, "decode_layers: w must hold 11 tensors per layer");
  const int64_t L = int64_t(w.size()) / kPerLayer;
  TORCH_CHECK(D % 16 == 0 && hd % 16 == 0 && hd <= 256 && n_heads % n_kv == 0, "decode_layers: unsupported shape");
  const bool wide = macaronic::wide();  // the AVX-512 kernels, else their AVX2 twins
  TORCH_CHECK(slots.size() == 4 && n_targets.size() == 4, "decode_layers: 4 slot tensors and 4 target counts");
  int64_t lora_per_layer = 0;
  std::vector<int64_t> a_off(4);
  for (int f = 0; f < 4; ++f) a_off[f] = lora_per_layer, lora_per_layer += 1 + n_targets[f];
  TORCH_CHECK(lora.empty() || int64_t(lora.size()) == L * lora_per_layer, "decode_layers: lora must be empty or complete");
  TORCH_CHECK(int64_t(ks.size()) == B && int64_t(vs.size()) == B && int64_t(lengths.size()) == B, "decode_layers: one K, V and length per row");
  TORCH_CHECK(cos.scalar_type() == at::kBFloat16 && sin.scalar_type() == at::kBFloat16 && cos.is_contiguous() &&
              sin.is_contiguous() && cos.size(0) == B && sin.size(0) == B, "decode_layers: cos, sin must be contiguous bf16 [B, head_dim]");
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(ks[b].dim() == 4 && ks[b].size(0) == L && ks[b].size(1) == n_kv && ks[b].size(3) == hd && ks[b].stride(3) == 1 &&
                ks[b].scalar_type() == at::kBFloat16 && vs[b].sizes() == ks[b].sizes() && vs[b].strides() == ks[b].strides() &&
                vs[b].scalar_type() == at::kBFloat16, "decode_layers: K/V buffers must be bf16 [L, n_kv, capacity, head_dim]");
    TORCH_CHECK(lengths[b] >= 0 && lengths[b] < ks[b].size(2), "decode_layers: KV buffer overflow: ", lengths[b] + 1,
                " > capacity ", ks[b].size(2));
  }
  for (const auto& s : slots) TORCH_CHECK(!given(s) || lora.size(), "decode_layers: slots without lora weights");
  const int64_t qw = n_heads * hd, kvw = n_kv * hd, group = n_heads / n_kv;
  const int64_t per = std::min<int64_t>(group, hd <= 64 ? 4 : 2), runs = (group + per - 1) / per;  // query heads a call
  const float scale = 1.f / std::sqrt(float(hd));
  at::Tensor x = x_in.contiguous().clone();
  at::Tensor h = at::empty_like(x), attn = at::empty({B, qw}, x.options());
  bf16* xp = x.data_ptr<bf16>();
  bf16* hp = h.data_ptr<bf16>();
  const bf16* cp = cos.data_ptr<bf16>();
  const bf16* sp = sin.data_ptr<bf16>();
  for (int64_t li = 0; li < L; ++li) {
    const at::Tensor* lw = w.data() + li * kPerLayer;
    at::TensorList ll = lora.empty() ? lora : lora.slice(li * lora_per_layer, lora_per_layer);
    for (int64_t b = 0; b < B; ++b)
      (wide ? rms_norm : rms_norm2)(xp + b * D, lw[0].data_ptr<bf16>(), D, float(eps), hp + b * D);
    at::Tensor qkv = proj(h, lw[1], lw[2], lw[3], ll, a_off[0], n_targets[0], slots[0], gparts, gtypes, int4_path);  // [B, qw + 2 kvw]
    TORCH_CHECK(qkv.size(1) == qw + 2 * kvw, "decode_layers: the qkv weight's width does not match the heads");
    bf16* qp = qkv.data_ptr<bf16>();
    const int64_t ld = qkv.size(1);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < n_heads + n_kv; ++t) (wide ? rope : rope2)(qp + b * ld + t * hd, cp + b * hd, sp + b * hd, hd);
      bf16* kb = ks[b].data_ptr<bf16>() + li * ks[b].stride(0) + lengths[b] * ks[b].stride(2);
      bf16* vb = vs[b].data_ptr<bf16>() + li * vs[b].stride(0) + lengths[b] * vs[b].stride(2);
      for (int64_t g = 0; g < n_kv; ++g) {
        std::copy_n(qp + b * ld + qw + g * hd, hd, kb + g * ks[b].stride(1));
        std::copy_n(qp + b * ld + qw + kvw + g * hd, hd, vb + g * vs[b].stride(1));
      }
    }
    bf16* ap = attn.data_ptr<bf16>();
    // work items: (row, K/V head, a run of `per` of its query heads), one grouped kernel call each
    macaronic::parallel_for(0, B * n_kv * runs, 1, [&](int64_t i0, int64_t i1) {
      std::vector<float> s;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = i / (n_kv * runs), g = i / runs % n_kv, h0 = g * group + i % runs * per;
        const int64_t nh = std::min(per, (g + 1) * group - h0);
        const bf16* k0 = ks[b].data_ptr<bf16>() + li * ks[b].stride(0) + g * ks[b].stride(1);
        const bf16* v0 = vs[b].data_ptr<bf16>() + li * vs[b].stride(0) + g * vs[b].stride(1);
        const bf16* q0 = qp + b * ld + h0 * hd;
        bf16* o0 = ap + b * qw + h0 * hd;
        if (!wide) {
          attend2(q0, nh, k0, v0, ks[b].stride(2), lengths[b] + 1, hd, scale, s, o0);
        } else if (HeadsFn f = heads_fn(hd, nh)) {
          f(q0, k0, v0, ks[b].stride(2), lengths[b] + 1, scale, s, o0);
        } else {
          for (int64_t h = 0; h < nh; ++h)
            attend(q0 + h * hd, k0, v0, ks[b].stride(2), lengths[b] + 1, hd, scale, s, o0 + h * hd);
        }
      }
    });
    at::Tensor o = proj(attn, lw[4], lw[5], at::Tensor(), ll, a_off[1], n_targets[1], slots[1], gparts, gtypes, int4_path);
    (wide ? add_into : add_into2)(xp, o.data_ptr<bf16>(), B * D);
    for (int64_t b = 0; b < B; ++b)
      (wide ? rms_norm : rms_norm2)(xp + b * D, lw[6].data_ptr<bf16>(), D, float(eps), hp + b * D);
    at::Tensor gu = proj(h, lw[7], lw[8], at::Tensor(), ll, a_off[2], n_targets[2], slots[2], gparts, gtypes, int4_path);  // [B, 2I]
    const int64_t I = gu.size(1) / 2;
    at::Tensor act = at::empty({B, I}, x.options());
    const bf16* gup = gu.data_ptr<bf16>();
    bf16* actp = act.data_ptr<bf16>();
    macaronic::parallel_for(0, B, 4, [&](int64_t b0, int64_t b1) {  // rows of 4 or more: one row is ~1 us
      for (int64_t b = b0; b < b1; ++b) (wide ? silu_mul : silu_mul2)(gup + b * 2 * I, I, actp + b * I);
    });
    at::Tensor dn = proj(act, lw[9], lw[10], at::Tensor(), ll, a_off[3], n_targets[3], slots[3], gparts, gtypes, int4_path);
    (wide ? add_into : add_into2)(xp, dn.data_ptr<bf16>(), B * D);
  }
  return x;
}

// decode_layers' SiLU step alone, for the tests: bf16 [N, 2I] (gate, then up) -> bf16 [N, I]; `twin`: the AVX2
// kernel (where the CPU runs it) instead of the AVX-512 one
at::Tensor silu_mul_rows(const at::Tensor& gu, bool twin) {
  TORCH_CHECK(gu.dim() == 2 && gu.scalar_type() == at::kBFloat16 && gu.is_contiguous() && gu.size(1) % 2 == 0,
              "silu_mul: gu must be a contiguous bf16 [N, 2I]");
  TORCH_CHECK(twin ? macaronic::cpu_avx2() : macaronic::wide(), "silu_mul: this CPU does not run that kernel");
  const int64_t N = gu.size(0), I = gu.size(1) / 2;
  at::Tensor out = at::empty({N, I}, gu.options());
  for (int64_t b = 0; b < N; ++b) (twin ? silu_mul2 : silu_mul)(gu.data_ptr<bf16>() + b * 2 * I, I, out.data_ptr<bf16>() + b * I);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(macaronic, m) {
  m.def("silu_mul(Tensor gu, bool twin=False) -> Tensor", &silu_mul_rows);
  m.def("decode_layers(Tensor x, Tensor[] w, Tensor[] lora, Tensor[] slots, Tensor[] ks, Tensor[] vs, int[] lengths, "
        "Tensor cos, Tensor sin, int[] n_targets, int n_heads, int n_kv, float eps, Tensor[] gparts, int[] gtypes, int int4_path=0) -> Tensor",
        &decode_layers);
}
