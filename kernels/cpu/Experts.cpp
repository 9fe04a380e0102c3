//===- Experts.cpp - routed SwiGLU experts --------------------------------===//
//
// Three parts. dispatch: the (token, pick) slots are counting-sorted by
// expert (the permute) and their token rows gathered into one buffer,
// expert by expert; experts() on one rank skips the copy, its grouped GEMMs
// reading each row's token from x (LinearProblem::xRows). expertRows (rows
// grouped by expert, as dispatch leaves them, or regrouped when they come
// from several ranks), in chunks of experts of bounded rows: grouped, the
// gate/up projections of a chunk's experts run as one grouped GEMM
// (linearGroup: one parallel region, threads sharing the row blocks of
// every expert), then SwiGLU over its rows, then the down projections as a
// second grouped GEMM; ungrouped, each projection of each expert is its own
// GEMM. combine: each token adds its weighted rows in
// ascending expert id, always-on (shared) experts last with weight 1: one
// fixed order (that of the transformers loop over experts) whatever the
// batch, the thread count or where the rows were computed. Always-on
// experts take the ids after the routed ones.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/PrefetchLines.h"
#include "kernels/cpu/Scratch.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Vector.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace moe::cpu {

using detail::scratch;

namespace {

/// dispatch's permute without its copy: slotOf[row] is the expert of each
/// row, rowOf[slot] the row of each slot and, when asked for, tokenOf[row]
/// the token of each row. Returns where each expert's rows start (one more
/// entry than experts: the last is the row count).
std::vector<int64_t> permute(int64_t tokens, const int32_t *indices, int64_t topK,
                             int64_t numExperts, int64_t shared, int32_t *slotOf, int32_t *rowOf,
                             int32_t *tokenOf) {
  const int64_t picks = topK + shared, slots = tokens * picks;
  auto expertOf = [&](int64_t s) {
    const int64_t j = s % picks;
    return j < topK ? int64_t(indices[s / picks * topK + j]) : numExperts + j - topK;
  };
  std::vector<int64_t> start(size_t(numExperts + shared + 1), 0);
  for (int64_t s = 0; s < slots; ++s)
    ++start[size_t(expertOf(s) + 1)];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = expertOf(s), row = next[size_t(e)]++;
    rowOf[s] = int32_t(row);
    slotOf[row] = int32_t(e);
    if (tokenOf)
      tokenOf[row] = int32_t(s / picks);
  }
  return start;
}

/// Bytes of gate/up and SwiGLU rows expertGroups keeps at once: the
/// experts run in chunks of about this many rows' worth (an expert's rows
/// are never split), so that a long prefill's intermediate rows (12,288
/// rows of 3 x 1,408 floats for 2,048 tokens of DeepSeek-V2-Lite's shape:
/// 200 MiB) do not add to peak memory. Each chunk's rows are still
/// thousands, so the grouped GEMMs keep their size.
constexpr int64_t kExpertScratchBytes = int64_t(16) << 20;

