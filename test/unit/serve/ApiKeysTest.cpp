//===- ApiKeysTest.cpp - who may call the API ----------------------------===//
#include "moe/serve/ApiKeys.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

using moe::serve::ApiKeys;

namespace {

std::string keyFile(const std::string &text, mode_t mode = 0600) {
  std::string path = testing::TempDir() + "/keys-" +
                     testing::UnitTest::GetInstance()->current_test_info()->name();
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

} // namespace

TEST(ApiKeys, TheSchemeIsReadInAnyCase) {
  auto keys = ApiKeys::load(keyFile("# comment\n\n  sk-one  \nsk-two\n"));
  ASSERT_TRUE(bool(keys)) << keys.status().message();
  EXPECT_EQ(keys->size(), 2u);
  for (const char *h : {"Bearer sk-one", "bearer sk-two", "BEARER sk-one", "bEaReR sk-two"})
    EXPECT_TRUE(keys->accepts(h)) << h;
  for (const char *h : {"Bearer sk-on", "Bearer sk-one2", "Basic sk-one", "sk-one", "Bearer ",
                        "", "Bearer  sk-one"})
    EXPECT_FALSE(keys->accepts(h)) << h;
}

TEST(ApiKeys, AKeyWithAControlCharacterIsRefused) {
  auto keys = ApiKeys::load(keyFile(std::string("sk-a\0b\n", 7)));
  ASSERT_FALSE(bool(keys));
  EXPECT_NE(keys.status().message().find("control character"), std::string::npos);
  EXPECT_FALSE(bool(ApiKeys::load(keyFile("# only comments\n"))));
}

TEST(ApiKeys, AFileOthersMayReadIsReported) {
  EXPECT_FALSE(ApiKeys::worldReadable(keyFile("sk-a\n", 0600)));
  EXPECT_FALSE(ApiKeys::worldReadable(keyFile("sk-a\n", 0640)));
  EXPECT_TRUE(ApiKeys::worldReadable(keyFile("sk-a\n", 0644)));
}
