//===- RankDeath.cpp - a rank dies in the middle of collectives -----------===//
//
//   mpirun -np N rank-death KILL_RANK AFTER
//
// Every rank all-reduces 1024 floats in a loop; rank KILL_RANK kills itself
// (SIGKILL) after AFTER rounds, while the others wait in the next one. The
// survivors must each print one line and exit non-zero, soon
// (test/conformance/rank-death.py checks).
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/MpiCollective.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  using namespace moe;
  if (argc != 3) {
    std::fprintf(stderr, "usage: rank-death KILL_RANK AFTER\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]), after = std::atoi(argv[2]);
  auto ranks = rt::createMpiCollective("rank-death");
  if (!ranks) {
    std::fprintf(stderr, "rank-death: %s\n", ranks.status().message().c_str());
    return 1;
  }
  rt::Collective &c = **ranks;
  auto device = rt::createCpuDevice();
  std::vector<float> x(1024, 1.0f);
  for (int round = 0; round < 1000000; ++round) {
    if (c.rank() == victim && round == after)
      std::raise(SIGKILL);
    if (rt::Status st = c.allReduce(device->stream(0), {x.data(), rt::DType::F32, x.size()});
        !st) {
      std::fprintf(stderr, "rank-death: rank %d of %d: error: %s\n", c.rank(), c.size(),
                   st.message().c_str());
      return 1;
    }
    std::fill(x.begin(), x.end(), 1.0f);
  }
  std::fprintf(stderr, "rank-death: rank %d of %d: rank %d never died\n", c.rank(), c.size(),
               victim);
  return 3;
}
