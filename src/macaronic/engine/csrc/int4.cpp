// Native int4 weight-only matmul for the CPU engine: y = x @ W.T (+ b), x bf16 [N, K], W int4.
//
// W is stored as packed nibbles and an fp16 (scale, min) per 16 outputs x 32 inputs (one group),
// W[o, k] = q * scale + min with q in 0..15 (asymmetric, like llama.cpp's Q4_1). Layout, built by
// macaronic.engine.quant.pack_int4 (whose unpack_int4 is the reference twin):
//   qw: uint8 [O/16, G, 8, 32]; in chunk c of group g, byte 2*o + e holds q[o, 32g + 2c + e] in
//       its low nibble and q[o, 32g + 2(c + 8) + e] in its high nibble (o: output in the block,
//       e: which of a pair of inputs);
//   sc: fp16 [O/16, G, 2, 16]: the scales and mins of the block's 16 outputs (fp16 like GGUF's Q4_1,
//       so a base imported from Q4_1 repacks without loss).
// Paths, picked per call by the row count (path 0; path 5 the same with x rounded on the few-rows path):
// - few rows (decode and short prefills: up to 4 with AMX, 128 without): nibbles become bf16 (128 + q) in registers by an OR with 0x4300 (exact),
//   vdpbf16ps multiplies them with pairs of x, and each group ends with
//   acc += scale * dot + (min - 128 * scale) * sum(x over the group). The weights are read once
//   per call, the arithmetic is fp32 and no weight is rounded.
// - more rows (batched decode, prefill), on a CPU with AMX: each block of 16 outputs is dequantised
//   once per call into bf16 VNNI tiles (1 KiB per group, in L1) and multiplied by tdpbf16ps over
//   tiles of 16 rows; the weights are rounded to bf16, as a bf16 copy would hold them;
// - more rows without AMX: chunks of the weights dequantised to bf16 [K, chunk] (1 MiB, in L2) and
//   multiplied by at::mm.
// - few rows with x rounded to 8 bits (path 4, AVX-512 VNNI): per row and group of 32, as llama.cpp's q8
//   rounds it; the group's q * xq summed exactly in int32 by vpdpbusd, then scaled in fp32. Half the multiply
//   instructions of the bf16 register kernel: 1.5-1.8x its speed at 8-16 rows (docs/LOG.md).
// On a CPU without AVX-512 BF16, AVX2 twins (below, csrc/avx2.h) run two of these paths in fp32: up to 32
// rows the register kernel with the weights widened to fp32 (q * scale + min), more rows fp32 chunks for
// at::mm.
// Knows nothing about models, adapters or Python.

#include <ATen/ATen.h>
#include <torch/library.h>

#include "avx2.h"
#include "pool.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

namespace macaronic {
void lora_delta_into(at::Tensor y, const at::Tensor& x, const at::Tensor& A, at::TensorList Bs, const at::Tensor& slots);
}

namespace {

// Only the kernels use AVX-512 (or AVX2, the twins): the library loads on any x86-64 and int4_supported() says if they can run.
#define KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

constexpr int64_t kGroup = 32;
constexpr int64_t kBlock = 16;
constexpr int kRowTile = 8;
// Without AMX, the register kernel up to this many rows: it beats dequantised chunks for at::mm up to about 256
// rows on a 2-core AMD EPYC with AVX-512 BF16 and no AMX (one layer of the default base's four projection shapes,
// scripts/avx2_int4_paths.py, docs/bench/int4-paths-avx512.json: 1.4 against 3.1 ms at 17 rows, 5.7 against 7.3
// at 128, even at 256, 23 against 21 at 512; docs/LOG.md, 2026-12-07). It was 16, measured on SmolLM2's shapes.
constexpr int64_t kFewRowsWide = 128;
constexpr int64_t kChunkBytes = int64_t(1) << 20;  // a dequantised chunk stays in L2 for at::mm
constexpr int64_t kAhead = 2048;                    // the few-rows path's software prefetch distance (bytes of nibbles)

KERNEL inline __m512 bf16x16(const at::BFloat16* p) {  // 16 bf16 -> 16 fp32
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

KERNEL inline __m512 f16x16(const at::Half* p) {  // 16 fp16 -> 16 fp32
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

KERNEL inline void store_bf16x16(at::BFloat16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v));
}

// Sum of x over each group of 32 inputs, in fp32: xs[n, g].
KERNEL void group_sums(const at::BFloat16* x, int64_t n_rows, int64_t K, float* xs) {
  const int64_t G = K / kGroup;
  for (int64_t n = 0; n < n_rows; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const at::BFloat16* p = x + n * K + g * kGroup;
      xs[n * G + g] = _mm512_reduce_add_ps(_mm512_add_ps(bf16x16(p), bf16x16(p + 16)));
    }
}

// The hardware prefetcher stops at 4 KiB pages; a block is ~4.6 KiB and the next block follows it, so the
// few-rows paths fetch kAhead bytes ahead of a group's nibbles and scales (into the next block near the end):
// they are otherwise bound by memory latency once the weights leave the cache (2x slower, docs/LOG.md).
inline void prefetch_group(const uint8_t* q, const at::Half* sc) {
  for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(q) + kAhead + 64 * l, _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(sc) + kAhead / 4, _MM_HINT_T0);
}

