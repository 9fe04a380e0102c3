//===- ChatTemplateTest.cpp - chat templates against transformers --------===//
//
// data/goldens.json is written by tools/make-chat-goldens.py with
// transformers' own apply_chat_template (the published Qwen3, DeepSeek-V3
// and Mixtral templates) and transformers' jinja environment (snippets).
// Every case must render byte for byte, or fail where transformers fails
// (with the same message for raise_exception). The refusals are ours: each
// must name the construct and where it is.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/ChatTemplate.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

using moe::rt::ChatTemplate;
using json = nlohmann::ordered_json;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string dataDir() {
  std::string goldens = MOE_CHAT_GOLDENS;
  return goldens.substr(0, goldens.rfind('/') + 1);
}

const json &goldens() {
  static const json g = json::parse(readFile(MOE_CHAT_GOLDENS));
  return g;
}

/// Renders `source` with `context` and checks it against a golden case.
void expectCase(const std::string &name, const std::string &source, const json &c) {
  SCOPED_TRACE(name);
  auto parsed = ChatTemplate::parse(source);
  ASSERT_TRUE(parsed) << parsed.status().message();
  auto rendered = parsed->render(c.at("context"));
  if (c.contains("output")) {
    ASSERT_TRUE(rendered) << rendered.status().message();
    EXPECT_EQ(*rendered, c.at("output").get<std::string>());
  } else {
    ASSERT_FALSE(rendered) << "transformers fails with " << c.at("error_kind").get<std::string>()
                           << " but this rendered: " << *rendered;
    if (c.at("error").is_string()) // raise_exception: the template's own message.
      EXPECT_EQ(rendered.status().message(), c.at("error").get<std::string>());
  }
}

TEST(ChatTemplateGoldens, PublishedTemplatesMatchTransformers) {
  const json &cases = goldens().at("conversations");
  ASSERT_GE(cases.size(), 40u);
  for (const json &c : cases)
    expectCase(c.at("name").get<std::string>(), readFile(dataDir() + c.at("template").get<std::string>()), c);
}

TEST(ChatTemplateGoldens, SnippetsMatchJinja) {
  const json &cases = goldens().at("snippets");
  ASSERT_GE(cases.size(), 40u);
  for (const json &c : cases)
    expectCase(c.at("name").get<std::string>(), c.at("source").get<std::string>(), c);
}

TEST(ChatTemplateGoldens, EveryTemplateIsCovered) {
  for (const char *t : {"qwen3.jinja", "deepseek-v3.jinja", "mixtral.jinja"}) {
    int outputs = 0, errors = 0;
    for (const json &c : goldens().at("conversations"))
      if (c.at("template") == t)
        (c.contains("output") ? outputs : errors)++;
    EXPECT_GE(outputs, 8) << t;
    if (std::string(t) == "mixtral.jinja")
      EXPECT_GE(errors, 2) << t;
  }
}

// A golden that the renderer would get wrong must fail the test: render a
// published template with one byte of context changed.
TEST(ChatTemplateGoldens, AChangedContextChangesTheOutput) {
  const json &c = goldens().at("conversations").at(0);
  auto parsed = ChatTemplate::parse(readFile(dataDir() + c.at("template").get<std::string>()));
  ASSERT_TRUE(parsed);
  json context = c.at("context");
  context["messages"][0]["content"] = context["messages"][0]["content"].get<std::string>() + "!";
  auto rendered = parsed->render(context);
  ASSERT_TRUE(rendered);
  EXPECT_NE(*rendered, c.at("output").get<std::string>());
}

TEST(ChatTemplate, KeyOrderOfOrderedJsonIsKept) {
  auto t = ChatTemplate::parse("{{ tool|tojson }}");
  ASSERT_TRUE(t);
  auto ordered = t->render(json::parse(R"({"tool": {"name": "f", "arguments": {"b": 1, "a": 2}}})"));
  ASSERT_TRUE(ordered);
  EXPECT_EQ(*ordered, R"({"name": "f", "arguments": {"b": 1, "a": 2}})");
  // nlohmann::json sorts keys before the template sees them.
  auto sorted = t->render(nlohmann::json::parse(R"({"tool": {"name": "f", "arguments": {"b": 1, "a": 2}}})"));
  ASSERT_TRUE(sorted);
  EXPECT_EQ(*sorted, R"({"arguments": {"a": 2, "b": 1}, "name": "f"})");
}

TEST(ChatTemplate, ContextMustBeAnObject) {
  auto t = ChatTemplate::parse("x");
  ASSERT_TRUE(t);
  auto r = t->render(json::array());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "chat template context must be a JSON object, not array");
}

