//===- MoeOps.cpp - verifiers and helpers of the moe ops ------------------===//
//
// Every verifier names the operand it rejects and quotes its type next to the
// shape it expected, so that an importer bug or a hand-edited IR file can be
// fixed from the message alone.
//
//===----------------------------------------------------------------------===//
#include "dialects/moe/MoeOps.h"
#include "moe/abi/KernelCall.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// A dimension the verifier does not constrain.
constexpr int64_t kAny = ShapedType::kDynamic;

bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string shapeString(ArrayRef<int64_t> dims) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(dims, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "*";
    else
      os << d;
  });
  os << "]";
  return s;
}

/// Checks that `value` is a ranked tensor whose dims are compatible with
/// `expected` (kAny matches anything).
LogicalResult expectShape(Operation *op, Value value, StringRef role,
                          ArrayRef<int64_t> expected) {
  auto type = cast<RankedTensorType>(value.getType());
  bool ok = type.getRank() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i)
    ok = dimsCompatible(type.getDimSize(i), expected[i]);
  if (ok)
    return success();
  return op->emitOpError() << role << " must have shape "
                           << shapeString(expected) << ", got " << type;
}

int64_t dim(Value value, unsigned i) {
  auto type = cast<RankedTensorType>(value.getType());
  return static_cast<int64_t>(i) < type.getRank() ? type.getDimSize(i) : kAny;
}

int64_t rank(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

LogicalResult expectRank(Operation *op, Value value, StringRef role,
                         int64_t wanted) {
  if (rank(value) == wanted)
    return success();
  return op->emitOpError() << role << " must be a rank-" << wanted
                           << " tensor, got " << value.getType();
}

LogicalResult expectIntegerElements(Operation *op, Value value,
                                    StringRef role) {
  if (isa<IntegerType>(cast<RankedTensorType>(value.getType()).getElementType()))
    return success();
  return op->emitOpError() << role << " must hold integers, got "
                           << value.getType();
}

/// Integer ids of exactly `dims`.
LogicalResult verifyIds(Operation *op, Value ids, StringRef role, ArrayRef<int64_t> dims) {
  if (failed(expectShape(op, ids, role, dims)))
    return failure();
  return expectIntegerElements(op, ids, role);
}

LogicalResult expectFloatElements(Operation *op, Value value, StringRef role) {
  if (isa<FloatType>(cast<RankedTensorType>(value.getType()).getElementType()))
    return success();
  return op->emitOpError() << role << " must hold floats, got "
                           << value.getType();
}

LogicalResult expectPositive(Operation *op, StringRef name, int64_t value) {
  if (value > 0)
    return success();
  return op->emitOpError() << name << " must be positive, got " << value;
}

/// I64Attr accessors return uint64_t; a negative layer shows up as a huge one.
LogicalResult verifyLayer(Operation *op, uint64_t layer) {
  if (static_cast<int64_t>(layer) >= 0)
    return success();
  return op->emitOpError() << "layer must be >= 0, got "
                           << static_cast<int64_t>(layer);
}

/// Token positions: rank 1, integers, one per token of `tokens`.
LogicalResult verifyPositions(Operation *op, Value positions, int64_t tokens) {
  if (failed(expectShape(op, positions, "positions", {tokens})))
    return failure();
  return expectIntegerElements(op, positions, "positions");
}

/// `rope_scaling` mirrors config.json: it must say which scaling it is.
LogicalResult verifyRopeScaling(Operation *op,
                                std::optional<DictionaryAttr> scaling) {
  if (!scaling)
    return success();
  auto kind = scaling->getAs<StringAttr>("rope_type");
  if (!kind)
    kind = scaling->getAs<StringAttr>("type");
  if (!kind)
    return op->emitOpError()
           << "rope_scaling needs a string 'rope_type' (or 'type'), got "
           << *scaling;
  if (auto factor = scaling->getAs<FloatAttr>("factor"))
    if (factor.getValueAsDouble() <= 0)
      return op->emitOpError() << "rope_scaling factor must be positive, got "
                               << factor.getValueAsDouble();
  return success();
}

/// gate/up [I x H], down [H x I] around an input [T x H]; result [T x H].
LogicalResult verifySwiglu(Operation *op, Value input, Value gate, Value up,
                           Value down, Value result) {
  if (failed(expectRank(op, input, "input", 2)) ||
      failed(expectRank(op, down, "down weight", 2)))
    return failure();
  int64_t tokens = dim(input, 0), hidden = dim(input, 1);
  int64_t inter = dim(down, 1);
  if (failed(expectShape(op, gate, "gate weight", {inter, hidden})) ||
      failed(expectShape(op, up, "up weight", {inter, hidden})) ||
      failed(expectShape(op, down, "down weight", {hidden, inter})))
    return failure();
  return expectShape(op, result, "result", {tokens, hidden});
}

/// A weight multiplied by a kernel that does not quantize its activations
/// (MLA's kv_b) cannot be w8a8 or w4a8. The embedding lookup takes a w8a8
/// or w4a8 table (a tied LM head's): it multiplies nothing, and reads the
/// stored int8 or int4 rows times their scales either way.
LogicalResult refuseW8a8(Operation *op, Value weight, StringRef role) {
  auto w = weight.getDefiningOp<WeightOp>();
  if (!w || (w.getPrecision() != Precision::w8a8 && w.getPrecision() != Precision::w4a8))
    return success();
  const bool int4 = w.getPrecision() == Precision::w4a8;
  return op->emitOpError() << "reads " << role << " '" << w.getName() << "' as "
                           << (int4 ? "w4a8" : "w8a8")
                           << ", which this op's kernel does not take (it quantizes "
                              "no activations); store it "
                           << (int4 ? "int4" : "int8");
}

} // namespace

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

