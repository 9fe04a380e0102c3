//===- NestingLimitsTest.cpp - deep input ends in an error, not a crash ---===//
//
// The context of a chat template is JSON from a request: it may nest at
// most kMaxJsonDepth arrays and objects (moe/runtime/JsonDepth.h), measured
// without recursion before anything copies or converts it. Input 100,000
// deep fails with a message that names the key, and input exactly at the
// limit still renders, so the limit is not off by one either way.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/JsonDepth.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using moe::rt::ChatTemplate;
using moe::rt::jsonDepth;
using moe::rt::kMaxJsonDepth;
using moe::rt::memberNestedTooDeep;
using json = nlohmann::ordered_json;

namespace {

const int kDeep = 100000; ///< Far past the limit, and past any thread's stack when recursed.

std::string repeat(const std::string &s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

// Deep JSON is parsed from text, never built by copies: nlohmann parses
// without recursion, but its copies and dumps recurse.
std::string arraysText(int levels) { return repeat("[", levels) + "1" + repeat("]", levels); }
std::string objectsText(int levels) { return repeat("{\"a\": ", levels) + "1" + repeat("}", levels); }
json nestedArrays(int levels) { return json::parse(arraysText(levels)); }
json nestedObjects(int levels) { return json::parse(objectsText(levels)); }
/// A context {"key": value}.
json contextWith(const std::string &key, const std::string &valueText) {
  return json::parse("{\"" + key + "\": " + valueText + "}");
}

/// The output of rendering `source`, or "error: <message>".
std::string render(const std::string &source, const json &context = json::object()) {
  auto parsed = ChatTemplate::parse(source);
  if (!parsed)
    return "error: " + parsed.status().message();
  auto rendered = parsed->render(context);
  return rendered ? *rendered : "error: " + rendered.status().message();
}

// --- jsonDepth, against a recursive count ------------------------------------

int recursiveDepth(const json &j) {
  if (!j.is_structured())
    return 0;
  int deepest = 0;
  for (const json &child : j)
    deepest = std::max(deepest, recursiveDepth(child));
  return deepest + 1;
}

TEST(JsonDepth, MatchesARecursiveCountUpToItsCap) {
  for (const char *text : {"1", "\"s\"", "[]", "{}", "[1, \"a\"]", "[[1]]", "[1, [2, [3]], {}]",
                           R"({"a": {"b": [[]]}, "c": []})", "[[], [[[]]], [], {\"k\": [{}]}]"}) {
    json j = json::parse(text);
    int depth = recursiveDepth(j);
    EXPECT_EQ(jsonDepth(j), depth) << text;
    for (int cap = 0; cap <= depth + 1; ++cap)
      EXPECT_EQ(jsonDepth(j, cap), std::min(depth, cap + 1)) << text << " cap " << cap;
  }
}

TEST(JsonDepth, CountsDeepDocumentsWithoutRecursion) {
  json arrays = nestedArrays(kDeep);
  EXPECT_EQ(jsonDepth(arrays, kDeep), kDeep);
  EXPECT_EQ(jsonDepth(arrays), kMaxJsonDepth + 1);
  EXPECT_EQ(jsonDepth(nestedObjects(kDeep), kDeep), kDeep);
}

TEST(JsonDepth, NamesTheMemberUnderWhichAnObjectNestsTooDeep) {
  json ok = json::object();
  ok["flat"] = 1;
  ok["deep"] = nestedArrays(kMaxJsonDepth - 1); // kMaxJsonDepth with the object.
  EXPECT_EQ(memberNestedTooDeep(ok), std::nullopt);
  ok["deeper"] = nestedObjects(kMaxJsonDepth);
  EXPECT_EQ(memberNestedTooDeep(ok), "deeper");
  EXPECT_EQ(memberNestedTooDeep(nestedArrays(kDeep)), std::nullopt) << "not an object";
}

// --- the context -------------------------------------------------------------

std::string contextTooDeep(const std::string &key) {
  return "error: chat template context: \"" + key + "\" nests deeper than the limit of " +
         std::to_string(kMaxJsonDepth) + " arrays and objects (the context's own included)";
}

TEST(ChatContext, NestedToTheLimitRendersPrintsAndCompares) {
  int levels = kMaxJsonDepth - 1; // The context object is the first level.
  std::string list = arraysText(levels);
  json arrays = json::parse("{\"x\": " + list + ", \"y\": " + list + "}");
  EXPECT_EQ(render("{{ x|tojson }}|{{ x }}|{{ x == y }}|{{ [x, y]|sort|length }}|{{ x in [y] }}", arrays),
            list + "|" + list + "|True|2|True");
  EXPECT_EQ(render("{{ x|tojson }}|{{ x }}", contextWith("x", objectsText(levels))),
            objectsText(levels) + "|" + repeat("{'a': ", levels) + "1" + repeat("}", levels));
}

TEST(ChatContext, NestedDeeperIsRefusedByNameBeforeAnyCopy) {
  for (int levels : {kMaxJsonDepth, kDeep}) {
    SCOPED_TRACE(levels);
    EXPECT_EQ(render("{{ tools }}", contextWith("tools", arraysText(levels))), contextTooDeep("tools"));
    EXPECT_EQ(render("{{ kwargs }}", contextWith("kwargs", objectsText(levels))), contextTooDeep("kwargs"));
    // Messages are copied to be normalised: the check comes first. The
    // context, the list and the message are three levels.
    std::string messages = "[{\"role\": \"user\", \"extra\": " + arraysText(levels - 2) + "}]";
    EXPECT_EQ(render("{{ messages }}", contextWith("messages", messages)), contextTooDeep("messages"));
    // The nlohmann::json overload converts to ordered_json, which recurses.
    auto t = ChatTemplate::parse("{{ tools }}");
    ASSERT_TRUE(t);
    auto r = t->render(nlohmann::json::parse("{\"tools\": " + arraysText(levels) + "}"));
    ASSERT_FALSE(r);
    EXPECT_EQ("error: " + r.status().message(), contextTooDeep("tools"));
  }
  std::string messages = "[{\"role\": \"user\", \"extra\": " + arraysText(kMaxJsonDepth - 3) + "}]";
  EXPECT_EQ(render("{{ messages[0].extra|length }}", contextWith("messages", messages)), "1");
}

TEST(ChatContext, ADeepNonObjectIsRefusedWithoutConversion) {
  auto t = ChatTemplate::parse("x");
  ASSERT_TRUE(t);
  auto ordered = t->render(nestedArrays(kDeep));
  ASSERT_FALSE(ordered);
  EXPECT_EQ(ordered.status().message(), "chat template context must be a JSON object, not array");
  auto sorted = t->render(nlohmann::json::parse(arraysText(kDeep)));
  ASSERT_FALSE(sorted);
  EXPECT_EQ(sorted.status().message(), "chat template context must be a JSON object, not array");
}

} // namespace
