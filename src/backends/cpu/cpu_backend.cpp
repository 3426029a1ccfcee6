// The CPU backend: host memory, its own kernels for the ops that dominate (one file per op
// family; the table is in kernels.cpp), and the reference kernels for the rest.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "volta/backend.h"

namespace volta {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    // The ops of its kernel table (every op: a reference kernel each, linked or the build fails).
    for (int i = 0; i < ir::kNumOps; ++i)
      if (const auto op = static_cast<ir::Op>(i); !ir::is_leaf(op) && cpu::cpu_kernel(op).run) caps_.ops.push_back(op);
    caps_.features = {"attention.keys_transposed", "attention.packed_heads", "attention.stored_probs", "matmul.epilogue",
                      "matmul.layout",          "matmul.packed_b",        "matmul.residual"};
    caps_.dtypes = {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16, DType::f16};
  }

  std::string name() const override { return "cpu"; }
  const Capabilities& capabilities() const override { return caps_; }

  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override {
    try {
      Tensor t = Tensor::zeros(DType::i32, {static_cast<int64_t>(align_up(bytes) / 4)});
      std::byte* raw = t.raw();
      return std::shared_ptr<std::byte>(std::make_shared<Tensor>(std::move(t)), raw);  // aliasing: owns the tensor
    } catch (const std::bad_alloc&) {
      return out_of_memory("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
  }
  Status copy_in(std::byte* dst, const std::byte* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status copy_out(std::byte* dst, const std::byte* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::ok();
  }

  // The packed path's B: K blocks of the blocking's kc for this shape, panels of the tile's width.
  std::optional<std::array<int64_t, 2>> matmul_weight_packing(int64_t M, int64_t N, int64_t K) const override {
    const cpu::MatmulIsa isa = cpu::matmul_active_isa();
    const int64_t nr = cpu::matmul_tile(isa).cols;
    if (!cpu::matmul_reads_packed_b(isa, M, N, nr)) return std::nullopt;
    return std::array<int64_t, 2>{std::max<int64_t>(cpu::matmul_blocking_for(isa, M, N, K).kc, 1), nr};
  }

  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& node, Determinism level) const override {
    return cpu::choose_cpu_kernel(g, node, level);
  }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& node) const override {
    if (node.op == ir::Op::Matmul) return cpu::matmul_workspace_bytes(g, node);
    if (node.op == ir::Op::NormParamGrad) return cpu::norm_param_grad_workspace_bytes(g, node);
    return cpu::reference_workspace_bytes(g, node);
  }
  size_t thread_scratch_bytes(const ir::Graph& g, const ir::Node& node) const override {
    return cpu::attention_scratch_bytes(g, node);
  }
  int scratch_threads() const override { return cpu::num_threads(); }
  StepRole step_role(const ir::Node& node, const KernelInfo& kernel) const override { return cpu::cpu_step_role(node, kernel); }

  // With several threads, a plan whose steps all keep a team's rules (no step forks its own
  // threads: a decode step's) is walked by every thread at once (parallel.h): each of its
  // kernels' parallel_for calls is then a share per thread and a look at the others' progress
  // instead of a fork and a join, about twenty times a token.
  Status walk(std::span<const StepRole> roles, const std::function<Status(size_t)>& step) override {
    const int threads = cpu::num_threads();
    const bool team = cpu_teams() && threads > 1 && !cpu::in_team() &&
                      std::none_of(roles.begin(), roles.end(), [](StepRole r) { return r == StepRole::Forks; }) &&
                      std::any_of(roles.begin(), roles.end(), [](StepRole r) { return r == StepRole::Shared; });
    if (!team) return Backend::walk(roles, step);
    walk_status_.assign(static_cast<size_t>(threads), Status::ok());
    cpu::run_team(threads, [&](int64_t rank) {
      Status st = Status::ok();  // (a local: the ranks' statuses share a cache line)
      for (size_t i = 0; i < roles.size() && st.is_ok(); ++i) {
        if (roles[i] == StepRole::Shared) st = step(i);
        else cpu::run_alone([&](int64_t) { st = step(i); });
      }
      if (st.is_ok()) return;
      walk_status_[static_cast<size_t>(rank)] = std::move(st);
      cpu::team_stop();
    });
    for (Status& st : walk_status_)
      if (!st.is_ok()) return st;
    return Status::ok();
  }

  Status execute(const ir::Node& node, std::span<const TensorRef> inputs, const TensorRef& output,
                 std::span<std::byte> workspace, const KernelInfo& kernel) override {
    const cpu::Kernel run = cpu::cpu_kernel_at(node.op, kernel.index).run;
    if (!run)
      return internal_error("[" + std::string(ir::op_name(node.op)) + "] cpu has no kernel number " +
                            std::to_string(kernel.index) + " ('" + kernel.variant + "') " + ir::node_ref(node));
    try {  // kernels' own scratch (and a worker thread's) may fail to allocate
      return run(cpu::KernelArgs{node, inputs, output, workspace});
    } catch (const std::bad_alloc&) {
      return out_of_memory("[" + std::string(ir::op_name(node.op)) + "] out of memory for scratch space " + ir::node_ref(node));
    }
  }

 private:
  Capabilities caps_;
  std::vector<Status> walk_status_;  // each rank's, of the current walk
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }
void set_cpu_threads(int n) { cpu::set_num_threads(n); }
Status start_cpu_threads(bool asked) { return cpu::start_threads(asked); }
namespace {
std::atomic<bool> g_teams{true};
}  // namespace
void set_cpu_teams(bool on) { g_teams = on; }
bool cpu_teams() { return g_teams.load(std::memory_order_relaxed); }
int cpu_threads() { return cpu::num_threads(); }

}  // namespace volta
