//===- ModelSummary.cpp - what a moe module contains ----------------------===//
#include "compiler/analysis/ModelSummary.h"
#include "dialects/moe/MoeOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

#include <map>

using namespace mlir;
using namespace mlir::moe;

namespace moe {

namespace {

/// 1234567 -> "1.23M".
std::string human(double value, const char *unit = "") {
  const char *suffixes[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (value >= 1000 && i < 4) {
    value /= 1000;
    ++i;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(i == 0 ? "%.0f" : "%.2f", value) << suffixes[i] << unit;
  return s;
}

unsigned bitsOf(Type type) {
  return type.isIntOrFloat() ? type.getIntOrFloatBitWidth() : 0;
}

} // namespace

void printModelSummary(ModuleOp module, llvm::raw_ostream &os) {
  auto type = module->getAttrOfType<StringAttr>("moe.model_type");
  int64_t attention = 0, mla = 0, moeLayers = 0, dense = 0, shared = 0;
  int64_t hidden = 0, vocab = 0;
  double params = 0, expertParams = 0, bytes = 0;
  std::map<std::string, std::pair<double, double>> perDtype; // params, bytes
  std::map<std::string, int64_t> opCounts;
  int64_t tensors = 0;
  RouterOp router;
  ExpertsOp experts;
  AttentionOp gqa;

  module.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "moe")
      ++opCounts[op->getName().getStringRef().str()];
    if (auto w = dyn_cast<WeightOp>(op)) {
      auto t = cast<RankedTensorType>(w.getType());
      double n = static_cast<double>(t.getNumElements());
      double b = n * bitsOf(t.getElementType()) / 8;
      if (w.getScale()) {
        double blocks = 1;
        for (int64_t d : w.getScaleShape())
          blocks *= static_cast<double>(d);
        b += blocks * 4;
      }
      std::string dtype;
      llvm::raw_string_ostream ds(dtype);
      ds << t.getElementType();
      perDtype[dtype].first += n;
      perDtype[dtype].second += b;
      params += n;
      bytes += b;
      tensors += w.isPerExpert() ? t.getDimSize(0) : 1;
      if (w.isPerExpert() || llvm::any_of(w->getUsers(), [](Operation *u) {
            return isa<ExpertsOp>(u);
          }))
        expertParams += n;
    } else if (auto a = dyn_cast<AttentionOp>(op)) {
      ++attention;
      gqa = a;
    } else if (isa<MlaAttentionOp>(op)) {
      ++mla;
    } else if (auto e = dyn_cast<ExpertsOp>(op)) {
      ++moeLayers;
      experts = e;
    } else if (isa<SwigluMlpOp>(op)) {
      ++dense;
    } else if (isa<SharedExpertOp>(op)) {
      ++shared;
    } else if (auto r = dyn_cast<RouterOp>(op)) {
      router = r;
    } else if (auto e = dyn_cast<EmbeddingOp>(op)) {
      auto t = cast<RankedTensorType>(e.getTable().getType());
      vocab = t.getDimSize(0);
      hidden = t.getDimSize(1);
    }
  });

  os << "model      " << (type ? type.getValue() : "?") << ": "
     << attention + mla << " layers (" << moeLayers << " MoE, " << dense
     << " dense), hidden " << hidden << ", vocab " << vocab << "\n";
  if (gqa)
    os << "attention  GQA, " << gqa.getNumHeads() << " heads / "
       << gqa.getNumKvHeads() << " KV heads x " << gqa.getHeadDim()
       << (gqa.getQkNorm().empty() ? "" : ", q/k RMSNorm") << "\n";
  module.walk([&](MlaAttentionOp m) {
    os << "attention  MLA, " << m.getNumHeads() << " heads, kv_lora_rank "
       << m.getKvLoraRank() << ", qk " << m.getQkNopeHeadDim() << "+"
       << m.getQkRopeHeadDim() << ", v " << m.getVHeadDim() << "\n";
    return WalkResult::interrupt();
  });
  double active = params;
  if (router && experts) {
    int64_t e = experts.getNumExperts();
    os << "experts    " << e << " routed, top-" << router.getTopK() << " ("
       << stringifyScoring(router.getScoring()) << ", "
       << stringifyTopkMethod(router.getTopkMethod());
    if (router.getNGroup() > 1)
      os << ", " << router.getTopkGroup() << " of " << router.getNGroup()
         << " groups";
    if (router.getBias())
      os << ", correction bias";
    os << "), " << (shared ? "shared expert" : "no shared expert") << "\n";
    active = params - expertParams * (1.0 - double(router.getTopK()) / e);
  }
  os << "weights    " << tensors << " tensors, " << human(params) << " params ("
     << human(active) << " active per token), " << human(bytes, "B") << "\n";
  for (auto &[dtype, pb] : perDtype)
    os << "  " << llvm::left_justify(dtype, 10) << human(pb.first)
       << " params, " << human(pb.second, "B") << "\n";
  os << "ops       ";
  for (auto &[name, count] : opCounts)
    os << " " << name << " " << count;
  os << "\n";
}

} // namespace moe
