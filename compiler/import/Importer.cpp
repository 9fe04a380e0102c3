//===- Importer.cpp - Hugging Face checkpoint -> moe dialect --------------===//
//
// Builds `forward(tokens, positions) -> logits` layer by layer from the
// normalised config, checking every tensor it names against the safetensors
// headers (name, shape, dtype, fp8 block scales). The per-family differences
// live in the small `*Names` helpers and in HfConfig; the graph is shared.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/Importer.h"
#include "compiler/import/HfConfig.h"
#include "compiler/import/PackedInt4.h"
#include "compiler/import/Safetensors.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <new>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::moe;
using json = nlohmann::json;

namespace moe {

namespace {

/// How a checkpoint tensor is stored; `linear` weights may be fp8 with block
/// scales, the others (norms, embeddings, router, biases) never are.
enum class WeightKind { Plain, Linear };

/// A checked checkpoint tensor: its dtype and, for fp8, its scale tensor;
/// for a GPTQ or AWQ layer (dtype kPackedInt4), the plan precision that
/// holds it exactly (int4, or int8 with zero points) and its group.
struct Resolved {
  std::string dtype;
  std::optional<std::string> scale;
  std::optional<Precision> stored;
  int64_t group = 0;
};

/// Answers "what is tensor X?" from the safetensors headers, or from the
/// config alone in shape-only mode; every answer is checked.
class WeightSource {
public:
  WeightSource(const HfConfig &config, const TensorCatalog *catalog)
      : config_(config), catalog_(catalog) {}

  bool shapeOnly() const { return catalog_ == nullptr; }
  bool has(const std::string &name) const {
    return catalog_ && catalog_->find(name);
  }
  /// Every tensor check() has resolved, scales included.
  const std::set<std::string> &used() const { return used_; }

  Resolved check(const std::string &name, const std::vector<int64_t> &shape,
                 WeightKind kind) const {
    if (!catalog_) {
      if (kind == WeightKind::Linear && !config_.fp8Block.empty())
        return {"F8_E4M3", name + "_scale_inv"};
      return {config_.defaultDtype(), std::nullopt};
    }
    const TensorInfo &info = find(name, shape);
    Resolved r{info.dtype, std::nullopt};
    if (info.packed) {
      if (shape.size() != 2)
        fail(info.file, "tensor '" + name + "' is a quantized layer but the model reads a "
                            "tensor of " + shapeString(shape));
      r.stored = info.packed->int8() ? Precision::int8 : Precision::int4;
      r.group = info.packed->group;
      return r;
    }
    if (info.dtype != "F32" && info.dtype != "BF16" && info.dtype != "F16" &&
        info.dtype != "F8_E4M3")
      fail(info.file, "tensor '" + name + "' has dtype " + info.dtype +
                          "; supported: F32, BF16, F16, F8_E4M3");
    if (info.dtype != "F8_E4M3")
      return r;
    if (shape.size() < 2)
      fail(info.file, "tensor '" + name + "' is F8_E4M3 but has rank " +
                          std::to_string(shape.size()) +
                          "; block scales need rank >= 2");
    r.scale = name + "_scale_inv";
    std::vector<int64_t> scaleShape = shape;
    std::vector<int64_t> block = blockSize();
    size_t n = shape.size();
    scaleShape[n - 2] = (shape[n - 2] + block[0] - 1) / block[0];
    scaleShape[n - 1] = (shape[n - 1] + block[1] - 1) / block[1];
    const TensorInfo &scale = find(*r.scale, scaleShape);
    if (scale.dtype != "F32")
      fail(scale.file, "tensor '" + *r.scale + "' has dtype " + scale.dtype +
                           "; fp8 block scales must be F32");
    return r;
  }

  /// "BF16", or "int4 group 128" for a quantized layer.
  static std::string describe(const Resolved &r) {
    return r.stored ? stringifyPrecision(*r.stored).str() + " group " + std::to_string(r.group)
                    : r.dtype;
  }

