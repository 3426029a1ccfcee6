// The model's state on a backend: named, persistent buffers (params, optimizer moments, the step
// counter, KV caches) allocated once in the backend's memory, bound by name to the Param leaves
// of the plans that run on it, read and written in place by plan nodes (optimizer_update,
// increment, cache_write), and copied to the host only on request (checkpoints, inspection, tests).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "volta/backend.h"
#include "volta/plan.h"

namespace volta {

class State {
 public:
  // The backend must outlive the state (a Runtime's backend() lives as long as the Runtime).
  explicit State(Backend& backend) : backend_(&backend), layout_(next_layout()) {}
  // A moved-from state is empty, with a layout of its own.
  State(State&& o) noexcept : backend_(o.backend_), entries_(std::move(o.entries_)), uploaded_(o.uploaded_), layout_(o.layout_) {
    o.entries_.clear(), o.layout_ = next_layout();
  }
  State& operator=(State&& o) noexcept {
    if (this == &o) return *this;
    backend_ = o.backend_, entries_ = std::move(o.entries_), uploaded_ = o.uploaded_, layout_ = o.layout_;
    o.entries_.clear(), o.layout_ = next_layout();
    return *this;
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Creates `name` with the host tensor's type and bytes, or overwrites it; an existing entry of
  // another type is an error naming the tensor.
  Status put(const std::string& name, const Tensor& host, plan::MemClass cls);
  // put() for each named tensor (a Bindings map of params, say).
  Status put_all(const std::map<std::string, Tensor>& tensors, plan::MemClass cls);
  // A host copy of `name`; an unknown name is an error naming it.
  Result<Tensor> get(const std::string& name) const;
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // Frees `name` (nothing when there is none): a KV cache before one of another batch size.
  void erase(const std::string& name) {
    if (entries_.erase(name) != 0) layout_ = next_layout();
  }
  // The entry's bytes in the backend's memory, or nullptr when there is none.
  const TensorRef* find(const std::string& name) const;
  // Bytes held per memory class (Param, OptState, ...).
  size_t bytes(plan::MemClass cls) const;
  // Bytes copied in by put (every backend counts them).
  size_t uploaded_bytes() const { return uploaded_; }
  Backend& backend() const { return *backend_; }
  // Which entries exist at which addresses: a value no other state, and no earlier set of this
  // one, has had (a new entry or an erased one changes it; overwriting bytes does not). A
  // runtime keeps a plan's bound state buffers while it stays the same.
  uint64_t layout() const { return layout_; }

 private:
  static uint64_t next_layout();
  struct Entry {
    plan::MemClass cls = plan::MemClass::Param;
    std::shared_ptr<std::byte> memory;
    TensorRef ref;
  };
  Backend* backend_;
  std::map<std::string, Entry> entries_;
  size_t uploaded_ = 0;
  uint64_t layout_;
};

}  // namespace volta
