//===- MoeDialect.td - the moe dialect and its attributes -----------------===//
//
// The `moe` dialect describes a Mixture-of-Experts transformer at the level of
// tensors: weights are named checkpoint tensors, activations are tensors over a
// dynamic token dimension. It is what the importer emits and what the
// model-level passes (fusion, precision, sharding, placement) rewrite.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_TD
#define MOE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts transformer graph";
  let description = [{
    Ops of a decoder-only MoE transformer: embedding, RMSNorm, attention (GQA
    and DeepSeek MLA), linear, dense SwiGLU MLP, router, routed experts,
    shared expert, residual add and LM head. Weights enter through
    `moe.weight`, which names a checkpoint tensor and never holds its data.

    Module attributes: `moe.model_type` (the Hugging Face `model_type`) and
    `moe.config` (the model's dimensions, as a dictionary).
  }];
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Hugging Face `model_type` values this project supports.
    static llvm::ArrayRef<llvm::StringRef> supportedModelTypes();
  }];
}

class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic, traits>;

include "dialects/moe/MoeEnums.td"

#endif // MOE_DIALECT_TD
