//===- PackedInt4.cpp - GPTQ and AWQ layers read as plan integers ---------===//
#include "compiler/import/PackedInt4.h"
#include "moe/abi/File.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

namespace moe {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "GPTQ and AWQ words are read as little-endian int32");

/// A GPTQ word of eight q values (q in [0, 15], lowest bits first) as the
/// plan's eight nibbles q - 8: subtracting 8 modulo 16 flips each nibble's
/// top bit, and the word's little-endian bytes hold the nibbles two per
/// byte, low nibble first, as the plan does.
constexpr uint32_t kMinusEight = 0x88888888u;

[[noreturn]] void fail(const TensorInfo &t, const std::string &layer, const std::string &what) {
  throw InputError(t.file + ": quantized layer '" + layer + "': " + what);
}

std::vector<char> readAll(const TensorInfo &t, uint64_t offset, uint64_t bytes) {
  auto in = rt::InputFile::open(t.file);
  if (!in)
    throw InputError(in.status().message());
  std::vector<char> data(bytes);
  if (rt::Status st = in->readAt(t.offset + offset, data.data(), bytes); !st)
    throw InputError(st.message());
  return data;
}

/// The tensor `name` of a layer, which must exist with `dtype` (one of
/// `dtypes`) and `shape`.
const TensorInfo &part(const TensorCatalog &catalog, const std::string &layer, const char *suffix,
                       const std::vector<std::string> &dtypes,
                       const std::vector<int64_t> &shape) {
  const std::string name = layer + suffix;
  const TensorInfo *t = catalog.find(name);
  const TensorInfo &qweight = *catalog.find(layer + ".qweight");
  if (!t)
    fail(qweight, layer, "tensor '" + name + "' is missing (expected " + dtypes[0] + " " +
                             shapeString(shape) + ")");
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end() || t->shape != shape) {
    std::string want;
    for (const std::string &d : dtypes)
      want += (want.empty() ? "" : ", ") + d;
    fail(*t, layer, "tensor '" + name + "' is " + t->dtype + " " + shapeString(t->shape) +
                        ", expected " + shapeString(shape) + " of " + want);
  }
  return *t;
}

/// Output 8k + m of an AWQ word is its nibble kAwqNibble[m]: AWQ packs
/// the outputs in the order 0, 2, 4, 6, 1, 3, 5, 7.
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t word(const std::vector<char> &data, size_t index) {
  uint32_t w;
  std::memcpy(&w, data.data() + 4 * index, 4);
  return w;
}

/// The nibble of output `o` in a word packed along the outputs (qzeros;
/// AWQ's qweight).
int outputNibble(const PackedInt4 &p, uint32_t w, int64_t o) {
  const int at = p.format.packing == Int4Format::Packing::Awq ? kAwqNibble[o % 8] : int(o % 8);
  return int(w >> (4 * at)) & 15;
}

/// Zero point z of (group g, output o) from the rows of qzeros starting at
/// group `g0`.
int zeroPoint(const PackedInt4 &p, const std::vector<char> &zeros, int64_t g0, int64_t g,
              int64_t o) {
  return outputNibble(p, word(zeros, size_t((g - g0) * (p.rows / 8) + o / 8)), o) +
         (p.format.zeroMinusOne ? 1 : 0);
}

