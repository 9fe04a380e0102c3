//===- ab-kernels.cpp - two builds of the CPU kernels, interleaved in one process -===//
//
// A shared VM's speed moves by 20-30% between runs of the same binary, more
// than most kernel changes are worth (docs/performance.md). This tool loads
// two builds of the kernels library (tools/ab-kernels.sh makes them) into
// one process, each with its own thread pool, and runs the same expert
// GEMMs through each in turn, alternating which goes first: every pair of
// runs sees the same moment of the machine. In a quiet phase the median of
// the paired ratios is stable to a few percent (an A/A run: 0.998,
// quartiles 0.96-1.05); wide quartiles say another tenant was busy. It
// also compares the two builds' outputs byte for byte: a kernel change
// that should keep the bits is checked on the way.
//
// The workload is the routed experts' projections as Experts.cpp runs them:
// per layer one linearGroup of every expert's gate/up product ([2I, H]),
// then one of its down product ([H, I]), each expert with its own weights.
// Both builds must share kernels/cpu/Kernels.h's LinearProblem and Weight
// (Weight took panelCols on 2026-12-03, LinearProblem xRows on 2026-12-04:
// older builds cannot be compared).
// --b-panels hands B the same weights in panels (Kernels.h): with two
// copies of one build, it measures the panel layout against rows; with
// --a-panels too, two builds' panel kernels. --b-type hands B the same
// stored weights with its activations quantized (int8 -> w8a8, int4 ->
// w4a8), or the reverse: one build's two paths against each other.
//
// Besides the ratio it prints each build's weight bytes read per second
// (the weights and scales of the experts that run, once per run) and, as
// the ceiling of a memory-bound GEMV, the read bandwidth of the same
// threads summing a buffer of the weights' size, measured between the
// rounds (a STREAM-like read, its median): a decode's fraction of the
// bandwidth roofline.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Kernels.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace moe {
namespace {

namespace cpu = moe::cpu;

struct Flags {
  std::string a, b, type = "bf16", bType, json;
  std::vector<int64_t> tokens = {1, 3, 8, 16};
  int64_t experts = 64, layers = 2, hidden = 1024, inter = 256, rounds = 40, batch = 64,
          topK = 8, active = 0, group = 128;
  int threads = 1;
  bool allowDifferent = false, aPanels = false, bPanels = false;
  bool panels() const { return aPanels || bPanels; }
};

/// One build of the kernels: its linearGroup, its own thread pool.
struct Build {
  std::string path;
  void (*group)(const cpu::LinearProblem *, size_t) = nullptr;
};

rt::Expected<Build> openBuild(const std::string &path, int threads) {
  // RTLD_LOCAL: the second build's symbols do not resolve to the first's
  // (the libraries are linked -Bsymbolic, so not to this binary's either).
  // A name without a slash is a file here, not one for dlopen to search for.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return rt::Status::error("cannot load " + path + ": " + dlerror() +
                             " (make it with tools/ab-kernels.sh)");
  auto setThreads =
      reinterpret_cast<void (*)(int)>(dlsym(handle, "_ZN3moe3cpu16setKernelThreadsEi"));
  auto group = reinterpret_cast<void (*)(const cpu::LinearProblem *, size_t)>(
      dlsym(handle, "_ZN3moe3cpu11linearGroupEPKNS0_13LinearProblemEm"));
  if (!setThreads || !group)
    return rt::Status::error(path + " lacks moe::cpu::linearGroup or setKernelThreads: not a "
                                    "kernels library of this layout");
  // A build whose LinearProblem differs would read this binary's problems
  // at the wrong stride. Builds before 2026-12-04 (LinearProblem::xRows)
  // do not say their size.
  auto problemBytes =
      reinterpret_cast<size_t (*)()>(dlsym(handle, "_ZN3moe3cpu18linearProblemBytesEv"));
  if (!problemBytes)
    return rt::Status::error(path + " predates moe::cpu::linearProblemBytes: its LinearProblem "
                                    "differs from this ab-kernels'; compare builds from "
                                    "2026-12-04 on");
  if (problemBytes() != sizeof(cpu::LinearProblem))
    return rt::Status::error(path + "'s LinearProblem takes " + std::to_string(problemBytes()) +
                             " bytes, this ab-kernels' " +
                             std::to_string(sizeof(cpu::LinearProblem)) +
                             ": rebuild ab-kernels from the same sources");
  setThreads(threads);
  return Build{path, group};
}