  /// Block size of fp8 scales: the config's, else DeepSeek-V3's 128 x 128.
  std::vector<int64_t> blockSize() const {
    return config_.fp8Block.empty() ? std::vector<int64_t>{128, 128}
                                    : config_.fp8Block;
  }

  [[noreturn]] static void fail(const std::string &file,
                                const std::string &what) {
    throw InputError(file + ": " + what);
  }

private:
  const TensorInfo &find(const std::string &name,
                         const std::vector<int64_t> &shape) const {
    const TensorInfo *info = catalog_->find(name);
    used_.insert(name);
    if (!info)
      fail(catalog_->source(), "tensor '" + name + "' is missing (expected " +
                                   "shape " + shapeString(shape) + ")");
    if (info->shape != shape)
      fail(info->file, "tensor '" + name + "' has shape " +
                           shapeString(info->shape) + ", expected " +
                           shapeString(shape));
    return *info;
  }

  const HfConfig &config_;
  const TensorCatalog *catalog_;
  mutable std::set<std::string> used_;
};

/// Why a checkpoint tensor no op uses may be left out, or null when it
/// may not: then it would be silently dropped, and the import refuses.
const char *documentedSkip(const HfConfig &c, const std::string &name,
                           const TensorInfo &info) {
  if (info.size == 0)
    return "no elements (e.g. the shared MLP of n_shared_experts 0): contributes nothing";
  if (name.size() > 20 && name.compare(name.size() - 20, 20, ".rotary_emb.inv_freq") == 0)
    return "RoPE frequencies, recomputed from the config";
  if (name == "lm_head.weight" && c.tieWordEmbeddings)
    return "equal to model.embed_tokens.weight, which it is tied to (checkTiedHead)";
  const std::string layers = "model.layers.";
  if (c.mtpLayers > 0 && name.compare(0, layers.size(), layers) == 0) {
    int64_t layer = std::atoll(name.c_str() + layers.size());
    if (layer >= c.numLayers && layer < c.numLayers + c.mtpLayers)
      return "multi-token-prediction layer (num_nextn_predict_layers)";
  }
  return nullptr;
}

/// A tied model whose checkpoint also holds its own LM head: the peers
/// disagree on which they compute with (transformers 5 uses the saved
/// lm_head.weight; transformers 4 and vLLM the embedding), so a head that
/// differs from the embedding is refused rather than either chosen.
void checkTiedHead(const HfConfig &c, const TensorCatalog &catalog) {
  const TensorInfo *head = catalog.find("lm_head.weight");
  const TensorInfo *table = catalog.find("model.embed_tokens.weight");
  if (!c.tieWordEmbeddings || !head || !table || sameData(*head, *table))
    return;
  throw InputError(head->file + ": tie_word_embeddings is true, but tensor 'lm_head.weight' "
                   "differs from 'model.embed_tokens.weight' (transformers 5 computes with "
                   "the former, transformers 4 and vLLM with the latter); set "
                   "tie_word_embeddings to false to use lm_head.weight, or remove it to tie");
}

/// Refuses a checkpoint holding tensors that no op consumes (a bias the
/// config does not announce, an unknown scale), naming the first of them.
void checkAllUsed(const HfConfig &c, const TensorCatalog &catalog,
                  const std::set<std::string> &used) {
  std::vector<const TensorInfo *> left;
  std::string first;
  for (auto &[name, info] : catalog.tensors())
    if (!used.count(name) && !documentedSkip(c, name, info)) {
      if (left.empty())
        first = name;
      left.push_back(&info);
    }
  if (left.empty())
    return;
  throw InputError(left[0]->file + ": tensor '" + first + "' " + shapeString(left[0]->shape) +
                   " is not used by the model as config.json describes it" +
                   (left.size() > 1 ? " (nor are " + std::to_string(left.size() - 1) + " more)"
                                    : std::string()) +
                   "; the importer refuses to drop weights it does not understand");
}

Type elementType(MLIRContext *ctx, const std::string &dtype) {
  Builder b(ctx);
  if (dtype == "F32")
    return b.getF32Type();
  if (dtype == "F16")
    return b.getF16Type();
  if (dtype == "F8_E4M3")
    return b.getFloat8E4M3FNType();
  if (dtype == kPackedInt4) // values scale * (q - zero), fp16 scales
    return b.getF16Type();
  return b.getBF16Type();
}

/// config.json values (rope_scaling) as attributes.
Attribute toAttribute(Builder &b, const json &value) {
  if (value.is_boolean())
    return b.getBoolAttr(value.get<bool>());
  if (value.is_number_integer())
    return b.getI64IntegerAttr(value.get<int64_t>());
  if (value.is_number())
    return b.getF64FloatAttr(value.get<double>());
  if (value.is_string())
    return b.getStringAttr(value.get<std::string>());
  if (value.is_array()) {
    SmallVector<Attribute> items;
    for (const json &item : value)
      items.push_back(toAttribute(b, item));
    return b.getArrayAttr(items);
  }
  if (value.is_object()) {
    SmallVector<NamedAttribute> items;
    for (auto &[key, item] : value.items())
      if (!item.is_null())
        items.push_back(b.getNamedAttr(key, toAttribute(b, item)));
    return b.getDictionaryAttr(items);
  }
  return b.getUnitAttr();
}

/// transformers' DeepSeek q_a_layernorm and kv_a_layernorm ignore
/// rms_norm_eps and use this.
constexpr double kMlaNormEps = 1e-6;

/// Names of one layer's feed-forward tensors in the checkpoint.
struct FfnNames {
  std::string moe;                   ///< the MoE block: router and experts
  std::string gate, up, down;        ///< per-expert projection names
  std::string shared;                ///< shared expert block, "" if none
};

FfnNames ffnNames(const HfConfig &c, const WeightSource &source,
                  const std::string &layer) {
  // transformers v5 names Mixtral's block `mlp` when it saves stacked experts.
  if (c.family == Family::Mixtral)
    return {source.has(layer + ".mlp.gate.weight") ? layer + ".mlp"
                                                   : layer + ".block_sparse_moe",
            "w1", "w3", "w2", ""};
  std::string shared;
  if (c.family == Family::Qwen2Moe)
    shared = layer + ".mlp.shared_expert";
  else if (c.sharedIntermediateSize > 0)
    shared = layer + ".mlp.shared_experts";
  return {layer + ".mlp", "gate_proj", "up_proj", "down_proj", shared};
}

class ModuleBuilder {
public:
  ModuleBuilder(MLIRContext &ctx, const HfConfig &config,
                const WeightSource &source)
      : ctx_(&ctx), b_(&ctx), config_(config), source_(source),
        loc_(UnknownLoc::get(&ctx)) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(named("model"));
    module.get()->setAttr("moe.model_type", b_.getStringAttr(config_.modelType));
    module.get()->setAttr("moe.config", configAttr());
    b_.setInsertionPointToEnd(module->getBody());

