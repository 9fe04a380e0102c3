// Every collective, in F32, BF16 and I32, against a naive reference that
// each rank computes alone: every rank's input is a known function of its
// rank, so each rank knows what every other rank sent. The values are small
// integers, exact in every dtype and in any order of summation, so results
// must be equal, not close; one test sums random floats with a tolerance.
// Run alone (the local collective) and under mpirun -np 2 and -np 4.
#include "Ranks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

namespace {

using moe::conformance::ranks;
using moe::conformance::stream;
namespace rt = moe::rt;

/// `count` elements of `dtype`, read and written as doubles.
class Array {
public:
  Array(rt::DType dtype, size_t count) : dtype_(dtype), bytes_(count * rt::dtypeSize(dtype)) {}
  rt::DeviceArray device() { return {bytes_.data(), dtype_, size()}; }
  size_t size() const { return bytes_.size() / rt::dtypeSize(dtype_); }
  void set(size_t i, double v) {
    uint8_t *p = bytes_.data() + i * rt::dtypeSize(dtype_);
    if (dtype_ == rt::DType::I32) {
      int32_t x = int32_t(v);
      std::memcpy(p, &x, 4);
    } else {
      float f = float(v);
      if (dtype_ == rt::DType::F32) {
        std::memcpy(p, &f, 4);
      } else { // BF16: the values used are exact, truncation is exact
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t h = uint16_t(bits >> 16);
        std::memcpy(p, &h, 2);
      }
    }
  }
  double get(size_t i) const {
    const uint8_t *p = bytes_.data() + i * rt::dtypeSize(dtype_);
    if (dtype_ == rt::DType::I32) {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    float f;
    if (dtype_ == rt::DType::F32) {
      std::memcpy(&f, p, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      uint32_t bits = uint32_t(h) << 16;
      std::memcpy(&f, &bits, 4);
    }
    return f;
  }

private:
  rt::DType dtype_;
  std::vector<uint8_t> bytes_;
};

/// Rank r's element i: a small integer in [-5, 5].
double value(int rank, size_t i) { return double(int((rank * 7 + i * 3) % 11) - 5); }

struct Case {
  rt::DType dtype;
  size_t count;
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return std::string(rt::dtypeName(info.param.dtype)) + "_" + std::to_string(info.param.count);
}

class Collectives : public ::testing::TestWithParam<Case> {};

TEST_P(Collectives, AllReduceSumsOverRanks) {
  const auto [dtype, count] = GetParam();
  Array a(dtype, count);
  for (size_t i = 0; i < count; ++i)
    a.set(i, value(ranks().rank(), i));
  ASSERT_TRUE(ranks().allReduce(stream(), a.device()));
  ASSERT_TRUE(stream().synchronize());
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int r = 0; r < ranks().size(); ++r)
      sum += value(r, i);
    ASSERT_EQ(a.get(i), sum) << "element " << i;
  }
}

TEST_P(Collectives, AllGatherConcatenatesInRankOrder) {
  const auto [dtype, count] = GetParam();
  Array in(dtype, count), out(dtype, count * size_t(ranks().size()));
  for (size_t i = 0; i < count; ++i)
    in.set(i, value(ranks().rank(), i));
  ASSERT_TRUE(ranks().allGather(stream(), in.device(), out.device()));
  ASSERT_TRUE(stream().synchronize());
  for (int r = 0; r < ranks().size(); ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out.get(size_t(r) * count + i), value(r, i)) << "rank " << r << " element " << i;
}

/// How many elements rank `from` sends to rank `to` (0 included).
size_t sendCount(int from, int to, size_t scale) { return size_t((from + 2 * to) % 4) * scale; }
/// Element j of what rank `from` sends to rank `to`.
double sent(int from, int to, size_t j) { return double(from * 16 + to * 4 + int(j % 4)); }

TEST_P(Collectives, AllToAllVDeliversWhatEachRankSends) {
  const auto [dtype, scale] = GetParam();
  const int me = ranks().rank(), n = ranks().size();
  std::vector<size_t> counts(static_cast<size_t>(n));
  size_t total = 0, incoming = 0;
  for (int to = 0; to < n; ++to)
    total += counts[size_t(to)] = sendCount(me, to, scale);
  for (int from = 0; from < n; ++from)
    incoming += sendCount(from, me, scale);
  Array send(dtype, total), recv(dtype, incoming + 3); // a little spare room
  for (int to = 0, k = 0; to < n; ++to)
    for (size_t j = 0; j < counts[size_t(to)]; ++j)
      send.set(size_t(k++), sent(me, to, j));
  std::vector<size_t> got;
  ASSERT_TRUE(ranks().allToAllV(stream(), send.device(), counts, recv.device(), got));
  ASSERT_TRUE(stream().synchronize());
  ASSERT_EQ(got.size(), size_t(n));
  size_t k = 0;
  for (int from = 0; from < n; ++from) {
    ASSERT_EQ(got[size_t(from)], sendCount(from, me, scale)) << "from rank " << from;
    for (size_t j = 0; j < got[size_t(from)]; ++j, ++k)
      ASSERT_EQ(recv.get(k), sent(from, me, j)) << "from rank " << from << " element " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Conformance, Collectives,
    ::testing::Values(Case{rt::DType::F32, 0}, Case{rt::DType::F32, 1},
                      Case{rt::DType::F32, 7}, Case{rt::DType::F32, 4099},
                      Case{rt::DType::BF16, 1}, Case{rt::DType::BF16, 7},
                      Case{rt::DType::BF16, 4099}, Case{rt::DType::I32, 1},
                      Case{rt::DType::I32, 7}, Case{rt::DType::I32, 4099}),
    caseName);

TEST(Collective, AllReduceOfRandomFloatsIsCloseToTheExactSum) {
  const size_t count = 1000;
  auto input = [](int rank) {
    std::mt19937 rng(uint32_t(rank + 1));
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(count);
    for (float &x : v)
      x = u(rng);
    return v;
  };
  std::vector<float> a = input(ranks().rank());
  ASSERT_TRUE(ranks().allReduce(stream(), {a.data(), rt::DType::F32, count}));
  ASSERT_TRUE(stream().synchronize());
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < ranks().size(); ++r) {
    std::vector<float> v = input(r);
    for (size_t i = 0; i < count; ++i)
      exact[i] += v[i];
  }
  for (size_t i = 0; i < count; ++i)
    ASSERT_NEAR(a[i], exact[i], 1e-6 * ranks().size()) << "element " << i;
}

TEST(Collective, BF16SumsRoundToNearestEven) {
  // Rank 0 adds 258 and rank 1 adds 1 (the others 0): 259 lies halfway
  // between the bf16 neighbours 258 and 260 and rounds to the even one,
  // 260 (truncation would give 258). Every other addition is exact, so the
  // order of summation does not matter.
  auto bf16 = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return uint16_t(bits >> 16);
  };
  const int me = ranks().rank();
  uint16_t x = bf16(me == 0 ? 258.0f : me == 1 ? 1.0f : 0.0f);
  ASSERT_TRUE(ranks().allReduce(stream(), {&x, rt::DType::BF16, 1}));
  ASSERT_TRUE(stream().synchronize());
  EXPECT_EQ(x, bf16(ranks().size() == 1 ? 258.0f : 260.0f));
}