static constexpr StringLiteral kExpertPlaceholder = "{e}";

bool WeightOp::isPerExpert() { return getName().contains(kExpertPlaceholder); }

SmallVector<StringRef> WeightOp::getParts() {
  SmallVector<StringRef> parts = {getName()};
  if (getConcat())
    for (Attribute a : getConcatAttr())
      parts.push_back(cast<StringAttr>(a).getValue());
  return parts;
}

std::string WeightOp::expand(StringRef pattern, int64_t e) {
  size_t at = pattern.find(kExpertPlaceholder);
  if (at == StringRef::npos)
    return pattern.str();
  return (pattern.take_front(at) + std::to_string(e) +
          pattern.drop_front(at + kExpertPlaceholder.size()))
      .str();
}

SmallVector<int64_t> WeightOp::getScaleShape() {
  SmallVector<int64_t> shape(getResult().getType().getShape());
  ArrayRef<int64_t> block = *getBlock();
  size_t r = shape.size();
  shape[r - 2] = (shape[r - 2] + block[0] - 1) / block[0];
  shape[r - 1] = (shape[r - 1] + block[1] - 1) / block[1];
  return shape;
}

bool WeightOp::isQuantized() {
  return getPrecision() &&
         (*getPrecision() == Precision::int8 || *getPrecision() == Precision::w8a8 ||
          *getPrecision() == Precision::int4 || *getPrecision() == Precision::w4a8 ||
          *getPrecision() == Precision::fp8);
}