    auto ids = RankedTensorType::get({ShapedType::kDynamic}, b_.getI32Type());
    auto logitsType = activation(config_.vocabSize);
    auto fn = b_.create<func::FuncOp>(
        loc_, "forward", b_.getFunctionType({ids, ids}, {logitsType}));
    b_.setInsertionPointToEnd(fn.addEntryBlock());
    Value tokens = fn.getArgument(0);
    positions_ = fn.getArgument(1);

    loc_ = named("model.embed_tokens");
    Value table = weight("model.embed_tokens.weight",
                         {config_.vocabSize, config_.hiddenSize},
                         WeightKind::Plain);
    Value h = b_.create<EmbeddingOp>(loc_, activation(config_.hiddenSize),
                                     tokens, table);
    for (int64_t i = 0; i < config_.numLayers; ++i)
      h = decoderLayer(i, h);

    loc_ = named("model.norm");
    h = rmsNorm(h, "model.norm.weight");
    loc_ = named("lm_head");
    Value head = config_.tieWordEmbeddings
                     ? table
                     : weight("lm_head.weight",
                              {config_.vocabSize, config_.hiddenSize},
                              WeightKind::Plain);
    Value logits = b_.create<LmHeadOp>(loc_, logitsType, h, head);
    b_.create<func::ReturnOp>(loc_, logits);
    return module;
  }

private:
  Location named(const std::string &name) {
    return NameLoc::get(b_.getStringAttr(name));
  }
  RankedTensorType activation(int64_t cols) {
    return RankedTensorType::get({ShapedType::kDynamic, cols}, b_.getF32Type());
  }

