//===- Trace.cpp - timelines of a rank's streams --------------------------===//
#include "moe/runtime/Trace.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <set>

namespace moe::rt {

void Trace::restart() {
  std::lock_guard<std::mutex> lock(m_);
  origin_ = Clock::now();
  spans_.clear();
}

Status Trace::time(Stream &stream, int streamIndex, Label label,
                   const std::function<Status()> &enqueue) {
  auto start = std::make_shared<Clock::time_point>();
  if (Status st = stream.enqueueHost([start] {
        *start = Clock::now();
        return Status::ok();
      });
      !st)
    return st;
  if (Status st = enqueue(); !st)
    return st;
  return stream.enqueueHost([this, start, streamIndex, label = std::move(label)] {
    const Clock::time_point end = Clock::now();
    auto us = [&](Clock::time_point t) {
      return std::chrono::duration<double, std::micro>(t - origin_).count();
    };
    add(label, streamIndex, us(*start), us(end) - us(*start));
    return Status::ok();
  });
}

void Trace::add(Label label, int stream, double startUs, double durationUs) {
  // To the nanosecond, start and end (a span then ends where the next one
  // on its stream starts, not a rounding after).
  auto ns = [](double us) { return std::round(us * 1e3); };
  const double start = ns(startUs), end = ns(startUs + durationUs);
  std::lock_guard<std::mutex> lock(m_);
  spans_.push_back({std::move(label), stream, start / 1e3, (end - start) / 1e3});
}

size_t Trace::spans() const {
  std::lock_guard<std::mutex> lock(m_);
  return spans_.size();
}

std::string Trace::events(int rank) const {
  std::lock_guard<std::mutex> lock(m_);
  using nlohmann::json;
  json all = json::array();
  all.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                 {"args", {{"name", "rank " + std::to_string(rank)}}}});
  std::set<int> streams;
  for (const Span &s : spans_)
    streams.insert(s.stream);
  for (int s : streams)
    all.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", s},
                   {"args", {{"name", "stream " + std::to_string(s)}}}});
  for (const Span &s : spans_)
    all.push_back({{"name", s.label.name},
                   {"cat", s.label.category},
                   {"ph", "X"},
                   {"ts", s.startUs},
                   {"dur", s.durationUs},
                   {"pid", rank},
                   {"tid", s.stream},
                   {"args",
                    {{"at", s.label.location}, {"tokens", s.label.tokens}, {"step", s.label.step}}}});
  std::string text = all.dump();
  // The objects without the array's brackets: ranks' lists are joined.
  return text.size() > 2 ? text.substr(1, text.size() - 2) : std::string();
}

std::string traceDocument(const std::vector<std::string> &rankEvents) {
  std::string doc = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  for (const std::string &e : rankEvents) {
    if (e.empty())
      continue;
    doc += (first ? "\n" : ",\n") + e;
    first = false;
  }
  return doc + "\n]}\n";
}

} // namespace moe::rt
