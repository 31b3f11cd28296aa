// Fused multi-LoRA delta for the decode shape: one call per projection, shrink and expand together.
//
// y[n, cols of target t] += (A[s] @ x[n])[t*r : (t+1)*r] @ Bt_t[s]   for every token n, s = slots[n] != 0
// with the bank's slot buffers (fp32, or bf16 for bf16 models: half the bytes a step reads): A [S, T*r, d_in] (the T targets of a fused projection stacked)
// and one Bt_t [S, r, w_t] per target (its output columns follow each other in y). With bf16 A, the Bt may be int8:
// the bank folds each Bt row's scale into the matching row of A (B diag(s) diag(1/s) A), so the kernel reads
// the int8 rows as plain numbers and a step reads a quarter fewer adapter bytes. Tokens are
// visited grouped by slot, so a slot's weights are read from memory once per call and stay in cache
// for its other tokens; slot 0 tokens cost nothing. x and y are bf16 or fp32; sums are fp32.
// The reference twin is macaronic.engine.slots.ReferenceLora. Knows nothing about adapters or models.

#include <ATen/ATen.h>
#include <torch/library.h>

#include "avx2.h"
#include "pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

#define KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

KERNEL inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
KERNEL inline __m512 load16(const at::BFloat16* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
KERNEL inline __m512 load16m(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
KERNEL inline __m512 load16m(const at::BFloat16* p, __mmask16 k) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}
KERNEL inline __m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
KERNEL inline __m512 load16m(const int8_t* p, __mmask16 k) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p)));
}
KERNEL inline void store16m(float* p, __m512 v, __mmask16 k) { _mm512_mask_storeu_ps(p, k, v); }
KERNEL inline void store16m(at::BFloat16* p, __m512 v, __mmask16 k) {
  _mm256_mask_storeu_epi16(p, k, (__m256i)_mm512_cvtneps_pbh(v));
}

// xa[j] = A[j, :] . x for the R rows of one slot, 4 rows at a time (x in fp32, d a multiple of 16).
template <typename TW>
KERNEL void shrink(const TW* A, int64_t R, int64_t d, const float* x, float* xa) {
  int64_t j = 0;
  for (; j + 4 <= R; j += 4) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < d; k += 16) {
      const __m512 v = _mm512_loadu_ps(x + k);
      a0 = _mm512_fmadd_ps(load16(A + j * d + k), v, a0);
      a1 = _mm512_fmadd_ps(load16(A + (j + 1) * d + k), v, a1);
      a2 = _mm512_fmadd_ps(load16(A + (j + 2) * d + k), v, a2);
      a3 = _mm512_fmadd_ps(load16(A + (j + 3) * d + k), v, a3);
    }
    xa[j] = _mm512_reduce_add_ps(a0), xa[j + 1] = _mm512_reduce_add_ps(a1);
    xa[j + 2] = _mm512_reduce_add_ps(a2), xa[j + 3] = _mm512_reduce_add_ps(a3);
  }
  for (; j < R; ++j) {
    __m512 a = _mm512_setzero_ps();
    for (int64_t k = 0; k < d; k += 16) a = _mm512_fmadd_ps(load16(A + j * d + k), _mm512_loadu_ps(x + k), a);
    xa[j] = _mm512_reduce_add_ps(a);
  }
}

KERNEL inline __m512bh ld(const at::BFloat16* p) { return (__m512bh)_mm512_loadu_si512(p); }


