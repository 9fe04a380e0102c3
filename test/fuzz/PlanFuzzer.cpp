//===- PlanFuzzer.cpp - fuzz the plan loader and verifier -----------------===//
//
// The input is a plan body: the target appends a valid checksum trailer, so
// mutations reach the FlatBuffers verifier and the loader's checks instead
// of stopping at the checksum. A plan directory with a 16 MiB (sparse)
// weight file lets the weight-range checks and the mapping run too. A plan
// that loads must be safe to run: it is run, two tokens through a session
// capped at 64 MiB, on the CPU backend.
//
//===----------------------------------------------------------------------===//
#include "moe/abi/Checksum.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/abi/PlanFormat.h"
#include "moe/runtime/Session.h"
#include "test/fuzz/FuzzTarget.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

using namespace moe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = fuzz::scratchDir();
  static const bool weights = [&] {
    fuzz::writeFile(dir + "/weights-0.bin", nullptr, 0);
    return ::truncate((dir + "/weights-0.bin").c_str(), 16 << 20) == 0;
  }();
  (void)weights;
  std::vector<uint8_t> file(data, data + size);
  const std::string trailer = rt::planTrailer(data, size);
  file.insert(file.end(), trailer.begin(), trailer.end());
  fuzz::writeFile(dir + "/" + rt::kPlanFileName, file.data(), file.size());
  auto plan = rt::LoadedPlan::open(dir);
  if (!plan)
    return 0;
  const plan::Plan &p = (*plan)->plan();
  static std::unique_ptr<rt::Device> device = rt::createCpuDevice();
  rt::SessionOptions options;
  options.maxContext = std::min<int64_t>(4, p.kv_cache()->max_context());
  options.memoryLimit = 64 << 20;
  auto session = rt::Session::create(**plan, *device, options);
  if (!session || p.config()->vocab_size() > (1 << 20))
    return 0;
  const int32_t tokens[2] = {0, int32_t(p.config()->vocab_size() - 1)}, positions[2] = {0, 1};
  int64_t count = std::min<int64_t>({2, p.max_batch_tokens(), options.maxContext});
  std::vector<float> logits(size_t(count * p.config()->vocab_size()));
  (void)(*session)->forward(tokens, positions, count, logits.data());
  return 0;
}
