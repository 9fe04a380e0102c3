//===- CheckpointFuzzer.cpp - fuzz the safetensors reader and importer ----===//
//
// The input is a model.safetensors file beside a fixed, valid config.json
// (a 2-layer Mixtral): header parsing, the tensor catalog, and the
// importer's name/shape/dtype checks all see it. Errors must come back as
// an error string, never as a crash.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/Importer.h"
#include "test/fuzz/FuzzContext.h"
#include "test/fuzz/FuzzTarget.h"


#include <cstring>

using namespace moe;

namespace {
// tools/make-tiny-checkpoint.py --model-type mixtral --dtype F32 with the
// dims in tools/fuzz.sh writes this config and the seed model.safetensors.
const char *kConfig = R"({"model_type": "mixtral", "torch_dtype": "float32", "vocab_size": 8,
  "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "num_local_experts": 2,
  "num_experts_per_tok": 1, "max_position_embeddings": 32, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false})";
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = fuzz::scratchDir();
  static const bool config = [&] {
    fuzz::writeFile(dir + "/config.json", kConfig, std::strlen(kConfig));
    return true;
  }();
  (void)config;
  fuzz::writeFile(dir + "/model.safetensors", data, size);
  std::string error;
  auto module = importCheckpoint(fuzz::context(), dir, {}, error);
  (void)module;
  return 0;
}
