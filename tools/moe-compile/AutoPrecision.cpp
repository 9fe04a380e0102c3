//===- AutoPrecision.cpp - moe-compile --precision=auto -------------------===//
#include "AutoPrecision.h"

#include "moe/abi/File.h"
#include "moe/runtime/Evaluate.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Tokenizer.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

namespace moe {

namespace fs = std::filesystem;

namespace {

// The units the search sets: each of moe-assign-precision's components, and
// the embedding and LM head together (a tied table serves both, and takes
// the more precise of their two precisions, so neither moves it alone).
constexpr const char *kUnits[][2] = {
    {"embedding", nullptr}, {"lm_head", nullptr},   {"router", nullptr},
    {"experts", nullptr},   {"shared_expert", nullptr}, {"dense_mlp", nullptr},
    {"attention", nullptr}, {"embedding", "lm_head"}};
constexpr size_t kTiedUnit = 7;
// The candidate precisions, from the most precise (f32: the reference) down.
constexpr const char *kPrecisions[] = {"f32", "bf16", "int8", "fp8", "int4"};
constexpr size_t kNumPrecisions = std::size(kPrecisions);

// Used when no calibration file is given to a byte-level model: ordinary
// English prose of several registers (narrative, technical, dialogue).
constexpr const char *kSample =
    "The river rose through the night, and by morning the lower fields were under a "
    "sheet of brown water. Old Tomas walked the length of the dike with a lantern, "
    "counting the places where the earth had softened, and when he came back he said "
    "only that the north gate would hold if nobody opened it.\n"
    "To measure the flow, divide the volume that passes a point by the time it takes; "
    "a channel ten metres wide and two deep, moving at one metre per second, carries "
    "twenty cubic metres every second, or seventy-two thousand in an hour.\n"
    "\"Will it reach the village?\" asked the girl. \"Not tonight,\" her mother answered, "
    "\"but tomorrow we carry the grain to the loft, and the chickens with it.\"\n";

struct Measure {
  uint64_t bytes = 0; ///< the plan's weight bytes
  double kl = 0, top1 = 1;
};

class Search {
public:
  /// `calibrationText`: the calibration file's bytes, when one is given.
  Search(const CompileFn &compile, const AutoPrecisionOptions &options, llvm::raw_ostream &log,
         std::string calibrationText)
      : compile_(compile), options_(options), log_(log),
        device_(rt::createCpuDevice({options.threads})),
        calibrationText_(std::move(calibrationText)) {}

  bool run(std::vector<std::string> &overrides, std::string &error) {
    if (!reference(error))
      return false;
    // Each component alone at each candidate precision, the rest fp32.
    log_ << "component          precision  weight bytes  KL (nats/token)  top-1\n";
    std::vector<size_t> present;
    for (size_t u = 0; u < std::size(kUnits); ++u) {
      alone_[u][0] = ref_;
      // The tied unit only when neither half moved anything alone.
      if (u == kTiedUnit && (isPresent(present, 0) || isPresent(present, 1)))
        continue;
      for (size_t p = 1; p < kNumPrecisions; ++p) {
        if (!measure("fp32", settings(u, p), alone_[u][p], error))
          return false;
        if (alone_[u][p].bytes == ref_.bytes)
          break; // no weight of this component in the model
        log_ << llvm::format("%-18s %-10s %12llu  %15.3g  %6.2f%%\n", name(u).c_str(),
                             kPrecisions[p], (unsigned long long)alone_[u][p].bytes,
                             alone_[u][p].kl, 100.0 * alone_[u][p].top1);
        if (p == kNumPrecisions - 1)
          present.push_back(u);
      }
    }
    std::vector<size_t> choice = cheapest(present);
    // Check the combination itself; while it misses the budget, give the
    // component with the largest KL at its precision the next better one.
    for (;;) {
      overrides.clear();
      for (size_t i = 0; i < present.size(); ++i)
        for (const std::string &o : settings(present[i], choice[i]))
          overrides.push_back(o);
      Measure m;
      if (!measure("keep", overrides, m, error))
        return false;
      log_ << "candidate      " << join(overrides) << ": " << m.bytes << " bytes, KL "
           << llvm::format("%.3g", m.kl) << ", top-1 " << llvm::format("%.2f%%", 100 * m.top1)
           << "\n";
      if (m.kl <= options_.maxKl && m.top1 >= options_.minTop1) {
        if (!integerActivations(present, choice, overrides, m, error))
          return false;
        Measure int8;
        if (!measure("int8", {}, int8, error))
          return false;
        log_ << "chosen         " << m.bytes << " weight bytes; the int8 policy: " << int8.bytes
             << " bytes, KL " << llvm::format("%.3g", int8.kl) << ", top-1 "
             << llvm::format("%.2f%%", 100 * int8.top1) << "\n";
        return true;
      }
      size_t worst = present.size();
      for (size_t i = 0; i < present.size(); ++i)
        if (choice[i] > 0 && (worst == present.size() ||
                              alone_[present[i]][choice[i]].kl >
                                  alone_[present[worst]][choice[worst]].kl))
          worst = i;
      if (worst == present.size()) {
        error = "the budget (--max-kl " + std::to_string(options_.maxKl) + ", --min-top1 " +
                std::to_string(options_.minTop1) + ") is not met even with every weight in f32";
        return false;
      }
      --choice[worst];
    }
  }

private:
  // The fp32 plan and the calibration tokens.
  bool reference(std::string &error) {
    const std::string dir = options_.workDir + "/fp32";
    if (!compile_("fp32", {}, dir, error))
      return false;
    auto plan = rt::LoadedPlan::open(dir);
    if (!plan)
      return fail(plan.status().message(), error);
    refPlan_ = plan.take();
    window_ = std::min<int64_t>(refPlan_->plan().kv_cache()->max_context(), 512);
    rt::SessionOptions so;
    so.maxContext = window_;
    auto session = rt::Session::create(*refPlan_, *device_, so);
    if (!session)
      return fail(session.status().message(), error);
    refSession_ = session.take();
    if (!calibration(error))
      return false;
    ref_ = Measure{refPlan_->program().weight_bytes(), 0.0, 1.0};
    log_ << "calibration: " << tokens_.size() << " tokens; fp32 plan " << ref_.bytes
         << " weight bytes\n";
    return true;
  }

