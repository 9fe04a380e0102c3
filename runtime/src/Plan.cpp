//===- Plan.cpp - load and verify a compiled plan ------------------------===//
#include "moe/runtime/Plan.h"
#include "moe/runtime/File.h"
#include "moe/runtime/Kernel.h"
#include "moe/runtime/Checksum.h"
#include "moe/runtime/PlanFormat.h"
#include "PlanShapes.h"
#include "PlanStreams.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moe::rt {

namespace {

/// The parameter table of each kernel's instructions (Kernels.def).
const plan::OpParams kKernelParams[] = {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params) plan::OpParams::Params,
#include "moe/runtime/Kernels.def"
};

/// A plan larger than this is not one we wrote (ours are KBs to a few MBs).
constexpr uint64_t kMaxPlanBytes = 1ull << 30;

std::string str(uint64_t v) { return std::to_string(v); }

/// [offset, offset + size) lies in [0, limit), without overflowing.
bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}
/// offset + size as text, also when it does not fit in 64 bits.
std::string end(uint64_t offset, uint64_t size) {
  uint64_t e = 0;
  return __builtin_add_overflow(offset, size, &e) ? "2^64 or more" : str(e);
}

} // namespace

// The HAL's enums number what the plan format numbers.
#define MOE_SAME(E, V) static_assert(int(E::V) == int(plan::E::V), #E "::" #V " differs")
MOE_SAME(DType, F32);
MOE_SAME(DType, BF16);
MOE_SAME(DType, F16);
MOE_SAME(DType, F8E4M3);
MOE_SAME(DType, I32);
MOE_SAME(DType, I8);
MOE_SAME(DType, I4);
static_assert(int(plan::DType::MAX) == int(DType::I4), "a plan DType the HAL lacks");
MOE_SAME(Scoring, Softmax);
MOE_SAME(Scoring, Sigmoid);
MOE_SAME(TopkMethod, Greedy);
MOE_SAME(TopkMethod, GroupLimitedGreedy);
MOE_SAME(TopkMethod, NoAuxTc);
#undef MOE_SAME
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params)                         \
  static_assert(int(Kernel::Name) == int(plan::OpCode::Name), #Name " op code differs");
#include "moe/runtime/Kernels.def"
static_assert(int(plan::OpCode::MAX) + 1 == sizeof(kKernelParams) / sizeof(kKernelParams[0]),
              "plan.fbs's OpCode and Kernels.def disagree: rerun cmake");

int kvLayerOf(const plan::Instruction &inst) {
  if (auto *a = inst.params_as_AttentionParams())
    return a->layer();
  if (auto *m = inst.params_as_MlaParams())
    return m->layer();
  return -1;
}

// A scaled (I8/I4/F8E4M3) weight's scales: an F32 weight
// [ceil(rows / row_group), ceil(cols / group)] where cols is the last
// dimension; I8/I4 have row_group 1; any other tensor has no group.
static Status checkQuantization(const plan::Plan &p, uint32_t id, const std::string &where) {
  const plan::Tensor *t = p.tensors()->Get(id);
  const bool quantized = t->storage() == plan::Storage::Weight &&
                         (t->dtype() == plan::DType::I8 || t->dtype() == plan::DType::I4 ||
                          t->dtype() == plan::DType::F8E4M3);
  if (!quantized)
    return t->group() == 0 ? Status::ok()
                           : Status::error(where + " has a quantization group but is not an "
                                                   "I8, I4 or F8E4M3 weight");
  const auto &shape = *t->shape();
  const int64_t cols = shape.Get(shape.size() - 1);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    rows *= shape.Get(d);
  if (t->group() < 1 || t->group() > cols)
    return Status::error(where + " has quantization group " + std::to_string(t->group()) +
                         "; it must be in [1, " + str(cols) + "] (its row length)");
  if (t->dtype() == plan::DType::I4 && (cols % 2 || t->group() % 2))
    return Status::error(where + " is I4 with an odd row length or group");
  const int64_t rowGroup = t->row_group();
  if (rowGroup < 1 || rowGroup > rows || (rowGroup != 1 && t->dtype() != plan::DType::F8E4M3))
    return Status::error(where + " has row group " + std::to_string(rowGroup) +
                         "; it must be 1 (I8, I4) or in [1, " + str(rows) + "] (F8E4M3)");
  if (t->scales() >= p.tensors()->size())
    return Status::error(where + " names scales tensor " + str(t->scales()) +
                         ", but the plan has " + str(p.tensors()->size()));
  const plan::Tensor *s = p.tensors()->Get(t->scales());
  const int64_t groups = (cols + t->group() - 1) / t->group();
  const int64_t blockRows = (rows + rowGroup - 1) / rowGroup;
  if (s->storage() != plan::Storage::Weight || s->dtype() != plan::DType::F32 ||
      s->shape()->size() != 2 || s->shape()->Get(0) != blockRows ||
      s->shape()->Get(1) != groups)
    return Status::error(where + " needs F32 weight scales [" + str(blockRows) + ", " +
                         str(groups) + "]; tensor " + str(t->scales()) + " is not that");
  return Status::ok();
}

std::vector<int32_t> eosTokens(const plan::Plan &plan) {
  const plan::ModelConfig *c = plan.config();
  if (!c)
    return {};
  if (c->eos_token_ids())
    return std::vector<int32_t>(c->eos_token_ids()->begin(), c->eos_token_ids()->end());
  if (c->eos_token_id() >= 0)
    return {c->eos_token_id()};
  return {};
}

Expected<std::unique_ptr<LoadedPlan>> LoadedPlan::open(const std::string &dir,
                                                       const LoadOptions &options) {
  std::unique_ptr<LoadedPlan> loaded(new LoadedPlan());
  loaded->dir_ = dir;
  std::string path = dir + "/" + kPlanFileName;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(dir + ": not a plan directory (run moe-compile <hf-dir> -o " +
                         dir + " first)");
  auto bytes = readFile(path, kMaxPlanBytes);
  if (!bytes)
    return bytes.status();
  if (bytes->size() < 24)
    return Status::error(path + ": truncated (" + str(bytes->size()) + " bytes)");
  loaded->bytes_.assign(bytes->begin(), bytes->end());

  size_t bodySize = loaded->bytes_.size() - kPlanTrailerBytes;
  const uint8_t *buf = loaded->bytes_.data();
  if (!plan::PlanBufferHasIdentifier(buf))
    return Status::error(path + ": not a moe plan (file identifier '" +
                         std::string(reinterpret_cast<const char *>(buf) + 4, 4) +
                         "', expected '" + plan::PlanIdentifier() + "')");
  if (loaded->bytes_.size() < kPlanTrailerBytes + 8 ||
      std::memcmp(buf + bodySize, kPlanTrailerTag, sizeof kPlanTrailerTag) != 0)
    return Status::error(path + ": not a moe plan, or truncated (no checksum trailer)");
  uint64_t stored = 0;
  for (int i = 7; i >= 0; --i)
    stored = (stored << 8) | buf[bodySize + 8 + size_t(i)];
  loaded->checksum_ = stored;
  if (checksum64(buf, bodySize) != stored)
    return Status::error(path + ": checksum mismatch: the plan file is corrupt; "
                                "recompile it with moe-compile");
  flatbuffers::Verifier verifier(buf, bodySize);
  if (!plan::VerifyPlanBuffer(verifier))
    return Status::error(path + ": corrupt plan (FlatBuffers verification failed); "
                                "recompile it with moe-compile");
  loaded->plan_ = plan::GetPlan(buf);
  const plan::Plan &p = *loaded->plan_;
  std::string version = std::to_string(p.format_major()) + "." +
                        std::to_string(p.format_minor());
  std::string ours = std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor);
  if (p.format_major() != kFormatMajor ||
      p.format_minor() > kFormatMinor)
    return Status::error(path + ": plan format " + version +
                         " is not supported by this runtime (format " + ours +
                         "); use a runtime at least as new as the compiler, or "
                         "recompile the plan");
  if (Status s = loaded->check(); !s)
    return Status::error(path + ": " + s.message());
  if (Status s = loaded->mapWeights(); !s)
    return s;
  if (options.verifyWeights)
    if (Status s = loaded->verifyWeights(); !s)
      return s;
  return std::move(loaded);
}