LogicalResult WeightOp::verifyPrecision() {
  StringRef name = getName();
  auto type = cast<RankedTensorType>(getResult().getType());
  if (!getPrecision()) {
    if (getGroup())
      return emitOpError() << "weight '" << name << "' has a 'group' but no precision";
    if (getStored())
      return emitOpError() << "weight '" << name << "' is 'stored' but has no precision";
    return success();
  }
  const Precision p = *getPrecision();
  if (getStored() && p != Precision::int4 && p != Precision::w4a8 && p != Precision::int8 &&
      p != Precision::w8a8)
    return emitOpError() << "weight '" << name << "' is stored as " << stringifyPrecision(p)
                         << "; only int4, w4a8, int8 and w8a8 come from a checkpoint as they are";
  if (getScale())
    return emitOpError() << "block-scaled weight '" << name
                         << "' keeps its checkpoint precision";
  if (isQuantized() != getGroup().has_value())
    return emitOpError() << "weight '" << name
                         << "' needs a 'group' exactly when its precision is int8, w8a8, int4, "
                            "w4a8 or fp8";
  if (!isQuantized())
    return success();
  int64_t cols = type.getShape().back(), group = *getGroup();
  if (type.getRank() < 2)
    return emitOpError() << "only matrices are quantized; weight '" << name << "' is " << type;
  if (group < 1 || group > cols)
    return emitOpError() << "group " << group << " of weight '" << name
                         << "' must be in [1, " << cols << "] (its row length)";
  // w8a8's kernels quantize activations per token and weights per row: one
  // scale per whole row.
  if (p == Precision::w8a8 && group != cols)
    return emitOpError() << "w8a8 weight '" << name << "' needs one scale per row (group "
                         << cols << ", its row length), got group " << group;
  if ((p == Precision::int4 || p == Precision::w4a8) && (cols % 2 || group % 2))
    return emitOpError() << stringifyPrecision(p) << " weight '" << name
                         << "' needs an even row length and group, got " << type << " and group "
                         << group;
  // w4a8's kernels sum blocks of 128 elements in integers, each block
  // under one scale: groups start at multiples of 128.
  if (p == Precision::w4a8 && group % 128 && group != cols)
    return emitOpError() << "w4a8 weight '" << name
                         << "' needs a group that is a multiple of 128 or its row length ("
                         << cols << "), got group " << group;
  return success();
}

LogicalResult WeightOp::verifyPanels() {
  if (!getPanels())
    return success();
  auto type = cast<RankedTensorType>(getResult().getType());
  // Stored as the checkpoint's float type, or converted to f32 or bf16.
  const bool floating =
      getPrecision() ? (*getPrecision() == Precision::f32 || *getPrecision() == Precision::bf16)
                     : !type.getElementType().isFloat8E4M3FN();
  if (!floating || type.getRank() < 2 ||
      type.getDimSize(type.getRank() - 2) % ::moe::rt::kPanelRows != 0)
    return emitOpError() << "weight '" << getName() << "' of " << type
                         << (getPrecision()
                                 ? " stored as " + stringifyPrecision(*getPrecision()).str()
                                 : std::string())
                         << " is in panels, which needs an f32, bf16 or f16 matrix whose rows "
                            "are a multiple of "
                         << ::moe::rt::kPanelRows;
  return success();
}

