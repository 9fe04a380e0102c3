//===- EventFolding.cpp - plan.record / plan.wait onto instructions -------===//
#include "compiler/target/EventFolding.h"

namespace moe {

std::vector<uint32_t> EventFolding::launch(int stream) {
  std::set<uint32_t> waits = std::move(pending_[stream]);
  pending_[stream].clear();
  lastLaunch_[stream] = instructions_++;
  return {waits.begin(), waits.end()};
}

void EventFolding::record(int64_t event, int stream) {
  // Its completion: the stream's work so far (all of it finishes before an
  // event recorded after its last launch) and the waits made since that
  // launch, which no launch carries yet.
  std::set<uint32_t> meaning = pending_[stream];
  if (auto last = lastLaunch_.find(stream); last != lastLaunch_.end())
    meaning.insert(eventAfter(last->second));
  meaning_[event] = std::move(meaning);
}

void EventFolding::wait(int64_t event, int stream) {
  const std::set<uint32_t> &meaning = meaning_[event];
  pending_[stream].insert(meaning.begin(), meaning.end());
}

uint32_t EventFolding::eventAfter(size_t index) {
  auto [it, added] = after_.try_emplace(index, next_);
  if (added)
    ++next_;
  return it->second;
}

std::vector<uint32_t> EventFolding::records(size_t index) const {
  auto it = after_.find(index);
  return it == after_.end() ? std::vector<uint32_t>{} : std::vector<uint32_t>{it->second};
}

} // namespace moe