// R rows x one block of 16 outputs, the few-rows path. Each row keeps C partial sums per group
// (independent dpbf16 chains: one or two rows alone would wait on the instruction's latency).
template <int R, int C = (R == 1 ? 4 : R <= 4 ? 2 : 1)>
KERNEL void rows_block(const at::BFloat16* x, int64_t K, const float* xs, const uint8_t* qw, const at::Half* sc,
                       const at::BFloat16* bias, at::BFloat16* y, int64_t O) {
  const int64_t G = K / kGroup;
  const __m512i low4 = _mm512_set1_epi16(0x000F), offset = _mm512_set1_epi16(0x4300);  // bf16(128) = 0x4300
  const __m512 c128 = _mm512_set1_ps(128.f);
  __m512 acc[R];
  const __m512 b0 = bias ? bf16x16(bias) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) acc[r] = b0;
  const int32_t* xp = reinterpret_cast<const int32_t*>(x);  // x as bf16 pairs; row r starts at r * K / 2
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* q = qw + g * 256;
    prefetch_group(q, sc + g * 32);
    __m512 gacc[R][C];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) gacc[r][j] = _mm512_setzero_ps();
    for (int c = 0; c < 8; ++c) {
      __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c * 32)));
      __m512bh wl = (__m512bh)_mm512_ternarylogic_epi32(w, low4, offset, 0xEA);  // (w & 0xF) | 0x4300
      __m512bh wh = (__m512bh)_mm512_or_si512(_mm512_srli_epi16(w, 4), offset);
      const int64_t k2 = g * (kGroup / 2) + c;  // pair index of chunk c's low nibbles
      const int jl = (2 * c) % C, jh = (2 * c + 1) % C;
      for (int r = 0; r < R; ++r) {
        const int32_t* row = xp + r * (K / 2);
        gacc[r][jl] = _mm512_dpbf16_ps(gacc[r][jl], wl, (__m512bh)_mm512_set1_epi32(row[k2]));
        gacc[r][jh] = _mm512_dpbf16_ps(gacc[r][jh], wh, (__m512bh)_mm512_set1_epi32(row[k2 + 8]));
      }
    }
    const __m512 s = f16x16(sc + g * 32), m = f16x16(sc + g * 32 + 16);
    const __m512 m128 = _mm512_fnmadd_ps(c128, s, m);  // min - 128 * scale: removes the offset
    for (int r = 0; r < R; ++r) {
      __m512 dot = gacc[r][0];
      for (int j = 1; j < C; ++j) dot = _mm512_add_ps(dot, gacc[r][j]);
      acc[r] = _mm512_fmadd_ps(dot, s, acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xs[r * G + g]), m128, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_bf16x16(y + r * O, acc[r]);
}

// ---- few rows with x rounded to 8 bits: integer products on VNNI (path 4) ----
// x is rounded per row and group of 32 as llama.cpp's q8 rounds it: d = max|x| / 127, xq = nearest(x * 127 / max|x|);
// each group's products q * xq are summed exactly in int32 by vpdpbusd (q unsigned 0..15, xq signed), then
// acc += (scale * d) * dot + min * sum(x over the group) in fp32 (the min term on the exact x). Half the
// multiply instructions of the bf16 kernel per row. The LM head uses it (its top candidates are rescored from
// the bf16 weight, so what the rounding moves is which 64 the rescoring sees, docs/LOG.md).
#define VNNI_KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,fma")))