/// Checks one layer's tensors and returns its view.
TensorInfo layerView(const TensorCatalog &catalog, const std::string &layer,
                     const Int4Format &format) {
  const bool awq = format.packing == Int4Format::Packing::Awq;
  const TensorInfo &qweight = *catalog.find(layer + ".qweight");
  const char *layout = awq ? "[in, out / 8]" : "[in / 8, out]";
  if (qweight.dtype != "I32" || qweight.shape.size() != 2)
    fail(qweight, layer, "tensor '" + layer + ".qweight' is " + qweight.dtype + " " +
                             shapeString(qweight.shape) + ", expected I32 " + layout);
  if (catalog.find(layer + ".weight"))
    fail(qweight, layer, "it has both '" + layer + ".weight' and '" + layer + ".qweight'");
  const int64_t in = awq ? qweight.shape[0] : qweight.shape[0] * 8;
  const int64_t out = awq ? qweight.shape[1] * 8 : qweight.shape[1];
  if (in == 0 || out == 0)
    fail(qweight, layer, "tensor '" + layer + ".qweight' " + shapeString(qweight.shape) +
                             " holds no weights");
  if (out % 8)
    fail(qweight, layer, "out " + std::to_string(out) +
                             " is not a multiple of 8, so its zero points do not pack");
  const TensorInfo *scaleInfo = catalog.find(layer + ".scales");
  if (!scaleInfo || scaleInfo->shape.size() != 2)
    fail(qweight, layer, "tensor '" + layer + ".scales' is missing or not [groups, out]");
  // A layer narrower than group_size has one group a row.
  const int64_t group = format.groupSize == -1 ? in : std::min(format.groupSize, in);
  const int64_t groups = (in + group - 1) / group;
  if (scaleInfo->shape[0] != groups)
    fail(*scaleInfo, layer, "tensor '" + layer + ".scales' has " +
                                std::to_string(scaleInfo->shape[0]) + " groups, but group_size " +
                                std::to_string(format.groupSize) + " makes " +
                                std::to_string(groups) + " of its " + std::to_string(in) +
                                " inputs");
  auto packed = std::make_shared<PackedInt4>();
  PackedInt4 &p = *packed;
  p.layer = layer;
  p.format = format;
  p.qweight = qweight;
  p.scales = part(catalog, layer, ".scales", {"F16", "BF16", "F32"}, {groups, out});
  p.qzeros = part(catalog, layer, ".qzeros", {"I32"}, {groups, out / 8});
  p.rows = out;
  p.cols = in;
  p.group = group;

  // Symmetric: every zero point 8, so q - 8 is the value and fits int4.
  if (format.symmetric) {
    std::vector<char> zeros = readAll(p.qzeros, 0, p.qzeros.size);
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t o = 0; o < out; ++o)
        if (int z = zeroPoint(p, zeros, 0, g, o); z != 8)
          fail(p.qzeros, layer, "output " + std::to_string(o) + " of group " +
                                    std::to_string(g) + " has zero point " + std::to_string(z) +
                                    ", not 8, though quantization_config.sym is true");
  }
  // Groups in order: input i in group i / group. A desc_act checkpoint
  // permutes them, which contiguous plan groups cannot express.
  if (!awq && format.descAct && !catalog.find(layer + ".g_idx"))
    fail(qweight, layer, "quantization_config.desc_act is true but tensor '" + layer +
                             ".g_idx' is missing, so its groups' order is unknown");
  if (!awq && catalog.find(layer + ".g_idx")) {
    const TensorInfo &gIdx = part(catalog, layer, ".g_idx", {"I32"}, {in});
    std::vector<char> ids = readAll(gIdx, 0, gIdx.size);
    for (int64_t i = 0; i < in; ++i) {
      int32_t g;
      std::memcpy(&g, ids.data() + 4 * i, 4);
      if (g != i / group)
        fail(gIdx, layer, "input " + std::to_string(i) + " is in group " + std::to_string(g) +
                              ", not " + std::to_string(i / group) +
                              ": act-order (desc_act) groups are out of order, which plan "
                              "groups cannot express; export with desc_act=false, or "
                              "dequantize to bf16 offline");
    }
  }
  TensorInfo view;
  view.file = qweight.file;
  view.dtype = kPackedInt4;
  view.shape = {out, in};
  view.size = uint64_t(out) * uint64_t(in) / (p.int8() ? 1 : 2);
  view.packed = std::move(packed);
  return view;
}

/// Symmetric GPTQ: each word of qweight is 8 plan nibbles (kMinusEight).
void readSymmetricGptq(const PackedInt4 &p, int64_t rows, int64_t cols, std::vector<char> &out) {
  const int64_t words = cols / 8;
  // Rows col0 / 8 .. of qweight, every output's column.
  std::vector<char> raw = readAll(p.qweight, uint64_t(p.col0 / 8) * uint64_t(p.rows) * 4,
                                  uint64_t(words) * uint64_t(p.rows) * 4);
  const size_t start = out.size(), rowBytes = size_t(cols / 2);
  out.resize(start + size_t(rows) * rowBytes);
  char *dst = out.data() + start;
  // Blocks of outputs: qweight's row j holds word j of every output, so a
  // block reads 16 adjacent words and writes 16 rows.
  constexpr int64_t kBlock = 16;
  for (int64_t o0 = 0; o0 < rows; o0 += kBlock) {
    const int64_t o1 = std::min(rows, o0 + kBlock);
    for (int64_t j = 0; j < words; ++j)
      for (int64_t o = o0; o < o1; ++o) {
        const uint32_t w = word(raw, size_t(j) * size_t(p.rows) + size_t(p.row0 + o)) ^ kMinusEight;
        std::memcpy(dst + size_t(o) * rowBytes + size_t(4 * j), &w, 4);
      }
  }
}