Status LoadedPlan::check() const {
  const plan::Plan &p = *plan_;
  if (!p.config() || !p.tensors() || !p.programs() || !p.inputs() ||
      !p.outputs() || !p.kv_cache() || !p.kv_cache()->layers() || !p.weight_files())
    return Status::error("incomplete plan: config, tensors, programs, inputs, outputs, "
                         "weight files and KV-cache spec are all required");
  for (int32_t id : eosTokens(p))
    if (id < 0 || id >= p.config()->vocab_size())
      return Status::error("end-of-sequence token " + str(id) + " outside the vocabulary [0, " +
                           str(p.config()->vocab_size()) + ")");
  size_t numTensors = p.tensors()->size();
  int64_t maxTokens = p.max_batch_tokens();
  if (maxTokens < 1 || maxTokens > (1 << 24))
    return Status::error("max_batch_tokens " + std::to_string(maxTokens) +
                         " out of range [1, 16777216]");
  auto tensorName = [&](uint32_t id) {
    const auto *t = p.tensors()->Get(id);
    return std::string(t->name() ? t->name()->c_str() : "?");
  };
  for (uint32_t id = 0; id < numTensors; ++id) {
    const plan::Tensor *t = p.tensors()->Get(id);
    std::string where = "tensor " + str(id) + " ('" + tensorName(id) + "')";
    size_t elem = dtypeSize(t->dtype());
    if (!elem)
      return Status::error(where + " has unknown dtype " + str(uint8_t(t->dtype())));
    if (!t->shape() || t->shape()->size() == 0 || t->shape()->size() > 4)
      return Status::error(where + " needs a shape of rank 1 to 4");
    uint64_t numel = 1;
    for (size_t d = 0; d < t->shape()->size(); ++d) {
      int64_t dim = t->shape()->Get(d);
      if (dim == -1 && d == 0) {
        numel *= uint64_t(maxTokens);
        continue;
      }
      if (dim < 1 || dim > (int64_t(1) << 32))
        return Status::error(where + " has dimension " + std::to_string(dim) +
                             " out of range");
      numel *= uint64_t(dim);
      if (numel > (uint64_t(1) << 48))
        return Status::error(where + " is too large");
    }
    uint64_t bytes = t->dtype() == plan::DType::I4 ? (numel + 1) / 2 : numel * elem;
    if (t->dtype() == plan::DType::I4 && t->storage() != plan::Storage::Weight)
      return Status::error(where + " is I4, which only weights can be");
    switch (t->storage()) {
    case plan::Storage::Weight:
      if (t->shape()->Get(0) == -1)
        return Status::error(where + " is a weight with a token dimension");
      if (t->weight_file() >= p.weight_files()->size())
        return Status::error(where + " names weight file " + str(t->weight_file()) +
                             ", but the plan has " + str(p.weight_files()->size()));
      if (t->offset() % kWeightAlignment != 0)
        return Status::error(where + " offset " + str(t->offset()) + " is not " +
                             str(kWeightAlignment) + "-byte aligned");
      if (t->size() != bytes)
        return Status::error(where + " has size " + str(t->size()) +
                             " but its shape and dtype need " + str(bytes));
      if (!fits(t->offset(), t->size(), p.weight_files()->Get(t->weight_file())->size()))
        return Status::error(where + " ends at byte " + end(t->offset(), t->size()) +
                             ", past its weight file (" +
                             str(p.weight_files()->Get(t->weight_file())->size()) + " bytes)");
      break;
    case plan::Storage::Arena:
      if (t->size() != bytes)
        return Status::error(where + " has arena size " + str(t->size()) +
                             " but needs " + str(bytes) + " at max_batch_tokens");
      // Kernels read f32 and i32 rows: the planner aligns every buffer.
      if (t->offset() % kWeightAlignment != 0)
        return Status::error(where + " arena offset " + str(t->offset()) + " is not " +
                             str(kWeightAlignment) + "-byte aligned");
      if (!fits(t->offset(), t->size(), p.arena_bytes()))
        return Status::error(where + " ends at arena byte " + end(t->offset(), t->size()) +
                             ", past the arena (" + str(p.arena_bytes()) + " bytes)");
      break;
    case plan::Storage::Input:
      break;
    default:
      return Status::error(where + " has unknown storage " + str(uint8_t(t->storage())));
    }
  }
  for (uint32_t id = 0; id < numTensors; ++id)
    if (Status s = checkQuantization(p, id, "tensor " + str(id) + " ('" + tensorName(id) + "')");
        !s)
      return s;
  for (const auto *file : *p.weight_files())
    if (!file->path() || file->path()->size() == 0 ||
        std::strchr(file->path()->c_str(), '/'))
      return Status::error("weight file names must be plain file names in the plan "
                           "directory");
  auto checkIds = [&](const flatbuffers::Vector<uint32_t> *ids, const std::string &what,
                      plan::Storage storage) -> Status {
    for (uint32_t id : *ids) {
      if (id >= numTensors)
        return Status::error(what + " names tensor " + str(id) + ", but the plan has " +
                             str(numTensors));
      if (p.tensors()->Get(id)->storage() != storage)
        return Status::error(what + " tensor " + str(id) + " ('" + tensorName(id) +
                             "') has the wrong storage");
    }
    return Status::ok();
  };
  if (p.inputs()->size() != 2 || p.outputs()->size() != 1)
    return Status::error("a plan takes 2 inputs (tokens, positions) and gives 1 "
                         "output (logits), got " + str(p.inputs()->size()) + " and " +
                         str(p.outputs()->size()));
  if (Status s = checkIds(p.inputs(), "input", plan::Storage::Input); !s)
    return s;
  if (Status s = checkIds(p.outputs(), "output", plan::Storage::Arena); !s)
    return s;
  const plan::KvCacheSpec &kv = *p.kv_cache();
  if (kv.dtype() != plan::DType::F32 && kv.dtype() != plan::DType::BF16 &&
      kv.dtype() != plan::DType::I8 && kv.dtype() != plan::DType::F8E4M3)
    return Status::error(std::string("KV-cache dtype ") + dtypeName(kv.dtype()) +
                         " is not supported (F32, BF16, I8, F8E4M3)");
  if (kv.max_context() < 1 || kv.max_context() > (1 << 24))
    return Status::error("KV-cache max_context " + std::to_string(kv.max_context()) +
                         " out of range [1, 16777216]");
  for (const auto *layer : *kv.layers())
    if (layer->k_width() < 1 || layer->v_width() < 1 || layer->k_width() > (1 << 20) ||
        layer->v_width() > (1 << 20))
      return Status::error("KV-cache layer widths out of range");
  if (p.programs()->size() != 1)
    return Status::error("this runtime runs single-rank plans; the plan has " +
                         str(p.programs()->size()) + " programs");
  const auto *insts = p.programs()->Get(0)->instructions();
  if (!insts || insts->size() == 0)
    return Status::error("program 0 has no instructions");
  for (uint32_t i = 0; i < insts->size(); ++i) {
    const plan::Instruction *inst = insts->Get(i);
    std::string where = "instruction " + str(i);
    const KernelInfo *k = kernelInfo(kernelOf(*inst));
    if (!k)
      return Status::error(where + " has unknown op code " + str(uint8_t(inst->op())));
    const plan::OpParams params = kKernelParams[size_t(inst->op())];
    where += " (" + std::string(k->name) + ")";
    size_t nin = inst->inputs() ? inst->inputs()->size() : 0;
    size_t nout = inst->outputs() ? inst->outputs()->size() : 0;
    if (nin < k->minIns || nin > k->maxIns || nout != k->outs)
      return Status::error(where + " has " + str(nin) + " inputs and " + str(nout) +
                           " outputs; expected " + str(k->minIns) + "-" + str(k->maxIns) +
                           " and " + str(k->outs));
    if (params != plan::OpParams::NONE && inst->params_type() != params)
      return Status::error(where + " lacks its " + plan::EnumNameOpParams(params));
    for (uint32_t id : *inst->inputs())
      if (id >= numTensors)
        return Status::error(where + " reads tensor " + str(id) + ", but the plan has " +
                             str(numTensors));
    for (uint32_t id : *inst->outputs())
      if (id >= numTensors || p.tensors()->Get(id)->storage() != plan::Storage::Arena)
        return Status::error(where + " writes tensor " + str(id) +
                             ", which is not an arena tensor of the plan");
    if (auto *att = inst->params_as_AttentionParams()) {
      if (att->num_heads() < 1 || att->num_kv_heads() < 1 || att->head_dim() < 1 ||
          att->num_heads() % att->num_kv_heads() != 0 || !att->rope() ||
          !att->rope()->inv_freq() || att->rope()->inv_freq()->size() * 2 > size_t(att->head_dim()))
        return Status::error(where + " has inconsistent attention parameters");
    }
    if (auto *mla = inst->params_as_MlaParams()) {
      if (mla->num_heads() < 1 || mla->kv_lora_rank() < 1 || mla->qk_nope_head_dim() < 1 ||
          mla->qk_rope_head_dim() < 2 || mla->v_head_dim() < 1 || !mla->rope() ||
          !mla->rope()->inv_freq() ||
          mla->rope()->inv_freq()->size() * 2 != size_t(mla->qk_rope_head_dim()))
        return Status::error(where + " has inconsistent MLA parameters");
    }
    if (int layer = kvLayerOf(*inst); layer != -1 && (layer < 0 || size_t(layer) >= kv.layers()->size()))
      return Status::error(where + " uses KV-cache layer " + std::to_string(layer) +
                           ", but the cache has " + str(kv.layers()->size()));
    if (auto *r = inst->params_as_RouterParams())
      if (r->num_experts() < 1 || r->top_k() < 1 || r->top_k() > r->num_experts() ||
          r->n_group() < 1 || r->num_experts() % r->n_group() != 0 ||
          r->topk_group() < 1 || r->topk_group() > r->n_group() ||
          r->scoring() > plan::Scoring::MAX || r->method() > plan::TopkMethod::MAX)
        return Status::error(where + " has inconsistent router parameters");
    if (auto *e = inst->params_as_ExpertsParams())
      if (e->num_experts() < 1 || e->intermediate() < 1 || e->num_shared() < 0 ||
          e->num_shared() > (1 << 20) ||
          nin != (e->fused_gate_up() ? 5u : 6u))
        return Status::error(where + " has inconsistent expert parameters");
  }
  if (Status st = checkShapes(p); !st)
    return st;
  return checkStreams(p);
}