// xq: int8 [N, K]; d, xs: fp32 [N, G] (the scale per group and the exact sum of x over it)
VNNI_KERNEL void q8_groups(const at::BFloat16* x, int64_t N, int64_t K, int8_t* xq, float* d, float* xs) {
  const int64_t G = K / kGroup;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const at::BFloat16* p = x + n * K + g * kGroup;
      const __m512 a = bf16x16(p), b = bf16x16(p + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      d[n * G + g] = amax / 127.f;
      xs[n * G + g] = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
      const __m512 vi = _mm512_set1_ps(inv);
      const __m512i qa = _mm512_cvt_roundps_epi32(_mm512_mul_ps(a, vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i qb = _mm512_cvt_roundps_epi32(_mm512_mul_ps(b, vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + n * K + g * kGroup), _mm512_cvtsepi32_epi8(qa));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + n * K + g * kGroup + 16), _mm512_cvtsepi32_epi8(qb));
    }
}

// R rows x one block of 16 outputs. Chunks c and c + 1 of a group interleave by 16-bit words into one
// register whose lane o holds, low nibbles, q[o, 2c .. 2c + 3] and, high nibbles, q[o, 2c + 16 .. 2c + 19]:
// the four inputs vpdpbusd multiplies with four bytes of x broadcast.
template <int R, int C = (R <= 2 ? 2 : 1)>
VNNI_KERNEL void q8_rows_block(const int8_t* xq, int64_t K, const float* d, const float* xs, const uint8_t* qw,
                               const at::Half* sc, const at::BFloat16* bias, at::BFloat16* y, int64_t O) {
  const int64_t G = K / kGroup;
  const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
  __m512 acc[R];
  const __m512 b0 = bias ? bf16x16(bias) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) acc[r] = b0;
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* q = qw + g * 256;
    prefetch_group(q, sc + g * 32);
    __m512i dot[R][C];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) dot[r][j] = _mm512_setzero_si512();
    for (int c = 0; c < 8; c += 2) {
      const __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c * 32)));
      const __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c * 32 + 32)));
      const __m512i w = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
      const __m512i lo = _mm512_and_si512(w, nib), hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), nib);
      const int j = (c / 2) % C;
      for (int r = 0; r < R; ++r) {
        const int32_t* row = reinterpret_cast<const int32_t*>(xq + r * K + g * kGroup);
        dot[r][j] = _mm512_dpbusd_epi32(dot[r][j], lo, _mm512_set1_epi32(row[c / 2]));
        dot[r][j] = _mm512_dpbusd_epi32(dot[r][j], hi, _mm512_set1_epi32(row[c / 2 + 4]));
      }
    }
    const __m512 s = f16x16(sc + g * 32), m = f16x16(sc + g * 32 + 16);
    for (int r = 0; r < R; ++r) {
      __m512i t = dot[r][0];
      for (int j = 1; j < C; ++j) t = _mm512_add_epi32(t, dot[r][j]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(s, _mm512_set1_ps(d[r * G + g])), acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xs[r * G + g]), m, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_bf16x16(y + r * O, acc[r]);
}

using Q8RowsFn = void (*)(const int8_t*, int64_t, const float*, const float*, const uint8_t*, const at::Half*,
                          const at::BFloat16*, at::BFloat16*, int64_t);
constexpr Q8RowsFn kQ8Rows[kRowTile] = {q8_rows_block<1>, q8_rows_block<2>, q8_rows_block<3>, q8_rows_block<4>,
                                        q8_rows_block<5>, q8_rows_block<6>, q8_rows_block<7>, q8_rows_block<8>};

using RowsFn = void (*)(const at::BFloat16*, int64_t, const float*, const uint8_t*, const at::Half*,
                        const at::BFloat16*, at::BFloat16*, int64_t);
constexpr RowsFn kRows[kRowTile] = {rows_block<1>, rows_block<2>, rows_block<3>, rows_block<4>,
                                    rows_block<5>, rows_block<6>, rows_block<7>, rows_block<8>};

