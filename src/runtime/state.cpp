// The model's state on a backend (include/volta/state.h).
#include "volta/state.h"

#include <atomic>

namespace volta {

uint64_t State::next_layout() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Status State::put(const std::string& name, const Tensor& host, plan::MemClass cls) {
  if (!host.defined()) return invalid_argument("state '" + name + "': no tensor given");
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.ref.type != host.type())
    return invalid_argument("state '" + name + "' is " + it->second.ref.type.to_string() + " but the new value is " +
                            host.type().to_string());
  if (it == entries_.end()) {
    Entry e;
    e.cls = cls;
    VOLTA_ASSIGN_OR_RETURN(e.memory, backend_->allocate(host.bytes()));
    e.ref = TensorRef{e.memory.get(), host.type()};
    it = entries_.emplace(name, std::move(e)).first;
    layout_ = next_layout();
  }
  it->second.cls = cls;
  VOLTA_RETURN_IF_ERROR(backend_->copy_in(it->second.ref.data, host.raw(), host.bytes()));
  uploaded_ += host.bytes();
  return Status::ok();
}

Status State::put_all(const std::map<std::string, Tensor>& tensors, plan::MemClass cls) {
  for (const auto& [name, t] : tensors) VOLTA_RETURN_IF_ERROR(put(name, t, cls));
  return Status::ok();
}

Result<Tensor> State::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return not_found("state has no tensor '" + name + "'");
  const TensorRef& r = it->second.ref;
  Tensor t = Tensor::empty(r.type.dtype, r.type.shape);
  VOLTA_RETURN_IF_ERROR(backend_->copy_out(t.raw(), r.data, t.bytes()));
  return t;
}

const TensorRef* State::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.ref;
}

size_t State::bytes(plan::MemClass cls) const {
  size_t total = 0;
  for (const auto& [name, e] : entries_)
    if (e.cls == cls) total += e.ref.type.bytes();
  return total;
}

}  // namespace volta