  DictionaryAttr configAttr() {
    const HfConfig &c = config_;
    SmallVector<NamedAttribute> items = {
        b_.getNamedAttr("vocab_size", b_.getI64IntegerAttr(c.vocabSize)),
        b_.getNamedAttr("hidden_size", b_.getI64IntegerAttr(c.hiddenSize)),
        b_.getNamedAttr("num_layers", b_.getI64IntegerAttr(c.numLayers)),
        b_.getNamedAttr("num_experts", b_.getI64IntegerAttr(c.numExperts)),
        b_.getNamedAttr("top_k", b_.getI64IntegerAttr(c.topK)),
        b_.getNamedAttr("max_position_embeddings",
                        b_.getI64IntegerAttr(c.maxPositions)),
        b_.getNamedAttr("tie_word_embeddings",
                        b_.getBoolAttr(c.tieWordEmbeddings)),
        b_.getNamedAttr("eos_token_id", b_.getI64IntegerAttr(c.configEosTokenId)),
        b_.getNamedAttr("eos_token_ids", b_.getDenseI64ArrayAttr(c.eosTokenIds))};
    if (!c.tokenizer.empty())
      items.push_back(b_.getNamedAttr("tokenizer", b_.getStringAttr(c.tokenizer)));
    return b_.getDictionaryAttr(items);
  }

  Value weight(const std::string &name, const std::vector<int64_t> &shape,
               WeightKind kind) {
    Resolved r = source_.check(name, shape, kind);
    return createWeight(name, shape, r);
  }

  Value createWeight(const std::string &name, const std::vector<int64_t> &shape,
                     const Resolved &r) {
    auto type = RankedTensorType::get(shape, elementType(ctx_, r.dtype));
    StringAttr scale = r.scale ? b_.getStringAttr(*r.scale) : StringAttr();
    DenseI64ArrayAttr block =
        r.scale ? b_.getDenseI64ArrayAttr(source_.blockSize())
                : DenseI64ArrayAttr();
    if (r.stored) // GPTQ/AWQ: the checkpoint's integers
      return b_.create<WeightOp>(loc_, type, b_.getStringAttr(name), ArrayAttr(), scale, block,
                                 PrecisionAttr::get(ctx_, *r.stored),
                                 b_.getI64IntegerAttr(r.group), ArrayAttr(), UnitAttr(),
                                 b_.getUnitAttr());
    return b_.create<WeightOp>(loc_, type, b_.getStringAttr(name), ArrayAttr(), scale,
                               block, PrecisionAttr(), IntegerAttr(), ArrayAttr());
  }

  /// One tensor per expert, `pattern` with `{e}` for the expert id; all must
  /// share a dtype. Returns the stacked weight [experts, shape...].
  Value expertWeight(const std::string &pattern,
                     const std::vector<int64_t> &shape) {
    Resolved first;
    for (int64_t e = 0; e < config_.numExperts; ++e) {
      std::string name = WeightOp::expand(pattern, e);
      Resolved r = source_.check(name, shape, WeightKind::Linear);
      if (e == 0)
        first = r;
      else if (r.dtype != first.dtype || r.stored != first.stored || r.group != first.group)
        WeightSource::fail(name, "expert " + std::to_string(e) + " is " + WeightSource::describe(r) +
                                     " but expert 0 is " + WeightSource::describe(first));
    }
    if (first.scale)
      first.scale = pattern + "_scale_inv";
    std::vector<int64_t> stacked = {config_.numExperts};
    stacked.insert(stacked.end(), shape.begin(), shape.end());
    return createWeight(pattern, stacked, first);
  }