LogicalResult WeightOp::verify() {
  StringRef name = getName();
  auto type = cast<RankedTensorType>(getResult().getType());
  if (name.empty())
    return emitOpError() << "needs a non-empty checkpoint tensor name";
  if (!type.hasStaticShape())
    return emitOpError() << "weight '" << name
                         << "' must have a static shape, got " << type;
  Type elem = type.getElementType();
  bool isFp8 = elem.isFloat8E4M3FN();
  if (!elem.isF32() && !elem.isBF16() && !elem.isF16() && !isFp8)
    return emitOpError() << "weight '" << name << "' has element type " << elem
                         << "; expected f32, bf16, f16 or f8E4M3FN";
  size_t placeholders = name.count(kExpertPlaceholder);
  if (placeholders > 1)
    return emitOpError() << "weight '" << name << "' has " << placeholders
                         << " '{e}' placeholders; at most one is allowed";
  if (placeholders == 1 && type.getRank() < 2)
    return emitOpError() << "per-expert weight '" << name
                         << "' needs the expert count as leading dimension "
                            "(rank >= 2), got "
                         << type;
  if (getConcat()) {
    size_t parts = getConcat()->size() + 1;
    int64_t rowsDim = placeholders ? 1 : 0;
    if (getConcat()->empty())
      return emitOpError() << "weight '" << name << "' has an empty 'concat' list";
    if (getScale())
      return emitOpError() << "block-scaled weight '" << name << "' cannot be concatenated";
    if (type.getRank() < rowsDim + 1 || type.getDimSize(rowsDim) % int64_t(parts) != 0)
      return emitOpError() << "weight '" << name << "' joins " << parts
                           << " tensors along dimension " << rowsDim << " of " << type
                           << ", which does not divide evenly";
    for (StringRef part : getParts())
      if (part.count(kExpertPlaceholder) != placeholders)
        return emitOpError() << "concatenated tensor '" << part << "' of weight '" << name
                             << "' must be per expert exactly when the weight is";
  }
  if (getScale().has_value() != getBlock().has_value())
    return emitOpError() << "weight '" << name
                         << "' needs both 'scale' and 'block' or neither";
  if (getAppend()) {
    size_t parts = getConcat() ? getConcat()->size() + 1 : 1;
    if (!placeholders || getScale() || getAppend()->empty() || getAppend()->size() % parts ||
        int64_t(getAppend()->size() / parts) >= type.getDimSize(0))
      return emitOpError() << "weight '" << name
                           << "' may append whole experts (" << parts
                           << " names each, fewer experts than it stacks) to an unscaled "
                              "per-expert stack only";
    for (Attribute a : getAppendAttr())
      if (cast<StringAttr>(a).getValue().contains(kExpertPlaceholder))
        return emitOpError() << "appended tensor '" << cast<StringAttr>(a).getValue()
                             << "' of weight '" << name << "' names one tensor, not '{e}'";
  }
  if (isFp8 && !getScale())
    return emitOpError() << "f8E4M3FN weight '" << name
                         << "' needs a block scale ('scale' and 'block')";
  if (failed(verifyPrecision()) || failed(verifyPanels()))
    return failure();
  if (!getScale())
    return success();
  if (!isFp8)
    return emitOpError() << "weight '" << name << "' of element type " << elem
                         << " has a block scale; block scales apply to "
                            "f8E4M3FN weights only";
  ArrayRef<int64_t> block = *getBlock();
  if (block.size() != 2 || block[0] <= 0 || block[1] <= 0)
    return emitOpError() << "block of weight '" << name
                         << "' must be two positive sizes, got "
                         << shapeString(block);
  if (type.getRank() < 2)
    return emitOpError() << "block-scaled weight '" << name
                         << "' must have rank >= 2, got " << type;
  if (getScale()->count(kExpertPlaceholder) != placeholders)
    return emitOpError() << "scale '" << *getScale() << "' of weight '" << name
                         << "' must be per expert exactly when the weight is";
  return success();
}

//===----------------------------------------------------------------------===//
// Token-wise ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, getIds(), "ids", 1)) ||
      failed(expectIntegerElements(*this, getIds(), "ids")) ||
      failed(expectRank(*this, getTable(), "table", 2)))
    return failure();
  return expectShape(*this, getResult(), "result",
                     {dim(getIds(), 0), dim(getTable(), 1)});
}

LogicalResult RmsNormOp::verify() {
  if (getEps().convertToDouble() <= 0)
    return emitOpError() << "eps must be positive, got "
                         << getEps().convertToDouble();
  int64_t r = rank(getInput());
  if (r < 1)
    return emitOpError() << "input must have rank >= 1, got "
                         << getInput().getType();
  if (failed(expectShape(*this, getWeight(), "weight",
                         {dim(getInput(), r - 1)})))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal input type " << getInput().getType();
  return success();
}