// Blocks [b0, b1) dequantised to bf16 into wt: [K, (b1 - b0) * 16], row k holding W[:, k].
KERNEL void dequant_blocks(const uint8_t* qw, const at::Half* sc, int64_t G, int64_t b0, int64_t b1, int64_t first,
                    int64_t ld, at::BFloat16* wt) {
  const __m512i low4 = _mm512_set1_epi16(0x000F), low16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* qb = qw + b * G * 256;
    const at::Half* sb = sc + b * G * 32;
    at::BFloat16* col = wt + (b - first) * kBlock;
    for (int64_t g = 0; g < G; ++g) {
      const __m512 s = f16x16(sb + g * 32), m = f16x16(sb + g * 32 + 16);
      for (int c = 0; c < 8; ++c) {
        __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + g * 256 + c * 32)));
        const __m512i halves[2] = {_mm512_and_si512(w, low4), _mm512_srli_epi16(w, 4)};  // pairs c and c + 8
        for (int h = 0; h < 2; ++h) {
          const int64_t k = g * kGroup + 2 * (c + 8 * h);
          __m512 even = _mm512_cvtepi32_ps(_mm512_and_si512(halves[h], low16));
          __m512 odd = _mm512_cvtepi32_ps(_mm512_srli_epi32(halves[h], 16));
          store_bf16x16(col + k * ld, _mm512_fmadd_ps(even, s, m));
          store_bf16x16(col + (k + 1) * ld, _mm512_fmadd_ps(odd, s, m));
        }
      }
    }
  }
}


// ---- many rows with AMX: the block's weights dequantised once into VNNI tiles, then tdpbf16ps ----

#define AMX_KERNEL __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,amx-tile,amx-bf16")))

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Block b's weights as bf16 B tiles: tile g, row p = the pairs (W[o, 32g + 2p], W[o, 32g + 2p + 1])
// of the 16 outputs o. (128 + q) comes out of the nibbles as bf16 bits, so the fp32 weight is one
// FMA: (128 + q) * scale + (min - 128 * scale).
KERNEL void dequant_tiles(const uint8_t* qb, const at::Half* sb, int64_t G, at::BFloat16* tiles) {
  const __m512i low4 = _mm512_set1_epi16(0x000F), offset = _mm512_set1_epi16(0x4300);
  const __m512i high16 = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  const __m512 c128 = _mm512_set1_ps(128.f);
  // cvtne2ps_pbh(odd, even) puts the 16 even weights below the 16 odd ones; this interleaves them
  const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t g = 0; g < G; ++g) {
    const __m512 s = f16x16(sb + g * 32), m128 = _mm512_fnmadd_ps(c128, s, f16x16(sb + g * 32 + 16));
    at::BFloat16* t = tiles + g * 512;
    for (int c = 0; c < 8; ++c) {
      __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + g * 256 + c * 32)));
      const __m512i halves[2] = {_mm512_ternarylogic_epi32(w, low4, offset, 0xEA),
                                 _mm512_or_si512(_mm512_srli_epi16(w, 4), offset)};  // pairs c and c + 8
      for (int h = 0; h < 2; ++h) {
        __m512 even = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(halves[h], 16)), s, m128);
        __m512 odd = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(halves[h], high16)), s, m128);
        __m512i bf = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
        _mm512_store_si512(reinterpret_cast<__m512i*>(t + (c + 8 * h) * 32), _mm512_permutexvar_epi16(pairs, bf));
      }
    }
  }
}

KERNEL void store_rows(const float* c, int rows, const at::BFloat16* bias, at::BFloat16* y, int64_t O) {
  const __m512 b = bias ? bf16x16(bias) : _mm512_setzero_ps();
  for (int m = 0; m < rows; ++m) store_bf16x16(y + m * O, _mm512_add_ps(_mm512_load_ps(c + m * 16), b));
}

