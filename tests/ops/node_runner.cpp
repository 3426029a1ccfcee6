#include "ops/node_runner.h"

#include "backends/cpu/kernels.h"

namespace volta::test {

Result<ir::Node> make_node(ir::Op op, const std::vector<TensorType>& inputs, const ir::Attrs& attrs,
                           const std::string& name) {
  ir::Node n;
  n.op = op;
  n.name = name;
  n.attrs = attrs;
  VOLTA_ASSIGN_OR_RETURN(n.type, ir::infer_type(op, inputs, attrs));
  return n;
}

ir::Graph node_graph(const ir::Node& node, const std::vector<TensorType>& inputs) {
  ir::Graph g;
  for (const TensorType& t : inputs) {
    ir::Node leaf;
    leaf.id = static_cast<int32_t>(g.nodes.size());
    leaf.name = "in" + std::to_string(leaf.id);
    leaf.type = t;
    g.nodes.push_back(std::move(leaf));
  }
  ir::Node n = node;
  n.id = static_cast<int32_t>(g.nodes.size());
  n.inputs.clear();
  for (int32_t i = 0; i < n.id; ++i) n.inputs.push_back(i);
  g.nodes.push_back(std::move(n));
  g.outputs = {static_cast<int32_t>(g.nodes.size() - 1)};
  return g;
}

namespace {

// The CPU backend's memory, the reference kernels' arithmetic.
class ReferenceBackend final : public Backend {
 public:
  ReferenceBackend() : host_(make_cpu_backend()) {}
  std::string name() const override { return "reference"; }
  const Capabilities& capabilities() const override { return host_->capabilities(); }
  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override { return host_->allocate(bytes); }
  Status copy_in(std::byte* dst, const std::byte* src, size_t bytes) override { return host_->copy_in(dst, src, bytes); }
  Status copy_out(std::byte* dst, const std::byte* src, size_t bytes) override { return host_->copy_out(dst, src, bytes); }
  KernelInfo kernel_info(const ir::Graph& /*g*/, const ir::Node& /*node*/, Determinism /*level*/) const override {
    return {"reference", Determinism::Strict};
  }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& node) const override {
    return cpu::reference_workspace_bytes(g, node);
  }
  Status execute(const ir::Node& node, std::span<const TensorRef> inputs, const TensorRef& output,
                 std::span<std::byte> workspace, const KernelInfo& /*kernel*/) override {
    return cpu::reference_kernel(node.op)(cpu::KernelArgs{node, inputs, output, workspace});
  }

 private:
  std::unique_ptr<Backend> host_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

Result<Uploaded> upload(Backend& be, const std::vector<Tensor>& in) {
  Uploaded u;
  for (const Tensor& t : in) {
    VOLTA_ASSIGN_OR_RETURN(auto mem, be.allocate(t.bytes()));
    VOLTA_RETURN_IF_ERROR(be.copy_in(mem.get(), t.raw(), t.bytes()));
    u.refs.push_back({mem.get(), t.type()});
    u.blocks.push_back(std::move(mem));
  }
  return u;
}

Result<std::vector<Tensor>> run_in_place(Backend& be, const ir::Node& node, const std::vector<Tensor>& in, Determinism level) {
  VOLTA_ASSIGN_OR_RETURN(const Uploaded up, upload(be, in));
  std::vector<TensorType> types;
  for (const Tensor& t : in) types.push_back(t.type());
  const ir::Graph g = node_graph(node, types);
  const ir::Node& n = g.nodes.back();
  const size_t ws_bytes = be.workspace_bytes(g, n);
  VOLTA_ASSIGN_OR_RETURN(auto ws, be.allocate(ws_bytes));
  VOLTA_ASSIGN_OR_RETURN(auto out_mem, be.allocate(n.type.bytes()));
  // The output starts as all-ones bytes (a nan in every float), so an element a kernel never
  // writes shows up instead of passing as the allocator's zero.
  const std::vector<std::byte> poison(n.type.bytes(), std::byte{0xff});
  VOLTA_RETURN_IF_ERROR(be.copy_in(out_mem.get(), poison.data(), poison.size()));
  // Through the backend's walk, as a plan's step: with several threads the CPU runs a Shared
  // kernel on all of them at once (a team), and the harness compares its bits across 1, 2 and 3.
  // The inputs are bound leaves, so those the op does not write stay as they are (as a plan's
  // run marks them: a team's kernel then reads their values outside its tasks without waiting).
  const KernelInfo kernel = be.kernel_info(g, n, level);
  const StepRole role = be.step_role(n, kernel);
  std::vector<TensorRef> refs = up.refs;
  for (size_t i = 0; i < refs.size(); ++i) refs[i].fixed = !ir::writes_input(n.op, i);
  VOLTA_RETURN_IF_ERROR(be.walk(std::span(&role, 1), [&](size_t) {
    return be.execute(n, refs, TensorRef{out_mem.get(), n.type}, std::span<std::byte>(ws.get(), ws_bytes), kernel);
  }));
  VOLTA_RETURN_IF_ERROR(be.synchronize());
  std::vector<Tensor> result;
  for (size_t i = 0; i <= in.size(); ++i) {
    const TensorType& type = i < in.size() ? in[i].type() : n.type;
    Tensor t = Tensor::zeros(type.dtype, type.shape);
    VOLTA_RETURN_IF_ERROR(be.copy_out(t.raw(), i < in.size() ? up.blocks[i].get() : out_mem.get(), t.bytes()));
    result.push_back(std::move(t));
  }
  return result;
}

Result<Tensor> run_node(Backend& be, const ir::Node& node, const std::vector<Tensor>& in, Determinism level) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> all, run_in_place(be, node, in, level));
  return std::move(all.back());
}

}  // namespace volta::test