// The shrink for bf16 weights and bf16 x, NT tokens of one slot at once: xa[t * R + j] = A[j, :] . x_t.
// vdpbf16ps takes 32 products a step, exact in fp32; each 64-byte piece of 4 rows of A is loaded
// once for all NT tokens (4 x NT independent chains).
template <int NT>
KERNEL void shrink_bf16_tokens(const at::BFloat16* A, int64_t R, int64_t d, const at::BFloat16* const* x, float* xa) {
  int64_t j = 0;
  for (; j + 4 <= R; j += 4) {
    __m512 acc[4][NT];
    for (int u = 0; u < 4; ++u)
      for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_setzero_ps();
    const char* next = reinterpret_cast<const char*>(A + (j + 4) * d);  // the next 4 rows (past R: harmless)
    int64_t k = 0;
    for (; k + 32 <= d; k += 32) {
      for (int u = 0; u < 4; ++u) _mm_prefetch(next + (u * d + k) * 2, _MM_HINT_T0);
      __m512bh a[4];
      for (int u = 0; u < 4; ++u) a[u] = ld(A + (j + u) * d + k);
      for (int t = 0; t < NT; ++t) {
        const __m512bh v = ld(x[t] + k);
        for (int u = 0; u < 4; ++u) acc[u][t] = _mm512_dpbf16_ps(acc[u][t], a[u], v);
      }
    }
    for (; k < d; k += 16)  // a last 16 (d is a multiple of 16)
      for (int t = 0; t < NT; ++t) {
        const __m512 v = load16(x[t] + k);
        for (int u = 0; u < 4; ++u) acc[u][t] = _mm512_fmadd_ps(load16(A + (j + u) * d + k), v, acc[u][t]);
      }
    for (int u = 0; u < 4; ++u)
      for (int t = 0; t < NT; ++t) xa[t * R + j + u] = _mm512_reduce_add_ps(acc[u][t]);
  }
  for (; j < R; ++j)
    for (int t = 0; t < NT; ++t) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t k = 0; k < d; k += 16) a = _mm512_fmadd_ps(load16(A + j * d + k), load16(x[t] + k), a);
      xa[t * R + j] = _mm512_reduce_add_ps(a);
    }
}

// y_t[0:w] += sum_j xa_t[j] * B[j, 0:w] for T tokens of one slot (B: [r, w] row-major; xa_t at
// xa + t * lda, y_t at y + t * ldy), 64 columns at a time: each B row is read once for all T.
template <int T, typename TW, typename TY>
KERNEL void expand(const float* xa, int64_t lda, const TW* B, int64_t r, int64_t w, TY* const* y) {
  for (int64_t c = 0; c < w; c += 64) {
    __mmask16 k[4];
    __m512 acc[T][4];
    for (int q = 0; q < 4; ++q) {
      const int64_t left = std::clamp<int64_t>(w - c - 16 * q, 0, 16);
      k[q] = __mmask16((1u << left) - 1);
      for (int t = 0; t < T; ++t) acc[t][q] = load16m(y[t] + c + 16 * q, k[q]);
    }
    for (int64_t j = 0; j < r; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(B + j * w + c + 256), _MM_HINT_T0);  // this row, 4 column blocks on
      _mm_prefetch(reinterpret_cast<const char*>(B + j * w + c + 256) + 64, _MM_HINT_T0);
      for (int q = 0; q < 4; ++q) {
        const __m512 b = load16m(B + j * w + c + 16 * q, k[q]);
        for (int t = 0; t < T; ++t) acc[t][q] = _mm512_fmadd_ps(_mm512_set1_ps(xa[t * lda + j]), b, acc[t][q]);
      }
    }
    for (int q = 0; q < 4; ++q)
      for (int t = 0; t < T; ++t) store16m(y[t] + c + 16 * q, acc[t][q], k[q]);
  }
}

