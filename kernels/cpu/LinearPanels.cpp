//===- LinearPanels.cpp - linear() over a weight stored in panels ---------===//
//
// A panel weight (Kernels.h, docs/design-panel-gemm.md) holds element c of
// kPanelRows = 8 consecutive rows in one 8-lane vector, so a register holds
// eight outputs and x is broadcast a scalar at a time. Each output is summed
// in one order in every path: acc = 0, then acc = fma(x[c], w[c], acc) for
// c = 0 .. k - 1, then acc + bias. Partial sums stored and reloaded between
// chunks of k are exact, and so is the conversion of bf16 and f16, so the
// result does not depend on the batch, the path, the thread count or the
// instruction set: the portable build runs the same sequence with std::fma.
//
// A work item is a token block (kTokens) of up to kPanelItemRows rows.
// - One token: the AVX2 item runs 8 panels at once: 8 independent chains,
//   8 sequential streams.
// - More: tiles of up to 6 tokens and 2-4 panels (about 12 sums) over
//   chunks of kPanelChunk elements; the tokens come in groups as even as
//   they can be. x is broadcast straight from its rows: packing it per
//   6-token group for one stream of broadcasts cost more than it saved
//   when each item packed its block's x again (so did copying the group's
//   rows to a padded stride, 0.93x at 4-16 tokens an expert). Each tile
//   asks for the next tile's panel lines as it goes (tileAvx2).
// Against the row layout's tiles (make bench-ab-kernels --b-panels, the
// routed experts' GEMMs, 2 threads, 2-core Zen 3): 1.02-1.17x from 1 to 8
// tokens an expert, 1.33x at 16, 1.16x for a batch of 64 routed top-8,
// 1.17-1.20x at 128 (bf16; f32 1.34x); whole bf16 models, repacked at load
// by a throwaway patch, ran a 512-token prefill 1.13-1.16x and a batch of
// 64 1.15-1.24x as fast (docs/design-panel-gemm.md).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/LinearDetail.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace moe::cpu::detail {
namespace {

constexpr int64_t kGroupTokens = 6;  // tokens of a tile at most (2 panels x 6 sums)
// Elements of k a tile sweeps between its stores: an item's 8 panels of
// 1024 bf16 (128 KiB; f32 256 KiB) stay in a Zen 3 core's 512 KiB L2 for the
// item's other token groups. Against 256 (make bench-ab-kernels AB_FLAGS=
// "--a-panels --b-panels", 2 threads, 2-core Zen 3, bf16, hidden 1024):
// 1.08x at 8 tokens an expert, 1.06x at 16, 1.08x at 64, 1.10x for a batch
// of 64 top-8; hidden 2048: 1.04-1.06x (2048 there: 0.97-1.12x, not kept);
// f32 1.02-1.03x; 64 and 128 were slower (0.90-0.96x).
constexpr int64_t kPanelChunk = 1024;

// The panel that holds row `row` (a multiple of kPanelRows) of w.
const char *panelOf(const Weight &w, int64_t row) {
  return static_cast<const char *>(w.data) + bytesOf(w.type, size_t(row * w.panelCols));
}

// The portable build: the definition, element by element (Weight::at
// finds each in its panel).
void itemPortable(const Item &it) {
  for (int64_t t = 0; t < it.tokens; ++t)
    for (int64_t r = it.row[0]; r < it.row[0] + it.rows; ++r) {
      const float *x = it.xRow(t);
      float acc = 0.0f;
      for (int64_t c = 0; c < it.k; ++c)
        acc = std::fma(x[c], it.w.at(size_t(r * it.k + c)), acc);
      it.out[t * it.n + r] = acc + it.bias[r];
    }
}

// --- AVX2 + FMA ---

// Elements [c, c + 1) of a panel (8 rows) as f32.
template <WeightType W>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 panelStep(const char *panel,
                                                                            int64_t c) {
  return load8<W>(panel + bytesOf(W, size_t(c * kPanelRows)));
}

// NP panels x T tokens over elements [0, len) of a chunk (one token: up to
// 8 panels, whose vectors are not held: 8 held beside 8 sums spilled two of
// them): x_t[c] at
// x[t][c]; the sums of token t, panel j are out[t * n + 8 j ..],
// zero before the first chunk (`first`) and plus bias after the last (bias
// not null). With more than one token, each line of the panels `next`
// bytes further on (the next tile's, or past the item's last panel the
// next item's) is asked for as the line at the same place is reached: a
// tile reads only NP streams, too few to keep memory busy, and the next
// tile's streams then arrive alongside. Against none (make
// bench-ab-kernels --a-panels --b-panels, 2 threads, 2-core Zen 3, bf16):
// 1.20-1.29x at 4 tokens an expert, 1.13-1.20x at 8, 1.02-1.07x at 16,
// 0.98x at 64 (noise), 1.05-1.11x for a batch of 64 top-8; whole batched
// decode steps 1.09-1.15x at batch 32, 1.13-1.34x at 64. Asking only for
// the first token group's lines (the later groups find them in L2) was
// 0.94x at 8 tokens, 1.04x at 16.
template <WeightType W, int NP, int T>
__attribute__((target("avx2,fma,f16c"))) void
tileAvx2(const float *const *x, const char *const *panel, int64_t len, float *out, int64_t n,
         bool first, const float *bias, int64_t next) {
  __m256 a[T][NP];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NP; ++j)
      a[t][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + t * n + 8 * j);
  for (int64_t c = 0; c < len; ++c) {
    if constexpr (T == 1) { // each panel's vector used once: converted as it is used
      const __m256 b = _mm256_broadcast_ss(x[0] + c);
#pragma GCC unroll 8
      for (int j = 0; j < NP; ++j)
        a[0][j] = _mm256_fmadd_ps(b, panelStep<W>(panel[j], c), a[0][j]);
      continue;
    }
    constexpr int64_t stepBytes = int64_t(bytesOf(W, kPanelRows));
    if ((c * stepBytes) % 64 == 0) // the first step of a cache line
#pragma GCC unroll 8
      for (int j = 0; j < NP; ++j)
        _mm_prefetch(panel[j] + c * stepBytes + next, _MM_HINT_T0);
    __m256 w[NP];
#pragma GCC unroll 8
    for (int j = 0; j < NP; ++j)
      w[j] = panelStep<W>(panel[j], c);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 b = _mm256_broadcast_ss(x[t] + c);
#pragma GCC unroll 8
      for (int j = 0; j < NP; ++j)
        a[t][j] = _mm256_fmadd_ps(b, w[j], a[t][j]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NP; ++j)
      _mm256_storeu_ps(out + t * n + 8 * j,
                       bias ? _mm256_add_ps(a[t][j], _mm256_loadu_ps(bias + 8 * j)) : a[t][j]);
}

// f(std::integral_constant<int, T>()) for T = count in 1 .. kGroupTokens.
template <class F> void withTokens(int64_t count, F &&f) {
  static_assert(kGroupTokens == 6, "the cases below");
  switch (count) {
  case 1: return f(std::integral_constant<int, 1>());
  case 2: return f(std::integral_constant<int, 2>());
  case 3: return f(std::integral_constant<int, 3>());
  case 4: return f(std::integral_constant<int, 4>());
  case 5: return f(std::integral_constant<int, 5>());
  default: return f(std::integral_constant<int, 6>());
  }
}

// Panels of a tile of T tokens: about 12 sums, with the panels' vectors,
// a broadcast x and the bf16 shuffle's mask in the 16 registers (2 x 3
// tiles ran 3 tokens an expert at 0.88x the speed of the row tiles: six
// multiply-add chains cannot hide their latency).
constexpr int64_t tilePanels(int T) { return T == 1 ? 4 : T == 2 ? 4 : T == 3 ? 3 : 2; }

// f(std::integral_constant<int, NP>()) for NP = count in 1 .. Max (<= 4):
// only the tiles a token count uses are built.
template <int64_t Max, class F> void withPanels(int64_t count, F &&f) {
  static_assert(Max >= 1 && Max <= 4, "the cases below");
  switch (count) {
  case 4:
    if constexpr (Max >= 4)
      return f(std::integral_constant<int, 4>());
    break;
  case 3:
    if constexpr (Max >= 3)
      return f(std::integral_constant<int, 3>());
    break;
  case 2:
    if constexpr (Max >= 2)
      return f(std::integral_constant<int, 2>());
    break;
  }
  return f(std::integral_constant<int, 1>());
}

template <WeightType W> void itemAvx2(const Item &it) {
  const int64_t row0 = it.row[0], panels = it.rows / kPanelRows;
  const char *panel[kPanelItemRows / kPanelRows];
  for (int64_t j = 0; j < panels; ++j)
    panel[j] = panelOf(it.w, row0 + j * kPanelRows);
  const int64_t panelBytes = int64_t(bytesOf(W, size_t(kPanelRows * it.w.panelCols)));
  // One token: all 8 panels at once, over all of k: eight independent
  // chains, each panel one sequential stream. No software prefetch: the
  // hardware follows contiguous panels, and asking for each line 256 B to
  // 2 KB ahead ran the experts' one-token GEMVs at 0.89-1.10x the speed
  // without (make bench-ab-kernels --b-panels, 2-core Zen 3).
  constexpr int64_t kAll = kPanelItemRows / kPanelRows;
  if (it.tokens == 1 && panels == kAll) {
    const float *x = it.xRow(0);
    return tileAvx2<W, kAll, 1>(&x, panel, it.k, it.out + row0, it.n, true, it.bias + row0, 0);
  }
  for (int64_t c0 = 0, len; c0 < it.k; c0 += len) {
    len = std::min(kPanelChunk, it.k - c0);
    const bool first = c0 == 0, last = c0 + len == it.k;
    const char *at[kPanelItemRows / kPanelRows];
    for (int64_t j = 0; j < panels; ++j)
      at[j] = panel[j] + bytesOf(W, size_t(c0 * kPanelRows));
    // Groups of at most kGroupTokens, as even as they come (8 tokens as 4 +
    // 4, not 6 + 2: a tile of 2 tokens has 4 chains of multiply-adds, too
    // few to hide their latency).
    const int64_t groups = (it.tokens + kGroupTokens - 1) / kGroupTokens;
    for (int64_t g = 0, t0 = 0, size; g < groups; ++g, t0 += size) {
      size = it.tokens / groups + (g < it.tokens % groups);
      const float *x[kGroupTokens];
      for (int64_t t = 0; t < size; ++t)
        x[t] = it.xRow(t0 + t) + c0;
      withTokens(size, [&](auto T) {
        constexpr int64_t step = tilePanels(T.value);
        for (int64_t j = 0; j < panels; j += step) {
          float *out = it.out + t0 * it.n + row0 + j * kPanelRows;
          const float *bias = last ? it.bias + row0 + j * kPanelRows : nullptr;
          withPanels<step>(std::min(step, panels - j), [&](auto NP) {
            tileAvx2<W, NP.value, T.value>(x, at + j, len, out, it.n, first, bias,
                                           NP.value * panelBytes);
          });
        }
      });
    }
  }
}

template <WeightType W> constexpr bool panelType() {
  return W == WeightType::F32 || W == WeightType::BF16 || W == WeightType::F16;
}

} // namespace

void panelItem(const Item &it) {
  withType(it.w.type, [&](auto type) {
    constexpr WeightType W = type.value;
    if constexpr (panelType<W>()) {
      if (useAvx2())
        itemAvx2<W>(it);
      else
        itemPortable(it);
    }
  });
}

} // namespace moe::cpu::detail
