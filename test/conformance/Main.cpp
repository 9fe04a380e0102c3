//===- Main.cpp - conformance tests, alone or under mpirun ----------------===//
#include "Ranks.h"
#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Registry.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace moe::conformance {

namespace {
std::unique_ptr<rt::Collective> theRanks;
std::unique_ptr<rt::Device> theDevice;

/// Prints failures only, tagged "[rank r]".
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo &t) override {
    if (t.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

private:
  int rank_;
};

/// A backend this build has but this machine cannot run (CUDA without a
/// GPU): every test reports itself skipped, with the reason, rather than
/// passing without running or being absent. (A skip from a global
/// environment would count the tests as passed.) A skip recorded as a test
/// starts keeps its body from running.
class SkipEverything : public ::testing::EmptyTestEventListener {
public:
  explicit SkipEverything(std::string why) : why_(std::move(why)) {}
  void OnTestStart(const ::testing::TestInfo &) override { GTEST_SKIP() << "skipped: " << why_; }

private:
  std::string why_;
};

/// Why backend `name` of this build cannot run here; "" if it can or if
/// the build has no such backend (createDevice then says so).
std::string unavailable(const std::string &name) {
  for (const rt::BackendInfo &b : rt::listBackends())
    if (b.name == name)
      return b.unavailable;
  return "";
}
} // namespace

rt::Collective &ranks() { return *theRanks; }
rt::Device &device() { return *theDevice; }
rt::Stream &stream() { return theDevice->stream(0); }

} // namespace moe::conformance

int main(int argc, char **argv) {
  using namespace moe;
  ::testing::InitGoogleTest(&argc, argv);
  if (rt::launchedByMpi()) {
    auto mpi = rt::createMpiCollective("conformance-tests");
    if (!mpi) {
      std::fprintf(stderr, "conformance-tests: %s\n", mpi.status().message().c_str());
      return 1;
    }
    conformance::theRanks = mpi.take();
  } else {
    conformance::theRanks = rt::createLocalCollective();
  }
  // The backend under test, from the registry: MOE_CONFORMANCE_DEVICE, or
  // cpu (a new backend runs this same binary with its name).
  const char *env = std::getenv("MOE_CONFORMANCE_DEVICE");
  const std::string name = env ? env : "cpu";
  if (std::string why = conformance::unavailable(name); !why.empty()) {
    ::testing::UnitTest::GetInstance()->listeners().Append(
        new conformance::SkipEverything(name + ": " + why));
    int failed = RUN_ALL_TESTS();
    conformance::theRanks.reset(); // MPI_Finalize
    return failed;
  }
  auto device = rt::createDevice(name);
  if (!device) {
    std::fprintf(stderr, "conformance-tests: %s\n", device.status().message().c_str());
    return 1;
  }
  conformance::theDevice = device.take();
  const int rank = conformance::theRanks->rank();
  if (rank != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new conformance::FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS();
  conformance::theRanks.reset(); // MPI_Finalize
  return failed;
}
