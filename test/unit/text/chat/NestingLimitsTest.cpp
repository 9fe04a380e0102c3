//===- NestingLimitsTest.cpp - deep input ends in an error, not a crash ---===//
//
// Every recursion of the chat template interpreter is bounded (chat/Limits.h
// and moe/runtime/JsonDepth.h): input nested 100,000 deep in each construct
// fails with a message that names the limit and where it was hit, and input
// exactly at each limit still works, so no limit is off by one either way.
// The strings a render builds are bounded too. These tests also run under
// ASan (tools/test-asan.sh), whose frames are the largest.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/JsonDepth.h"

#include "chat/Limits.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <pthread.h>

#include <cctype>
#include <functional>
#include <string>

using moe::rt::ChatTemplate;
using moe::rt::jsonDepth;
using moe::rt::kMaxJsonDepth;
using moe::rt::memberNestedTooDeep;
using json = nlohmann::ordered_json;
namespace chat = moe::rt::chat;

namespace {

const int kDeep = 100000; ///< Far past every limit, and past any thread's stack when recursed.

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

/// "chat template 1:<column>: <what>", the error of a one-line template
/// whose problem is at byte `offset` (ASCII, so the column is offset + 1).
std::string errorAt(size_t offset, const std::string &what) {
  return "error: chat template 1:" + std::to_string(offset + 1) + ": " + what;
}

const std::string kTemplateNesting = "the template nests deeper than " + std::to_string(chat::kMaxTemplateNesting) +
                                     " blocks, brackets and unary operators, the limit";
const std::string kExpressionHeight = "an expression nests deeper than " +
                                      std::to_string(chat::kMaxExpressionHeight) +
                                      " operators, filters, attributes, calls and literals, the limit";
const std::string kRenderDepth = "rendering nests deeper than " + std::to_string(chat::kMaxRenderDepth) +
                                 " statements, expressions and macro calls, the limit (does a macro call "
                                 "itself without end?)";
const std::string kValueDepth = "a value nests deeper than " + std::to_string(chat::kMaxValueDepth) +
                                " lists, tuples and dicts, the limit for printing, comparing and tojson";

std::string textTooLong(uint64_t bytes) {
  return "the template builds a string of " + std::to_string(bytes) + " bytes, beyond the limit of " +
         std::to_string(chat::kMaxTextBytes >> 20) + " MiB";
}

std::string listTooLong(uint64_t items) {
  return "the template builds a list of " + std::to_string(items) + " items, beyond the limit of " +
         std::to_string(chat::kMaxListItems);
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

// --- nesting in the template's source ----------------------------------------

/// prefix + open^n + inner + close^n + suffix. The level of each `open`
/// starts at its byte `at`, where the error points when there is one too many.
struct Construct {
  const char *name;
  std::string prefix, open, inner, close, suffix;
  size_t at;
  std::string rendered; ///< At the limit, with the context below; empty: parse only.
};

void PrintTo(const Construct &c, std::ostream *os) { *os << c.name; }

const json kContext = {{"x", json::array({0})}};

class Nesting : public testing::TestWithParam<Construct> {};

std::string nested(const Construct &c, size_t n) {
  return c.prefix + repeat(c.open, n) + c.inner + repeat(c.close, n) + c.suffix;
}

TEST_P(Nesting, WorksAtTheLimitAndIsRefusedPastIt) {
  const Construct &c = GetParam();
  size_t limit = chat::kMaxTemplateNesting;
  auto atLimit = ChatTemplate::parse(nested(c, limit));
  ASSERT_TRUE(atLimit) << atLimit.status().message();
  if (!c.rendered.empty()) {
    auto out = atLimit->render(kContext);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ(*out, c.rendered);
  }
  std::string expected = errorAt(c.prefix.size() + limit * c.open.size() + c.at, kTemplateNesting);
  EXPECT_EQ(render(nested(c, limit + 1)), expected);
  EXPECT_EQ(render(nested(c, kDeep)), expected);
}

INSTANTIATE_TEST_SUITE_P(
    Constructs, Nesting,
    testing::Values(
        Construct{"parentheses", "{{ ", "(", "1", ")", " }}", 0, "1"},
        Construct{"lists", "{{ ", "[", "1", "]", " }}", 0,
                  repeat("[", chat::kMaxTemplateNesting) + "1" + repeat("]", chat::kMaxTemplateNesting)},
        Construct{"dicts", "{{ ", "{'k': ", "1", "}", " }}", 0,
                  repeat("{'k': ", chat::kMaxTemplateNesting) + "1" + repeat("}", chat::kMaxTemplateNesting)},
        Construct{"calls", "{{ ", "f(", "1", ")", " }}", 1, ""},
        Construct{"subscripts", "{{ ", "x[", "0", "]", " }}", 1, "0"},
        Construct{"filter arguments", "{{ ", "x|default(", "1", ")", " }}", 9, "[0]"},
        Construct{"not", "{{ ", "not ", "1", "", " }}", 0, "True"},
        Construct{"unary minus", "{{ ", "- ", "1", "", " }}", 0, "1"},
        Construct{"inline if-else", "{{ ", "1 if x else ", "2", "", " }}", 7, "1"},
        Construct{"if blocks", "", "{% if x %}", "ok", "{% endif %}", "", 3, "ok"},
        Construct{"for blocks", "", "{% for i in x %}", "ok", "{% endfor %}", "", 3, "ok"},
        Construct{"macro blocks", "", "{% macro m() %}", "ok", "{% endmacro %}", "", 3, ""},
        Construct{"set blocks", "", "{% set v %}", "ok", "{% endset %}", "", 3, ""},
        Construct{"generation blocks", "", "{% generation %}", "ok", "{% endgeneration %}", "", 3, "ok"}),
    [](const testing::TestParamInfo<Construct> &info) {
      std::string name = info.param.name;
      for (char &ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch)))
          ch = '_';
      return name;
    });

