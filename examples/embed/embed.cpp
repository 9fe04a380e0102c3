// embed: the smallest program that runs a compiled plan with the installed
// runtime library. Usage: embed PLAN-DIR MAX-NEW-TOKENS TOKEN-ID...
// Prints the generated ids (greedy; ends at the model's end of sequence).
#include <moe/runtime/Engine.h>
#include <moe/runtime/Hal.h>
#include <moe/runtime/Plan.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
  if (argc < 4)
    return std::fprintf(stderr, "usage: embed PLAN-DIR MAX-NEW-TOKENS TOKEN-ID...\n"), 1;
  auto plan = moe::rt::LoadedPlan::open(argv[1]);
  if (!plan)
    return std::fprintf(stderr, "embed: %s\n", plan.status().message().c_str()), 1;
  auto device = moe::rt::createCpuDevice();
  auto engine = moe::rt::Engine::create(**plan, *device, {});
  if (!engine)
    return std::fprintf(stderr, "embed: %s\n", engine.status().message().c_str()), 1;
  moe::rt::GenerationRequest request;
  request.maxNewTokens = std::atoll(argv[2]);
  for (int i = 3; i < argc; ++i)
    request.prompt.push_back(std::atoi(argv[i]));
  if (auto id = (*engine)->submit(request); !id)
    return std::fprintf(stderr, "embed: %s\n", id.status().message().c_str()), 1;
  while (!(*engine)->idle())
    if (moe::rt::Status st = (*engine)->step(); !st)
      return std::fprintf(stderr, "embed: %s\n", st.message().c_str()), 1;
  for (const moe::rt::GenerationResult &r : (*engine)->takeFinished())
    for (int32_t t : r.tokens)
      std::printf("%d\n", t);
  return 0;
}
