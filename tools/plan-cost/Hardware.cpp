//===- Hardware.cpp - a hardware profile for the plan simulator -----------===//
#include "tools/plan-cost/Hardware.h"
#include "moe/abi/File.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace moe::cost {

namespace {

const char *typeName(plan::DType t) {
  switch (t) {
  case plan::DType::BF16: return "bf16";
  case plan::DType::F16: return "bf16"; // the same tensor-core rate
  case plan::DType::F8E4M3: return "fp8";
  case plan::DType::I8: return "int8";
  case plan::DType::I4: return "int4";
  default: return "f32";
  }
}

} // namespace

double Hardware::tflops(plan::DType type) const {
  auto it = matmulTflops.find(typeName(type));
  return it != matmulTflops.end() ? it->second : matmulTflops.at("f32");
}

rt::Expected<Hardware> Hardware::fromJson(const nlohmann::json &j) {
  if (!j.is_object())
    return rt::Status::error("a hardware profile is a JSON object");
  const std::vector<std::string> known = {"name",         "description",
                                          "matmul_tflops", "memory_gb_per_s",
                                          "launch_overhead_us", "link",
                                          "host_runs_stream_zero", "sources"};
  for (const auto &[key, value] : j.items())
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string fields;
      for (const std::string &k : known)
        fields += (fields.empty() ? "" : ", ") + k;
      return rt::Status::error("unknown field \"" + key + "\" (fields: " + fields + ")");
    }
  Hardware h;
  try {
    h.name = j.at("name").get<std::string>();
    h.description = j.value("description", "");
    for (const auto &[type, rate] : j.at("matmul_tflops").items()) {
      if (!std::set<std::string>{"f32", "bf16", "fp8", "int8", "int4"}.count(type))
        return rt::Status::error("matmul_tflops: unknown type \"" + type +
                                 "\" (f32, bf16, fp8, int8, int4)");
      h.matmulTflops[type] = rate.get<double>();
    }
    h.memoryGBps = j.at("memory_gb_per_s").get<double>();
    h.launchOverheadUs = j.value("launch_overhead_us", 0.0);
    if (j.contains("link") && !j.at("link").is_null()) {
      const auto &l = j.at("link");
      for (const auto &[key, value] : l.items())
        if (key != "latency_us" && key != "gb_per_s")
          return rt::Status::error("link: unknown field \"" + key + "\" (latency_us, gb_per_s)");
      h.link = rt::LinkModel{l.at("latency_us").get<double>(), l.at("gb_per_s").get<double>()};
    }
    h.hostRunsStreamZero = j.value("host_runs_stream_zero", false);
    if (j.contains("sources"))
      for (const auto &[key, value] : j.at("sources").items())
        h.sources[key] = value.get<std::string>();
  } catch (const nlohmann::json::exception &e) {
    return rt::Status::error(std::string("a field is missing or of the wrong type: ") + e.what());
  }
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!h.matmulTflops.count("f32"))
    return rt::Status::error("matmul_tflops needs an \"f32\" rate (the rate of any type "
                             "without one)");
  for (const auto &[type, rate] : h.matmulTflops)
    if (!positive(rate))
      return rt::Status::error("matmul_tflops." + type + " must be a number > 0");
  if (!positive(h.memoryGBps))
    return rt::Status::error("memory_gb_per_s must be a number > 0");
  if (!std::isfinite(h.launchOverheadUs) || h.launchOverheadUs < 0)
    return rt::Status::error("launch_overhead_us must be a number >= 0");
  if (h.link && (!std::isfinite(h.link->latencyUs) || h.link->latencyUs < 0 ||
                 !positive(h.link->gbPerSecond)))
    return rt::Status::error("link: latency_us must be >= 0 and gb_per_s > 0");
  return h;
}

rt::Expected<Hardware> Hardware::load(const std::string &path) {
  auto text = rt::readFile(path, 1 << 20);
  if (!text)
    return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded())
    return rt::Status::error(path + ": not JSON");
  auto h = fromJson(j);
  if (!h)
    return rt::Status::error(path + ": " + h.status().message());
  return h;
}

nlohmann::ordered_json Hardware::toJson() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["description"] = description;
  j["matmul_tflops"] = matmulTflops;
  j["memory_gb_per_s"] = memoryGBps;
  j["launch_overhead_us"] = launchOverheadUs;
  if (link)
    j["link"] = {{"latency_us", link->latencyUs}, {"gb_per_s", link->gbPerSecond}};
  else
    j["link"] = nullptr;
  j["host_runs_stream_zero"] = hostRunsStreamZero;
  j["sources"] = sources;
  return j;
}

} // namespace moe::cost