/// Tokens each (layer, expert) gets: `tokens` each (with --active, only
/// that many experts of a layer, at random), or with tokens == 0 a decode
/// batch of `batch` tokens routed to topK distinct experts at random.
std::vector<int64_t> tokenCounts(const Flags &f, int64_t tokens, std::mt19937 &rng) {
  std::vector<int64_t> count(size_t(f.layers * f.experts), tokens);
  std::vector<int64_t> ids(size_t(f.experts));
  if (tokens > 0) {
    if (f.active == 0)
      return count;
    std::fill(count.begin(), count.end(), 0);
    for (int64_t l = 0; l < f.layers; ++l) {
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int64_t j = 0; j < f.active; ++j)
        count[size_t(l * f.experts + ids[size_t(j)])] = tokens;
    }
    return count;
  }
  std::fill(count.begin(), count.end(), 0);
  for (int64_t l = 0; l < f.layers; ++l)
    for (int64_t t = 0; t < f.batch; ++t) {
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int64_t j = 0; j < f.topK; ++j)
        ++count[size_t(l * f.experts + ids[size_t(j)])];
    }
  return count;
}

/// Whether a --type quantizes the activations (w8a8, w4a8).
bool quantizesActivations(const std::string &type) { return type == "w8a8" || type == "w4a8"; }

/// The weights of every (layer, expert): random values of the type, one
/// scale per row for int8 (and W8A8: int8 weights, x quantized per row),
/// one per --group elements of a row for int4 (and W4A8).
struct Weights {
  cpu::WeightType type;
  int64_t group = 0; // I4: elements a scale
  std::vector<uint8_t> gateUp, down;
  std::vector<uint8_t> gateUpPanels, downPanels; // --b-panels: the same weights in panels
  std::vector<float> gateUpScales, downScales;