// Blocks [b0, b1) for all rows; xp: [Np, K] with Np a multiple of 16 (rows past N are padding).
AMX_KERNEL void amx_blocks(const at::BFloat16* xp, int64_t N, int64_t K, const uint8_t* qw, const at::Half* sc,
                           const at::BFloat16* bias, at::BFloat16* y, int64_t O, int64_t b0, int64_t b1) {
  const int64_t G = K / kGroup, Np = (N + 15) / 16 * 16;
  TileConfig cfg;
  for (int t = 0; t < 3; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;  // tmm0: C fp32, tmm1: A bf16, tmm2: B bf16
  _tile_loadconfig(&cfg);
  thread_local std::vector<at::BFloat16> tiles_store;
  if (tiles_store.size() < size_t(G * 512 + 32)) tiles_store.resize(G * 512 + 32);
  at::BFloat16* tiles = reinterpret_cast<at::BFloat16*>((reinterpret_cast<uintptr_t>(tiles_store.data()) + 63) & ~uintptr_t(63));
  alignas(64) float c[16 * 16];
  for (int64_t b = b0; b < b1; ++b) {
    dequant_tiles(qw + b * G * 256, sc + b * G * 32, G, tiles);
    for (int64_t r0 = 0; r0 < Np; r0 += 16) {
      _tile_zero(0);
      for (int64_t g = 0; g < G; ++g) {
        _tile_loadd(1, xp + r0 * K + g * kGroup, K * 2);
        _tile_loadd(2, tiles + g * 512, 64);
        _tile_dpbf16ps(0, 1, 2);
      }
      _tile_stored(0, c, 64);
      store_rows(c, int(std::min<int64_t>(16, N - r0)), bias ? bias + b * kBlock : nullptr, y + r0 * O + b * kBlock, O);
    }
  }
  _tile_release();
}

bool amx_ready() {  // Linux hands out the AMX tile state only on request
  static const bool ok = [] {
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
    constexpr long kReqPerm = 0x1023, kTileData = 18;
    return syscall(SYS_arch_prctl, kReqPerm, kTileData) == 0;
  }();
  return ok;
}

// ---- AVX2 + FMA (no AVX-512 BF16): the same two paths in fp32, 8 outputs a register ----
// Few rows (up to kFewRows2): each chunk's nibbles become fp32 weights in registers, q * scale + min (the
// twin's arithmetic, no weight rounded), and meet up to 4 rows of x (widened once per call) in FMAs.
// More rows: chunks of the weights dequantised to fp32 [K, chunk] and multiplied by at::mm in fp32
// (without native bf16, a bf16 at::mm is emulated and several times slower, docs/LOG.md).

template <int R>
AVX2_KERNEL void rows_block2(const float* x, int64_t K, const uint8_t* qw, const at::Half* sc, const at::BFloat16* bias,
                             at::BFloat16* y, int64_t O) {
  using namespace macaronic::avx2;
  constexpr int C = R == 1 ? 2 : 1;  // chains per row and half: one row alone would wait on the FMA's latency
  const int64_t G = K / kGroup;
  const __m256i low4 = _mm256_set1_epi16(0x000F), low16 = _mm256_set1_epi32(0xFFFF);
  __m256 acc[R][2][C];
  for (int r = 0; r < R; ++r)
    for (int hf = 0; hf < 2; ++hf)
      for (int j = 0; j < C; ++j) acc[r][hf][j] = j == 0 && bias ? load8(bias + 8 * hf) : _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* q = qw + g * 256;
    for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(q) + kAhead + 64 * l, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(sc + g * 32) + kAhead / 4, _MM_HINT_T0);
    const __m256 s[2] = {load8(sc + g * 32), load8(sc + g * 32 + 8)};
    const __m256 m[2] = {load8(sc + g * 32 + 16), load8(sc + g * 32 + 24)};
    for (int c = 0; c < 8; ++c)
      for (int hf = 0; hf < 2; ++hf) {  // outputs 8 * hf .. 8 * hf + 7: bytes 16 * hf .. of the chunk
        const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c * 32 + 16 * hf)));
        const __m256i nib[2] = {_mm256_and_si256(w, low4), _mm256_srli_epi16(w, 4)};  // pairs c and c + 8
        for (int h = 0; h < 2; ++h) {
          const int64_t k = g * kGroup + 2 * (c + 8 * h);
          const __m256 we = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(nib[h], low16)), s[hf], m[hf]);
          const __m256 wo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(nib[h], 16)), s[hf], m[hf]);
          for (int r = 0; r < R; ++r) {
            __m256& a = acc[r][hf][h % C];
            a = _mm256_fmadd_ps(we, _mm256_broadcast_ss(x + r * K + k), a);
            a = _mm256_fmadd_ps(wo, _mm256_broadcast_ss(x + r * K + k + 1), a);
          }
        }
      }
  }
  for (int r = 0; r < R; ++r)
    for (int hf = 0; hf < 2; ++hf) {
      __m256 v = acc[r][hf][0];
      for (int j = 1; j < C; ++j) v = _mm256_add_ps(v, acc[r][hf][j]);
      store8(y + r * O + 8 * hf, v);
    }
}

using RowsFn2 = void (*)(const float*, int64_t, const uint8_t*, const at::Half*, const at::BFloat16*, at::BFloat16*, int64_t);
constexpr int kRowTile2 = 4;  // AVX2 has 16 registers
// Up to this many rows the register kernel beats fp32 chunks for at::mm (a quiet 2-core AVX2 EPYC, one layer
// of the default base's four projection shapes, scripts/avx2_int4_paths.py, docs/bench/int4-paths-avx2.json:
// 9.5 against 11.6 ms at 16 rows, about even at 28-32, 26 against 15 at 48; docs/LOG.md, fifteenth session)
constexpr int64_t kFewRows2 = 32;
constexpr RowsFn2 kRows2[kRowTile2] = {rows_block2<1>, rows_block2<2>, rows_block2<3>, rows_block2<4>};