/// y[r] = expert e's SwiGLU of row r for the rows of each expert e, which
/// owns rows [start[e], start[e + 1]); row r is x + xRows[r] * hidden, or
/// x + r * hidden without xRows (the grouped GEMMs read it where it is:
/// LinearProblem::xRows). Experts run in chunks (kExpertScratchBytes),
/// each as below; the results do not depend on the chunks.
void expertGroups(const float *x, const int32_t *xRows, const std::vector<int64_t> &start,
                  int64_t hidden, int64_t inter, const ExpertWeights &w, float *y) {
  const int64_t all = int64_t(start.size()) - 1, count = start.back();
  int64_t largest = 0;
  for (int64_t e = 0; e < all; ++e)
    largest = std::max(largest, start[size_t(e + 1)] - start[size_t(e)]);
  const int64_t cap = std::min(
      count, std::max(largest, kExpertScratchBytes / (3 * inter * int64_t(sizeof(float)))));
  thread_local std::vector<float> gateUpBuf, actBuf;
  float *gateUp = scratch(gateUpBuf, cap * 2 * inter), *act = scratch(actBuf, cap * inter);
  // Grouped: every expert's projections in one parallel region; else one
  // after another, each its own (the same results).
  auto run = [&](const std::vector<LinearProblem> &group) {
    if (w.grouped)
      return linearGroup(group.data(), group.size());
    for (const LinearProblem &p : group)
      linearGroup(&p, 1);
  };
  std::vector<LinearProblem> group;
  for (int64_t e0 = 0, e1; e0 < all; e0 = e1) {
    // The chunk: experts [e0, e1), rows [base, start[e1]).
    const int64_t base = start[size_t(e0)];
    e1 = e0 + 1;
    while (e1 < all && start[size_t(e1 + 1)] - base <= cap)
      ++e1;
    const int64_t rows = start[size_t(e1)] - base;
    if (rows == 0)
      continue;
    // gateUp row r: [gate | up] of row base + r.
    group.clear();
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t n = start[size_t(e + 1)] - start[size_t(e)], r0 = start[size_t(e)];
      if (n == 0)
        continue;
      const float *xe = xRows ? x : x + r0 * hidden;
      const int32_t *rowsOfE = xRows ? xRows + r0 : nullptr;
      float *gu = gateUp + (r0 - base) * 2 * inter;
      if (w.gateUp) {
        group.push_back({xe, n, hidden, w.gateUp->offset(e * 2 * inter * hidden), 2 * inter,
                         nullptr, gu, rowsOfE});
      } else {
        // Separate gate and up: [n, inter] each, one after the other.
        group.push_back(
            {xe, n, hidden, w.gate.offset(e * inter * hidden), inter, nullptr, gu, rowsOfE});
        group.push_back({xe, n, hidden, w.up.offset(e * inter * hidden), inter, nullptr,
                         gu + n * inter, rowsOfE});
      }
    }
    run(group);
    // Fused, every expert's rows are [gate | up]: one SwiGLU over all of
    // them shares the threads (an expert's few rows alone run on one thread).
    if (w.gateUp)
      siluMul(gateUp, gateUp + inter, rows, inter, 2 * inter, act);
    else
      for (int64_t e = e0; e < e1; ++e) {
        const int64_t n = start[size_t(e + 1)] - start[size_t(e)], r0 = start[size_t(e)] - base;
        const float *gu = gateUp + r0 * 2 * inter;
        if (n > 0)
          siluMul(gu, gu + n * inter, n, inter, inter, act + r0 * inter);
      }
    group.clear();
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t n = start[size_t(e + 1)] - start[size_t(e)], r0 = start[size_t(e)];
      if (n > 0)
        group.push_back({act + (r0 - base) * inter, n, inter, w.down.offset(e * hidden * inter),
                         hidden, nullptr, y + r0 * hidden});
    }
    run(group);
  }
}

} // namespace

void dispatch(const float *x, int64_t tokens, int64_t hidden, const int32_t *indices, int64_t topK,
              int64_t numExperts, int64_t shared, float *rows, int32_t *slotOf, int32_t *rowOf) {
  permute(tokens, indices, topK, numExperts, shared, slotOf, rowOf, nullptr);
  // The gather (a prefill's is tens of MB) shared between the threads.
  const int64_t picks = topK + shared;
  forRows(tokens * picks, hidden, [&](int64_t s) {
    std::copy_n(x + s / picks * hidden, hidden, rows + int64_t(rowOf[s]) * hidden);
  });
}

