//===- Limits.cpp - the errors of the limits in Limits.h -----------------===//
#include "Limits.h"

#include "Error.h"

#include <string>

namespace moe::rt::chat {

namespace {

/// A count for a message; UINT64_MAX stands for a product that overflowed.
std::string countText(uint64_t n) {
  return n == UINT64_MAX ? "more than " + std::to_string(n) : std::to_string(n);
}

} // namespace

void failTemplateNesting(size_t offset) {
  fail(offset, "the template nests deeper than " + std::to_string(kMaxTemplateNesting) +
                   " blocks, brackets and unary operators, the limit");
}

void failExpressionHeight(size_t offset) {
  fail(offset, "an expression nests deeper than " + std::to_string(kMaxExpressionHeight) +
                   " operators, filters, attributes, calls and literals, the limit");
}

void failRenderDepth(size_t offset) {
  fail(offset, "rendering nests deeper than " + std::to_string(kMaxRenderDepth) +
                   " statements, expressions and macro calls, the limit (does a macro call itself without end?)");
}

void failValueDepth(size_t offset) {
  fail(offset, "a value nests deeper than " + std::to_string(kMaxValueDepth) +
                   " lists, tuples and dicts, the limit for printing, comparing and tojson");
}

void failTextBytes(uint64_t bytes, size_t offset) {
  fail(offset, "the template builds a string of " + countText(bytes) + " bytes, beyond the limit of " +
                   std::to_string(kMaxTextBytes >> 20) + " MiB");
}

void failListItems(uint64_t items, size_t offset) {
  fail(offset, "the template builds a list of " + countText(items) + " items, beyond the limit of " +
                   std::to_string(kMaxListItems));
}

} // namespace moe::rt::chat