  Value rmsNorm(Value x, const std::string &name) {
    return rmsNorm(x, name, config_.rmsNormEps);
  }
  Value rmsNorm(Value x, const std::string &name, double eps) {
    int64_t cols = cast<RankedTensorType>(x.getType()).getDimSize(1);
    Value w = weight(name, {cols}, WeightKind::Plain);
    return b_.create<RmsNormOp>(loc_, x.getType(), x, w,
                                b_.getF64FloatAttr(eps));
  }

  Value linear(Value x, const std::string &prefix, int64_t out,
               bool bias = false) {
    int64_t in = cast<RankedTensorType>(x.getType()).getDimSize(1);
    Value w = weight(prefix + ".weight", {out, in}, WeightKind::Linear);
    Value b = bias ? weight(prefix + ".bias", {out}, WeightKind::Plain)
                   : Value();
    return b_.create<LinearOp>(loc_, activation(out), x, w, b);
  }

  Value decoderLayer(int64_t i, Value h) {
    std::string layer = "model.layers." + std::to_string(i);
    loc_ = named(layer + ".self_attn");
    Value x = rmsNorm(h, layer + ".input_layernorm.weight");
    Value attn = config_.mla ? mlaAttention(i, layer + ".self_attn", x)
                             : gqaAttention(i, layer + ".self_attn", x);
    h = b_.create<AddOp>(loc_, h.getType(), h, attn);
    loc_ = named(layer + ".mlp");
    x = rmsNorm(h, layer + ".post_attention_layernorm.weight");
    Value ffn = config_.sparseLayer[i] ? moeBlock(i, layer, x)
                                       : denseMlp(layer + ".mlp", x,
                                                  config_.intermediateSize);
    return b_.create<AddOp>(loc_, h.getType(), h, ffn);
  }

  Value gqaAttention(int64_t i, const std::string &p, Value x) {
    const HfConfig &c = config_;
    int64_t qDim = c.numHeads * c.headDim, kvDim = c.numKvHeads * c.headDim;
    Value q = linear(x, p + ".q_proj", qDim, c.qkvBias);
    Value k = linear(x, p + ".k_proj", kvDim, c.qkvBias);
    Value v = linear(x, p + ".v_proj", kvDim, c.qkvBias);
    SmallVector<Value, 2> qkNorm;
    if (c.qkNorm)
      qkNorm = {weight(p + ".q_norm.weight", {c.headDim}, WeightKind::Plain),
                weight(p + ".k_norm.weight", {c.headDim}, WeightKind::Plain)};
    DictionaryAttr scaling =
        c.ropeScaling.is_object()
            ? cast<DictionaryAttr>(toAttribute(b_, c.ropeScaling))
            : DictionaryAttr();
    IntegerAttr window = c.slidingLayer[size_t(i)] ? b_.getI64IntegerAttr(c.slidingWindow)
                                                   : IntegerAttr();
    Value attn = b_.create<AttentionOp>(
        loc_, activation(qDim), q, k, v, positions_, qkNorm,
        b_.getI64IntegerAttr(i), b_.getI64IntegerAttr(c.numHeads),
        b_.getI64IntegerAttr(c.numKvHeads), b_.getI64IntegerAttr(c.headDim),
        b_.getF64FloatAttr(c.ropeTheta), scaling, window,
        c.qkNorm ? b_.getF64FloatAttr(c.rmsNormEps) : FloatAttr());
    return linear(attn, p + ".o_proj", c.hiddenSize, c.oBias);
  }