LogicalResult AddRmsNormOp::verify() {
  Type t = getLhs().getType();
  if (getRhs().getType() != t || getSum().getType() != t || getNormed().getType() != t)
    return emitOpError() << "operands and results must have one type, got " << t << ", "
                         << getRhs().getType() << " -> " << getSum().getType() << ", "
                         << getNormed().getType();
  if (getEps().convertToDouble() <= 0)
    return emitOpError() << "eps must be positive, got " << getEps().convertToDouble();
  int64_t r = rank(getLhs());
  if (r < 1)
    return emitOpError() << "operands must have rank >= 1, got " << t;
  return expectShape(*this, getWeight(), "weight", {dim(getLhs(), r - 1)});
}

LogicalResult LinearOp::verify() {
  if (failed(expectRank(*this, getInput(), "input", 2)) ||
      failed(expectRank(*this, getWeight(), "weight", 2)))
    return failure();
  int64_t out = dim(getWeight(), 0);
  if (failed(expectShape(*this, getWeight(), "weight",
                         {kAny, dim(getInput(), 1)})))
    return failure();
  if (getBias() && failed(expectShape(*this, getBias(), "bias", {out})))
    return failure();
  return expectShape(*this, getResult(), "result", {dim(getInput(), 0), out});
}

LogicalResult AddOp::verify() {
  if (getLhs().getType() != getRhs().getType() ||
      getLhs().getType() != getResult().getType())
    return emitOpError() << "operands and result must have one type, got "
                         << getLhs().getType() << ", " << getRhs().getType()
                         << " -> " << getResult().getType();
  return success();
}

LogicalResult LmHeadOp::verify() {
  if (failed(expectRank(*this, getInput(), "input", 2)) ||
      failed(expectRank(*this, getWeight(), "weight", 2)) ||
      failed(expectShape(*this, getWeight(), "weight",
                         {kAny, dim(getInput(), 1)})))
    return failure();
  return expectShape(*this, getResult(), "result",
                     {dim(getInput(), 0), dim(getWeight(), 0)});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(),
          headDim = getHeadDim();
  if (failed(expectPositive(*this, "num_heads", heads)) ||
      failed(expectPositive(*this, "num_kv_heads", kvHeads)) ||
      failed(expectPositive(*this, "head_dim", headDim)))
    return failure();
  if (failed(verifyLayer(*this, getLayer())))
    return failure();
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads " << heads
                         << " must be a multiple of num_kv_heads " << kvHeads;
  if (getRopeTheta().convertToDouble() <= 0)
    return emitOpError() << "rope_theta must be positive, got "
                         << getRopeTheta().convertToDouble();
  if (getSlidingWindow() &&
      failed(expectPositive(*this, "sliding_window", *getSlidingWindow())))
    return failure();
  if (failed(verifyRopeScaling(*this, getRopeScaling())))
    return failure();
  if (failed(expectRank(*this, getQ(), "q", 2)))
    return failure();
  int64_t tokens = dim(getQ(), 0);
  if (failed(expectShape(*this, getQ(), "q", {tokens, heads * headDim})) ||
      failed(expectShape(*this, getK(), "k", {tokens, kvHeads * headDim})) ||
      failed(expectShape(*this, getV(), "v", {tokens, kvHeads * headDim})) ||
      failed(verifyPositions(*this, getPositions(), tokens)))
    return failure();
  if (!getQkNorm().empty() && getQkNorm().size() != 2)
    return emitOpError() << "qk_norm takes 2 weights (q, k), got "
                         << getQkNorm().size();
  for (Value norm : getQkNorm())
    if (failed(expectShape(*this, norm, "qk_norm weight", {headDim})))
      return failure();
  return expectShape(*this, getResult(), "result", {tokens, heads * headDim});
}

