// A test backend: the CPU backend in disguise.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "volta/backend.h"
#include "volta/optim.h"

namespace volta::test {

// The CPU backend behind another face: every call goes to a real CPU backend. Test backends
// derive from it and override only what they change.
class CpuWrapper : public Backend {
 public:
  CpuWrapper() : cpu_(make_cpu_backend()) {}
  const Capabilities& capabilities() const override { return cpu_->capabilities(); }
  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override { return cpu_->allocate(bytes); }
  Status copy_in(std::byte* d, const std::byte* s, size_t n) override { return cpu_->copy_in(d, s, n); }
  Status copy_out(std::byte* d, const std::byte* s, size_t n) override { return cpu_->copy_out(d, s, n); }
  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level) const override {
    return cpu_->kernel_info(g, n, level);
  }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) const override { return cpu_->workspace_bytes(g, n); }
  Status execute(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> ws,
                 const KernelInfo& k) override {
    return cpu_->execute(n, in, out, ws, k);
  }

 protected:
  std::unique_ptr<Backend> cpu_;
};

// The CPU backend in disguise: without an attention kernel (compile must not fuse into an op it
// lacks), or as a "device" whose memory the runtime must treat as not host memory (it counts
// what is copied in).
class CpuVariant final : public CpuWrapper {
 public:
  // kUnpacked: every kernel, but no packed weights (the wrapper never offers a packing).
  // kNoCacheAttention: attention, but its cache writes left as cache_write steps.
  // kKeyRows: every kernel, but attention reads no keys as columns (generation's key caches are rows).
  // kNoAttentionKeyColumns: kNoAttention whose key caches are still columns (their decode step
  // unfused: the scores a matmul of q by the cache as it lies).
  enum Kind { kNoAttention, kDevice, kUnpacked, kNoCacheAttention, kKeyRows, kNoAttentionKeyColumns };
  explicit CpuVariant(Kind kind) : kind_(kind), caps_(cpu_->capabilities()) {
    if (kind == kNoAttention) std::erase(caps_.ops, ir::Op::Attention), caps_.features.clear();
    if (kind == kNoAttentionKeyColumns) std::erase(caps_.ops, ir::Op::Attention), caps_.features = {"attention.keys_transposed"};
    if (kind == kKeyRows) std::erase(caps_.features, "attention.keys_transposed");
    if (kind == kUnpacked) std::erase(caps_.features, "matmul.packed_b");
    if (kind == kNoCacheAttention) std::erase(caps_.ops, ir::Op::CacheAttention);
  }
  std::string name() const override {
    switch (kind_) {
      case kDevice: return "fake-device";
      case kUnpacked: return "cpu-unpacked";
      case kNoCacheAttention: return "cpu-no-cache-attention";
      case kKeyRows: return "cpu-key-rows";
      case kNoAttentionKeyColumns: return "cpu-no-attention-key-columns";
      default: return "cpu-no-attention";
    }
  }
  const Capabilities& capabilities() const override { return caps_; }
  bool host_memory() const override { return kind_ != kDevice; }
  size_t copied_in = 0;
  Status copy_in(std::byte* d, const std::byte* s, size_t n) override {
    copied_in += n;
    return cpu_->copy_in(d, s, n);
  }

 private:
  Kind kind_;
  Capabilities caps_;
};

// The CPU backend as a device that records: between begin and end, execute() only keeps the
// call; a replay runs the kept calls. It counts the nodes it ran and the replays.
class RecordingDevice final : public CpuWrapper {
 public:
  struct Call {
    const ir::Node* node;
    std::vector<TensorRef> in;
    TensorRef out;
    std::span<std::byte> ws;
    KernelInfo kernel;
  };
  struct Calls final : Recording {
    std::vector<Call> calls;
  };
  std::string name() const override { return "fake-recording-device"; }
  bool host_memory() const override { return false; }
  bool can_record() const override { return true; }
  Status execute(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> ws,
                 const KernelInfo& k) override {
    if (recording_) {
      recording_->calls.push_back({&n, std::vector<TensorRef>(in.begin(), in.end()), out, ws, k});
      return Status::ok();
    }
    ++executed;
    return cpu_->execute(n, in, out, ws, k);
  }
  Status begin_recording() override {
    recording_ = std::make_unique<Calls>();
    return Status::ok();
  }
  Result<std::unique_ptr<Recording>> end_recording() override { return std::unique_ptr<Recording>(std::move(recording_)); }
  Status replay(const Recording& r) override {
    ++replayed;
    for (const Call& c : static_cast<const Calls&>(r).calls) VOLTA_RETURN_IF_ERROR(cpu_->execute(*c.node, c.in, c.out, c.ws, c.kernel));
    return Status::ok();
  }
  int64_t executed = 0, replayed = 0;

 private:
  std::unique_ptr<Calls> recording_;
};

}  // namespace volta::test