  bool calibration(std::string &error) {
    auto tokenizer = rt::ByteTokenizer::forPlan(refPlan_->plan());
    std::string text = options_.calibrationFile.empty() ? std::string(kSample) : calibrationText_;
    const int32_t vocab = refPlan_->plan().config()->vocab_size();
    if (tokenizer) {
      tokens_ = tokenizer->encode(text);
      start_ = tokenizer->startId();
    } else if (!options_.calibrationFile.empty()) { // token ids
      std::replace(text.begin(), text.end(), ',', ' ');
      std::istringstream ids(text);
      for (long long id; ids >> id;) {
        if (id < 0 || id >= vocab)
          return fail(options_.calibrationFile + ": token id " + std::to_string(id) +
                          " is outside the vocabulary [0, " + std::to_string(vocab) + ")",
                      error);
        tokens_.push_back(int32_t(id));
      }
      if (!ids.eof())
        return fail(options_.calibrationFile + ": expected token ids separated by commas or "
                                               "spaces (the model has no byte tokenizer)",
                    error);
    } else { // no text to read: seeded random tokens
      std::mt19937 rng(1);
      std::uniform_int_distribution<int32_t> id(0, vocab - 1);
      for (int64_t i = 0; i < options_.calibrationTokens; ++i)
        tokens_.push_back(id(rng));
    }
    if (int64_t(tokens_.size()) > options_.calibrationTokens)
      tokens_.resize(size_t(options_.calibrationTokens));
    if (tokens_.size() < 2)
      return fail("the calibration input has fewer than 2 tokens", error);
    return true;
  }

  bool measure(const std::string &policy, const std::vector<std::string> &overrides, Measure &m,
               std::string &error) {
    const std::string dir = options_.workDir + "/candidate";
    if (!compile_(policy, overrides, dir, error))
      return false;
    auto plan = rt::LoadedPlan::open(dir);
    if (!plan)
      return fail(plan.status().message(), error);
    rt::SessionOptions so;
    so.maxContext = window_;
    auto session = rt::Session::create(**plan, *device_, so);
    if (!session)
      return fail(session.status().message(), error);
    auto score = rt::scoreTokens(**session, tokens_, window_, refSession_.get(), start_);
    if (!score)
      return fail(score.status().message(), error);
    m = Measure{(*plan)->program().weight_bytes(), score->comparison->kl, score->comparison->top1};
    return true;
  }

  // The assignment with the fewest predicted bytes whose summed KL and top-1
  // loss (each component measured alone) fit the budget; all f32 fits.
  std::vector<size_t> cheapest(const std::vector<size_t> &present) const {
    std::vector<size_t> choice(present.size(), 0), best = choice;
    double bestBytes = double(ref_.bytes), bestKl = 0;
    for (;;) {
      double bytes = double(ref_.bytes), kl = 0, loss = 0;
      for (size_t i = 0; i < present.size(); ++i) {
        const Measure &m = alone_[present[i]][choice[i]];
        bytes += double(m.bytes) - double(ref_.bytes);
        kl += m.kl;
        loss += 1.0 - m.top1;
      }
      if (kl <= options_.maxKl && loss <= 1.0 - options_.minTop1 &&
          (bytes < bestBytes || (bytes == bestBytes && kl < bestKl))) {
        best = choice;
        bestBytes = bytes;
        bestKl = kl;
      }
      size_t i = 0; // next assignment, as a number in base kNumPrecisions
      while (i < choice.size() && ++choice[i] == kNumPrecisions)
        choice[i++] = 0;
      if (i == choice.size())
        return best;
    }
  }