LogicalResult MlaAttentionOp::verify() {
  int64_t heads = getNumHeads(), rankKv = getKvLoraRank(),
          nope = getQkNopeHeadDim(), rope = getQkRopeHeadDim(),
          vDim = getVHeadDim();
  if (failed(expectPositive(*this, "num_heads", heads)) ||
      failed(expectPositive(*this, "kv_lora_rank", rankKv)) ||
      failed(expectPositive(*this, "qk_nope_head_dim", nope)) ||
      failed(expectPositive(*this, "qk_rope_head_dim", rope)) ||
      failed(expectPositive(*this, "v_head_dim", vDim)))
    return failure();
  if (rope % 2 != 0)
    return emitOpError() << "qk_rope_head_dim must be even, got " << rope;
  if (failed(verifyLayer(*this, getLayer())))
    return failure();
  if (getSoftmaxScale().convertToDouble() <= 0)
    return emitOpError() << "softmax_scale must be positive, got "
                         << getSoftmaxScale().convertToDouble();
  if (getRopeTheta().convertToDouble() <= 0)
    return emitOpError() << "rope_theta must be positive, got "
                         << getRopeTheta().convertToDouble();
  if (failed(verifyRopeScaling(*this, getRopeScaling())))
    return failure();
  if (failed(expectRank(*this, getQ(), "q", 2)))
    return failure();
  int64_t tokens = dim(getQ(), 0);
  if (failed(expectShape(*this, getQ(), "q", {tokens, heads * (nope + rope)})) ||
      failed(expectShape(*this, getKvA(), "kv_a", {tokens, rankKv + rope})) ||
      failed(expectShape(*this, getKvNorm(), "kv_norm weight", {rankKv})) ||
      failed(expectShape(*this, getKvB(), "kv_b weight",
                         {heads * (nope + vDim), rankKv})) ||
      failed(verifyPositions(*this, getPositions(), tokens)) ||
      failed(refuseW8a8(*this, getKvB(), "kv_b weight")))
    return failure();
  return expectShape(*this, getResult(), "result", {tokens, heads * vDim});
}

//===----------------------------------------------------------------------===//
// Feed-forward
//===----------------------------------------------------------------------===//

LogicalResult SwigluMlpOp::verify() {
  return verifySwiglu(*this, getInput(), getGate(), getUp(), getDown(),
                      getResult());
}

LogicalResult SharedExpertOp::verify() {
  if (failed(verifySwiglu(*this, getInput(), getGate(), getUp(), getDown(),
                          getResult())))
    return failure();
  if (getSigmoidGate())
    return expectShape(*this, getSigmoidGate(), "sigmoid_gate weight",
                       {1, dim(getInput(), 1)});
  return success();
}

