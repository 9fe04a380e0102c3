//===- PostProcessor.h - tokenizer.json post-processors ---------*- C++ -*-===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_POSTPROCESSOR_H
#define MOE_RUNTIME_TEXT_TOKENIZER_POSTPROCESSOR_H

#include "Json.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace moe::rt::tok {

/// Adds the template's special tokens around a single sequence (pairs are
/// not encoded by the runtime).
class PostProcessor {
public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t> &ids) const = 0;
};

/// The `post_processor` object (not null).
Expected<std::unique_ptr<PostProcessor>> parsePostProcessor(const Json &json);

} // namespace moe::rt::tok

#endif
