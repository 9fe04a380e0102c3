// Routing profiles: the JSON form read back as written, malformed files
// refused by what is wrong, windows merged with decay only between
// profiles of the same model and layers, and counts summed over ranks
// exactly beyond 32 bits (the one-rank job; more ranks:
// test/e2e/routing-profile.test).
#include "moe/runtime/Collective.h"
#include "moe/runtime/Registry.h"
#include "moe/runtime/RoutingWindow.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace moe::rt;

namespace {

RoutingProfile sample() {
  RoutingProfile p;
  p.modelType = "deepseek_v3";
  p.numExperts = 3;
  p.topK = 2;
  p.windows = 1;
  p.tokens = 5;
  p.last = {5, 2, "2026-11-30T00:00:00Z"};
  p.layers = {{1, {4, 6, 0}}, {2, {2.5, 3, 4.5}}};
  return p;
}

std::string edited(const std::function<void(nlohmann::json &)> &edit) {
  nlohmann::json j = nlohmann::json::parse(routingProfileJson(sample()));
  edit(j);
  return j.dump();
}

TEST(RoutingProfile, ReadsBackWhatItWrites) {
  auto back = parseRoutingProfile(routingProfileJson(sample()));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(routingProfileJson(*back), routingProfileJson(sample()));
  EXPECT_EQ(back->layers[1].counts, (std::vector<double>{2.5, 3, 4.5}));
  EXPECT_EQ(back->last.ranks, 2);
}

TEST(RoutingProfile, RefusesMalformedProfilesByWhatIsWrong) {
  auto error = [](const std::string &text) {
    auto p = parseRoutingProfile(text);
    return p ? std::string("accepted") : p.status().message();
  };
  EXPECT_EQ(error("[1, 2]"), "not JSON, or not an object");
  EXPECT_EQ(error(edited([](auto &j) { j["format"] = "x"; })),
            "its \"format\" is not \"moe-routing-profile\"");
  EXPECT_EQ(error(edited([](auto &j) { j["version"] = 2; })),
            "version 2; this build reads version 1");
  EXPECT_EQ(error(edited([](auto &j) { j["layers"][0]["counts"] = {1, 2}; })),
            "layer 1 has 2 counts for 3 experts");
  EXPECT_EQ(error(edited([](auto &j) { j["layers"][1]["counts"][2] = -1; })),
            "layer 2 has a count that is negative or not finite");
  EXPECT_EQ(error(edited([](auto &j) { j["num_experts"] = 0; })),
            "num_experts, top_k, windows and ranks must be positive and tokens finite and >= 0");
  EXPECT_EQ(error(edited([](auto &j) { j["decay"] = 7.5; })), "decay must lie in [0, 1]");
  EXPECT_EQ(error(edited([](auto &j) { j["layers"] = {{"a", j["layers"][0]}}; })),
            "\"layers\" must be an array");
  EXPECT_EQ(error(edited([](auto &j) { j["layers"][1]["layer"] = 1; })),
            "layer 1 is listed twice");
  EXPECT_EQ(error(edited([](auto &j) { j["last_window"]["tokens"] = -5; })),
            "last_window.tokens must be a whole number >= 0");
  EXPECT_NE(error(edited([](auto &j) { j.erase("last_window"); })).find("missing"),
            std::string::npos);
}

TEST(RoutingProfile, MergesWindowsWithDecay) {
  RoutingProfile next = sample();
  next.layers = {{1, {1, 1, 2}}, {2, {0, 0, 4}}};
  next.tokens = 2;
  auto merged = mergeWindow(sample(), next, 0.25);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->windows, 2);
  EXPECT_EQ(merged->decay, 0.25);
  EXPECT_EQ(merged->tokens, 0.25 * 5 + 2);
  EXPECT_EQ(merged->layers[0].counts, (std::vector<double>{2, 2.5, 2}));
  EXPECT_EQ(merged->layers[1].counts, (std::vector<double>{0.625, 0.75, 5.125}));
}

TEST(RoutingProfile, MergesOnlyTheSameModelAndLayers) {
  RoutingProfile other = sample();
  other.layers.pop_back();
  auto layers = mergeWindow(sample(), other, 1);
  ASSERT_FALSE(layers);
  EXPECT_EQ(layers.status().message(),
            "the profile is of another model (MoE layers [1,2], this run [1]): write a new "
            "profile, or remove the old one");
  other = sample();
  other.numExperts = 4;
  EXPECT_FALSE(mergeWindow(sample(), other, 1));
  EXPECT_FALSE(mergeWindow(sample(), sample(), 1.5));
}

TEST(RoutingProfile, SumsCountsOverRanksExactlyBeyond32Bits) {
  auto device = createDevice("cpu", {});
  ASSERT_TRUE(device);
  auto job = createLocalCollective();
  const std::vector<ExpertLoad> load = {{3, {0, (uint64_t(1) << 40) + 7, 0x7fffffffu}},
                                        {5, {uint64_t(1) << 31, 1, 2}}};
  auto sum = sumOverRanks(*job, **device, load);
  ASSERT_TRUE(sum) << sum.status().message();
  ASSERT_EQ(sum->size(), 2u);
  EXPECT_EQ((*sum)[0].counts, load[0].counts);
  EXPECT_EQ((*sum)[1].counts, load[1].counts);
  EXPECT_EQ((*sum)[1].layer, 5);
}

} // namespace