/// prefix + link^n + suffix: a chain that the parser builds in a loop but
/// that nests the expression tree one level per link. The node of each link
/// starts at its byte `at`.
struct Chain {
  const char *name;
  std::string prefix, link, suffix;
  size_t at;
  std::string rendered; ///< With kMaxExpressionHeight - 1 links; empty: parse only.
};

void PrintTo(const Chain &c, std::ostream *os) { *os << c.name; }

class Chains : public testing::TestWithParam<Chain> {};

TEST_P(Chains, WorkUpToTheHeightLimitAndAreRefusedPastIt) {
  const Chain &c = GetParam();
  size_t links = chat::kMaxExpressionHeight - 1; // The first operand is the last level.
  auto atLimit = ChatTemplate::parse(c.prefix + repeat(c.link, links) + c.suffix);
  ASSERT_TRUE(atLimit) << atLimit.status().message();
  if (!c.rendered.empty()) {
    auto out = atLimit->render(kContext);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ(*out, c.rendered);
  }
  std::string expected = errorAt(c.prefix.size() + links * c.link.size() + c.at, kExpressionHeight);
  EXPECT_EQ(render(c.prefix + repeat(c.link, links + 1) + c.suffix), expected);
  EXPECT_EQ(render(c.prefix + repeat(c.link, kDeep) + c.suffix), expected);
}

INSTANTIATE_TEST_SUITE_P(
    Operators, Chains,
    testing::Values(Chain{"plus", "{{ 1", " + 1", " }}", 1, std::to_string(chat::kMaxExpressionHeight)},
                    Chain{"or", "{{ 0", " or 0", " }}", 1, "0"},
                    Chain{"filters", "{{ ' a '", "|trim", " }}", 1, "a"},
                    Chain{"attributes", "{{ d", ".a", " }}", 0, ""},
                    Chain{"calls", "{{ f", "()", " }}", 0, ""},
                    Chain{"subscripts", "{{ x", "[0]", " }}", 0, ""}),
    [](const testing::TestParamInfo<Chain> &info) { return std::string(info.param.name); });

