//===- Plan.cpp - load and verify a compiled plan ------------------------===//
#include "moe/runtime/Plan.h"
#include "moe/abi/File.h"
#include "moe/abi/Kernel.h"
#include "moe/abi/KernelCall.h"
#include "moe/abi/Checksum.h"
#include "moe/abi/PlanFormat.h"
#include "moe/abi/WeightChecksum.h"
#include "PlanPrograms.h"
#include "WeightScan.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace moe::rt {

namespace {

/// A plan larger than this is not one we wrote (ours are KBs to a few MBs).
constexpr uint64_t kMaxPlanBytes = 1ull << 30;

std::string str(uint64_t v) { return std::to_string(v); }

/// A verifying prefault runs on this many threads, each populating and
/// checking its share of the weights: one checks while another waits for
/// the disk, and over a hot page cache the checksums, which read every
/// byte, share the cores (docs/robustness.md).
constexpr int kVerifyWorkers = 2;

} // namespace

const char *prefaultName(Prefault mode) {
  switch (mode) {
  case Prefault::Off:
    return "off";
  case Prefault::Background:
    return "background";
  case Prefault::Sync:
    return "sync";
  }
  return "?";
}

std::optional<Prefault> parsePrefault(const std::string &name) {
  for (Prefault m : {Prefault::Off, Prefault::Background, Prefault::Sync})
    if (name == prefaultName(m))
      return m;
  return std::nullopt;
}