  // At equal weight bytes the kernels that quantize activations to int8 run
  // faster on a CPU (integer dot products; on a Zen 4, w4a8 read 0.87-0.95
  // of the memory bandwidth at one token against int4's 0.45, and w8a8
  // prefilled about twice as fast as int8: docs/performance.md): each
  // unit the choice puts at int4 (int8) moves to w4a8 (w8a8), one at a
  // time, where the combination measured still meets the budget. Not the
  // embedding, which is looked up rather than multiplied, nor the router,
  // whose E x H matrix is too small to gain (as the w4a8 and w8a8 policies).
  bool integerActivations(const std::vector<size_t> &present, const std::vector<size_t> &choice,
                          std::vector<std::string> &overrides, Measure &m, std::string &error) {
    for (size_t i = 0; i < present.size(); ++i) {
      const size_t u = present[i];
      const std::string from = kPrecisions[choice[i]];
      const char *faster = from == "int4" ? "w4a8" : from == "int8" ? "w8a8" : nullptr;
      const std::string unit = kUnits[u][0];
      if (!faster || kUnits[u][1] || unit == "embedding" || unit == "router")
        continue;
      std::vector<std::string> trial = overrides;
      for (std::string &o : trial)
        if (o == unit + "=" + from)
          o = unit + "=" + faster;
      Measure t;
      if (!measure("keep", trial, t, error))
        return false;
      const bool kept = t.kl <= options_.maxKl && t.top1 >= options_.minTop1;
      log_ << (kept ? "faster         " : "not faster     ") << unit << "=" << faster
           << ": " << t.bytes << " bytes, KL " << llvm::format("%.3g", t.kl) << ", top-1 "
           << llvm::format("%.2f%%", 100 * t.top1) << "\n";
      if (kept) {
        overrides = trial;
        m = t;
      }
    }
    return true;
  }

  // The overrides that put unit u at precision p.
  static std::vector<std::string> settings(size_t u, size_t p) {
    std::vector<std::string> out;
    for (const char *c : kUnits[u])
      if (c)
        out.push_back(std::string(c) + "=" + kPrecisions[p]);
    return out;
  }
  static std::string name(size_t u) {
    return kUnits[u][1] ? std::string(kUnits[u][0]) + "+" + kUnits[u][1] : kUnits[u][0];
  }
  static bool isPresent(const std::vector<size_t> &present, size_t u) {
    return std::find(present.begin(), present.end(), u) != present.end();
  }

  static std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v)
      s += (s.empty() ? "" : ",") + x;
    return s;
  }

  static bool fail(const std::string &message, std::string &error) {
    error = message;
    return false;
  }

  const CompileFn &compile_;
  const AutoPrecisionOptions &options_;
  llvm::raw_ostream &log_;
  std::unique_ptr<rt::Device> device_;
  std::unique_ptr<rt::LoadedPlan> refPlan_;
  std::unique_ptr<rt::Session> refSession_;
  std::vector<int32_t> tokens_;
  std::optional<int32_t> start_;
  int64_t window_ = 0;
  Measure ref_;
  std::string calibrationText_;
  std::array<std::array<Measure, kNumPrecisions>, std::size(kUnits)> alone_{};
};

} // namespace

std::string candidatesDir(const std::string &output) {
  // Candidates of compiles that no longer run (killed) go first.
  const fs::path out = fs::absolute(output).lexically_normal();
  const std::string prefix = out.filename().string() + ".auto-candidates-";
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(out.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0)
      continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && !rt::processRunning(pid))
      fs::remove_all(entry.path(), ec);
  }
  return output + ".auto-candidates-" + std::to_string(::getpid());
}

bool searchPrecision(const CompileFn &compile, const AutoPrecisionOptions &options,
                     std::vector<std::string> &overrides, llvm::raw_ostream &log,
                     std::string &error) {
  // Inputs first, so that a bad one is the only line printed.
  std::string calibrationText;
  if (!options.calibrationFile.empty()) {
    auto read = rt::readFile(options.calibrationFile);
    if (!read) {
      error = read.status().message();
      return false;
    }
    calibrationText = read.take();
  }
  std::error_code ec;
  fs::create_directories(options.workDir, ec);
  if (!ec && !fs::is_directory(options.workDir, ec) && !ec)
    ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    error = options.workDir + ": cannot create the directory for candidate plans (" +
            ec.message() + "); remove it or choose another -o";
    return false;
  }
  log << "moe-compile: --precision=auto: each component at each precision, against fp32\n";
  bool ok = Search(compile, options, log, std::move(calibrationText)).run(overrides, error);
  fs::remove_all(options.workDir, ec);
  return ok;
}

} // namespace moe