Status LoadedPlan::mapWeights() {
  const plan::Plan &p = *plan_;
  for (const auto *file : *p.weight_files()) {
    std::string path = dir_ + "/" + file->path()->str();
    auto in = InputFile::open(path);
    if (!in)
      return in.status();
    if (in->size() < file->size())
      return Status::error(path + ": " + str(in->size()) + " bytes, but the plan needs " +
                           str(file->size()) + " (truncated weight file?)");
    const int fd = in->fd();
    Mapping m;
    m.size = file->size();
    if (m.size > 0) {
      m.data = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m.data == MAP_FAILED)
        return Status::error(path + ": mmap failed (" + std::strerror(errno) + ")");
    }
    mappings_.push_back(m); // the mapping outlives the descriptor

  }
  return Status::ok();
}

LoadedPlan::~LoadedPlan() {
  for (Mapping &m : mappings_)
    if (m.data)
      ::munmap(m.data, m.size);
}

const void *LoadedPlan::weightData(uint32_t id) const {
  const plan::Tensor *t = plan_->tensors()->Get(id);
  return static_cast<const uint8_t *>(mappings_[t->weight_file()].data) + t->offset();
}

Status LoadedPlan::verifyWeights() const {
  const plan::Plan &p = *plan_;
  for (uint32_t id = 0; id < p.tensors()->size(); ++id) {
    const plan::Tensor *t = p.tensors()->Get(id);
    if (t->storage() != plan::Storage::Weight)
      continue;
    uint64_t sum = checksum64(weightData(id), t->size());
    if (sum != t->checksum()) {
      std::ostringstream os;
      os << dir_ << "/" << p.weight_files()->Get(t->weight_file())->path()->str()
         << ": checksum mismatch in weight '" << t->name()->str() << "' (bytes "
         << t->offset() << ".." << t->offset() + t->size() << "): the weight file is "
         << "corrupt or belongs to another plan";
      return Status::error(os.str());
    }
  }
  return Status::ok();
}

} // namespace moe::rt
