//===- Synth.cpp - a runnable copy of a plan with random weights ----------===//
//
// The copy's plan file is the original's bytes with three kinds of field
// changed in place (the compiler writes every scalar, ForceDefaults, so each
// has its slot): the weights' checksums, Provenance.shape_only and the
// characters of Provenance.checkpoint_hash. Nothing else moves, so the plan
// keeps its layout, schedule and placement exactly; it is then sealed with
// a new trailer. Weight files are written tensor by tensor in offset order,
// in chunks, each tensor's checksum computed as its bytes are produced.
//
//===----------------------------------------------------------------------===//
#include "tools/moe-plan/Synth.h"

#include "moe/abi/Numeric.h"
#include "moe/abi/WeightChecksum.h"
#include "moe/abi/File.h"
#include "moe/abi/PlanFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;
namespace fb = moe::plan;
using moe::rt::Status;

namespace moe::tools {
namespace {

/// splitmix64: fast, and the same stream for the same seed on every machine.
class Random {
public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

private:
  uint64_t state_;
};

/// A generated table as the flatbuffers::Table it privately is (what flatc's
/// --gen-mutable accessors do): only to overwrite a scalar in its slot.
template <typename T> flatbuffers::Table &asTable(T &table) {
  return *reinterpret_cast<flatbuffers::Table *>(&table);
}

/// What a weight tensor holds, for its values.
enum class Kind { Matrix, Vector, Scales };

/// The root mean square of a quantized type's codes as fill() draws them:
/// int4 uniform in [-7, 7], int8 uniform in [-127, 127], fp8 a uniform byte
/// with the NaN codes moved to their neighbours (+-448).
float codeRms(fb::DType quantized) {
  switch (quantized) {
  case fb::DType::I4: return std::sqrt(280.0f / 15); // 2 (1^2 + .. + 7^2) / 15
  case fb::DType::F8E4M3: { // every byte, a NaN code read as its neighbour (fill)
    double sum = 0;
    for (int b = 0; b < 256; ++b) {
      const double v = cpu::fp8ToF32(uint8_t((b & 0x7f) == 0x7f ? b ^ 1 : b));
      sum += v * v;
    }
    return float(std::sqrt(sum / 256));
  }
  default: return std::sqrt(127.0f * 128.0f / 3.0f); // (2 (1^2 + .. + 127^2) + 0) / 255
  }
}

/// f16 bits of `v` (|v| < 2^16), its mantissa cut to 10 bits; magnitudes
/// below f16's smallest normal (2^-14) become 0.
uint16_t f16Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = int((bits >> 23) & 0xff) - 127 + 15;
  if (exponent <= 0)
    return uint16_t(sign);
  return uint16_t(sign | uint32_t(exponent) << 10 | (bits >> 13 & 0x3ffu));
}

/// `bytes` (a multiple of the element size) of a tensor of `dtype` into out:
/// matrices of floats uniform in [-rms sqrt(3), rms sqrt(3)), vectors 1.0,
/// scales `value`, quantized codes uniform with mean 0.
void fill(fb::DType dtype, Kind kind, float value, Random &random, uint8_t *out, size_t bytes) {
  auto uniform = [&] { // in [-1, 1)
    return float(int64_t(random.next() >> 11) - (int64_t(1) << 52)) * 0x1p-52f;
  };
  const float half = value * std::sqrt(3.0f); // a matrix's values: RMS `value`
  auto put16 = [&](size_t i, uint16_t v) { std::memcpy(out + 2 * i, &v, 2); };
  switch (dtype) {
  case fb::DType::F32:
    for (size_t i = 0; i < bytes / 4; ++i) {
      const float v = kind == Kind::Matrix ? half * uniform() : kind == Kind::Scales ? value : 1.0f;
      std::memcpy(out + 4 * i, &v, 4);
    }
    return;
  case fb::DType::BF16:
  case fb::DType::F16:
    for (size_t i = 0; i < bytes / 2; ++i) {
      const float v = kind == Kind::Matrix ? half * uniform() : 1.0f;
      put16(i, dtype == fb::DType::BF16 ? cpu::f32ToBf16(v) : f16Bits(v));
    }
    return;
  case fb::DType::I8:
    for (size_t i = 0; i < bytes; ++i)
      out[i] = uint8_t(int8_t(int(random.next() % 255) - 127));
    return;
  case fb::DType::I4:
    // Uniform in [-7, 7], mean 0: uniform nibbles (mean -1/2) give every
    // product a common component along the all-ones direction that grows
    // layer by layer until every token is the same.
    for (size_t i = 0; i < bytes; ++i) {
      const uint64_t r = random.next();
      out[i] = uint8_t((int(r % 15) - 7) & 15) | uint8_t(((int((r >> 32) % 15) - 7) & 15) << 4);
    }
    return;
  case fb::DType::F8E4M3:
    for (size_t i = 0; i < bytes; ++i) {
      uint8_t code = uint8_t(random.next());
      if ((code & 0x7f) == 0x7f) // the NaN codes
        code ^= 1;
      out[i] = code;
    }
    return;
  case fb::DType::I32:
    break;
  }
  std::memset(out, 0, bytes);
}

/// What each tensor holds, and its value: a matrix's RMS, a scale's value.
struct Contents {
  std::vector<Kind> kinds;
  std::vector<float> values;
};
/// A matrix's values have RMS 1 / sqrt(its row length), so that a product
/// keeps the RMS of its input; the embedding table's rows have RMS 1. Each
/// token then stays itself through the layers, and routers spread tokens
/// over the experts as a trained model's do. (Magnitudes that grow the
/// residual stream layer by layer make every token the same after a layer
/// or two: at DeepSeek-V2-Lite's shape, all 512 tokens of a prompt went to
/// the same 6 of 64 experts.) make-gguf.py scales llama.cpp's the same way.
Contents contentsOf(const fb::Plan &plan) {
  const uint32_t n = plan.tensors()->size();
  Contents c{std::vector<Kind>(n, Kind::Matrix), std::vector<float>(n, 0.0f)};
  std::vector<bool> table(n, false);
  for (const fb::Program *program : *plan.programs())
    for (const fb::Instruction *i : *program->instructions())
      if (i->op() == fb::OpCode::Embedding && i->inputs()->size() >= 2)
        table[i->inputs()->Get(1)] = true;
  for (uint32_t id = 0; id < n; ++id) {
    const fb::Tensor *t = plan.tensors()->Get(id);
    if (t->shape()->size() <= 1)
      c.kinds[id] = Kind::Vector;
    else
      c.values[id] = table[id] ? 1.0f : 1.0f / std::sqrt(float(t->shape()->Get(t->shape()->size() - 1)));
  }
  for (uint32_t id = 0; id < n; ++id) {
    const fb::Tensor *t = plan.tensors()->Get(id);
    if (t->storage() == fb::Storage::Weight && t->group() > 0) {
      c.kinds[t->scales()] = Kind::Scales;
      c.values[t->scales()] = c.values[id] / codeRms(t->dtype());
    }
  }
  return c;
}

/// Writes one weight file of the plan's tensors in `file` and sets their
/// checksums in the (mutable) plan.
Status writeWeightFile(fb::Plan &plan, const Contents &contents, uint32_t file,
                       const std::string &path, uint64_t seed) {
  const fb::WeightFile &spec = *plan.weight_files()->Get(file);
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < plan.tensors()->size(); ++id) {
    const fb::Tensor &t = *plan.tensors()->Get(id);
    if (t.storage() == fb::Storage::Weight && t.weight_file() == file)
      order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return plan.tensors()->Get(a)->offset() < plan.tensors()->Get(b)->offset();
  });
  auto output = rt::OutputFile::create(path);
  if (!output)
    return output.status();
  constexpr size_t kChunk = size_t(8) << 20; // a multiple of 8, as WeightHasher streams
  std::vector<uint8_t> chunk(kChunk);
  uint64_t at = 0;
  auto pad = [&](uint64_t to) -> Status {
    std::fill(chunk.begin(), chunk.end(), 0);
    for (; at < to; at += std::min<uint64_t>(kChunk, to - at))
      if (Status s = output->write(chunk.data(), std::min<uint64_t>(kChunk, to - at)); !s)
        return s;
    return Status::ok();
  };
  for (uint32_t id : order) {
    fb::Tensor &t = const_cast<fb::Tensor &>(*plan.tensors()->Get(id));
    if (t.offset() < at || t.offset() + t.size() > spec.size())
      return Status::error("tensor " + t.name()->str() + " overlaps another or lies past the "
                           "end of " + spec.path()->str() + ": recompile the plan");
    if (Status s = pad(t.offset()); !s)
      return s;
    Random random(seed * 0x100000001b3ull + id);
    rt::WeightHasher sum(plan.weight_checksum()); // the plan's: it keeps its format
    for (uint64_t done = 0; done < t.size();) {
      const size_t n = size_t(std::min<uint64_t>(kChunk, t.size() - done));
      fill(t.dtype(), contents.kinds[id], contents.values[id], random, chunk.data(), n);
      sum.update(chunk.data(), n);
      if (Status s = output->write(chunk.data(), n); !s)
        return s;
      done += n;
    }
    at += t.size();
    asTable(t).SetField<uint64_t>(fb::Tensor::VT_CHECKSUM, sum.value(), 0);
  }
  if (Status s = pad(spec.size()); !s)
    return s;
  return output->close();
}

} // namespace

