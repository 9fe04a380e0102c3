//===- Cli.h - the one command-line convention of every tool ----*- C++ -*-===//
//
// Every tool parses its flags with CLI11 through this class, so that all of
// them share one --help layout, --version, the same names for the same
// things (--json FILE, --threads N) and one error form:
//   <tool>: error: <what> (see --help)
// with exit code 1. Numeric flags are validated (finite, in range).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_CLI_H
#define MOE_TOOLS_COMMON_CLI_H

#include "tools/common/ProcessGuards.h"
#include "moe/runtime/Registry.h"
#include "moe/abi/Version.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <algorithm>
#include <string>
#include <vector>

namespace moe::tools {

/// A real number that is finite and within [lo, hi].
inline CLI::Validator finiteIn(double lo, double hi) {
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        char *end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0')
          return "'" + text + "' is not a number";
        if (!std::isfinite(v) || v < lo || v > hi)
          return "'" + text + "' is not a finite number in [" + CLI::detail::to_string(lo) +
                 ", " + CLI::detail::to_string(hi) + "]";
        return "";
      },
      "");
}

/// A real number that is finite and > 0 (sizes in MiB, rates).
inline CLI::Validator positiveFinite() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        char *end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || !(v > 0) || v > 1e12)
          return "'" + text + "' is not a positive number";
        return "";
      },
      "");
}

/// A whole number within [lo, hi].
inline CLI::Validator integerIn(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        char *end = nullptr;
        errno = 0;
        long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE)
          return "'" + text + "' is not a whole number";
        if (v < lo || v > hi)
          return "'" + text + "' is not in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "]";
        return "";
      },
      "");
}

/// One of `choices`.
inline CLI::Validator oneOf(std::vector<std::string> choices) {
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) != choices.end())
          return "";
        std::string list;
        for (const std::string &c : choices)
          list += (list.empty() ? "" : ", ") + c;
        return "'" + text + "' is not one of " + list;
      },
      "");
}

/// CLI11's layout with descriptions wrapped to the terminal-friendly width
/// and, after each flag, only its value's name (ranges and defaults are in
/// the description, where they read as sentences).
class HelpFormatter : public CLI::Formatter {
public:
  std::string make_option_name(const CLI::Option *opt, bool positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, positional);
    for (size_t open; (open = name.find('{')) != std::string::npos;) // --no-x{false}
      name.erase(open, name.find('}', open) - open + 1);
    return name;
  }
  std::string make_option_opts(const CLI::Option *opt) const override {
    return opt->get_type_size() == 0 ? "" : " " + opt->get_type_name();
  }
  std::string make_option_desc(const CLI::Option *opt) const override {
    const std::string &text = opt->get_description();
    const size_t width = 96 - get_column_width();
    std::string out, line;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      std::string word = text.substr(start, end == std::string::npos ? end : end - start);
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      start = end == std::string::npos ? text.size() : end + 1;
    }
    return out + line;
  }
};

class Cli {
public:
  Cli(std::string tool, const std::string &description)
      : app(description, tool), tool_(std::move(tool)) {
    app.set_version_flag("--version", tool_ + " " + rt::version() + " (commit " +
                                          rt::gitCommit() + ")",
                         "print the version and the git commit, then exit");
    app.set_help_flag("-h,--help", "print this help, then exit");
    auto formatter = std::make_shared<HelpFormatter>();
    formatter->column_width(30);
    app.formatter(formatter);
    reportTruncatedMappings(tool_);
    reportLostStdout(tool_);
  }

