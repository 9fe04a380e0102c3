//===- Session.h - run a loaded plan ----------------------------*- C++ -*-===//
#ifndef MOE_RUNTIME_SESSION_H
#define MOE_RUNTIME_SESSION_H

#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"

#include <cstdint>
#include <memory>

namespace moe::rt {

struct SessionOptions {
  /// Context of the one sequence this session holds; 0: the plan's.
  int64_t maxContext = 0;
};

/// Tokens routed to each expert of one MoE layer, as counted at run time.
struct ExpertLoad {
  int layer = -1;                 ///< decoder layer (from the router's location)
  std::vector<uint64_t> counts;   ///< per expert: token selections
};

/// One sequence's state (arena, KV cache) over a loaded plan.
class Session {
public:
  static Expected<std::unique_ptr<Session>>
  create(const LoadedPlan &plan, Device &device, const SessionOptions &options = {});
  ~Session();

  /// Runs the model on `count` tokens at `positions` (count <= maxBatchTokens,
  /// positions < maxContext; earlier positions must already be in the KV
  /// cache) and writes their logits, [count, vocab], to `logits`.
  Status forward(const int32_t *tokens, const int32_t *positions, int64_t count,
                 float *logits);

  int64_t maxBatchTokens() const;
  int64_t maxContext() const { return maxContext_; }
  int64_t vocabSize() const;
  /// Bytes of the KV cache this session allocated.
  uint64_t kvBytes() const { return kvBytes_; }
  /// Routing counts of every MoE layer since the session began.
  const std::vector<ExpertLoad> &expertLoad() const { return load_; }

private:
  Session(const LoadedPlan &plan, Device &device) : plan_(plan), device_(device) {}
  const LoadedPlan &plan_;
  Device &device_;
  std::shared_ptr<void> arena_;
  std::vector<std::shared_ptr<void>> kvStorage_;
  std::vector<KvLayerView> kv_;
  std::vector<ExpertLoad> load_;
  int64_t maxContext_ = 0;
  uint64_t kvBytes_ = 0;
};

} // namespace moe::rt

#endif