LogicalResult RouterOp::verify() {
  if (failed(expectRank(*this, getInput(), "input", 2)) ||
      failed(expectRank(*this, getWeight(), "weight", 2)) ||
      failed(expectShape(*this, getWeight(), "weight",
                         {kAny, dim(getInput(), 1)})))
    return failure();
  int64_t experts = dim(getWeight(), 0), topK = getTopK();
  int64_t groups = getNGroup(), keptGroups = getTopkGroup();
  if (topK < 1 || topK > experts)
    return emitOpError() << "top_k " << topK << " must lie in [1, " << experts
                         << "] (the number of experts)";
  if (groups < 1 || experts % groups != 0)
    return emitOpError() << "n_group " << groups
                         << " must be positive and divide the " << experts
                         << " experts";
  if (keptGroups < 1 || keptGroups > groups)
    return emitOpError() << "topk_group " << keptGroups << " must lie in [1, "
                         << groups << "] (n_group)";
  TopkMethod method = getTopkMethod();
  if (method == TopkMethod::greedy && groups != 1)
    return emitOpError() << "topk_method greedy ignores groups; n_group must "
                            "be 1, got "
                         << groups;
  if (topK > keptGroups * (experts / groups))
    return emitOpError() << "top_k " << topK << " exceeds the "
                         << keptGroups * (experts / groups)
                         << " experts in the kept topk_group " << keptGroups
                         << " groups";
  if (method == TopkMethod::noaux_tc && experts / groups < 2)
    return emitOpError() << "topk_method noaux_tc scores a group by its two "
                            "best experts; groups of "
                         << experts / groups << " expert are too small";
  if (getRoutedScalingFactor().convertToDouble() <= 0)
    return emitOpError() << "routed_scaling_factor must be positive, got "
                         << getRoutedScalingFactor().convertToDouble();
  if (getPolicy() != RoutingPolicy::token_choice && method != TopkMethod::greedy)
    return emitOpError() << "routing policy " << stringifyRoutingPolicy(getPolicy())
                         << " needs a greedy router, got " << stringifyTopkMethod(method);
  if (!(getCapacityFactor().convertToDouble() >= 1 &&
        getCapacityFactor().convertToDouble() <= 64))
    return emitOpError() << "capacity_factor must lie in [1, 64] (below 1 some picks would "
                            "find no expert with room), got "
                         << getCapacityFactor().convertToDouble();
  bool needsBias = method == TopkMethod::noaux_tc;
  if (needsBias != static_cast<bool>(getBias()))
    return emitOpError() << (needsBias ? "topk_method noaux_tc needs a "
                                         "correction bias"
                                       : "a correction bias needs topk_method "
                                         "noaux_tc, got ")
                         << (needsBias ? "" : stringifyTopkMethod(method));
  if (getBias() && failed(expectShape(*this, getBias(), "bias", {experts})))
    return failure();
  int64_t tokens = dim(getInput(), 0);
  if (failed(expectShape(*this, getWeights(), "weights", {tokens, topK})) ||
      failed(expectFloatElements(*this, getWeights(), "weights")) ||
      failed(expectShape(*this, getIndices(), "indices", {tokens, topK})) ||
      failed(expectIntegerElements(*this, getIndices(), "indices")))
    return failure();
  return success();
}

int64_t ExpertsOp::getNumExperts() { return dim(getDown(), 0) - getNumShared(); }

namespace {

/// The stacked SwiGLU expert weights of `op` over hidden size `hidden`:
/// (gate, up, down) or (gate_up, down). Returns the number of experts
/// stacked.
FailureOr<int64_t> verifyStacks(Operation *op, ValueRange weights, int64_t hidden) {
  size_t n = weights.size();
  if (n != 2 && n != 3)
    return op->emitOpError() << "takes 3 expert weights (gate, up, down) or 2 "
                                "(gate_up, down), got "
                             << n;
  Value down = weights.back();
  if (failed(expectRank(op, down, "down weight", 3)))
    return failure();
  int64_t experts = dim(down, 0), inter = dim(down, 2);
  if (failed(expectShape(op, down, "down weight", {experts, hidden, inter})))
    return failure();
  if (n == 2) {
    if (failed(expectShape(op, weights[0], "gate_up weight", {experts, 2 * inter, hidden})))
      return failure();
  } else if (failed(expectShape(op, weights[0], "gate weight", {experts, inter, hidden})) ||
             failed(expectShape(op, weights[1], "up weight", {experts, inter, hidden}))) {
    return failure();
  }
  return experts;
}

/// Routing weights and ids of `tokens` tokens: float and integer [T, K].
/// Returns K.
FailureOr<int64_t> verifyRouting(Operation *op, Value weights, Value ids, int64_t tokens) {
  if (failed(expectRank(op, weights, "routing weights", 2)) ||
      failed(expectFloatElements(op, weights, "routing weights")))
    return failure();
  int64_t topK = dim(weights, 1);
  if (failed(expectShape(op, weights, "routing weights", {tokens, topK})) ||
      failed(verifyIds(op, ids, "routing indices", {tokens, topK})))
    return failure();
  return topK;
}

} // namespace