template <typename TW, typename TB, typename TX, typename TY>
KERNEL void lora_tokens(const TX* x, int64_t d, const TW* A, int64_t R, const std::vector<const TB*>& Bs,
                        const std::vector<int64_t>& widths, int64_t r, int64_t S, const int64_t* order, int64_t b0,
                        int64_t b1, const int64_t* slots, TY* y, int64_t d_out) {
  constexpr int kTok = 4;
  std::vector<float> xf(d), xa(kTok * R);
  for (int64_t i = b0; i < b1;) {
    const int64_t s = slots[order[i]];
    int nt = 0;
    TY* ys[kTok];
    const TX* xs[kTok];
    for (; nt < kTok && i < b1 && slots[order[i]] == s; ++nt, ++i) {  // up to 4 tokens of slot s
      const int64_t n = order[i];
      xs[nt] = x + n * d;
      if constexpr (!(std::is_same_v<TW, at::BFloat16> && std::is_same_v<TX, at::BFloat16>)) {
        for (int64_t k = 0; k < d; k += 16) _mm512_storeu_ps(xf.data() + k, load16(x + n * d + k));
        shrink(A + s * R * d, R, d, xf.data(), xa.data() + nt * R);
      }
      ys[nt] = y + n * d_out;
    }
    if (i < b1 && slots[order[i]] != s) {  // the next slot's first rows of A and B, while this one computes
      const int64_t s2 = slots[order[i]];
      const char* a2 = reinterpret_cast<const char*>(A + s2 * R * d);
      for (int64_t off = 0; off < std::min<int64_t>(4, R) * d * int64_t(sizeof(TW)); off += 64) _mm_prefetch(a2 + off, _MM_HINT_T1);
      for (size_t t = 0; t < Bs.size(); ++t)
        for (int64_t j = 0; j < r; ++j) _mm_prefetch(reinterpret_cast<const char*>(Bs[t] + (s2 * r + j) * widths[t]), _MM_HINT_T1);
    }
    if constexpr (std::is_same_v<TW, at::BFloat16> && std::is_same_v<TX, at::BFloat16>) {
      switch (nt) {  // the tokens together: each row of A is read once for all of them
        case 1: shrink_bf16_tokens<1>(A + s * R * d, R, d, xs, xa.data()); break;
        case 2: shrink_bf16_tokens<2>(A + s * R * d, R, d, xs, xa.data()); break;
        case 3: shrink_bf16_tokens<3>(A + s * R * d, R, d, xs, xa.data()); break;
        default: shrink_bf16_tokens<4>(A + s * R * d, R, d, xs, xa.data()); break;
      }
    }
    int64_t col = 0;
    for (size_t t = 0; t < Bs.size(); ++t) {
      const TB* B = Bs[t] + s * r * widths[t];
      const float* xt = xa.data() + t * r;
      TY* yt[kTok];
      for (int u = 0; u < nt; ++u) yt[u] = ys[u] + col;
      switch (nt) {
        case 1: expand<1>(xt, R, B, r, widths[t], yt); break;
        case 2: expand<2>(xt, R, B, r, widths[t], yt); break;
        case 3: expand<3>(xt, R, B, r, widths[t], yt); break;
        default: expand<4>(xt, R, B, r, widths[t], yt); break;
      }
      col += widths[t];
    }
  }
}

// ---- AVX2 + FMA (no AVX-512 BF16): the same delta in fp32, 8 lanes at a time ----
// x is widened to fp32 once per token; each row of A (fp32 or bf16) is read once for the slot's tokens
// (up to 4); B rows (fp32, bf16 or int8) are read once per 16 columns for all of them.

template <int NT, typename TW>
AVX2_KERNEL void shrink2(const TW* A, int64_t R, int64_t d, const float* xf, float* xa) {  // xa[t * R + j] = A[j] . x_t
  using namespace macaronic::avx2;
  for (int64_t j = 0; j < R; ++j) {
    __m256 acc[NT][2];
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    const TW* a = A + j * d;
    for (int64_t k = 0; k < d; k += 16) {  // d is a multiple of 16
      const __m256 a0 = load8(a + k), a1 = load8(a + k + 8);
      for (int t = 0; t < NT; ++t) {
        acc[t][0] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(xf + t * d + k), acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(xf + t * d + k + 8), acc[t][1]);
      }
    }
    for (int t = 0; t < NT; ++t) xa[t * R + j] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
  }
}

template <typename T>
inline float widen(T v) { return float(v); }

