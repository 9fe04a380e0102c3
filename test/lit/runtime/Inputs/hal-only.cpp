// A backend written against the HAL alone: these headers need neither the
// plan's schema (FlatBuffers) nor anything but the standard library.
#include "moe/runtime/Collective.h"
#include "moe/runtime/Hal.h"
#include "moe/abi/Kernel.h"
#include "moe/abi/KernelCall.h"
#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Registry.h"
#include "moe/abi/Status.h"

int main() {
  moe::rt::KernelCall call;
  call.params = moe::rt::RmsNormParams{1e-6f};
  return call.kernel == moe::rt::Kernel::Embedding ? 0 : 1;
}
