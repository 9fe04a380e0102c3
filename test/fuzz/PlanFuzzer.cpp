//===- PlanFuzzer.cpp - fuzz the plan loader and verifier -----------------===//
//
// The input is a plan body: the target appends a valid checksum trailer, so
// mutations reach the FlatBuffers verifier and the loader's checks instead
// of stopping at the checksum. A plan directory with a 16 MiB (sparse)
// weight file lets the weight-range checks and the mapping run too. A plan that loads is also asked for
// its memory needs (overflow checks) and shown through the runtime's
// accessors.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Checksum.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/PlanFormat.h"
#include "moe/runtime/Session.h"
#include "test/fuzz/FuzzTarget.h"

#include <unistd.h>

#include <cstring>
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
  file.insert(file.end(), rt::kPlanTrailerTag, rt::kPlanTrailerTag + 8);
  uint64_t sum = rt::checksum64(data, size);
  for (int i = 0; i < 8; ++i)
    file.push_back(uint8_t(sum >> (8 * i)));
  fuzz::writeFile(dir + "/" + rt::kPlanFileName, file.data(), file.size());
  auto plan = rt::LoadedPlan::open(dir);
  if (!plan)
    return 0;
  const plan::Plan &p = (*plan)->plan();
  auto needs = rt::memoryNeeds(p, uint64_t(p.kv_cache()->max_context()), p.kv_cache()->dtype());
  (void)needs;
  for (uint32_t id = 0; id < p.tensors()->size(); ++id)
    if (p.tensors()->Get(id)->storage() == plan::Storage::Weight) {
      const auto *bytes = static_cast<const uint8_t *>((*plan)->weightData(id));
      volatile uint8_t sink = p.tensors()->Get(id)->size() ? bytes[p.tensors()->Get(id)->size() - 1] : 0;
      (void)sink;
    }
  return 0;
}