  Value mlaAttention(int64_t i, const std::string &p, Value x) {
    const HfConfig &c = config_;
    int64_t qDim = c.numHeads * (c.qkNopeHeadDim + c.qkRopeHeadDim);
    Value q;
    if (c.qLoraRank > 0) {
      Value qa = linear(x, p + ".q_a_proj", c.qLoraRank, c.qkvBias);
      qa = rmsNorm(qa, p + ".q_a_layernorm.weight", kMlaNormEps);
      q = linear(qa, p + ".q_b_proj", qDim);
    } else {
      q = linear(x, p + ".q_proj", qDim);
    }
    Value kvA = linear(x, p + ".kv_a_proj_with_mqa",
                       c.kvLoraRank + c.qkRopeHeadDim, c.qkvBias);
    Value kvNorm =
        weight(p + ".kv_a_layernorm.weight", {c.kvLoraRank}, WeightKind::Plain);
    Value kvB = weight(p + ".kv_b_proj.weight",
                       {c.numHeads * (c.qkNopeHeadDim + c.vHeadDim),
                        c.kvLoraRank},
                       WeightKind::Linear);
    DictionaryAttr scaling =
        c.ropeScaling.is_object()
            ? cast<DictionaryAttr>(toAttribute(b_, c.ropeScaling))
            : DictionaryAttr();
    Value attn = b_.create<MlaAttentionOp>(
        loc_, activation(c.numHeads * c.vHeadDim), q, kvA, kvNorm, kvB,
        positions_, b_.getI64IntegerAttr(i), b_.getI64IntegerAttr(c.numHeads),
        b_.getI64IntegerAttr(c.kvLoraRank),
        b_.getI64IntegerAttr(c.qkNopeHeadDim),
        b_.getI64IntegerAttr(c.qkRopeHeadDim), b_.getI64IntegerAttr(c.vHeadDim),
        b_.getF64FloatAttr(c.softmaxScale), b_.getF64FloatAttr(c.ropeTheta),
        scaling, b_.getF64FloatAttr(kMlaNormEps), b_.getBoolAttr(c.ropeInterleave));
    return linear(attn, p + ".o_proj", c.hiddenSize, c.oBias);
  }

  /// gate/up/down projections of one dense MLP named `p` (`p.gate_proj`...).
  std::array<Value, 3> mlpWeights(const std::string &p, int64_t inter) {
    int64_t hidden = config_.hiddenSize;
    return {weight(p + ".gate_proj.weight", {inter, hidden}, WeightKind::Linear),
            weight(p + ".up_proj.weight", {inter, hidden}, WeightKind::Linear),
            weight(p + ".down_proj.weight", {hidden, inter},
                   WeightKind::Linear)};
  }

  Value denseMlp(const std::string &p, Value x, int64_t inter) {
    auto [gate, up, down] = mlpWeights(p, inter);
    return b_.create<SwigluMlpOp>(loc_, x.getType(), x, gate, up, down);
  }

  Value moeBlock(int64_t index, const std::string &layer, Value x) {
    const HfConfig &c = config_;
    FfnNames names = ffnNames(c, source_, layer);
    int64_t e = c.numExperts, hidden = c.hiddenSize;
    Value gate = weight(names.moe + ".gate.weight", {e, hidden},
                        WeightKind::Plain);
    Value bias;
    if (c.topkMethod == "noaux_tc") {
      Resolved r = source_.check(names.moe + ".gate.e_score_correction_bias",
                                 {e}, WeightKind::Plain);
      if (source_.shapeOnly())
        r.dtype = "F32";
      bias = createWeight(names.moe + ".gate.e_score_correction_bias", {e}, r);
    }
    auto f32 = b_.getF32Type();
    auto routeType = [&](Type elem) {
      return RankedTensorType::get({ShapedType::kDynamic, c.topK}, elem);
    };
    auto router = b_.create<RouterOp>(
        loc_, routeType(f32), routeType(b_.getI32Type()), x, gate, bias,
        ScoringAttr::get(ctx_, *symbolizeScoring(c.scoring)),
        TopkMethodAttr::get(ctx_, *symbolizeTopkMethod(c.topkMethod)),
        b_.getI64IntegerAttr(c.topK), b_.getBoolAttr(c.normTopkProb),
        b_.getI64IntegerAttr(c.nGroup), b_.getI64IntegerAttr(c.topkGroup),
        b_.getF64FloatAttr(c.routedScalingFactor), b_.getI64IntegerAttr(index),
        RoutingPolicyAttr::get(ctx_, RoutingPolicy::token_choice), b_.getF64FloatAttr(1.0));
    Value out = b_.create<ExpertsOp>(loc_, x.getType(), x, router.getWeights(),
                                     router.getIndices(),
                                     expertWeights(names), IntegerAttr(), UnitAttr());
    if (names.shared.empty())
      return out;
    auto [sg, su, sd] = mlpWeights(names.shared, c.sharedIntermediateSize);
    Value sharedGate =
        c.sharedExpertGate ? weight(names.moe + ".shared_expert_gate.weight",
                                    {1, hidden}, WeightKind::Plain)
                           : Value();
    Value shared =
        b_.create<SharedExpertOp>(loc_, x.getType(), x, sg, su, sd, sharedGate);
    return b_.create<AddOp>(loc_, x.getType(), out, shared);
  }