struct Refusal {
  const char *source;
  const char *message; ///< The whole error, location included.
  bool atParse;
};

class ChatTemplateRefuses : public testing::TestWithParam<Refusal> {};

TEST_P(ChatTemplateRefuses, NamesTheConstructAndItsLocation) {
  const Refusal &r = GetParam();
  auto parsed = ChatTemplate::parse(r.source);
  if (r.atParse) {
    ASSERT_FALSE(parsed) << r.source;
    EXPECT_EQ(parsed.status().message(), r.message);
    return;
  }
  ASSERT_TRUE(parsed) << parsed.status().message();
  auto rendered = parsed->render(json::parse(R"({"s": "Grüße", "l": [1], "d": {"k": 1}})"));
  ASSERT_FALSE(rendered) << r.source << " rendered " << *rendered;
  EXPECT_EQ(rendered.status().message(), r.message);
}

INSTANTIATE_TEST_SUITE_P(
    Constructs, ChatTemplateRefuses,
    testing::Values(
        Refusal{"a\nb\n  {{ x|wordwrap }}", "chat template 3:8: filter \"wordwrap\" is not supported", true},
        Refusal{"{{ x is divisible }}", "chat template 1:9: test \"divisible\" is not supported", true},
        Refusal{"x\n{% include 'other.jinja' %}", "chat template 2:4: statement \"include\" is not supported", true},
        Refusal{"{% extends 'base' %}", "chat template 1:4: statement \"extends\" is not supported", true},
        Refusal{"{% block body %}{% endblock %}", "chat template 1:4: statement \"block\" is not supported", true},
        Refusal{"{% import 'm' as m %}", "chat template 1:4: statement \"import\" is not supported", true},
        Refusal{"{% filter upper %}x{% endfilter %}", "chat template 1:4: statement \"filter\" is not supported", true},
        Refusal{"{% with a = 1 %}{% endwith %}", "chat template 1:4: statement \"with\" is not supported", true},
        Refusal{"é{% raw %}{{ x }}{% endraw %}", "chat template 1:5: statement \"raw\" is not supported", true},
        Refusal{"{% frobnicate %}", "chat template 1:4: unknown statement \"frobnicate\"", true},
        Refusal{"{% for x in l recursive %}{% endfor %}", "chat template 1:15: recursive for loops are not supported", true},
        Refusal{"{{ f(*args) }}", "chat template 1:6: argument unpacking (* and **) is not supported", true},
        Refusal{"{% break %}", "chat template 1:4: \"break\" outside a for loop", true},
        Refusal{"{% set x | upper %}a{% endset %}", "chat template 1:10: filters on a block set are not supported", true},
        Refusal{"{% if x %}", "chat template 1:11: the template ends inside a block: expected {% elif %}", true},
        Refusal{"{{ x ", "chat template 1:1: the tag is never closed (expected \"}}\")", true},
        Refusal{"{# x", "chat template 1:1: the comment is never closed", true},
        Refusal{"{{ a ! b }}", "chat template 1:6: unexpected character '!' in a tag", true},
        Refusal{"{{ '%s' % s }}", "chat template 1:9: printf-style string formatting (str % ...) is not supported", false},
        Refusal{"\n {{ s.zfill(3) }}", "chat template 2:6: the str method \"zfill\" is not supported", false},
        Refusal{"{{ s.format(1) }}", "chat template 1:5: the str method \"format\" is not supported", false},
        Refusal{"{{ l.append(2) }}", "chat template 1:5: the list method \"append\" is not supported", false},
        Refusal{"{{ d.update({}) }}", "chat template 1:5: the dict method \"update\" is not supported", false},
        Refusal{"{{ s|upper }}", "chat template 1:6: filter upper of text with non-ASCII letters is not supported", false},
        Refusal{"{{ s.lower() }}", "chat template 1:11: str case mapping of text with non-ASCII letters is not supported", false},
        Refusal{"{{ 9223372036854775807 + 1 }}", "chat template 1:24: integer overflow (Python would use a big integer)", false},
        Refusal{"{{ l|map('wordwrap')|list }}", "chat template 1:6: filter \"wordwrap\" is not supported", false},
        Refusal{"{{ x.y }}", "chat template 1:5: 'x' is undefined", false},
        Refusal{"{{ d.k.z.w }}", "chat template 1:9: 'int object' has no attribute 'z'", false},
        Refusal{"{{ 1 / 0 }}", "chat template 1:6: division by zero", false},
        Refusal{"{{ raise_exception('Roles must alternate!') }}", "Roles must alternate!", false}));

} // namespace
