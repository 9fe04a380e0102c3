//===- Rope.cpp - rotary embedding tables resolved at compile time --------===//
#include "compiler/conversion/Rope.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace moe {

namespace {

double number(DictionaryAttr d, llvm::StringRef key, double dflt) {
  Attribute a = d.get(key);
  if (auto f = dyn_cast_or_null<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return static_cast<double>(i.getInt());
  return dflt;
}

/// YaRN's attention factor from factor, mscale and mscale_all_dim.
double yarnMscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

} // namespace

bool computeRope(int64_t rotaryDim, double theta, DictionaryAttr scaling,
                 int64_t maxPositions, RopeTable &table, std::string &error) {
  int64_t pairs = rotaryDim / 2;
  std::vector<float> base(pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    // transformers: base ** (arange(0, dim, 2).float() / dim), in float32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(rotaryDim);
    base[i] = 1.0f / static_cast<float>(std::pow(theta, double(exponent)));
  }
  table.invFreq = base;
  table.attentionFactor = 1.0f;
  if (!scaling)
    return true;
  std::string kind;
  if (auto s = scaling.getAs<StringAttr>("rope_type"))
    kind = s.str();
  else if (auto s = scaling.getAs<StringAttr>("type"))
    kind = s.str();
  if (kind.empty() || kind == "default")
    return true;
  double factor = number(scaling, "factor", 1.0);
  if (kind == "linear") {
    for (float &f : table.invFreq)
      f = static_cast<float>(f / factor);
    return true;
  }
  if (kind != "yarn") {
    error = "rope scaling '" + kind + "' is not supported (supported: default, "
            "linear, yarn)";
    return false;
  }
  double original = number(scaling, "original_max_position_embeddings",
                            static_cast<double>(maxPositions));
  double mscale = number(scaling, "mscale", 0), mscaleAllDim =
                      number(scaling, "mscale_all_dim", 0);
  double attention = number(scaling, "attention_factor", 0);
  if (attention == 0)
    attention = (mscale != 0 && mscaleAllDim != 0)
                    ? yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAllDim)
                    : yarnMscale(factor, 1.0);
  table.attentionFactor = static_cast<float>(attention);
  double betaFast = number(scaling, "beta_fast", 32), betaSlow =
                        number(scaling, "beta_slow", 1);
  if (betaFast == 0)
    betaFast = 32;
  if (betaSlow == 0)
    betaSlow = 1;
  auto correctionDim = [&](double rotations) {
    return (rotaryDim * std::log(original / (rotations * 2 * M_PI))) /
           (2 * std::log(theta));
  };
  bool truncate = true;
  if (auto t = scaling.getAs<BoolAttr>("truncate"))
    truncate = t.getValue();
  double low = correctionDim(betaFast), high = correctionDim(betaSlow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotaryDim - 1));
  if (low == high)
    high += 0.001;
  for (int64_t i = 0; i < pairs; ++i) {
    float ramp = static_cast<float>((static_cast<float>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    float extrapolation = 1.0f - ramp;
    float interpolation = static_cast<float>(base[i] / factor);
    table.invFreq[i] =
        interpolation * (1.0f - extrapolation) + base[i] * extrapolation;
  }
  return true;
}

} // namespace moe