  /// The experts' weights: (gate, up, down) from one tensor per expert (the
  /// Hub layout), or (gate_up, down) from transformers v5's stacked tensors.
  SmallVector<Value, 3> expertWeights(const FfnNames &names) {
    int64_t inter = config_.moeIntermediateSize, hidden = config_.hiddenSize;
    int64_t e = config_.numExperts;
    std::string stacked = names.moe + ".experts.";
    if (source_.has(stacked + "gate_up_proj"))
      return {weight(stacked + "gate_up_proj", {e, 2 * inter, hidden},
                     WeightKind::Linear),
              weight(stacked + "down_proj", {e, hidden, inter},
                     WeightKind::Linear)};
    std::string p = names.moe + ".experts.{e}.";
    return {expertWeight(p + names.gate + ".weight", {inter, hidden}),
            expertWeight(p + names.up + ".weight", {inter, hidden}),
            expertWeight(p + names.down + ".weight", {hidden, inter})};
  }

  MLIRContext *ctx_;
  OpBuilder b_;
  const HfConfig &config_;
  const WeightSource &source_;
  Location loc_;
  Value positions_;
};

} // namespace

OwningOpRef<ModuleOp> importCheckpoint(MLIRContext &context,
                                       const std::string &dir,
                                       const ImportOptions &options,
                                       std::string &error) {
  context.loadDialect<MoeDialect, func::FuncDialect>();
  try {
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir))
      throw InputError(dir + ": not a directory (expected a Hugging Face "
                             "checkpoint directory with config.json)");
    HfConfig config = HfConfig::load((fs::path(dir) / "config.json").string());
    std::optional<TensorCatalog> catalog;
    if (!options.shapeOnly) {
      catalog = openCheckpoint(dir, config);
      checkTiedHead(config, *catalog);
    } else if (config.int4) {
      throw InputError(config.path + ": a GPTQ or AWQ checkpoint's quantized layers are known "
                       "from its tensors, which --shape-only does not read");
    }
    WeightSource source(config, catalog ? &*catalog : nullptr);
    OwningOpRef<ModuleOp> module =
        ModuleBuilder(context, config, source).build();
    if (catalog)
      checkAllUsed(config, *catalog, source.used());

    std::string diagnostic;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diagnostic.empty())
        diagnostic = diag.str();
      return success();
    });
    if (failed(verify(*module)))
      throw InputError(config.path + ": the imported model is invalid: " +
                       diagnostic);
    return module;
  } catch (const InputError &e) {
    error = e.what();
    return nullptr;
  } catch (const nlohmann::json::exception &e) {
    // A JSON value of an unexpected kind that a reader did not name.
    error = dir + ": malformed JSON in the checkpoint: " + e.what();
    return nullptr;
  } catch (const std::bad_alloc &) {
    error = dir + ": out of memory reading the checkpoint (sizes in it too large?)";
    return nullptr;
  }
}

} // namespace moe