/// Any zero points: each element q - z as int8, row by row of qweight.
void readWithZeros(const PackedInt4 &p, int64_t rows, int64_t cols, std::vector<char> &out) {
  const bool awq = p.format.packing == Int4Format::Packing::Awq;
  // GPTQ: qweight rows col0 / 8 .. of out words; AWQ: rows col0 .. of out / 8.
  const int64_t first = awq ? p.col0 : p.col0 / 8, count = awq ? cols : cols / 8;
  const int64_t width = awq ? p.rows / 8 : p.rows;
  std::vector<char> raw = readAll(p.qweight, uint64_t(first) * uint64_t(width) * 4,
                                  uint64_t(count) * uint64_t(width) * 4);
  const int64_t g0 = p.col0 / p.group, groups = (cols + p.group - 1) / p.group;
  std::vector<char> zeros = readAll(p.qzeros, uint64_t(g0) * uint64_t(p.rows / 8) * 4,
                                    uint64_t(groups) * uint64_t(p.rows / 8) * 4);
  const size_t start = out.size();
  out.resize(start + size_t(rows) * size_t(cols));
  int8_t *dst = reinterpret_cast<int8_t *>(out.data() + start);
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t i = p.col0 + c, g = i / p.group;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = p.row0 + r;
      const int q = awq ? outputNibble(p, word(raw, size_t(c * width + o / 8)), o)
                        : int(word(raw, size_t((i / 8 - first) * width + o)) >> (4 * (i % 8))) & 15;
      dst[size_t(r) * size_t(cols) + size_t(c)] = int8_t(q - zeroPoint(p, zeros, g0, g, o));
    }
  }
}

} // namespace

TensorCatalog openCheckpoint(const std::string &dir, const HfConfig &config) {
  TensorCatalog catalog = TensorCatalog::open(dir);
  if (!config.int4)
    return catalog;
  const std::string suffix = ".qweight";
  std::vector<std::string> layers;
  for (auto &[name, info] : catalog.tensors())
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      layers.push_back(name.substr(0, name.size() - suffix.size()));
  for (const std::string &layer : layers) {
    TensorInfo view = layerView(catalog, layer, *config.int4);
    // The tensors the view reads: an AWQ layer's g_idx, which AWQ does not
    // write, stays and is refused as unused.
    for (const char *s : {".qweight", ".scales", ".qzeros", ".g_idx"})
      if (std::string(s) != ".g_idx" || config.int4->packing == Int4Format::Packing::Gptq)
        catalog.erase(layer + s);
    catalog.insert(layer + ".weight", std::move(view));
  }
  return catalog;
}

TensorInfo slicePackedInt4(const TensorInfo &view, int64_t r0, int64_t nr, int64_t c0,
                           int64_t nc) {
  const PackedInt4 &p = *view.packed;
  const int64_t first = p.col0 + c0, end = first + nc;
  // GPTQ packs 8 inputs a word: slices start on a word too.
  const int64_t unit = p.format.packing == Int4Format::Packing::Awq ? 1 : 8;
  if (p.group == p.cols && nc != p.cols)
    fail(p.qweight, p.layer,
         "columns [" + std::to_string(first) + ", " + std::to_string(end) + ") of its " +
             std::to_string(p.cols) + " inputs cut its one group a row (group_size -1), which no "
             "tensor-parallel degree splits: run it without --tp, or export with group_size 128");
  const bool aligned = first % p.group == 0 && first % unit == 0 &&
                       ((nc % p.group == 0 && nc % unit == 0) || end == p.cols);
  if (!aligned)
    fail(p.qweight, p.layer,
         "columns [" + std::to_string(first) + ", " + std::to_string(end) + ") of its " +
             std::to_string(p.cols) + " inputs do not start and end on its groups of " +
             std::to_string(p.group) + (unit > 1 ? " (and multiples of 8)" : "") +
             ": use a tensor-parallel degree that splits its groups evenly");
  auto packed = std::make_shared<PackedInt4>(p);
  packed->row0 += r0;
  packed->col0 += c0;
  TensorInfo v = view;
  v.shape = {nr, nc};
  v.size = uint64_t(nr) * uint64_t(nc) / (p.int8() ? 1 : 2);
  v.packed = std::move(packed);
  return v;
}

void readPackedInt4(const TensorInfo &view, std::vector<char> &out, std::vector<float> &scales) {
  const PackedInt4 &p = *view.packed;
  const int64_t rows = view.shape[0], cols = view.shape[1];
  if (p.int8())
    readWithZeros(p, rows, cols, out);
  else
    readSymmetricGptq(p, rows, cols, out);
  // Scales [groups, out] -> per row, its groups in order.
  const int64_t g0 = p.col0 / p.group, groups = (cols + p.group - 1) / p.group;
  const unsigned elem = dtypeSize(p.scales.dtype);
  std::vector<char> s = readAll(p.scales, uint64_t(g0) * uint64_t(p.rows) * elem,
                                uint64_t(groups) * uint64_t(p.rows) * elem);
  std::vector<float> all(size_t(groups) * size_t(p.rows));
  decodeElements(p.scales.dtype, s.data(), all.size(), all.data());
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = all[size_t(g) * size_t(p.rows) + size_t(p.row0 + o)];
      if (!std::isfinite(scale)) // a NaN would make every output of its row NaN
        fail(p.scales, p.layer, "the scale of output " + std::to_string(p.row0 + o) +
                                    " in group " + std::to_string(g0 + g) + " is " +
                                    std::to_string(scale));
      scales.push_back(scale);
    }
}

} // namespace moe
