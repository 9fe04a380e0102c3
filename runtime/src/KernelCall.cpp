//===- KernelCall.cpp - element types -------------------------------------===//
#include "moe/runtime/KernelCall.h"

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

} // namespace moe::rt