const char *prefaultStateName(PrefaultProgress::State state) {
  switch (state) {
  case PrefaultProgress::State::Off:
    return "off";
  case PrefaultProgress::State::Running:
    return "running";
  case PrefaultProgress::State::Done:
    return "done";
  case PrefaultProgress::State::Stopped:
    return "stopped";
  case PrefaultProgress::State::Failed:
    return "failed";
  }
  return "?";
}

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
MOE_SAME(RoutingPolicy, TokenChoice);
MOE_SAME(RoutingPolicy, Capacity);
MOE_SAME(RoutingPolicy, ExpertChoice);
#undef MOE_SAME
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params)                         \
  static_assert(int(Kernel::Name) == int(plan::OpCode::Name), #Name " op code differs");
#include "moe/abi/Kernels.def"

// A scaled (I8/I4/F8E4M3) weight's scales: an F32 weight
// [ceil(rows / row_group), ceil(cols / group)] where cols is the last
// dimension; I8/I4 have row_group 1; any other tensor has no group.
// int8_activations only on I8 weights with one scale per row (W8A8) and I4
// weights whose groups start at multiples of 128 elements (W4A8: group a
// multiple of 128 or the row length); which kernels may read them:
// checkShapes.
static Status checkQuantization(const plan::Plan &p, uint32_t id, const std::string &where) {
  const plan::Tensor *t = p.tensors()->Get(id);
  const bool quantized = t->storage() == plan::Storage::Weight &&
                         (t->dtype() == plan::DType::I8 || t->dtype() == plan::DType::I4 ||
                          t->dtype() == plan::DType::F8E4M3);
  if (t->int8_activations()) {
    const bool matrix = t->storage() == plan::Storage::Weight && t->shape()->size() >= 2 &&
                        t->row_group() == 1;
    const int64_t cols = matrix ? t->shape()->Get(t->shape()->size() - 1) : 0;
    const bool w8a8 = matrix && t->dtype() == plan::DType::I8 && t->group() == cols;
    const bool w4a8 = matrix && t->dtype() == plan::DType::I4 && t->group() > 0 &&
                      (t->group() % 128 == 0 || t->group() == cols);
    if (!w8a8 && !w4a8)
      return Status::error(where + " has int8_activations, which needs an I8 weight with one "
                                   "scale per row (W8A8: group = its row length) or an I4 "
                                   "weight whose group is a multiple of 128 or its row length "
                                   "(W4A8), row_group 1; it is " +
                           std::string(dtypeName(t->dtype())) + " with group " +
                           std::to_string(t->group()) + " and row_group " +
                           std::to_string(t->row_group()));
  }
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

// Panels8 (format 2.8): only on F32, BF16 or F16 weights whose matrices (the
// last two dimensions) have whole panels of 8 rows; which kernels may read
// them: checkShapes.
static Status checkLayout(const plan::Tensor &t, const std::string &where) {
  if (t.layout() == plan::Layout::Rows)
    return Status::ok();
  if (t.layout() != plan::Layout::Panels8)
    return Status::error(where + " has unknown layout " + str(uint8_t(t.layout())) +
                         " (this build reads Rows and Panels8)");
  const auto &shape = *t.shape();
  std::string dims = "[";
  for (uint32_t d = 0; d < shape.size(); ++d)
    dims += (d ? ", " : "") + std::to_string(shape.Get(d));
  dims += "]";
  const bool floating = t.dtype() == plan::DType::F32 || t.dtype() == plan::DType::BF16 ||
                        t.dtype() == plan::DType::F16;
  if (t.storage() != plan::Storage::Weight || !floating || shape.size() < 2 ||
      shape.Get(shape.size() - 2) % kPanelRows != 0)
    return Status::error(where + " is in panels (Panels8), which needs an F32, BF16 or F16 "
                                 "weight of at least 2 dimensions whose matrices have a "
                                 "multiple of " + str(kPanelRows) + " rows; it is " +
                         std::string(dtypeName(t.dtype())) + " " + dims +
                         (t.storage() == plan::Storage::Weight ? "" : ", not a weight"));
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
  flatbuffers::Verifier versionVerifier(buf, bodySize);
  if (!versionVerifier.VerifyBuffer<plan::PlanVersion>(nullptr))
    return Status::error(path + ": corrupt plan (FlatBuffers verification failed); "
                                "recompile it with moe-compile");
  const auto *v = flatbuffers::GetRoot<plan::PlanVersion>(buf);
  std::string version = std::to_string(v->format_major()) + "." +
                        std::to_string(v->format_minor());
  std::string ours = std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor);
  if (v->format_major() < kFormatMajor)
    return Status::error(path + ": plan format " + version + " is older than this runtime's (" +
                         ours + "); recompile with moe-compile");
  if (v->format_major() != kFormatMajor || v->format_minor() > kFormatMinor)
    return Status::error(path + ": plan format " + version +
                         " is not supported by this runtime (format " + ours +
                         "); use a runtime at least as new as the compiler, or "
                         "recompile the plan");
  flatbuffers::Verifier verifier(buf, bodySize);
  if (!plan::VerifyPlanBuffer(verifier))
    return Status::error(path + ": corrupt plan (FlatBuffers verification failed); "
                                "recompile it with moe-compile");
  loaded->plan_ = plan::GetPlan(buf);
  if (Status s = loaded->check(); !s)
    return Status::error(path + ": " + s.message());
  if (options.rank && (*options.rank < 0 || *options.rank >= loaded->ranks()))
    return Status::error(path + ": rank " + std::to_string(*options.rank) +
                         " cannot run it: the plan is compiled for " +
                         std::to_string(loaded->ranks()) + " rank(s); launch " +
                         std::to_string(loaded->ranks()) + " (mpirun -np " +
                         std::to_string(loaded->ranks()) + ") or recompile the plan");
  loaded->rank_ = options.rank.value_or(0);
  const bool shapeOnly =
      loaded->plan_->provenance() && loaded->plan_->provenance()->shape_only();
  const bool verify = options.verifyWeights || options.verifyWhilePrefaulting;
  if (shapeOnly && (options.mapWeights || verify))
    return Status::error(path + ": a shape-only plan (moe-compile --shape-only) has no "
                                "weights: inspect or simulate it (moe-plan show, moe-plan "
                                "simulate), or compile the checkpoint to run it");
  if (verify && !options.mapWeights)
    return Status::error(path + ": the weights cannot be verified without mapping them "
                                "(LoadOptions::mapWeights)");
  if (options.verifyWhilePrefaulting && !options.verifyWeights &&
      options.prefault == Prefault::Off)
    return Status::error(path + ": the weights cannot be verified while they are prefaulted "
                                "with the prefault off: prefault them (background or sync), "
                                "or do not verify them");
  if (!options.mapWeights) {
    loaded->mappings_.resize(loaded->plan_->weight_files()->size());
    return std::move(loaded);
  }
  if (Status s = loaded->mapWeights(options.rank); !s)
    return s;
  const Prefault mode = options.verifyWeights ? Prefault::Sync : options.prefault;
  loaded->startPrefault(mode, verify);
  // Sync: open is where a mismatch fails. In the background the check may
  // have failed already too (a small plan), but the caller asks prefault().
  if (const PrefaultProgress p = loaded->prefault();
      mode == Prefault::Sync && p.state == PrefaultProgress::State::Failed)
    return Status::error(p.error);
  return std::move(loaded);
}

Status LoadedPlan::check() const {
  const plan::Plan &p = *plan_;
  if (!p.config() || !p.tensors() || !p.programs() || p.programs()->size() == 0 ||
      !p.kv_cache() || !p.kv_cache()->layers() || !p.weight_files())
    return Status::error("incomplete plan: config, tensors, programs, weight files and "
                         "KV-cache spec are all required");
  if (p.programs()->size() > kMaxRanks)
    return Status::error("the plan has " + str(p.programs()->size()) + " rank programs; at most " +
                         str(kMaxRanks) + " are supported");
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
      // The token dimension leads, or follows the rank dimension of a
      // gathered or exchanged activation ([ranks, T, ...]).
      if (dim == -1 && (d == 0 || (d == 1 && t->shape()->Get(0) != -1))) {
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
      break; // within the arena of each program that uses it: checkProgram
    case plan::Storage::Input:
      break;
    default:
      return Status::error(where + " has unknown storage " + str(uint8_t(t->storage())));
    }
  }
  // Micro-batches: rows of another tensor, described as their base.
  for (uint32_t id = 0; id < numTensors; ++id) {
    const plan::Tensor *t = p.tensors()->Get(id);
    if (t->parts() == 1 && t->part() == 0)
      continue;
    const std::string where = "tensor " + str(id) + " ('" + tensorName(id) + "')";
    if (t->parts() < 2 || t->parts() > kMaxMicroBatches || t->part() < 0 || t->part() >= t->parts())
      return Status::error(where + " is part " + std::to_string(t->part()) + " of " +
                           std::to_string(t->parts()) + "; expected 2 to " + str(kMaxMicroBatches) +
                           " parts and a part in [0, parts)");
    const plan::Tensor *b = t->base() < numTensors ? p.tensors()->Get(t->base()) : nullptr;
    if (!b || t->base() == id || b->parts() != 1 ||
        (b->storage() != plan::Storage::Arena && b->storage() != plan::Storage::Input) ||
        t->storage() != b->storage() || t->dtype() != b->dtype() || t->offset() != b->offset() ||
        t->size() != b->size() || !sameElements(t->shape(), b->shape()) || t->shape()->Get(0) != -1)
      return Status::error(where + " is rows of tensor " + str(t->base()) +
                           ", which must be a whole arena tensor or input led by the tokens, "
                           "with the view's storage, dtype, shape, offset and size");
  }
  for (uint32_t id = 0; id < numTensors; ++id) {
    const std::string where = "tensor " + str(id) + " ('" + tensorName(id) + "')";
    if (Status s = checkQuantization(p, id, where); !s)
      return s;
    if (Status s = checkLayout(*p.tensors()->Get(id), where); !s)
      return s;
  }
  if (!weightChecksumName(p.weight_checksum()))
    return Status::error("weight checksum algorithm " + str(uint64_t(p.weight_checksum())) +
                         " is not one this runtime knows (0: checksum64, 1: xxh3-64)");
  for (const auto *file : *p.weight_files())
    if (!file->path() || file->path()->size() == 0 ||
        std::strchr(file->path()->c_str(), '/'))
      return Status::error("weight file names must be plain file names in the plan "
                           "directory");
    else if (file->rank() < 0 || file->rank() >= int(p.programs()->size()))
      return Status::error("weight file " + file->path()->str() + " belongs to rank " +
                           std::to_string(file->rank()) + ", but the plan has " +
                           str(p.programs()->size()) + " rank program(s)");
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
  if (Status st = checkGroups(p); !st)
    return st;
  for (uint32_t r = 0; r < p.programs()->size(); ++r)
    if (Status st = checkProgram(p, r); !st)
      return Status::error((p.programs()->size() > 1 ? "rank " + str(r) + ": " : "") +
                           st.message());
  return checkRanks(p);
}

