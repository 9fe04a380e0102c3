//===- ProfileFuzzer.cpp - fuzz the routing-profile reader ----------------===//
//
// The input is a routing profile (moe/runtime/RoutingProfile.h), the file
// moe-run, moe-bench and moe-place read back. A profile the reader accepts
// must survive a round trip (written and read again, the same text) and
// merge with itself; anything else must come back as an error.
//
//===----------------------------------------------------------------------===//
#include "moe/abi/RoutingProfile.h"
#include "test/fuzz/FuzzTarget.h"

#include <cstdlib>
#include <string>

using namespace moe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto profile = rt::parseRoutingProfile(std::string(reinterpret_cast<const char *>(data), size));
  if (!profile)
    return 0;
  const std::string text = rt::routingProfileJson(*profile);
  auto again = rt::parseRoutingProfile(text);
  if (!again || rt::routingProfileJson(*again) != text)
    std::abort(); // a profile we write must read back as itself
  if (!rt::mergeWindow(*profile, *profile, 0.5))
    std::abort(); // a profile is of its own model
  return 0;
}