  Weights(const Flags &f, std::mt19937 &rng) {
    type = f.type == "int8" || f.type == "w8a8"   ? cpu::WeightType::I8
           : f.type == "int4" || f.type == "w4a8" ? cpu::WeightType::I4
           : f.type == "f32"                      ? cpu::WeightType::F32
                                                  : cpu::WeightType::BF16;
    if (type == cpu::WeightType::I4)
      group = f.group;
    const size_t stacks = size_t(f.layers * f.experts);
    gateUp.resize(bytes(stacks * size_t(2 * f.inter * f.hidden)));
    down.resize(bytes(stacks * size_t(f.hidden * f.inter)));
    fill(gateUp, rng);
    fill(down, rng);
    if (f.panels()) {
      gateUpPanels = toPanels(gateUp, stacks, 2 * f.inter, f.hidden);
      downPanels = toPanels(down, stacks, f.hidden, f.inter);
    }
    gateUpScales.assign(stacks * size_t(2 * f.inter) * size_t(scalesPerRow(f.hidden)), 1.0f / 64);
    downScales.assign(stacks * size_t(f.hidden) * size_t(scalesPerRow(f.inter)), 1.0f / 64);
  }
  bool quantized() const { return type == cpu::WeightType::I8 || type == cpu::WeightType::I4; }
  /// Bytes of `elements` stored elements.
  size_t bytes(size_t elements) const {
    switch (type) {
    case cpu::WeightType::I4: return elements / 2;
    case cpu::WeightType::I8: return elements;
    case cpu::WeightType::F32: return 4 * elements;
    default: return 2 * elements;
    }
  }
  int64_t scalesPerRow(int64_t cols) const {
    return type == cpu::WeightType::I4 ? (cols + group - 1) / group
           : type == cpu::WeightType::I8 ? 1
                                         : 0;
  }
  /// Bytes a product reads of an [rows, cols] matrix: its weights and scales.
  double readBytes(int64_t rows, int64_t cols) const {
    return double(bytes(size_t(rows * cols))) + 4.0 * double(rows * scalesPerRow(cols));
  }
  void fill(std::vector<uint8_t> &data, std::mt19937 &rng) const {
    if (type == cpu::WeightType::I4) { // uniform nibbles, eight a draw
      for (size_t i = 0; i < data.size(); i += 4) {
        const uint32_t v = uint32_t(rng());
        std::memcpy(data.data() + i, &v, std::min<size_t>(4, data.size() - i));
      }
      return;
    }
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    const size_t elementBytes = bytes(1), n = data.size() / elementBytes;
    for (size_t i = 0; i < n; ++i) {
      const float v = value(rng);
      uint8_t *at = data.data() + i * elementBytes;
      if (type == cpu::WeightType::I8) {
        *at = uint8_t(int8_t(std::lround(v * 127)));
      } else if (type == cpu::WeightType::F32) {
        std::memcpy(at, &v, 4);
      } else { // bf16: the f32's high half
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t h = uint16_t(bits >> 16);
        std::memcpy(at, &h, 2);
      }
    }
  }
  /// Each of `stacks` [rows, cols] matrices in panels (cpu::panelIndex).
  std::vector<uint8_t> toPanels(const std::vector<uint8_t> &rowMajor, size_t stacks, int64_t rows,
                                int64_t cols) const {
    const size_t elementBytes = bytes(1);
    std::vector<uint8_t> panels(rowMajor.size());
    const size_t matrix = size_t(rows * cols);
    for (size_t e = 0; e < stacks; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          std::memcpy(panels.data() + (e * matrix + cpu::panelIndex(r, c, cols)) * elementBytes,
                      rowMajor.data() + (e * matrix + size_t(r * cols + c)) * elementBytes,
                      elementBytes);
    return panels;
  }
  cpu::Weight weight(bool isGateUp, size_t stack, int64_t rows, int64_t cols, bool panels,
                     bool int8Activations) const {
    cpu::Weight w;
    w.type = type;
    const std::vector<uint8_t> &data =
        panels ? (isGateUp ? gateUpPanels : downPanels) : (isGateUp ? gateUp : down);
    w.data = data.data() + bytes(stack * size_t(rows * cols));
    if (panels)
      w.panelCols = cols;
    if (quantized()) {
      w.scales = (isGateUp ? gateUpScales : downScales).data() +
                 stack * size_t(rows * scalesPerRow(cols));
      w.cols = cols;
      w.group = type == cpu::WeightType::I4 ? group : cols;
      w.int8Activations = int8Activations;
    }
    return w;
  }
};

/// Seconds `threads` threads take to read `bytes` bytes at `data` (each a
/// slice, summed 64 bits at a time into independent sums): a STREAM-like
/// read of memory, the ceiling of a GEMV that reads each weight once.
double readSeconds(const uint8_t *data, size_t bytes, int threads) {
  std::vector<std::thread> pool;
  std::vector<uint64_t> sums(size_t(threads) * 8);
  const size_t words = bytes / 8 / 64 * 64; // whole lines
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      const size_t from = words * size_t(i) / size_t(threads) / 8 * 8,
                   to = words * size_t(i + 1) / size_t(threads) / 8 * 8;
      uint64_t s[8] = {};
      for (size_t w = from; w < to; w += 8)
        for (int j = 0; j < 8; ++j) {
          uint64_t v;
          std::memcpy(&v, data + 8 * (w + size_t(j)), 8);
          s[j] += v;
        }
      std::copy(s, s + 8, sums.begin() + 8 * i);
    });
  for (std::thread &t : pool)
    t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  static volatile uint64_t sink;
  sink = std::accumulate(sums.begin(), sums.end(), uint64_t(0));
  return seconds;
}

/// One workload: the problems of every layer, with each build's outputs.
struct Workload {
  std::vector<float> x, act;
  std::vector<float> gateUpOut[2], downOut[2];
  std::vector<std::vector<cpu::LinearProblem>> problems[2]; // per build: gate/up, down per layer
  double flops = 0, bytes = 0; // of one run: multiply-adds x 2, weight and scale bytes read
};