Status synthesizeWeights(const rt::LoadedPlan &loaded, const std::string &out, uint64_t seed) {
  std::error_code error;
  if (fs::exists(out, error) || error)
    return Status::error(out + ": already exists; name a new directory for the copy");
  auto bytes = rt::readFile(loaded.dir() + "/" + rt::kPlanFileName);
  if (!bytes)
    return bytes.status();
  // The body without its trailer (LoadedPlan::open checked both).
  std::string body = bytes->substr(0, bytes->size() - rt::kPlanTrailerBytes);
  fb::Plan &plan = *flatbuffers::GetMutableRoot<fb::Plan>(body.data());
  if (!fs::create_directory(out, error))
    return Status::error(out + ": cannot create (" + error.message() + ")");
  auto written = [&]() -> Status {
    const Contents contents = contentsOf(plan);
    for (uint32_t file = 0; file < plan.weight_files()->size(); ++file)
      if (Status s = writeWeightFile(plan, contents, file,
                                     out + "/" + plan.weight_files()->Get(file)->path()->str(),
                                     seed);
          !s)
        return s;
    if (fb::Provenance *p = const_cast<fb::Provenance *>(plan.provenance())) {
      asTable(*p).SetField<uint8_t>(fb::Provenance::VT_SHAPE_ONLY, 0, 0);
      if (auto *hash = const_cast<flatbuffers::String *>(p->checkpoint_hash())) {
        std::string mark = "random-" + std::to_string(seed);
        mark.resize(hash->size(), '-');
        std::memcpy(hash->data(), mark.data(), hash->size());
      }
    }
    auto planFile = rt::OutputFile::create(out + "/" + rt::kPlanFileName);
    if (!planFile)
      return planFile.status();
    if (Status s = planFile->write(body); !s)
      return s;
    if (Status s = planFile->write(rt::planTrailer(body.data(), body.size())); !s)
      return s;
    return planFile->close();
  }();
  if (!written)
    fs::remove_all(out, error);
  return written;
}

} // namespace moe::tools
