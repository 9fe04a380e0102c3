//===- MoeDialect.cpp - moe dialect registration and module attributes ---===//
#include "dialects/moe/MoeDialect.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::moe;

#include "dialects/moe/MoeDialect.cpp.inc"
#include "dialects/moe/MoeEnums.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/moe/MoeOps.cpp.inc"
      >();
}

ArrayRef<StringRef> MoeDialect::supportedModelTypes() {
  static const StringRef types[] = {"mixtral", "qwen2_moe", "qwen3_moe",
                                    "deepseek_v2", "deepseek_v3"};
  return types;
}

LogicalResult MoeDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == "moe.model_type") {
    auto value = dyn_cast<StringAttr>(attr.getValue());
    if (!value)
      return op->emitError() << "'moe.model_type' must be a string, got "
                             << attr.getValue();
    if (!llvm::is_contained(supportedModelTypes(), value.getValue()))
      return op->emitError() << "unsupported 'moe.model_type' \""
                             << value.getValue()
                             << "\"; expected one of mixtral, qwen2_moe, "
                                "qwen3_moe, deepseek_v2, deepseek_v3";
    return success();
  }
  if (name == "moe.config") {
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'moe.config' must be a dictionary, got "
                             << attr.getValue();
    return success();
  }
  return op->emitError() << "unknown moe dialect attribute '" << name << "'";
}