TEST(Nesting, FlatConstructsHaveNoDepthLimit) {
  // Concatenations, elif branches, items and arguments sit side by side.
  EXPECT_EQ(render("{{ 'a'" + repeat(" ~ 'a'", kDeep) + " }}"), std::string(kDeep + 1, 'a'));
  EXPECT_EQ(render("{% if false %}" + repeat("{% elif false %}", kDeep) + "{% else %}ok{% endif %}"), "ok");
  EXPECT_EQ(render("{{ [" + repeat("1, ", kDeep) + "1]|length }}"), std::to_string(kDeep + 1));
  EXPECT_EQ(render("{{ 0" + repeat(" == 0", kDeep) + " }}"), "True");
}

// --- recursion while rendering -------------------------------------------------

/// ns.x built `levels` deep in a loop, `wrap` wrapping it once per level.
std::string built(const std::string &wrap, int levels) {
  return "{% set ns = namespace(x=0, y=0) %}{% for i in range(" + std::to_string(levels) + ") %}{% set ns.x = " +
         wrap + " %}{% endfor %}";
}

/// ns.x and ns.y, equal and built apart, so that no comparison of them
/// is cut short by finding the same object on both sides.
std::string builtTwice(const std::string &wrap, int levels) {
  std::string loop = built(wrap, levels);
  loop = loop.substr(loop.find("{% for"));
  return built(wrap, levels) + "{% set ns.y = ns.x %}{% set ns.x = 0 %}" + loop;
}

TEST(RenderDepth, AMacroThatCallsItselfEndsInAnError) {
  // Levels: the outer print (1), its call (2), then per call the macro's
  // print (odd) and call (even). At level 1024, a call, evaluating its
  // callee `f` would enter level 1025: the error points at that `f`, the
  // one inside the macro.
  std::string source = "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}";
  static_assert(chat::kMaxRenderDepth % 2 == 0, "the deepest level is a call");
  EXPECT_EQ(render(source), errorAt(source.find("{{ f() }}") + 3, kRenderDepth));
}

TEST(RenderDepth, RecursionToTheLimitRenders) {
  // f(n) reaches level 3n + 4: per call, the if (3 + 3j), its print
  // (4 + 3j) and the call (5 + 3j), whose argument k - 1 (6 + 3j) evaluates
  // k and 1 (7 + 3j); the last call stops at its if and its condition
  // (3 + 3n, 4 + 3n).
  auto source = [](int n) {
    return "{% macro f(k) %}{% if k %}{{ f(k - 1) }}{% endif %}.{% endmacro %}{{ f(" + std::to_string(n) + ") }}";
  };
  int n = (chat::kMaxRenderDepth - 4) / 3;
  ASSERT_EQ(3 * n + 4, chat::kMaxRenderDepth) << "choose a limit that this macro reaches exactly";
  EXPECT_EQ(render(source(n)), std::string(n + 1, '.'));
  EXPECT_EQ(render(source(n + 1)).rfind("error: chat template 1:", 0), 0u);
  EXPECT_NE(render(source(n + 1)).find(kRenderDepth), std::string::npos);
  EXPECT_NE(render(source(kDeep)).find(kRenderDepth), std::string::npos);
}

