//===- Args.h - a small flag parser for the runtime tools -------*- C++ -*-===//
//
// The runtime tools link no LLVM, so they parse `--name value` and
// `--name=value` themselves. Unknown flags and bad values are errors.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_ARGS_H
#define MOE_TOOLS_COMMON_ARGS_H

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe::tools {

struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// True when argv asks for --help (or -h).
inline bool wantsHelp(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h")
      return true;
  return false;
}

class Args {
public:
  /// `valued`: flags that take a value; `switches`: flags that do not.
  Args(int argc, char **argv, const std::vector<std::string> &valued,
       const std::vector<std::string> &switches) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0 || a == "--") {
        positional.push_back(a);
        continue;
      }
      std::string name = a.substr(2), value;
      size_t eq = name.find('=');
      bool inlineValue = eq != std::string::npos;
      if (inlineValue) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (contains(switches, name) && !inlineValue) {
        values_[name] = "1";
      } else if (contains(valued, name)) {
        if (!inlineValue) {
          if (i + 1 >= argc)
            throw ArgError("--" + name + " needs a value");
          value = argv[++i];
        }
        values_[name] = value;
      } else {
        throw ArgError("unknown option --" + name + " (see --help)");
      }
    }
  }

  bool has(const std::string &name) const { return values_.count(name) != 0; }
  std::string str(const std::string &name, const std::string &dflt = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? dflt : it->second;
  }
  int64_t integer(const std::string &name, int64_t dflt) const {
    if (!has(name))
      return dflt;
    return parseInt(name, str(name));
  }
  double number(const std::string &name, double dflt) const {
    if (!has(name))
      return dflt;
    return parseNumber(name, str(name));
  }
  /// "1,2,3" -> {1, 2, 3}.
  std::vector<int64_t> integers(const std::string &name) const {
    std::vector<int64_t> out;
    for (const std::string &item : items(name))
      out.push_back(parseInt(name, item));
    return out;
  }
  /// "0.5,2" -> {0.5, 2}.
  std::vector<double> numbers(const std::string &name) const {
    std::vector<double> out;
    for (const std::string &item : items(name))
      out.push_back(parseNumber(name, item));
    return out;
  }

  std::vector<std::string> positional;

private:
  static bool contains(const std::vector<std::string> &v, const std::string &s) {
    for (const auto &x : v)
      if (x == s)
        return true;
    return false;
  }
  std::vector<std::string> items(const std::string &name) const {
    std::vector<std::string> out;
    std::string v = str(name);
    for (size_t start = 0;;) {
      size_t comma = v.find(',', start);
      out.push_back(v.substr(start, comma == std::string::npos ? std::string::npos
                                                               : comma - start));
      if (comma == std::string::npos)
        return out;
      start = comma + 1;
    }
  }
  static double parseNumber(const std::string &name, const std::string &v) {
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end)
      throw ArgError("--" + name + " takes numbers, got '" + v + "'");
    return d;
  }
  static int64_t parseInt(const std::string &name, const std::string &v) {
    char *end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end)
      throw ArgError("--" + name + " takes integers, got '" + v + "'");
    return n;
  }
  std::map<std::string, std::string> values_;
};

/// The main() of a runtime tool: --help prints `help`; otherwise parses the
/// flags and returns body(args); a flag error prints "<tool>: error: ..."
/// and returns 1.
template <typename Body>
int toolMain(int argc, char **argv, const char *tool, const char *help,
             const std::vector<std::string> &valued, const std::vector<std::string> &switches,
             Body body) {
  if (wantsHelp(argc, argv)) {
    std::cout << help;
    return 0;
  }
  try {
    Args args(argc, argv, valued, switches);
    return body(args);
  } catch (const ArgError &e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 1;
  }
}

} // namespace moe::tools

#endif
