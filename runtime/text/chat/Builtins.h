//===- Builtins.h - filters, tests and methods --------------------*- C++ -*-===//
//
// The jinja2 filters and tests, and the Python str/dict/list methods, that
// chat templates use. The parser looks filters and tests up by name so that
// an unsupported one fails at parse time with its line:column.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_BUILTINS_H
#define MOE_RUNTIME_TEXT_CHAT_BUILTINS_H

#include "Value.h"

#include <string_view>

namespace moe::rt::chat {

using FilterFn = Value (*)(const Value &subject, CallArgs &args, size_t offset);
using TestFn = bool (*)(const Value &subject, CallArgs &args, size_t offset);

/// nullptr when the filter or test is not supported.
FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);

/// `object.name` as jinja2's sandbox resolves it: a method of str, dict or
/// list (bound to `object`), else dict item, else Undefined. Python methods
/// that are not implemented, and the mutating ones the sandbox forbids, fail
/// rather than read as undefined.
Value getAttribute(const Value &object, const std::string &name, size_t offset);
/// `object[key]`: item first, then attribute, as jinja2's getitem.
Value getItem(const Value &object, const Value &key, size_t offset);

/// Python's len(); fails for values without one.
int64_t length(const Value &v, size_t offset);
/// The items a for loop visits: list/tuple items, dict keys, string
/// characters, nothing for Undefined; fails otherwise.
List iterate(const Value &v, size_t offset);

} // namespace moe::rt::chat

#endif
