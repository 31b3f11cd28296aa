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
// - few rows (decode): the row stays in L1 and meets every x row in fp32 FMAs;
// - more rows (prefill): chunks of rows dequantised to fp32 and multiplied by at::mm in fp32.
// No weight is rounded and the arithmetic is fp32: the twin is engine/ggml.py's dequantize + matmul.
// llama.cpp itself rounds x to 8 bits per block (q8_0 / q8_K dot products), so its logits differ from
// these in the last bits. Knows nothing about models, adapters or Python.

#include <ATen/ATen.h>
#include <torch/library.h>

#include "pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

#define KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))

constexpr int kFewRows = 8;
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

KERNEL inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One row of K weights (row: its blocks) -> out[K] in fp32, in ggml's arithmetic.
KERNEL void dequant_row(int64_t type, const uint8_t* row, int64_t K, float* out) {
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
          const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
          const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
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

KERNEL inline float dot(const float* a, const float* b, int64_t K) {  // K a multiple of 32
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

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
  if (N <= kFewRows) {
    macaronic::parallel_for(0, O, 16, [&](int64_t o0, int64_t o1) {
      thread_local std::vector<float> w;
      if (w.size() < size_t(K)) w.resize(K);
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t p = r.find(o);
        dequant_row(r.type[p], r.row(p, o), K, w.data());
        const float b = bp ? float(bp[o]) : 0.f;
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
        dequant_row(r.type[p], r.row(p, o), K, wp + (o - c0) * K);
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
    dequant_row(type, part.data_ptr<uint8_t>() + o * part.size(1), K, out.data_ptr<float>() + o * K);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(macaronic, m) {
  m.def("ggml_linear(Tensor x, Tensor[] parts, int[] types, Tensor? bias) -> Tensor", &ggml_linear);
  m.def("ggml_dequantize(Tensor part, int type, int K) -> Tensor", &ggml_dequantize);
}