  /// Parses the command line. Returns an exit code when the tool should
  /// stop now: 0 after --help or --version, 1 after a bad flag (reported in
  /// one line).
  std::optional<int> parse(int argc, char **argv) {
    if (std::optional<std::string> bad = emptyListItem(argc, argv))
      return fail(*bad + " (see --help)");
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success &e) {
      return app.exit(e);
    } catch (const CLI::ParseError &e) {
      return fail(std::string(e.what()) + " (see --help)");
    }
    if (const CLI::Option *empty = givenEmpty(app))
      return fail(empty->get_name() + ": an empty value (see --help)");
    return std::nullopt;
  }

  /// The plan directory, a required positional argument.
  CLI::Option *addPlan(std::string &dir, CLI::App *on = nullptr) {
    return (on ? on : &app)
        ->add_option("plan", dir, "the plan directory (moe-compile -o)")
        ->required()
        ->type_name("PLAN-DIR");
  }

  /// --json FILE: the results as JSON in FILE; `-` is standard output, which
  /// then holds nothing else (human-readable output goes to stderr).
  CLI::Option *addJson(std::string &path) {
    json_ = &path;
    return app.add_option("--json", path,
                          "write the results as JSON to FILE ('-': standard output, "
                          "and everything else to standard error)")
        ->type_name("FILE");
  }

  /// --threads N: kernel threads (0: one per core).
  CLI::Option *addThreads(int &threads) {
    return app.add_option("--threads", threads, "kernel threads (default 0: one per core)")
        ->check(integerIn(0, 4096))
        ->type_name("N");
  }

  /// --device NAME: the backend (default cpu); --list-devices prints this
  /// build's backends, one per line (with --json -, as JSON), and exits.
  CLI::Option *addDevice(std::string &device) {
    // Callbacks run after every flag is read (and before required ones are
    // checked), so --json is known here wherever it stands.
    app.add_flag_callback(
        "--list-devices",
        [this] {
          if (json_ && *json_ == "-") {
            nlohmann::json list = nlohmann::json::array();
            for (const rt::BackendInfo &b : rt::listBackends())
              list.push_back({{"name", b.name},
                              {"description", b.description},
                              {"unavailable", b.unavailable}});
            std::printf("%s\n", list.dump(2).c_str());
          } else {
            for (const rt::BackendInfo &b : rt::listBackends())
              std::printf("%-6s %s%s\n", b.name.c_str(), b.description.c_str(),
                          b.unavailable.empty()
                              ? ""
                              : (" (unavailable: " + b.unavailable + ")").c_str());
          }
          throw CLI::Success();
        },
        "print the backends --device can name (with --json -, as JSON), then exit");
    return app.add_option("--device", device, "the backend to run on (default cpu; see "
                                              "--list-devices)")
        ->type_name("NAME");
  }

  /// Prints "<tool>: error: <message>" and returns 1, the exit code.
  int fail(const std::string &message) const {
    std::fprintf(stderr, "%s: error: %s\n", tool_.c_str(), message.c_str());
    return 1;
  }
  const std::string &tool() const { return tool_; }

  CLI::App app;

private:
  /// CLI11 drops the empty items of a delimited list ("5,,6" reads as 5,6,
  /// as if nothing were wrong): they are refused instead.
  std::optional<std::string> emptyListItem(int argc, char **argv) const {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i], value;
      if (arg.rfind("--", 0) != 0)
        continue;
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg.resize(eq);
      } else if (i + 1 < argc) {
        value = argv[i + 1];
      }
      const CLI::Option *o = app.get_option_no_throw(arg);
      if (!o || o->get_delimiter() == '\0' || value.empty())
        continue;
      const std::string d(1, o->get_delimiter());
      if (value.find(d + d) != std::string::npos || value.front() == d[0] ||
          value.back() == d[0])
        return arg + ": '" + value + "' has an empty item";
    }
    return std::nullopt;
  }

  /// The first option of `on` or its subcommands given an empty value
  /// (`--json ''` would otherwise mean "not given"), or null.
  static const CLI::Option *givenEmpty(const CLI::App &on) {
    for (const CLI::Option *o : on.get_options())
      for (const std::string &value : o->results())
        if (o->get_type_size() != 0 && value.empty())
          return o;
    for (const CLI::App *sub : on.get_subcommands())
      if (const CLI::Option *o = givenEmpty(*sub))
        return o;
    return nullptr;
  }

  std::string tool_;
  const std::string *json_ = nullptr; ///< the --json path, when the tool has one
};

} // namespace moe::tools

#endif
