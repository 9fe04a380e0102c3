//===- KernelCall.cpp - element types, expert shares ----------------------===//
#include "moe/abi/KernelCall.h"

namespace moe::rt {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32: case DType::I32: return 4;
  case DType::BF16: case DType::F16: return 2;
  case DType::F8E4M3: case DType::I8: case DType::I4: return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::BF16: return "BF16";
  case DType::F16: return "F16";
  case DType::F8E4M3: return "F8E4M3";
  case DType::I32: return "I32";
  case DType::I8: return "I8";
  case DType::I4: return "I4";
  }
  return "?";
}

ExpertShare expertShare(const ExpertsParams &p) {
  ExpertShare share;
  if (!p.stacked)
    return share;
  share.stack.assign(size_t(p.stacked), -1);
  share.replicas.assign(size_t(p.stacked), 1);
  share.replica.assign(size_t(p.stacked), 0);
  if (p.rowsSeen && p.rowsSeen->size() == size_t(p.stacked))
    share.seen = p.rowsSeen.get();
  for (size_t i = 0; i < p.held.size(); ++i) {
    const auto e = size_t(p.held[i]);
    share.stack[e] = int32_t(i);
    if (!p.replicas.empty()) {
      share.replicas[e] = p.replicas[i];
      share.replica[e] = p.replica[i];
    }
  }
  return share;
}

} // namespace moe::rt
