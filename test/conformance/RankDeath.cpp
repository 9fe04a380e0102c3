//===- RankDeath.cpp - a rank dies in the middle of collectives -----------===//
//
//   mpirun -np N rank-death KILL_RANK AFTER [kill|stop] [DEADLINE_SECONDS]
//
// Every rank all-reduces 1024 floats in a loop; rank KILL_RANK kills
// (SIGKILL, the default) or stops (SIGSTOP) itself after AFTER rounds,
// while the others wait in the next one, each for at most DEADLINE_SECONDS
// (default: the runtime's). The survivors must each print one line and exit
// non-zero, soon; a stopped rank must be named (test/conformance/
// rank-death.py checks).
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/MpiCollective.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  using namespace moe;
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: rank-death KILL_RANK AFTER [kill|stop] [DEADLINE_SECONDS]\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]), after = std::atoi(argv[2]);
  const int signal = argc > 3 && std::string(argv[3]) == "stop" ? SIGSTOP : SIGKILL;
  const auto deadline = argc > 4 ? std::chrono::milliseconds(1000 * std::atoi(argv[4]))
                                 : rt::kDefaultCollectiveDeadline;
  auto ranks = rt::createMpiCollective("rank-death", deadline);
  if (!ranks) {
    std::fprintf(stderr, "rank-death: %s\n", ranks.status().message().c_str());
    return 1;
  }
  rt::Collective &c = **ranks;
  auto device = rt::createCpuDevice();
  std::vector<float> x(1024, 1.0f);
  for (int round = 0; round < 1000000; ++round) {
    if (c.rank() == victim && round == after)
      std::raise(signal);
    if (rt::Status st = c.allReduce(device->stream(0), {x.data(), rt::DType::F32, x.size()});
        !st) {
      std::fprintf(stderr, "rank-death: rank %d of %d: error: %s\n", c.rank(), c.size(),
                   st.message().c_str());
      c.abandon();
      return 1;
    }
    std::fill(x.begin(), x.end(), 1.0f);
  }
  std::fprintf(stderr, "rank-death: rank %d of %d: rank %d never died\n", c.rank(), c.size(),
               victim);
  return 3;
}