Workload makeWorkload(const Flags &f, const Weights &w, const std::vector<int64_t> &count) {
  Workload wl;
  int64_t rows = 0;
  for (int64_t c : count)
    rows += c;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  wl.x.resize(size_t(rows * f.hidden));
  wl.act.resize(size_t(rows * f.inter));
  for (float &v : wl.x)
    v = value(rng);
  for (float &v : wl.act)
    v = value(rng);
  for (int b = 0; b < 2; ++b) {
    wl.gateUpOut[b].assign(size_t(rows * 2 * f.inter), 0.0f);
    wl.downOut[b].assign(size_t(rows * f.hidden), 0.0f);
    int64_t r0 = 0;
    for (int64_t l = 0; l < f.layers; ++l) {
      std::vector<cpu::LinearProblem> gateUp, down;
      for (int64_t e = 0; e < f.experts; ++e) {
        const size_t stack = size_t(l * f.experts + e);
        const int64_t n = count[stack];
        if (n == 0)
          continue;
        const bool panels = b == 1 ? f.bPanels : f.aPanels;
        const bool quantizes = quantizesActivations(b == 1 && !f.bType.empty() ? f.bType : f.type);
        gateUp.push_back({wl.x.data() + r0 * f.hidden, n, f.hidden,
                          w.weight(true, stack, 2 * f.inter, f.hidden, panels, quantizes),
                          2 * f.inter, nullptr, wl.gateUpOut[b].data() + r0 * 2 * f.inter});
        down.push_back({wl.act.data() + r0 * f.inter, n, f.inter,
                        w.weight(false, stack, f.hidden, f.inter, panels, quantizes), f.hidden,
                        nullptr, wl.downOut[b].data() + r0 * f.hidden});
        if (b == 0)
          wl.bytes += w.readBytes(2 * f.inter, f.hidden) + w.readBytes(f.hidden, f.inter);
        r0 += n;
      }
      wl.problems[b].push_back(std::move(gateUp));
      wl.problems[b].push_back(std::move(down));
    }
  }
  wl.flops = 2.0 * double(rows) * double(3 * f.inter * f.hidden);
  return wl;
}

