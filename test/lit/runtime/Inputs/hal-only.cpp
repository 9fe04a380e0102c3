// A backend written against the HAL alone: these headers need neither the
// plan's schema (FlatBuffers) nor anything but the standard library.
#include "moe/runtime/Collective.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Kernel.h"
#include "moe/runtime/KernelCall.h"
#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Registry.h"
#include "moe/runtime/Status.h"

int main() {
  moe::rt::KernelCall call;
  call.params = moe::rt::RmsNormParams{1e-6f};
  return call.kernel == moe::rt::Kernel::Embedding ? 0 : 1;
}