Status LoadedPlan::mapWeights(const std::optional<int> &rank) {
  const plan::Plan &p = *plan_;
  for (const auto *file : *p.weight_files()) {
    if (rank && file->rank() != *rank) {
      mappings_.push_back({}); // another rank's: never touched here
      continue;
    }
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

void LoadedPlan::startPrefault(Prefault mode, bool verify) {
  std::vector<ScanFile> files;
  for (const Mapping &m : mappings_)
    files.push_back({static_cast<const uint8_t *>(m.data), m.data ? m.size : 0});
  // A plain prefault is one pass over the files; a verifying one, two
  // workers (docs/robustness.md: they keep it within 10% of the plain one
  // when the weights come from disk).
  ScanPlan scan = planScan(*plan_, std::move(files), verify, verify ? kVerifyWorkers : 1);
  if (mode == Prefault::Off || (scan.bytes == 0 && !verify))
    return; // progress_ says Off (a verifying one with nothing mapped is Done at once)
  // Before any page is faulted in: huge pages where the kernel allows them
  // for the mapping (for a file mapping it decides by the file system and
  // its THP settings; refused or ignored, the pages stay small). Only a
  // flag on the mapping: the readahead, which may wait for the disk, is
  // the scan's.
  bool huge = true;
  for (const Mapping &m : mappings_)
    if (m.data)
      huge = ::madvise(m.data, m.size, MADV_HUGEPAGE) == 0 && huge;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.mode = mode;
    progress_.state = PrefaultProgress::State::Running;
    progress_.bytes = scan.bytes;
    progress_.hugePageAdvice = huge;
    progress_.verifying = verify;
    progress_.checksum = plan_->weight_checksum();
    progress_.weightBytes = scan.weightBytes;
    prefaultStart_ = std::chrono::steady_clock::now();
  }
  if (mode == Prefault::Background) {
    // Shared, so that it is still here if no thread can be had.
    auto shared = std::make_shared<const ScanPlan>(std::move(scan));
    try {
      prefaultThread_ = std::thread([this, shared] {
        pthread_setname_np(pthread_self(), "moe-prefault");
        runPrefault(*shared);
      });
      return;
    } catch (const std::system_error &) {
      // No thread to be had: run it here instead.
    }
    runPrefault(*shared);
    return;
  }
  runPrefault(scan);
}

void LoadedPlan::runPrefault(const ScanPlan &scan) {
  const plan::WeightChecksum algorithm = plan_->weight_checksum();
  auto report = [this](const ScanStep &step) {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.populated += step.populated;
    progress_.verified += step.verified;
    progress_.populateRead = progress_.populateRead && step.populateRead;
  };
  // Lists after the first go to helpers, which this thread joins before it
  // reports the end (the plan's destructor joins this one, or open waits).
  const size_t workers = scan.workers.size();
  std::vector<ScanEnd> ends(workers);
  std::vector<std::thread> helpers;
  std::vector<size_t> here; // the lists this thread scans
  if (workers > 0)
    here.push_back(0);
  for (size_t k = 1; k < workers; ++k) {
    try {
      helpers.emplace_back([&, k] {
        pthread_setname_np(pthread_self(), "moe-prefault-2");
        ends[k] = scanParts(scan, k, algorithm, stop_, report);
      });
    } catch (const std::system_error &) {
      here.push_back(k); // no thread to be had
    }
  }
  for (size_t k : here)
    ends[k] = scanParts(scan, k, algorithm, stop_, report);
  for (std::thread &t : helpers)
    t.join();
  auto state = PrefaultProgress::State::Done;
  std::string error;
  for (const ScanEnd &end : ends)
    if (end.kind == ScanEnd::Kind::Mismatch) {
      state = PrefaultProgress::State::Failed;
      error = checksumMismatch(end.tensor);
      break;
    } else if (end.kind == ScanEnd::Kind::Stopped) {
      state = PrefaultProgress::State::Stopped;
    }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.state = state;
    progress_.error = error;
    progress_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prefaultStart_).count();
  }
  ended_.notify_all();
}