// Blocks [b0, b1) dequantised to fp32 into wt: [K, (b1 - b0) * 16], row k holding W[:, k].
AVX2_KERNEL void dequant_blocks2(const uint8_t* qw, const at::Half* sc, int64_t G, int64_t b0, int64_t b1, int64_t first,
                                 int64_t ld, float* wt) {
  using namespace macaronic::avx2;
  const __m256i low4 = _mm256_set1_epi16(0x000F), low16 = _mm256_set1_epi32(0xFFFF);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* qb = qw + b * G * 256;
    const at::Half* sb = sc + b * G * 32;
    float* col = wt + (b - first) * kBlock;
    for (int64_t g = 0; g < G; ++g)
      for (int hf = 0; hf < 2; ++hf) {
        const __m256 s = load8(sb + g * 32 + 8 * hf), m = load8(sb + g * 32 + 16 + 8 * hf);
        for (int c = 0; c < 8; ++c) {
          const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qb + g * 256 + c * 32 + 16 * hf)));
          const __m256i nib[2] = {_mm256_and_si256(w, low4), _mm256_srli_epi16(w, 4)};
          for (int h = 0; h < 2; ++h) {
            const int64_t k = g * kGroup + 2 * (c + 8 * h);
            store8(col + k * ld + 8 * hf, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(nib[h], low16)), s, m));
            store8(col + (k + 1) * ld + 8 * hf, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(nib[h], 16)), s, m));
          }
        }
      }
  }
}

at::Tensor int4_linear_avx2(const at::Tensor& x, const uint8_t* q, const at::Half* s, const std::optional<at::Tensor>& bias,
                            int64_t G, int64_t n_blocks, int64_t path) {
  const int64_t N = x.size(0), K = x.size(1), O = n_blocks * kBlock;
  if (path == 0) path = N <= kFewRows2 ? 1 : 3;
  at::Tensor xf = x.to(at::kFloat);
  const float* xp = xf.data_ptr<float>();
  if (path == 1) {
    at::Tensor y = at::empty({N, O}, x.options());
    const at::BFloat16* bp = bias ? bias->data_ptr<at::BFloat16>() : nullptr;
    at::BFloat16* yp = y.data_ptr<at::BFloat16>();
    macaronic::parallel_for(0, n_blocks, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (int64_t r0 = 0; r0 < N; r0 += kRowTile2) {
          const int rows = int(std::min<int64_t>(kRowTile2, N - r0));
          kRows2[rows - 1](xp + r0 * K, K, q + b * G * 256, s + b * G * 32, bp ? bp + b * kBlock : nullptr,
                           yp + r0 * O + b * kBlock, O);
        }
    });
    return y;
  }
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n_blocks, kChunkBytes / (K * 4 * kBlock)));
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(K * chunk * kBlock)) scratch.resize(K * chunk * kBlock);
  at::Tensor y = at::empty({N, O}, x.options());
  at::Tensor bf = bias ? bias->to(at::kFloat) : at::Tensor();
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = std::min(n_blocks, c0 + chunk), width = (c1 - c0) * kBlock;
    float* wp = scratch.data();
    macaronic::parallel_for(c0, c1, 4, [&](int64_t b0, int64_t b1) { dequant_blocks2(q, s, G, b0, b1, c0, width, wp); });
    at::Tensor w = at::from_blob(wp, {K, width}, xf.options());
    at::Tensor part = bias ? at::addmm(bf.narrow(0, c0 * kBlock, width), xf, w) : at::mm(xf, w);
    y.narrow(1, c0 * kBlock, width).copy_(part);
  }
  return y;
}

void check(const at::Tensor& x, const at::Tensor& qw, const at::Tensor& sc, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kBFloat16 && x.is_contiguous(), "int4_linear: x must be a contiguous bf16 [N, K]");
  TORCH_CHECK(qw.dim() == 4 && qw.scalar_type() == at::kByte && qw.is_contiguous() && qw.size(2) == 8 && qw.size(3) == 32,
              "int4_linear: qw must be a contiguous uint8 [O/16, G, 8, 32]");
  TORCH_CHECK(sc.dim() == 4 && sc.scalar_type() == at::kHalf && sc.is_contiguous() && sc.size(0) == qw.size(0) &&
                  sc.size(1) == qw.size(1) && sc.size(2) == 2 && sc.size(3) == 16,
              "int4_linear: sc must be a contiguous fp16 [O/16, G, 2, 16]");
  TORCH_CHECK(x.size(1) == qw.size(1) * kGroup, "int4_linear: x has ", x.size(1), " inputs, the weight ", qw.size(1) * kGroup);
  if (bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == qw.size(0) * kBlock && bias->scalar_type() == at::kBFloat16 &&
                    bias->is_contiguous(), "int4_linear: bias must be a contiguous bf16 [O]");
  }
}