TEST(Collective, AllToAllVRefusesOnEveryRankWhenOneReceiveBufferIsTooSmall) {
  // Every rank sends one element to every rank; rank 0 has room for none.
  const int n = ranks().size();
  std::vector<float> send(static_cast<size_t>(n), 1.0f), recv(static_cast<size_t>(n));
  std::vector<size_t> counts(size_t(n), 1), got;
  const size_t room = ranks().rank() == 0 ? 0 : size_t(n);
  rt::Status st = ranks().allToAllV(stream(), {send.data(), rt::DType::F32, send.size()},
                                     counts, {recv.data(), rt::DType::F32, room}, got);
  ASSERT_FALSE(st);
  if (ranks().rank() == 0)
    EXPECT_NE(st.message().find(std::to_string(n) + " elements arrive"), std::string::npos)
        << st.message();
  else
    EXPECT_EQ(st.message(), "all_to_all_v: a receive buffer on another rank is too small");
}

TEST(Collective, RefusesBadArgumentsByName) {
  float x[4] = {};
  rt::Status st = ranks().allReduce(stream(), {x, rt::DType::F16, 4});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "all_reduce: the buffer is F16; collectives move F32, BF16 and I32");
  st = ranks().allGather(stream(), {x, rt::DType::F32, 2},
                         {x, rt::DType::F32, 2 * size_t(ranks().size()) + 1});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("all_gather: the output must hold"), std::string::npos);
  std::vector<size_t> got;
  st = ranks().allToAllV(stream(), {x, rt::DType::F32, 4},
                         std::vector<size_t>(size_t(ranks().size()) + 1, 0),
                         {x, rt::DType::F32, 4}, got);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("send counts for"), std::string::npos);
  st = ranks().allReduce(stream(), {nullptr, rt::DType::F32, 3});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "all_reduce: the buffer has 3 elements but no memory");
}

