// Plans are pure functions of (graph hash, bound shapes, backend, flags), so they are cached.
#include "volta/plan.h"

namespace volta::plan {

std::shared_ptr<const ExecutionPlan> PlanCache::find(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return it->second;
}

void PlanCache::insert(const PlanKey& key, std::shared_ptr<const ExecutionPlan> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  plans_[key] = std::move(plan);
}

uint64_t PlanCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t PlanCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}
size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

}  // namespace volta::plan