double runOnce(const Build &build, const std::vector<std::vector<cpu::LinearProblem>> &groups) {
  // A build's helper threads spin for about a millisecond after its last
  // region before they sleep (ThreadPool.cpp): the other build's run must
  // not start beside them.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto &g : groups)
    build.group(g.data(), g.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int abMain(const Flags &f, const tools::Cli &cli) {
  tools::Output out(f.json);
  if (rt::Status st = out.open(); !st)
    return cli.fail(st.message());
  auto a = openBuild(f.a, f.threads);
  if (!a)
    return cli.fail(a.status().message());
  auto b = openBuild(f.b, f.threads);
  if (!b)
    return cli.fail(b.status().message());
  std::mt19937 rng(1);
  std::fprintf(stderr, "ab-kernels: making %s weights for %lld layers x %lld experts ...\n",
               f.type.c_str(), (long long)f.layers, (long long)f.experts);
  const Weights weights(f, rng);
  const std::string types = f.bType.empty() ? f.type : f.type + " (A) and " + f.bType + " (B)";
  std::fprintf(out.text(),
               "A %s\nB %s\n%s weights, %lld layers x %lld experts, gate/up [%lld, %lld], down "
               "[%lld, %lld], %d thread(s), %lld rounds; B speed / A: median of paired ratios "
               "(quartiles); weight GB/s at the median run, and as a fraction of the read "
               "bandwidth (median of a read of %.0f MB between rounds)\n",
               f.a.c_str(), f.b.c_str(), types.c_str(), (long long)f.layers,
               (long long)f.experts, (long long)(2 * f.inter), (long long)f.hidden,
               (long long)f.hidden, (long long)f.inter, f.threads, (long long)f.rounds,
               double(weights.gateUp.size() + weights.down.size()) / 1e6);
  nlohmann::json results = nlohmann::json::array();
  bool allSame = true;
  for (int64_t tokens : f.tokens) {
    const std::vector<int64_t> count = tokenCounts(f, tokens, rng);
    Workload wl = makeWorkload(f, weights, count);
    const Build *builds[2] = {&*a, &*b};
    for (int warm = 0; warm < 2; ++warm)
      for (int i = 0; i < 2; ++i)
        runOnce(*builds[i], wl.problems[i]);
    std::vector<double> ratio, ta, tb, read;
    for (int64_t r = 0; r < f.rounds; ++r) {
      const int first = int(r % 2);
      double t[2];
      t[first] = runOnce(*builds[first], wl.problems[first]);
      t[1 - first] = runOnce(*builds[1 - first], wl.problems[1 - first]);
      ta.push_back(t[0]);
      tb.push_back(t[1]);
      ratio.push_back(t[0] / t[1]);
      // The read bandwidth of this moment: both weight stacks, read once.
      const double seconds = readSeconds(weights.gateUp.data(), weights.gateUp.size(), f.threads) +
                             readSeconds(weights.down.data(), weights.down.size(), f.threads);
      read.push_back(double(weights.gateUp.size() + weights.down.size()) / seconds / 1e9);
    }
    std::sort(ratio.begin(), ratio.end());
    std::sort(ta.begin(), ta.end());
    std::sort(tb.begin(), tb.end());
    std::sort(read.begin(), read.end());
    const bool same = std::memcmp(wl.gateUpOut[0].data(), wl.gateUpOut[1].data(),
                                  wl.gateUpOut[0].size() * sizeof(float)) == 0 &&
                      std::memcmp(wl.downOut[0].data(), wl.downOut[1].data(),
                                  wl.downOut[0].size() * sizeof(float)) == 0;
    allSame &= same;
    const double median = tools::percentile(ratio, 50), q1 = tools::percentile(ratio, 25),
                 q3 = tools::percentile(ratio, 75);
    const double gA = wl.flops / tools::percentile(ta, 50) / 1e9,
                 gB = wl.flops / tools::percentile(tb, 50) / 1e9;
    const double bA = wl.bytes / tools::percentile(ta, 50) / 1e9,
                 bB = wl.bytes / tools::percentile(tb, 50) / 1e9, bRead = tools::percentile(read, 50);
    const std::string what =
        tokens > 0 ? std::to_string(tokens) + " tokens an expert" +
                         (f.active ? " (" + std::to_string(f.active) + " a layer)" : "")
                   : "a batch of " + std::to_string(f.batch) + " top-" + std::to_string(f.topK);
    std::fprintf(out.text(),
                 "  %-26s %.3f (%.3f-%.3f)  A %.1f GFLOP/s %.1f GB/s (%.2f), B %.1f GFLOP/s "
                 "%.1f GB/s (%.2f); read %.1f GB/s; outputs %s\n",
                 what.c_str(), median, q1, q3, gA, bA, bA / bRead, gB, bB, bB / bRead, bRead,
                 same ? "identical" : "DIFFERENT");
    results.push_back({{"tokens", tokens},
                       {"median_speed_ratio", median},
                       {"q1", q1},
                       {"q3", q3},
                       {"a_gflops", gA},
                       {"b_gflops", gB},
                       {"a_gbps", bA},
                       {"b_gbps", bB},
                       {"read_gbps", bRead},
                       {"read_gbps_q1", tools::percentile(read, 25)},
                       {"read_gbps_q3", tools::percentile(read, 75)},
                       {"identical_outputs", same}});
  }
  if (out.wantsJson())
    if (rt::Status st = out.writeJson({{"a", f.a},
                                       {"b", f.b},
                                       {"type", f.type},
                                       {"threads", f.threads},
                                       {"rounds", f.rounds},
                                       {"results", results}});
        !st)
      return cli.fail(st.message());
  if (!allSame && !f.allowDifferent)
    return cli.fail("the builds' outputs differ (pass --allow-different-bits if a change "
                    "means to change them)");
  return 0;
}

} // namespace
} // namespace moe

