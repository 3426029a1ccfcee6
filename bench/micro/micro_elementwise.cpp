// Microbenchmarks of elementwise kernels: a fused chain against the unfused ops it replaces.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "volta/rng.h"
#include "volta/tensor.h"

namespace {

using namespace volta;

struct Op {
  ir::Node node;
  std::vector<TensorRef> in;
  TensorRef out;
  Status run() const { return cpu::cpu_kernel(node.op).run(cpu::KernelArgs{node, in, out, {}}); }
};

Op make(ir::Op op, std::vector<Tensor*> in, Tensor& out, ir::Attrs attrs = {}) {
  Op o;
  o.node.op = op;
  o.node.name = "n";
  o.node.attrs = std::move(attrs);
  o.node.type = out.type();
  for (Tensor* t : in) o.in.push_back({t->raw(), t->type()});
  o.out = {out.raw(), out.type()};
  return o;
}

// a + b + c over [12, 64, 384] (the shape of a training step's q/k/v gradient sum): one fused
// pass against two adds through a temporary.
void BM_Add3(benchmark::State& state) {
  cpu::set_num_threads(1);
  const Shape s{12, 64, 384};
  Tensor a = Tensor::zeros(DType::f32, s), b = a.clone(), c = a.clone(), t = a.clone(), y = a.clone();
  fill_normal(a, 1, 1, 0, 1), fill_normal(b, 1, 2, 0, 1), fill_normal(c, 1, 3, 0, 1);
  const bool fused = state.range(0) != 0;
  const Op f = make(ir::Op::FusedElementwise, {&a, &b, &c}, y, {{"program", std::string("add x0 x1; add t0 x2")}});
  const Op first = make(ir::Op::Add, {&a, &b}, t), second = make(ir::Op::Add, {&t, &c}, y);
  for (auto _ : state) {
    if (fused) benchmark::DoNotOptimize(f.run());
    else benchmark::DoNotOptimize(first.run()), benchmark::DoNotOptimize(second.run());
  }
  state.SetBytesProcessed(state.iterations() * a.bytes() * 4);
}
BENCHMARK(BM_Add3)->ArgNames({"fused"})->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
