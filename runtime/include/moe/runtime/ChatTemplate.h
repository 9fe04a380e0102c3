//===- ChatTemplate.h - Hugging Face chat templates (Jinja) -----*- C++ -*-===//
//
// A Hugging Face tokenizer_config.json carries a `chat_template`: Jinja2 source
// that turns a conversation into the prompt text. ChatTemplate renders it as
// transformers' `apply_chat_template(..., tokenize=False)` does: jinja2's
// sandbox with trim_blocks and lstrip_blocks, the globals raise_exception,
// strftime_now and namespace, and transformers' tojson. It interprets a
// subset of Jinja2 (runtime/text/chat/README.md lists it) and refuses everything
// else with one line naming the construct and its line:column, so that an
// unsupported template fails loudly instead of rendering a wrong prompt.
// Untrusted input cannot crash or exhaust it: nesting, recursion and the
// strings a render builds are bounded, each refused past its limit with an
// error that names it (the README's "Limits").
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_CHATTEMPLATE_H
#define MOE_RUNTIME_CHATTEMPLATE_H

#include "moe/abi/Status.h"

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace moe::rt {

namespace chat {
struct Template;
}

class ChatTemplate {
public:
  /// Parses a template. Errors read "chat template L:C: ..." and name the
  /// construct, e.g. `chat template 3:15: filter "wordwrap" is not supported`.
  static Expected<ChatTemplate> parse(std::string_view source);

  /// Renders with `context`, a JSON object holding what transformers passes
  /// to the template: messages, add_generation_prompt, bos_token, eos_token,
  /// tools, enable_thinking and any other keyword. Messages are normalised as
  /// apply_chat_template does (keys whose value is null are dropped; the
  /// reasoning fields reasoning_content/thinking/reasoning alias each other).
  /// An object's key order is kept, which `tojson` and printing show; a
  /// `nlohmann::json` argument has its keys sorted already, so pass an
  /// `ordered_json` when that order matters (tool schemas, arguments).
  /// `raise_exception(msg)` in the template fails with exactly `msg`. A
  /// context that nests deeper than kMaxJsonDepth (moe/runtime/JsonDepth.h)
  /// is refused, naming its key, before anything copies it.
  Expected<std::string> render(const nlohmann::ordered_json &context) const;
  Expected<std::string> render(const nlohmann::json &context) const;

private:
  explicit ChatTemplate(std::shared_ptr<const chat::Template> parsed)
      : parsed_(std::move(parsed)) {}
  std::shared_ptr<const chat::Template> parsed_;
};

} // namespace moe::rt

#endif
