// Microbenchmarks of the training step's small ops on the shakespeare-char shapes (768 rows of
// 128 or 512 columns, 65 classes), one thread (the gradient norm also two), operands hot in
// cache: the kernels' own cost.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "volta/rng.h"
#include "volta/tensor.h"

namespace {

using namespace volta;

struct StepOp {
  ir::Node node;
  std::vector<Tensor> in;
  Tensor out, ws;
  std::vector<TensorRef> refs;
  Status run() {
    return cpu::cpu_kernel(node.op).run(
        cpu::KernelArgs{node, refs, {out.raw(), out.type()}, {ws.raw(), static_cast<size_t>(ws.bytes())}});
  }
};

StepOp make(ir::Op op, std::vector<Tensor> in, TensorType out, ir::Attrs attrs = {}) {
  StepOp o;
  o.node.op = op;
  o.node.name = "n";
  o.node.attrs = std::move(attrs);
  o.node.type = out;
  o.in = std::move(in);
  for (Tensor& t : o.in) o.refs.push_back({t.raw(), t.type()});
  o.out = Tensor::zeros(out.dtype, out.shape);
  o.ws = Tensor::zeros(DType::f32, {1 << 14});
  return o;
}

Tensor normal(Shape s, uint64_t stream) {
  Tensor t = Tensor::zeros(DType::f32, std::move(s));
  fill_normal(t, 7, stream, 0.0f, 1.0f);
  return t;
}

void time_op(benchmark::State& state, StepOp o, int threads = 1) {
  cpu::set_num_threads(threads);
  for (auto _ : state) benchmark::DoNotOptimize(o.run());
  state.SetItemsProcessed(state.iterations() * o.in[0].numel());
  cpu::set_num_threads(1);
}

void BM_StepLayerNorm(benchmark::State& state) {
  time_op(state, make(ir::Op::LayerNorm, {normal({768, 128}, 1), normal({128}, 2), normal({128}, 3)}, {DType::f32, {768, 128}}));
}
void BM_StepLayerNormGrad(benchmark::State& state) {
  time_op(state, make(ir::Op::LayerNormGrad, {normal({768, 128}, 1), normal({128}, 2), normal({768, 128}, 3)},
                      {DType::f32, {768, 128}}));
}
void BM_StepNormParamGrad(benchmark::State& state) {
  time_op(state, make(ir::Op::NormParamGrad, {normal({768, 128}, 1), normal({768, 128}, 2)}, {DType::f32, {2, 128}}));
}
void BM_StepGelu(benchmark::State& state) {
  time_op(state, make(ir::Op::Gelu, {normal({768, 512}, 1)}, {DType::f32, {768, 512}}));
}
void BM_StepGeluGrad(benchmark::State& state) {
  time_op(state, make(ir::Op::GeluGrad, {normal({768, 512}, 1), normal({768, 512}, 2)}, {DType::f32, {768, 512}}));
}
void BM_StepAdd(benchmark::State& state) {
  time_op(state, make(ir::Op::Add, {normal({768, 128}, 1), normal({768, 128}, 2)}, {DType::f32, {768, 128}}));
}
Tensor targets() {
  Tensor t = Tensor::zeros(DType::i32, {768});
  for (int64_t i = 0; i < 768; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(i * 7 % 65);
  return t;
}
void BM_StepCrossEntropy(benchmark::State& state) {
  time_op(state, make(ir::Op::CrossEntropy, {normal({768, 65}, 1), targets()}, {DType::f32, {}}));
}
void BM_StepCrossEntropyGrad(benchmark::State& state) {
  Tensor one = Tensor::zeros(DType::f32, {});
  one.data<float>()[0] = 1.0f;
  time_op(state, make(ir::Op::CrossEntropyGrad, {normal({768, 65}, 1), targets(), std::move(one)}, {DType::f32, {768, 65}}));
}
// The global gradient norm over the 4-layer model's 27 gradients (0.8M floats): the two
// embeddings, per layer two norms' [2, 128] and four weights, and the final norm's.
void BM_StepGradNorm(benchmark::State& state) {
  std::vector<Tensor> grads{normal({65, 128}, 1), normal({64, 128}, 2)};
  for (uint64_t l = 0; l < 4; ++l)
    for (const Shape& s : {Shape{2, 128}, Shape{128, 384}, Shape{128, 128}, Shape{2, 128}, Shape{128, 512}, Shape{512, 128}})
      grads.push_back(normal(s, 10 + l));
  grads.push_back(normal({2, 128}, 3));
  time_op(state, make(ir::Op::GradNorm, std::move(grads), {DType::f64, {}}), static_cast<int>(state.range(0)));
}
BENCHMARK(BM_StepLayerNorm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepGradNorm)->ArgNames({"threads"})->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepLayerNormGrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepNormParamGrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepGelu)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepGeluGrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepAdd)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepCrossEntropy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepCrossEntropyGrad)->Unit(benchmark::kMicrosecond);

}  // namespace
