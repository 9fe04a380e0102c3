// Buffers and copies of the device under test: memory kinds, imported host
// memory, copies between kinds in stream order on every stream, and the
// range check every backend shares.
#include "Ranks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

using moe::conformance::device;
namespace rt = moe::rt;

std::unique_ptr<rt::Buffer> make(size_t bytes, rt::MemoryKind kind) {
  auto b = device().allocate(bytes, kind);
  EXPECT_TRUE(b) << b.status().message();
  return b ? b.take() : nullptr;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

TEST(Buffers, KindsSizesAndAlignment) {
  for (size_t bytes : {size_t(1), size_t(64), size_t(1000)}) {
    auto local = make(bytes, rt::MemoryKind::DeviceLocal);
    auto visible = make(bytes, rt::MemoryKind::HostVisible);
    ASSERT_TRUE(local && visible);
    EXPECT_EQ(local->kind(), rt::MemoryKind::DeviceLocal);
    EXPECT_EQ(visible->kind(), rt::MemoryKind::HostVisible);
    EXPECT_EQ(local->size(), bytes);
    EXPECT_EQ(local->host(), nullptr); // the host must copy, as on a GPU
    ASSERT_NE(visible->host(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(local->data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(visible->data()) % 64, 0u);
  }
}

// Host -> device -> device -> host with offsets, on the caller's stream and
// on a worker stream: each copy sees the one enqueued before it.
TEST(Buffers, CopiesRunInStreamOrderOnEveryStream) {
  for (int s : {0, 1}) {
    SCOPED_TRACE(testing::Message() << "stream " << s);
    rt::Stream &stream = device().stream(s);
    const std::vector<uint8_t> data = pattern(300, uint8_t(7 + s));
    auto in = make(400, rt::MemoryKind::HostVisible);
    auto a = make(512, rt::MemoryKind::DeviceLocal);
    auto b = make(512, rt::MemoryKind::DeviceLocal);
    auto out = make(400, rt::MemoryKind::HostVisible);
    ASSERT_TRUE(in && a && b && out);
    std::memcpy(static_cast<uint8_t *>(in->host()) + 100, data.data(), data.size());
    std::memset(out->host(), 0, 400);
    ASSERT_TRUE(stream.copy(*a, 64, *in, 100, 300));
    ASSERT_TRUE(stream.copy(*b, 200, *a, 64, 300));
    ASSERT_TRUE(stream.copy(*out, 50, *b, 200, 300));
    ASSERT_TRUE(stream.synchronize());
    const auto *got = static_cast<const uint8_t *>(out->host());
    EXPECT_EQ(std::vector<uint8_t>(got + 50, got + 350), data);
    EXPECT_EQ(got[49], 0);
    EXPECT_EQ(got[350], 0);
  }
}

TEST(Buffers, ImportedHostMemoryIsReadable) {
  const std::vector<uint8_t> file = pattern(256, 3); // as a mapped weight file
  auto weights = device().importHost(file.data(), file.size());
  ASSERT_TRUE(weights) << weights.status().message();
  EXPECT_EQ((*weights)->size(), file.size());
  auto out = make(256, rt::MemoryKind::HostVisible);
  ASSERT_TRUE(out);
  ASSERT_TRUE(device().stream(0).copy(*out, 0, **weights, 0, 256));
  ASSERT_TRUE(device().stream(0).synchronize());
  const auto *got = static_cast<const uint8_t *>(out->host());
  EXPECT_EQ(std::vector<uint8_t>(got, got + 256), file);
}

TEST(Buffers, CopiesOutsideABufferAreRefused) {
  auto a = make(128, rt::MemoryKind::DeviceLocal);
  auto b = make(64, rt::MemoryKind::HostVisible);
  ASSERT_TRUE(a && b);
  rt::Stream &stream = device().stream(0);
  rt::Status st = stream.copy(*b, 0, *a, 0, 128);
  EXPECT_EQ(st.message(), "copy of 128 bytes from offset 0 of a 128-byte buffer to offset 0 of "
                          "a 64-byte buffer: out of range");
  st = stream.copy(*a, 0, *b, SIZE_MAX, 1); // the offset alone wraps
  EXPECT_FALSE(st);
  EXPECT_TRUE(stream.copy(*a, 128, *b, 64, 0)); // empty, at the ends: fine
  EXPECT_TRUE(stream.synchronize());
}

} // namespace