bool amx_ready();
bool int4_q8();

// path: 0 picks by the row count (docs/LOG.md: the register kernel up to 4 rows with AMX, where the two
// are even on SmolLM2's shapes, up to kFewRowsWide without), 1 the register kernel, 2 AMX tiles,
// 3 dequantise + at::mm, 4 the register kernel on x rounded to 8 bits (VNNI), 5 as 0 but 4 where 0 takes 1
// (and the CPU has VNNI; else 1): a model quantized with x rounded (engine/quant.py, MACARONIC_INT4_X) asks 5. The paths round differently (AMX and mm see bf16 weights), so a sequence's
// logits can differ in the last bits between a batch of up to 4 (128 without AMX) rows and a larger one.
at::Tensor int4_linear(const at::Tensor& x, const at::Tensor& qw, const at::Tensor& sc, const std::optional<at::Tensor>& bias,
                       int64_t path) {
  check(x, qw, sc, bias);
  const int64_t N = x.size(0), K = x.size(1), G = qw.size(1), n_blocks = qw.size(0), O = n_blocks * kBlock;
  TORCH_CHECK(path >= 0 && path <= 5, "int4_linear: path must be 0..5");
  TORCH_CHECK(path != 2 || amx_ready(), "int4_linear: this CPU or kernel gives no AMX");
  TORCH_CHECK(path != 4 || (macaronic::wide() && macaronic::cpu_avx512_vnni()),
              "int4_linear: path 4 (x rounded to 8 bits) needs AVX-512 BF16 and VNNI");
  const uint8_t* q = qw.data_ptr<uint8_t>();
  const at::Half* s = sc.data_ptr<at::Half>();
  if (N == 0) return at::empty({0, O}, x.options());
  const bool x8 = path == 5 && int4_q8();  // 5: 0's choice, with x rounded where it would take the register kernel
  if (path == 5) path = 0;
  if (!macaronic::wide()) return int4_linear_avx2(x, q, s, bias, G, n_blocks, path);
  if (path == 0) path = amx_ready() ? (N <= 4 ? 1 : 2) : (N <= kFewRowsWide ? 1 : 3), path = path == 1 && x8 ? 4 : path;
  if (path == 1) {
    at::Tensor y = at::empty({N, O}, x.options());
    at::Tensor xs = at::empty({N, G}, x.options().dtype(at::kFloat));
    group_sums(x.data_ptr<at::BFloat16>(), N, K, xs.data_ptr<float>());
    const at::BFloat16* xp = x.data_ptr<at::BFloat16>();
    const float* xsp = xs.data_ptr<float>();
    const at::BFloat16* bp = bias ? bias->data_ptr<at::BFloat16>() : nullptr;
    at::BFloat16* yp = y.data_ptr<at::BFloat16>();
    macaronic::parallel_for(0, n_blocks, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (int64_t r0 = 0; r0 < N; r0 += kRowTile) {
          const int rows = int(std::min<int64_t>(kRowTile, N - r0));
          kRows[rows - 1](xp + r0 * K, K, xsp + r0 * G, q + b * G * 256, s + b * G * 32, bp ? bp + b * kBlock : nullptr,
                          yp + r0 * O + b * kBlock, O);
        }
    });
    return y;
  }
  if (path == 4) {
    at::Tensor y = at::empty({N, O}, x.options());
    at::Tensor xq = at::empty({N, K}, x.options().dtype(at::kChar));
    at::Tensor dx = at::empty({N, G}, x.options().dtype(at::kFloat)), xs = at::empty({N, G}, x.options().dtype(at::kFloat));
    q8_groups(x.data_ptr<at::BFloat16>(), N, K, xq.data_ptr<int8_t>(), dx.data_ptr<float>(), xs.data_ptr<float>());
    const int8_t* xqp = xq.data_ptr<int8_t>();
    const float *dp = dx.data_ptr<float>(), *xsp = xs.data_ptr<float>();
    const at::BFloat16* bp = bias ? bias->data_ptr<at::BFloat16>() : nullptr;
    at::BFloat16* yp = y.data_ptr<at::BFloat16>();
    macaronic::parallel_for(0, n_blocks, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (int64_t r0 = 0; r0 < N; r0 += kRowTile) {
          const int rows = int(std::min<int64_t>(kRowTile, N - r0));
          kQ8Rows[rows - 1](xqp + r0 * K, K, dp + r0 * G, xsp + r0 * G, q + b * G * 256, s + b * G * 32,
                            bp ? bp + b * kBlock : nullptr, yp + r0 * O + b * kBlock, O);
        }
    });
    return y;
  }
  if (path == 2) {
    at::Tensor xp = N % 16 ? at::cat({x, x.new_zeros({16 - N % 16, K})}) : x;
    at::Tensor y = at::empty({N, O}, x.options());
    const at::BFloat16* bp = bias ? bias->data_ptr<at::BFloat16>() : nullptr;
    const at::BFloat16* xpp = xp.data_ptr<at::BFloat16>();
    at::BFloat16* yp = y.data_ptr<at::BFloat16>();
    macaronic::parallel_for(0, n_blocks, 4, [&](int64_t b0, int64_t b1) { amx_blocks(xpp, N, K, q, s, bp, yp, O, b0, b1); });
    return y;
  }
  // many rows without AMX: dequantise chunks of output blocks to bf16 [K, chunk] and let at::mm run them. The
  // chunk lives in a per-thread buffer kept between calls (a fresh allocation page-faults every call).
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n_blocks, kChunkBytes / (K * 2 * kBlock)));
  thread_local std::vector<at::BFloat16> scratch;
  if (scratch.size() < size_t(K * chunk * kBlock)) scratch.resize(K * chunk * kBlock);
  at::Tensor y = chunk == n_blocks ? at::Tensor() : at::empty({N, O}, x.options());
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = std::min(n_blocks, c0 + chunk), width = (c1 - c0) * kBlock;
    at::BFloat16* wp = scratch.data();
    macaronic::parallel_for(c0, c1, 4, [&](int64_t b0, int64_t b1) { dequant_blocks(q, s, G, b0, b1, c0, width, wp); });
    at::Tensor w = at::from_blob(wp, {K, width}, x.options());
    at::Tensor part = bias ? at::addmm(bias->narrow(0, c0 * kBlock, width), x, w) : at::mm(x, w);
    if (chunk == n_blocks) return part;
    y.narrow(1, c0 * kBlock, width).copy_(part);
  }
  return y;
}