// y_t[0:w] += sum_j xa_t[j] * B[j, 0:w] for NT tokens of one slot, 16 columns at a time (a scalar tail).
template <int NT, typename TB, typename TY>
AVX2_KERNEL void expand2(const float* xa, int64_t lda, const TB* B, int64_t r, int64_t w, TY* const* y) {
  using namespace macaronic::avx2;
  int64_t c = 0;
  for (; c + 16 <= w; c += 16) {
    __m256 acc[NT][2];
    for (int t = 0; t < NT; ++t) acc[t][0] = load8(y[t] + c), acc[t][1] = load8(y[t] + c + 8);
    for (int64_t j = 0; j < r; ++j) {
      const __m256 b0 = load8(B + j * w + c), b1 = load8(B + j * w + c + 8);
      for (int t = 0; t < NT; ++t) {
        const __m256 s = _mm256_broadcast_ss(xa + t * lda + j);
        acc[t][0] = _mm256_fmadd_ps(s, b0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(s, b1, acc[t][1]);
      }
    }
    for (int t = 0; t < NT; ++t) store8(y[t] + c, acc[t][0]), store8(y[t] + c + 8, acc[t][1]);
  }
  for (; c < w; ++c)
    for (int t = 0; t < NT; ++t) {
      float v = widen(y[t][c]);
      for (int64_t j = 0; j < r; ++j) v = std::fma(xa[t * lda + j], widen(B[j * w + c]), v);
      y[t][c] = TY(v);
    }
}

template <typename TW, typename TB, typename TX, typename TY>
AVX2_KERNEL void lora_tokens2(const TX* x, int64_t d, const TW* A, int64_t R, const std::vector<const TB*>& Bs,
                              const std::vector<int64_t>& widths, int64_t r, const int64_t* order, int64_t b0, int64_t b1,
                              const int64_t* slots, TY* y, int64_t d_out) {
  using namespace macaronic::avx2;
  constexpr int kTok = 4;
  std::vector<float> xf(kTok * d), xa(kTok * R);
  for (int64_t i = b0; i < b1;) {
    const int64_t s = slots[order[i]];
    int nt = 0;
    TY* ys[kTok];
    for (; nt < kTok && i < b1 && slots[order[i]] == s; ++nt, ++i) {  // up to 4 tokens of slot s
      const int64_t n = order[i];
      for (int64_t k = 0; k < d; k += 8) _mm256_storeu_ps(xf.data() + nt * d + k, load8(x + n * d + k));
      ys[nt] = y + n * d_out;
    }
    const TW* As = A + s * R * d;
    switch (nt) {
      case 1: shrink2<1>(As, R, d, xf.data(), xa.data()); break;
      case 2: shrink2<2>(As, R, d, xf.data(), xa.data()); break;
      case 3: shrink2<3>(As, R, d, xf.data(), xa.data()); break;
      default: shrink2<4>(As, R, d, xf.data(), xa.data()); break;
    }
    int64_t col = 0;
    for (size_t t = 0; t < Bs.size(); ++t) {
      const TB* B = Bs[t] + s * r * widths[t];
      const float* xt = xa.data() + t * r;
      TY* yt[kTok];
      for (int u = 0; u < nt; ++u) yt[u] = ys[u] + col;
      switch (nt) {
        case 1: expand2<1>(xt, R, B, r, widths[t], yt); break;
        case 2: expand2<2>(xt, R, B, r, widths[t], yt); break;
        case 3: expand2<3>(xt, R, B, r, widths[t], yt); break;
        default: expand2<4>(xt, R, B, r, widths[t], yt); break;
      }
      col += widths[t];
    }
  }
}

template <typename TW, typename TB, typename TX, typename TY>
void tokens(const TX* x, int64_t d, const TW* A, int64_t R, const std::vector<const TB*>& Bs, const std::vector<int64_t>& widths,
            int64_t r, int64_t S, const int64_t* order, int64_t b0, int64_t b1, const int64_t* slots, TY* y, int64_t d_out) {
  if (macaronic::wide()) lora_tokens(x, d, A, R, Bs, widths, r, S, order, b0, b1, slots, y, d_out);
  else lora_tokens2(x, d, A, R, Bs, widths, r, order, b0, b1, slots, y, d_out);
}

template <typename TW, typename TB>
void run(at::Tensor& y, const at::Tensor& x, const at::Tensor& A, at::TensorList Bs, const std::vector<int64_t>& widths,
         int64_t r, int64_t S, const std::vector<int64_t>& order, int64_t skip, const int64_t* sp, int64_t d_out) {
  std::vector<const TB*> bp;
  for (const auto& b : Bs) bp.push_back(b.data_ptr<TB>());
  const TW* ap = A.data_ptr<TW>();
  const int64_t R = A.size(1), d = A.size(2);
  macaronic::parallel_for(skip, int64_t(order.size()), 4, [&](int64_t b0, int64_t b1) {
    if (x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat)
      tokens(x.data_ptr<float>(), d, ap, R, bp, widths, r, S, order.data(), b0, b1, sp, y.data_ptr<float>(), d_out);
    else if (x.scalar_type() == at::kBFloat16 && y.scalar_type() == at::kBFloat16)
      tokens(x.data_ptr<at::BFloat16>(), d, ap, R, bp, widths, r, S, order.data(), b0, b1, sp, y.data_ptr<at::BFloat16>(), d_out);
    else if (x.scalar_type() == at::kFloat)
      tokens(x.data_ptr<float>(), d, ap, R, bp, widths, r, S, order.data(), b0, b1, sp, y.data_ptr<at::BFloat16>(), d_out);
    else
      tokens(x.data_ptr<at::BFloat16>(), d, ap, R, bp, widths, r, S, order.data(), b0, b1, sp, y.data_ptr<float>(), d_out);
  });
}

void lora_delta(at::Tensor y, const at::Tensor& x, const at::Tensor& A, at::TensorList Bs, const at::Tensor& slots) {
  const auto wt = A.scalar_type();
  TORCH_CHECK(A.dim() == 3 && (wt == at::kFloat || wt == at::kBFloat16) && A.is_contiguous(),
              "lora_delta: A must be a contiguous fp32/bf16 [S, T*r, d_in]");
  const int64_t S = A.size(0), R = A.size(1), d = A.size(2), T = int64_t(Bs.size());
  TORCH_CHECK(T > 0 && R % T == 0, "lora_delta: A's rows must be T * r for T = len(Bs)");
  const int64_t r = R / T;
  TORCH_CHECK(d % 16 == 0, "lora_delta: d_in must be a multiple of 16");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == d && x.is_contiguous() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
              "lora_delta: x must be a contiguous fp32/bf16 [N, d_in]");
  const int64_t N = x.size(0);
  std::vector<int64_t> widths;
  int64_t d_out = 0;
  for (const auto& b : Bs) {
    TORCH_CHECK(b.dim() == 3 && b.size(0) == S && b.size(1) == r && b.scalar_type() == Bs[0].scalar_type() &&
                (b.scalar_type() == wt || (wt == at::kBFloat16 && b.scalar_type() == at::kChar)) && b.is_contiguous(),
                "lora_delta: each B must be a contiguous [S, r, w] of A's dtype (or int8 with bf16 A)");
    widths.push_back(b.size(2));
    d_out += b.size(2);
  }
  TORCH_CHECK(y.dim() == 2 && y.size(0) == N && y.size(1) == d_out && y.is_contiguous() && (y.scalar_type() == at::kFloat || y.scalar_type() == at::kBFloat16),
              "lora_delta: y must be a contiguous fp32/bf16 [N, sum of B widths]");
  TORCH_CHECK(slots.dim() == 1 && slots.size(0) == N && slots.scalar_type() == at::kLong && slots.is_contiguous(),
              "lora_delta: slots must be a contiguous int64 [N]");
  const int64_t* sp = slots.data_ptr<int64_t>();
  for (int64_t n = 0; n < N; ++n) TORCH_CHECK(sp[n] >= 0 && sp[n] < S, "lora_delta: slot ", sp[n], " out of range");
  std::vector<int64_t> count(S + 1, 0), order(N);  // tokens grouped by slot (a stable counting sort)
  for (int64_t n = 0; n < N; ++n) count[sp[n] + 1]++;
  for (int64_t s = 1; s <= S; ++s) count[s] += count[s - 1];
  for (int64_t n = 0; n < N; ++n) order[count[sp[n]]++] = n;
  const int64_t skip = std::count(sp, sp + N, int64_t(0));  // slot 0 sorts first and adds nothing
  if (wt == at::kFloat) run<float, float>(y, x, A, Bs, widths, r, S, order, skip, sp, d_out);
  else if (Bs[0].scalar_type() == at::kChar) run<at::BFloat16, int8_t>(y, x, A, Bs, widths, r, S, order, skip, sp, d_out);
  else run<at::BFloat16, at::BFloat16>(y, x, A, Bs, widths, r, S, order, skip, sp, d_out);
}

// The base matmul and its LoRA delta in one call (one dispatch instead of two per projection).
at::Tensor dense_lora(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, const at::Tensor& A,
                      at::TensorList Bs, const at::Tensor& slots) {
  at::Tensor y = at::linear(x, w, bias);
  lora_delta(y, x, A, Bs, slots);
  return y;
}

}  // namespace

namespace macaronic {
// For csrc/int4.cpp's int4_linear_lora: the same delta after the int4 matmul.
void lora_delta_into(at::Tensor y, const at::Tensor& x, const at::Tensor& A, at::TensorList Bs, const at::Tensor& slots) {
  lora_delta(y, x, A, Bs, slots);
}
}  // namespace macaronic

TORCH_LIBRARY_FRAGMENT(macaronic, m) {
  m.def("lora_delta(Tensor(a!) y, Tensor x, Tensor A, Tensor[] Bs, Tensor slots) -> ()", &lora_delta);
  m.def("dense_lora(Tensor x, Tensor w, Tensor? bias, Tensor A, Tensor[] Bs, Tensor slots) -> Tensor", &dense_lora);
}