TEST(Collective, GroupsSumAmongTheirMembersOnly) {
  // Pairs of neighbours {0, 1}, {2, 3}, ... (an odd last rank alone), then
  // the ranks of the same parity; each rank sums rank + 1 over its group.
  const int rank = ranks().rank(), size = ranks().size();
  std::vector<int> pair = {rank / 2 * 2};
  if (pair[0] + 1 < size)
    pair.push_back(pair[0] + 1);
  std::vector<int> parity;
  for (int r = rank % 2; r < size; r += 2)
    parity.push_back(r);
  for (const std::vector<int> &members : {pair, parity}) {
    auto group = ranks().group(members);
    ASSERT_TRUE(group) << group.status().message();
    ASSERT_EQ((*group)->size(), int(members.size()));
    EXPECT_EQ(members[size_t((*group)->rank())], rank);
    int32_t x[3] = {rank + 1, 2 * (rank + 1), 0};
    ASSERT_TRUE((*group)->allReduce(stream(), {x, rt::DType::I32, 3}));
    ASSERT_TRUE(stream().synchronize());
    int32_t want = 0;
    for (int m : members)
      want += m + 1;
    EXPECT_EQ(x[0], want);
    EXPECT_EQ(x[1], 2 * want);
    EXPECT_EQ(x[2], 0);
    // Asked again: the same collective, made once.
    auto again = ranks().group(members);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *group);
  }
  // Every rank: this collective itself.
  std::vector<int> all(size_t(size), 0);
  for (int r = 0; r < size; ++r)
    all[size_t(r)] = r;
  auto whole = ranks().group(all);
  ASSERT_TRUE(whole);
  EXPECT_EQ(*whole, &ranks());
}

TEST(Collective, CountsTheTimeSpentWaitingForPeers) {
  // Rank 0 comes 100 ms late: every other rank waits that long inside.
  const auto before = ranks().timeInCollectives();
  if (ranks().rank() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int32_t x = 1;
  ASSERT_TRUE(ranks().allReduce(stream(), {&x, rt::DType::I32, 1}));
  ASSERT_TRUE(stream().synchronize());
  EXPECT_EQ(x, ranks().size());
  const auto waited = ranks().timeInCollectives() - before;
  if (ranks().size() == 1)
    EXPECT_EQ(waited.count(), 0) << "the local collective waits for nobody";
  else if (ranks().rank() != 0)
    EXPECT_GE(waited, std::chrono::milliseconds(50));
  else
    EXPECT_GE(waited.count(), 0);
}

TEST(Collective, GroupsRefuseMembersByName) {
  const int rank = ranks().rank(), size = ranks().size();
  auto outside = ranks().group({size});
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.status().message(),
            "a process group's ranks are ascending, distinct and below " + std::to_string(size) +
                "; got rank " + std::to_string(size) + " at position 0");
  if (size > 1) {
    auto backwards = ranks().group({1, 0});
    ASSERT_FALSE(backwards);
    EXPECT_NE(backwards.status().message().find("got rank 0 at position 1"), std::string::npos);
    auto notMine = ranks().group({(rank + 1) % size});
    ASSERT_FALSE(notMine);
    EXPECT_EQ(notMine.status().message(),
              "rank " + std::to_string(rank) + " asked for a process group it is not in");
  }
}

TEST(Collective, RanksAgreeOnThePlanOrAllFail) {
  const int n = ranks().size();
  EXPECT_TRUE(rt::agreeOnPlan(ranks(), moe::conformance::device(), 0x1234, n));
  rt::Status wrongRanks = rt::agreeOnPlan(ranks(), moe::conformance::device(), 0x1234, n + 1);
  ASSERT_FALSE(wrongRanks);
  EXPECT_EQ(wrongRanks.message(),
            "the plan is compiled for " + std::to_string(n + 1) + " rank(s), but " +
                std::to_string(n) + " were launched: launch " + std::to_string(n + 1) +
                " (mpirun -np " + std::to_string(n + 1) + ") or recompile the plan for " +
                std::to_string(n));
  if (n < 2)
    return;
  // The last rank loaded another plan: every rank fails, naming it (or,
  // on the last rank, every other).
  const bool odd = ranks().rank() == n - 1;
  rt::Status differ = rt::agreeOnPlan(ranks(), moe::conformance::device(), odd ? 0x9999 : 0x1234, n);
  ASSERT_FALSE(differ);
  EXPECT_NE(differ.message().find("loaded different plans"), std::string::npos);
  if (!odd)
    EXPECT_NE(differ.message().find("rank(s) " + std::to_string(n - 1) + " loaded"),
              std::string::npos)
        << differ.message();
}

} // namespace