int main(int argc, char **argv) {
  moe::tools::Cli cli("ab-kernels",
                      "ab-kernels: two builds of the CPU kernels library, interleaved in one "
                      "process on the routed experts' GEMMs; prints the median of paired speed "
                      "ratios and whether their outputs are byte-identical");
  moe::Flags f;
  CLI::App &app = cli.app;
  app.add_option("a", f.a, "build A (the baseline): a shared kernels library from "
                           "tools/ab-kernels.sh")
      ->required()
      ->type_name("A.so");
  app.add_option("b", f.b, "build B (the change)")->required()->type_name("B.so");
  app.add_option("--tokens", f.tokens,
                 "tokens an expert, a comma-separated list; 0: a decode batch (--batch) "
                 "routed top-k at random (default 1,3,8,16)")
      ->delimiter(',')
      ->check(moe::tools::integerIn(0, 4096))
      ->type_name("LIST");
  app.add_option("--type", f.type,
                 "weight type: bf16, int8, w8a8 (int8 weights and activations), int4 (one "
                 "scale per --group elements), w4a8 (int4 weights, int8 activations) or f32 "
                 "(default bf16)")
      ->check(moe::tools::oneOf({"bf16", "int8", "w8a8", "int4", "w4a8", "f32"}))
      ->type_name("T");
  app.add_option("--b-type", f.bType,
                 "B multiplies by the same stored weights as this type: w8a8 or int8 beside "
                 "--type int8 or w8a8, w4a8 or int4 beside int4 or w4a8 (the same library for "
                 "both: its two paths; pass --allow-different-bits)")
      ->check(moe::tools::oneOf({"int8", "w8a8", "int4", "w4a8"}))
      ->type_name("T");
  app.add_option("--group", f.group, "int4 and w4a8: elements a scale (default 128)")
      ->check(moe::tools::integerIn(2, 1 << 16))
      ->type_name("G");
  app.add_option("--active", f.active,
                 "with --tokens N > 0: only this many experts of a layer (at random) get N "
                 "tokens each (default 0: every expert); --active 8 --tokens 1 reads a "
                 "batch-1 decode's expert weights")
      ->check(moe::tools::integerIn(0, 4096))
      ->type_name("A");
  app.add_flag("--b-panels", f.bPanels,
               "B reads the weights in panels (Kernels.h, docs/design-panel-gemm.md), A in rows: "
               "bf16 and f32 only, the same library for both (a copy of it as B); the sums' "
               "order differs, so pass --allow-different-bits");
  app.add_flag("--a-panels", f.aPanels,
               "A reads the weights in panels too (with --b-panels: two builds' panel kernels)");
  app.add_option("--experts", f.experts, "experts a layer (default 64)")
      ->check(moe::tools::integerIn(1, 4096))
      ->type_name("E");
  app.add_option("--layers", f.layers,
                 "layers, each with its own weights (default 2: 200 MB of bf16, from memory)")
      ->check(moe::tools::integerIn(1, 1024))
      ->type_name("L");
  app.add_option("--hidden", f.hidden, "hidden size (default 1024)")
      ->check(moe::tools::integerIn(8, 1 << 16))
      ->type_name("H");
  app.add_option("--inter", f.inter, "expert intermediate size (default 256)")
      ->check(moe::tools::integerIn(8, 1 << 16))
      ->type_name("I");
  app.add_option("--batch", f.batch, "tokens of the routed batch of --tokens 0 (default 64)")
      ->check(moe::tools::integerIn(1, 1 << 16))
      ->type_name("B");
  app.add_option("--top-k", f.topK, "experts a token of that batch picks (default 8)")
      ->check(moe::tools::integerIn(1, 4096))
      ->type_name("K");
  app.add_option("--rounds", f.rounds, "timed pairs of runs per workload (default 40)")
      ->check(moe::tools::integerIn(1, 1 << 20))
      ->type_name("N");
  app.add_option("--threads", f.threads, "kernel threads of each build (default 1)")
      ->check(moe::tools::integerIn(1, 4096))
      ->type_name("N");
  app.add_flag("--allow-different-bits", f.allowDifferent,
               "exit 0 even when the builds' outputs differ");
  cli.addJson(f.json);
  if (auto code = cli.parse(argc, argv))
    return *code;
  if (f.topK > f.experts && std::count(f.tokens.begin(), f.tokens.end(), 0) > 0)
    return cli.fail("--top-k must not exceed --experts");
  auto storage = [](const std::string &t) { return t == "w8a8" ? "int8" : t == "w4a8" ? "int4" : t; };
  if (!f.bType.empty() && storage(f.bType) != storage(f.type))
    return cli.fail("--b-type " + f.bType + " does not store its weights as --type " + f.type +
                    " does");
  if (f.active > f.experts)
    return cli.fail("--active must not exceed --experts");
  if ((f.type == "int4" || f.type == "w4a8") && (f.group % 2 || f.hidden % 2 || f.inter % 2))
    return cli.fail("int4 takes an even --group, --hidden and --inter");
  if (f.panels() && f.type != "bf16" && f.type != "f32")
    return cli.fail("--a-panels and --b-panels take --type bf16 or f32 (panels hold f32, bf16 "
                    "or f16 weights)");
  if (f.panels() && (f.hidden % moe::cpu::kPanelRows || f.inter % moe::cpu::kPanelRows))
    return cli.fail("--a-panels and --b-panels need --hidden and --inter multiples of " +
                    std::to_string(moe::cpu::kPanelRows) + " (whole panels)");
  return moe::abMain(f, cli);
}