LogicalResult ExpertsOp::verify() {
  if (failed(expectRank(*this, getInput(), "input", 2)))
    return failure();
  int64_t tokens = dim(getInput(), 0), hidden = dim(getInput(), 1);
  FailureOr<int64_t> experts = verifyStacks(*this, getExpertWeights(), hidden);
  if (failed(experts))
    return failure();
  if (getNumShared() < 0 || getNumShared() >= *experts)
    return emitOpError() << "has " << getNumShared() << " always-on experts of " << *experts
                         << " stacked; at least one must be routed";
  FailureOr<int64_t> topK =
      verifyRouting(*this, getRoutingWeights(), getRoutingIndices(), tokens);
  if (failed(topK))
    return failure();
  if (!ShapedType::isDynamic(*topK) && *topK > getNumExperts())
    return emitOpError() << "routes each token to " << *topK
                         << " experts but has only " << getNumExperts();
  return expectShape(*this, getResult(), "result", {tokens, hidden});
}

LogicalResult DispatchOp::verify() {
  const int64_t experts = static_cast<int64_t>(getExperts()),
                shared = static_cast<int64_t>(getShared());
  if (experts < 1 || shared < 0)
    return emitOpError() << "needs at least one routed expert and no negative count of "
                            "always-on ones, got experts "
                         << experts << " shared " << shared;
  if (failed(expectRank(*this, getInput(), "input", 2)) ||
      failed(expectRank(*this, getRoutingIndices(), "routing indices", 2)))
    return failure();
  int64_t tokens = dim(getInput(), 0), hidden = dim(getInput(), 1);
  int64_t topK = dim(getRoutingIndices(), 1);
  if (failed(verifyIds(*this, getRoutingIndices(), "routing indices", {tokens, topK})))
    return failure();
  if (!ShapedType::isDynamic(topK) && topK > experts)
    return emitOpError() << "routes each token to " << topK << " experts but has only "
                         << experts;
  int64_t picks = ShapedType::isDynamic(topK) ? kAny : topK + shared;
  if (failed(expectShape(*this, getRows(), "rows", {tokens, picks, hidden})) ||
      failed(expectFloatElements(*this, getRows(), "rows")))
    return failure();
  if (failed(verifyIds(*this, getSlots(), "slots", {tokens, picks})))
    return failure();
  return verifyIds(*this, getMap(), "map", {tokens, picks});
}

LogicalResult ExpertRowsOp::verify() {
  if (failed(expectRank(*this, getRows(), "rows", 3)) ||
      failed(expectFloatElements(*this, getRows(), "rows")))
    return failure();
  int64_t tokens = dim(getRows(), 0), picks = dim(getRows(), 1), hidden = dim(getRows(), 2);
  if (failed(verifyStacks(*this, getExpertWeights(), hidden)) ||
      failed(verifyIds(*this, getSlots(), "slots", {tokens, picks})))
    return failure();
  return expectShape(*this, getResult(), "result", {tokens, picks, hidden});
}

LogicalResult CombineOp::verify() {
  if (failed(expectRank(*this, getRows(), "expert rows", 3)) ||
      failed(expectFloatElements(*this, getRows(), "expert rows")))
    return failure();
  int64_t tokens = dim(getRows(), 0), picks = dim(getRows(), 1), hidden = dim(getRows(), 2);
  if (failed(verifyIds(*this, getMap(), "map", {tokens, picks})))
    return failure();
  FailureOr<int64_t> topK =
      verifyRouting(*this, getRoutingWeights(), getRoutingIndices(), tokens);
  if (failed(topK))
    return failure();
  if (!ShapedType::isDynamic(*topK) && !ShapedType::isDynamic(picks) && *topK > picks)
    return emitOpError() << "sums " << picks << " rows per token, fewer than its " << *topK
                         << " routed picks";
  return expectShape(*this, getResult(), "result", {tokens, hidden});
}

#define GET_OP_CLASSES
#include "dialects/moe/MoeOps.cpp.inc"