void expertRows(const float *rows, const int32_t *slotOf, int64_t count, int64_t hidden,
                int64_t inter, const ExpertWeights &w, int64_t numSlots,
                const ExpertShare &share, float *y) {
  // The stack index of each row's expert, or -1 for another rank's row.
  std::vector<int64_t> own(static_cast<size_t>(count));
  // Rows of each expert so far, earlier calls' included.
  std::vector<uint64_t> seen(share.stack.size(), 0);
  if (share.seen)
    seen = *share.seen;
  for (int64_t r = 0; r < count; ++r) {
    const size_t e = size_t(slotOf[r]);
    if (share.stack.empty()) {
      own[size_t(r)] = int64_t(e);
      continue;
    }
    const uint64_t n = seen[e]++;
    own[size_t(r)] =
        share.stack[e] >= 0 && n % uint64_t(share.replicas[e]) == uint64_t(share.replica[e])
            ? share.stack[e]
            : -1;
  }
  if (share.seen)
    *share.seen = std::move(seen);
  std::vector<int64_t> start(size_t(numSlots + 1), 0);
  bool allHeld = true, ascending = true;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t s = own[size_t(r)];
    allHeld &= s >= 0;
    ascending &= r == 0 || s >= own[size_t(r - 1)];
    if (s >= 0)
      ++start[size_t(s + 1)];
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  if (allHeld && ascending)
    return expertGroups(rows, nullptr, start, hidden, inter, w, y);
  // Rows from several ranks (each rank's run ascends, the whole does not),
  // or rows other ranks compute: group this rank's (stably), compute, put
  // each result back in its place, and zero the others.
  const int64_t mine = start.back();
  thread_local std::vector<float> outBuf;
  float *out = scratch(outBuf, mine * hidden);
  std::vector<int64_t> next(start.begin(), start.end() - 1), placeOf(static_cast<size_t>(count));
  std::vector<int32_t> rowAt(static_cast<size_t>(mine)); // the row at each place
  for (int64_t r = 0; r < count; ++r) {
    const int64_t s = own[size_t(r)];
    placeOf[size_t(r)] = s < 0 ? -1 : next[size_t(s)]++;
    if (s < 0)
      std::fill(y + r * hidden, y + (r + 1) * hidden, 0.0f);
    else
      rowAt[size_t(placeOf[size_t(r)])] = int32_t(r);
  }
  expertGroups(rows, rowAt.data(), start, hidden, inter, w, out);
  for (int64_t r = 0; r < count; ++r)
    if (placeOf[size_t(r)] >= 0)
      std::copy_n(out + placeOf[size_t(r)] * hidden, hidden, y + r * hidden);
}

void combine(const float *y, const int32_t *rowOf, const float *weights,
             const int32_t *indices, int64_t tokens, int64_t topK, int64_t shared,
             int64_t hidden, float *out) {
  const int64_t picks = topK + shared;
  // Tokens are independent: shared between the threads.
  forRows(tokens, picks * hidden, [&](int64_t t) {
    thread_local std::vector<int64_t> order;
    order.resize(static_cast<size_t>(topK));
    std::iota(order.begin(), order.end(), 0);
    const int32_t *ids = indices + t * topK;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
    float *o = out + t * hidden;
    std::fill(o, o + hidden, 0.0f);
    for (int64_t j = 0; j < picks; ++j) {
      const int64_t pick = j < topK ? order[size_t(j)] : j;
      const float weight = j < topK ? weights[t * topK + pick] : 1.0f;
      const float *yr = y + int64_t(rowOf[t * picks + pick]) * hidden;
      // The next pick's row (rows lie anywhere in y, a page each for a
      // hidden size of 1024: the prefetchers do not follow).
      if (j + 1 < picks) {
        const int64_t nextPick = j + 1 < topK ? order[size_t(j + 1)] : j + 1;
        prefetchLines(y + int64_t(rowOf[t * picks + nextPick]) * hidden,
                      hidden * int64_t(sizeof(float)));
      }
      mulAddRow(weight, yr, o, hidden);
    }
  });
}

void experts(const float *x, int64_t tokens, int64_t hidden, int64_t inter,
             int64_t numExperts, const float *weights, const int32_t *indices,
             int64_t topK, const ExpertWeights &w, float *out) {
  const int64_t slots = tokens * (topK + w.shared);
  thread_local std::vector<float> yBuf;
  thread_local std::vector<int32_t> slotBuf, rowBuf, tokenBuf;
  float *y = scratch(yBuf, slots * hidden);
  int32_t *slotOf = scratch(slotBuf, slots), *rowOf = scratch(rowBuf, slots);
  int32_t *tokenOf = scratch(tokenBuf, slots);
  // The permute without dispatch's copy: the grouped GEMMs read each row's
  // token from x (a decode's 4 KB rows copied from x to a megabyte of rows
  // that the experts' weights had evicted cost 0.2-0.3 ms a layer).
  const std::vector<int64_t> start =
      permute(tokens, indices, topK, numExperts, w.shared, slotOf, rowOf, tokenOf);
  expertGroups(x, tokenOf, start, hidden, inter, w, y);
  combine(y, rowOf, weights, indices, tokens, topK, w.shared, hidden, out);
}

} // namespace moe::cpu