PrefaultProgress LoadedPlan::prefault() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrefaultProgress p = progress_;
  if (p.state == PrefaultProgress::State::Running)
    p.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prefaultStart_).count();
  return p;
}

void LoadedPlan::waitForPrefault() const {
  std::unique_lock<std::mutex> lock(mutex_);
  ended_.wait(lock, [&] { return progress_.state != PrefaultProgress::State::Running; });
}

LoadedPlan::~LoadedPlan() {
  // The prefault thread reads the mappings: it stops within a chunk and is
  // joined before they go.
  stop_.store(true, std::memory_order_relaxed);
  if (prefaultThread_.joinable())
    prefaultThread_.join();
  for (Mapping &m : mappings_)
    if (m.data)
      ::munmap(m.data, m.size);
}

const void *LoadedPlan::weightData(uint32_t id) const {
  const plan::Tensor *t = plan_->tensors()->Get(id);
  const Mapping &m = mappings_[t->weight_file()];
  return m.data ? static_cast<const uint8_t *>(m.data) + t->offset() : nullptr;
}

std::string LoadedPlan::checksumMismatch(uint32_t tensor) const {
  const plan::Tensor *t = plan_->tensors()->Get(tensor);
  std::ostringstream os;
  os << dir_ << "/" << plan_->weight_files()->Get(t->weight_file())->path()->str()
     << ": checksum mismatch in weight '" << t->name()->str() << "' (bytes " << t->offset()
     << ".." << t->offset() + t->size() << "): the weight file is corrupt or belongs to "
     << "another plan";
  return os.str();
}

} // namespace moe::rt