bool int4_supported() { return macaronic::cpu_avx512_bf16() || macaronic::cpu_avx2(); }

bool int4_wide() { return macaronic::wide(); }

bool int4_q8() { return macaronic::wide() && macaronic::cpu_avx512_vnni(); }  // path 4 runs  // the AVX-512 kernels (else the AVX2 twins)

// int4_linear plus the LoRA delta of csrc/lora.cpp in one call: a projection's one dispatch.
at::Tensor int4_linear_lora(const at::Tensor& x, const at::Tensor& qw, const at::Tensor& sc,
                            const std::optional<at::Tensor>& bias, const at::Tensor& A, at::TensorList Bs,
                            const at::Tensor& slots, int64_t path) {
  at::Tensor y = int4_linear(x, qw, sc, bias, path);
  macaronic::lora_delta_into(y, x, A, Bs, slots);
  return y;
}

}  // namespace

namespace macaronic {
// For csrc/decode.cpp: the projection call the Python path makes (path 0 or 5: picked by the row count).
at::Tensor int4_matmul(const at::Tensor& x, const at::Tensor& qw, const at::Tensor& sc, const std::optional<at::Tensor>& bias,
                       int64_t path) {
  return int4_linear(x, qw, sc, bias, path);
}
}  // namespace macaronic

TORCH_LIBRARY(macaronic, m) {
  m.def("int4_linear(Tensor x, Tensor qw, Tensor sc, Tensor? bias, int path=0) -> Tensor", &int4_linear);
  m.def("int4_linear_lora(Tensor x, Tensor qw, Tensor sc, Tensor? bias, Tensor A, Tensor[] Bs, Tensor slots, int path=0) -> Tensor",
        &int4_linear_lora);
  m.def("int4_supported() -> bool", &int4_supported);
  m.def("amx_supported() -> bool", &amx_ready);
  m.def("wide_supported() -> bool", &int4_wide);
  m.def("q8_supported() -> bool", &int4_q8);
}