/// Runs `work` on a thread whose stack is `bytes`.
void onThreadWithStack(size_t bytes, const std::function<void()> &work) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  auto run = [](void *arg) -> void * {
    (*static_cast<const std::function<void()> *>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()> *>(&work)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(RenderDepth, TheDeepestParseAndRenderFitAQuarterOfAWorkersStack) {
  // A server's worker thread gets glibc's default stack, 8 MiB; these must
  // fit in a quarter of it, ASan's frames included (docs/robustness.md).
  const size_t stack = size_t(2) << 20;
  // The parser's deepest path: brackets, each through every precedence level.
  std::string parens = "{{ " + repeat("(", chat::kMaxTemplateNesting) + "1" +
                       repeat(")", chat::kMaxTemplateNesting) + " }}";
  // The render's: a macro recursing to the render limit through a loop and
  // an if (levels 3 + 4j to 8 + 4j per call j), whose last call prints,
  // compares and serialises values at the value limit (levels 4n + 5 to
  // 4n + 10 for [ns.y][0]).
  int calls = (chat::kMaxRenderDepth - 10) / 4;
  std::string recursion = builtTwice("[ns.x]", chat::kMaxValueDepth) +
                          "{% macro f(k) %}{% for i in [1] %}{% if k %}{{ f(k - 1) }}{% else %}"
                          "{{ ns.x|tojson|length }} {{ ns.x|string|length }} {{ ns.x == [ns.y][0] }} "
                          "{{ [ns.x, ns.y]|sort|length }}{% endif %}{% endfor %}{% endmacro %}{{ f(" +
                          std::to_string(calls) + ") }}";
  std::string parsed, rendered;
  onThreadWithStack(stack, [&] {
    parsed = render(parens);
    rendered = render(recursion);
  });
  EXPECT_EQ(parsed, "1");
  std::string size = std::to_string(2 * chat::kMaxValueDepth + 1);
  EXPECT_EQ(rendered, size + " " + size + " True 2");
  EXPECT_NE(render(recursion.substr(0, recursion.rfind("f(")) + "f(" + std::to_string(calls + 1) + ") }}")
                .find(kRenderDepth),
            std::string::npos)
      << "the recursion above is not the deepest";
}


// --- values a template builds --------------------------------------------------

TEST(ValueDepth, BuiltToTheLimitPrintsComparesAndSerialises) {
  int levels = chat::kMaxValueDepth;
  std::string list = repeat("[", levels) + "0" + repeat("]", levels);
  EXPECT_EQ(render(built("[ns.x]", levels) + "{{ ns.x }}|{{ ns.x|tojson }}"), list + "|" + list);
  EXPECT_EQ(render(builtTwice("[ns.x]", levels) + "{{ ns.x == ns.y }} {{ ns.x in [ns.y] }} "
                                                  "{{ [ns.x, ns.y]|sort|length }} {{ [ns.x, ns.y]|unique|length }}"),
            "True True 2 1");
  EXPECT_EQ(render(built("{'k': ns.x}", levels) + "{{ ns.x|tojson|length }}"),
            std::to_string(levels * std::string("{\"k\": }").size() + 1));
}

TEST(ValueDepth, BuiltDeeperIsAnErrorWhereItIsWalked) {
  for (int levels : {chat::kMaxValueDepth + 1, kDeep}) {
    SCOPED_TRACE(levels);
    bool boundary = levels == chat::kMaxValueDepth + 1; // Every walk there; the main ones far past it.
    std::string prefix = built("[ns.x]", levels);
    EXPECT_EQ(render(prefix + "{{ ns.x }}"), errorAt(prefix.size(), kValueDepth));
    if (boundary)
      EXPECT_EQ(render(prefix + "{{ ns.x|tojson }}"), errorAt(prefix.size() + 8, kValueDepth));
    std::string dicts = built("{'k': ns.x}", levels);
    EXPECT_EQ(render(dicts + "{{ ns.x|tojson(indent=2) }}"), errorAt(dicts.size() + 8, kValueDepth));
    if (boundary)
      EXPECT_EQ(render(dicts + "{{ ns.x|string }}"), errorAt(dicts.size() + 8, kValueDepth));
    // A comparison has no position of its own: it gets its expression's.
    std::string twice = builtTwice("[ns.x]", levels);
    EXPECT_EQ(render(twice + "{{ ns.x == ns.y }}"), errorAt(twice.size() + 3, kValueDepth));
    if (boundary)
      EXPECT_EQ(render(twice + "{{ [ns.x, ns.y]|sort }}"), errorAt(twice.size() + 16, kValueDepth));
  }
}

TEST(ValueDepth, DeepValuesThatAreNeverWalkedAreFreedWithoutRecursion) {
  EXPECT_EQ(render(built("[ns.x]", kDeep) + "done"), "done");
  EXPECT_EQ(render(built("{'k': ns.x}", kDeep) + "done"), "done");
  // A chain of namespaces, each holding the next.
  std::string chain = "{% set head = namespace(next=none) %}{% set ns = namespace(tail=head) %}"
                      "{% for i in range(" + std::to_string(kDeep) + ") %}{% set n = namespace(next=none) %}"
                      "{% set t = ns.tail %}{% set t.next = n %}{% set ns.tail = n %}{% endfor %}";
  EXPECT_EQ(render(chain + "{{ head }}"), errorAt(chain.size(), kValueDepth));
  // A chain of macros, each calling the one defined before it.
  std::string macros = "{% set ns = namespace(m=none) %}{% for i in range(" + std::to_string(kDeep) +
                       ") %}{% set prev = ns.m %}{% macro m() %}{{ prev() }}{% endmacro %}{% set ns.m = m %}"
                       "{% endfor %}";
  EXPECT_NE(render(macros + "{{ ns.m() }}").find(kRenderDepth), std::string::npos);
}

TEST(ValueDepth, ANamespaceThatHoldsItselfIsAnErrorWhenPrintedAndIsFreed) {
  // Python prints the cycle as {...}; this refuses it. The cycle is broken
  // when the render ends (ASan's leak check would report it otherwise).
  std::string source = "{% set ns = namespace() %}{% set ns.me = [ns] %}";
  EXPECT_EQ(render(source + "{{ ns.me|length }}"), "1");
  EXPECT_EQ(render(source + "{{ ns }}"), errorAt(source.size(), kValueDepth));
}

// --- strings and lists a template builds ----------------------------------------

TEST(TextSize, AStringUpToTheLimitIsBuiltAndOneByteMoreIsNot) {
  std::string atLimit = render("{{ 'x' * " + std::to_string(chat::kMaxTextBytes) + " }}");
  EXPECT_EQ(atLimit.size(), chat::kMaxTextBytes);
  EXPECT_EQ(atLimit.find_first_not_of('x'), std::string::npos);
  EXPECT_EQ(render("{{ 'x' * " + std::to_string(chat::kMaxTextBytes + 1) + " }}"),
            errorAt(7, textTooLong(chat::kMaxTextBytes + 1)));
  EXPECT_EQ(render("{{ 'xy' * 10 ** 18 }}"), errorAt(8, textTooLong(2000000000000000000)));
  EXPECT_EQ(render("{{ 'xyz' * 9223372036854775807 }}"),
            "error: chat template 1:10: the template builds a string of more than 18446744073709551615 bytes, "
            "beyond the limit of 32 MiB");
  EXPECT_EQ(render("{{ ('' * 10 ** 18)|length }} {{ ([] * 10 ** 18)|length }} {{ ('x' * -5)|length }}"), "0 0 0");
}

TEST(TextSize, EveryWayToGrowAStringIsBounded) {
  // A string doubled in a loop: 2^25 bytes is the limit itself.
  static_assert(chat::kMaxTextBytes == size_t(1) << 25, "the doubling below reaches the limit exactly");
  auto doubling = [](int times) {
    return "{% set ns = namespace(s='x') %}{% for i in range(" + std::to_string(times) +
           ") %}{% set ns.s = ns.s + ns.s %}{% endfor %}";
  };
  EXPECT_EQ(render(doubling(25) + "{{ ns.s|length }}"), std::to_string(chat::kMaxTextBytes));
  EXPECT_EQ(render(doubling(100)), errorAt(doubling(100).find("+"), textTooLong(uint64_t(1) << 26)));

  // Each of these builds 36 MiB or more from a 12 MiB string.
  size_t part = size_t(12) << 20;
  uint64_t tripled = 3 * (chat::kMaxTextBytes / 3 + 1); // Grown 3 bytes per byte, one step past the limit.
  json context = {{"s", std::string(part, 's')}};
  struct Case {
    std::string source;
    size_t at;      ///< Where the error points.
    uint64_t bytes; ///< The size it reports: the string as far as it got.
  };
  for (const Case &c : std::vector<Case>{
           {"{{ s ~ s ~ s }}", 11, 3 * part},
           {"{{ [s, s, s]|join }}", 13, 3 * part},
           {"{{ ''.join([s, s, s]) }}", 10, 3 * part},
           {"{{ [s, s, s] }}", 0, 3 * (part + 2) + 2 * 2 + 1},
           {"{{ [s, s, s]|tojson }}", 13, 3 * (part + 2) + 2 * 2 + 1},
           {"{{ s|replace('s', 'sss') }}", 5, tripled},
           {"{{ s.replace('', 'ab') }}", 12, tripled},
           {"{% for i in range(3) %}{{ s }}{% endfor %}", 23, 3 * part},
       }) {
    EXPECT_EQ(render(c.source, context), errorAt(c.at, textTooLong(c.bytes))) << c.source;
  }
  EXPECT_EQ(render("{{ (s ~ s)|length }}", context), std::to_string(2 * part));
}

TEST(ListSize, ListsUpToTheLimitAreBuiltAndLongerOnesAreNot) {
  std::string limit = std::to_string(chat::kMaxListItems);
  EXPECT_EQ(render("{{ range(" + limit + ")|length }} {{ ([0] * " + limit + ")|length }}"), limit + " " + limit);
  EXPECT_EQ(render("{{ range(" + limit + " + 1)|length }}"), errorAt(8, listTooLong(chat::kMaxListItems + 1)));
  EXPECT_EQ(render("{{ [0, 1] * 10 ** 12 }}"), errorAt(10, listTooLong(2000000000000)));
  std::string doubling = "{% set ns = namespace(l=[0]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}"
                         "{% endfor %}";
  EXPECT_EQ(render(doubling), errorAt(doubling.find("+"), listTooLong(uint64_t(1) << 20)));
}

// --- integer powers --------------------------------------------------------------

TEST(Power, HugeExponentsTakeNoTimeAndOverflowIsAnError) {
  // Against repeated multiplication in 128 bits.
  auto naive = [](int64_t base, int64_t exponent) -> std::string {
    __int128 r = 1;
    for (int64_t i = 0; i < exponent; ++i) {
      r *= base;
      if (r > INT64_MAX || r < INT64_MIN)
        return "overflow";
    }
    return std::to_string(static_cast<int64_t>(r));
  };
  for (auto [base, exponent] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 0}, {2, 62}, {2, 63}, {-2, 63}, {-2, 64}, {3, 39}, {3, 40}, {-3, 39}, {10, 18}, {10, 19}, {7, 5},
           {0, 0}, {0, 9}, {1, 1000}, {-1, 1001}}) {
    std::string expected = naive(base, exponent);
    std::string source = "{{ (" + std::to_string(base) + ") ** " + std::to_string(exponent) + " }}";
    std::string out = render(source);
    if (expected == "overflow")
      EXPECT_NE(out.find("integer overflow"), std::string::npos) << source << " gave " << out;
    else
      EXPECT_EQ(out, expected) << source;
  }
  EXPECT_EQ(render("{{ 1 ** 4611686018427387904 }} {{ (-1) ** 4611686018427387905 }} {{ 0 ** 9223372036854775807 }}"),
            "1 -1 0");
}

} // namespace
