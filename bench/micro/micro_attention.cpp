// Microbenchmarks of the attention kernel: one decode step of TinyLM (4 heads of 32, one query
// row at position `length` of a cache of 256 rows, read in place: length + 1 keys), the cost a
// token pays per layer; columns = 1: the key cache stored transposed (keys_transposed), as the
// CPU's generation lays it out.
#include <benchmark/benchmark.h>

#include <array>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "volta/op_attrs.h"
#include "volta/rng.h"
#include "volta/tensor.h"

namespace {

using namespace volta;

void BM_DecodeAttention(benchmark::State& state) {
  cpu::set_num_threads(1);
  const int64_t H = 4, D = 32, cap = 256, length = state.range(0);
  const bool columns = state.range(1) != 0;
  Tensor q = Tensor::zeros(DType::f32, {1, H, 1, D}), y = q.clone();
  Tensor vc = Tensor::zeros(DType::f32, {1, H, cap, D});
  Tensor kc = columns ? Tensor::zeros(DType::f32, {1, H, D, cap}) : vc.clone();
  Tensor position = Tensor::zeros(DType::i32, {1});
  position.data<int32_t>()[0] = static_cast<int32_t>(length);
  fill_normal(q, 1, 1, 0, 1), fill_normal(kc, 1, 4, 0, 1), fill_normal(vc, 1, 5, 0, 1);
  ir::Node node;
  node.op = ir::Op::Attention;
  node.name = "attn";
  node.attrs = {{"scale", 0.17677669}, {"causal_offset", int64_t{0}}, {"keys_transposed", int64_t{columns}}};
  node.type = y.type();
  // Bound as a plan binds them: the kernel reads the struct instead of parsing the map per call.
  node.attrs.bind_typed(std::make_shared<const ir::AttrsOf<ir::Op::Attention>>(ir::parse_attrs<ir::Op::Attention>(node.attrs).value()));
  std::vector<TensorRef> in;
  for (Tensor* t : {&q, &kc, &vc, &position}) in.push_back({t->raw(), t->type()});
  const TensorRef out{y.raw(), y.type()};
  for (auto _ : state) {
    const Status st = cpu::cpu_kernel(ir::Op::Attention).run(cpu::KernelArgs{node, in, out, {}});
    if (!st.is_ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(y.raw());
  }
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"length", "columns"})
    ->ArgsProduct({{8, 40, 63, 255}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// The softmax rows of the training step's attention forward alone: 48 groups of 64 causal score
// rows, in blocks of 16 rows each as wide as the keys its last row sees (16, 32, 48, 64), as the
// fused kernel hands them to softmax_rows. In place, as the kernel calls it: each call's rows are
// the previous call's probabilities (finite, the same work each call), since restoring the
// scores would cost more than the rows.
void BM_SoftmaxCausalRows(benchmark::State& state) {
  const int64_t G = 48, T = 64, block = 16;
  Tensor s = Tensor::zeros(DType::f32, {G, T, T});
  fill_normal(s, 1, 7, 0, 1);
  float* p = s.data<float>();
  for (auto _ : state) {
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i0 = 0; i0 < T; i0 += block) {
        float* rows = p + (g * T + i0) * T;
        cpu::softmax_rows(rows, rows, T, block, i0 + block, i0 + 1, 1, 0.17677669f, false, nullptr, 0);
      }
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_SoftmaxCausalRows)->Unit(benchmark::kMicrosecond);

}  // namespace

// The training step's attention on TinyLM's packed projection (batch 12, 4 heads of 32, 64
// positions, causal): the forward (grad = 0) or its gradient (grad = 1), one layer's call. cold
// = 1: each call on the next of 32 copies of the operands (51 MB, more than L3 holds), as the
// step's backward meets them, written a whole forward pass before. stored = 1: the forward keeps
// the probabilities (store_probs) and the gradient reads them, as store_attention_probs plans it.
void BM_TrainAttention(benchmark::State& state) {
  cpu::set_num_threads(static_cast<int>(state.range(1)));
  const int64_t B = 12, H = 4, T = 64, D = 32;
  const bool grad = state.range(0) != 0, stored = state.range(3) != 0;
  const int copies = state.range(2) != 0 ? 32 : 1;
  auto node_of = [&](ir::Op op, bool store, const TensorType& type) {
    ir::Node node;
    node.op = op;
    node.name = "attn";
    node.attrs = {{"scale", 0.17677669}, {"causal_offset", int64_t{0}}, {"packed_heads", H}};
    if (store) node.attrs.set("store_probs", int64_t{1});
    node.type = type;
    return node;
  };
  const TensorType flat{DType::f32, {B * T * H * D + B * H * T * T}};
  std::vector<Tensor> qkvs, dys, ys, fwds;  // fwds: a stored forward's result (output, probabilities)
  for (int c = 0; c < copies; ++c) {
    Tensor qkv = Tensor::zeros(DType::f32, {B, T, 3 * H * D}), dy = Tensor::zeros(DType::f32, {B, T, H * D});
    fill_normal(qkv, 1, 1, 0, 1), fill_normal(dy, 1, 2, 0, 1);
    ys.push_back(grad ? qkv.clone() : stored ? Tensor::zeros(DType::f32, flat.shape) : dy.clone());
    if (grad && stored) {
      fwds.push_back(Tensor::zeros(DType::f32, flat.shape));
      const ir::Node fwd = node_of(ir::Op::Attention, true, flat);
      std::vector<TensorRef> in(3, TensorRef{qkv.raw(), qkv.type()});
      (void)cpu::cpu_kernel(fwd.op).run(cpu::KernelArgs{fwd, in, {fwds.back().raw(), flat}, {}});
    }
    qkvs.push_back(std::move(qkv)), dys.push_back(std::move(dy));
  }
  const ir::Node node = node_of(grad ? ir::Op::AttentionGrad : ir::Op::Attention, stored && !grad, ys[0].type());
  int c = 0;
  for (auto _ : state) {
    std::vector<TensorRef> in;
    for (int i = 0; i < 3; ++i) in.push_back({qkvs[c].raw(), qkvs[c].type()});
    if (grad) in.push_back({dys[c].raw(), dys[c].type()});
    if (grad && stored)  // the probabilities: the stored forward's result past its output
      in.push_back({reinterpret_cast<std::byte*>(fwds[c].data<float>() + B * T * H * D), TensorType{DType::f32, {B, H, T, T}}});
    const TensorRef out{ys[c].raw(), ys[c].type()};
    const Status st = cpu::cpu_kernel(node.op).run(cpu::KernelArgs{node, in, out, {}});
    if (!st.is_ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(ys[c].raw());
    c = (c + 1) % copies;
  }
  cpu::set_num_threads(1);
}
BENCHMARK(BM_TrainAttention)
    ->ArgNames({"grad", "threads", "cold", "stored"})
    ->ArgsProduct({{0, 1}, {1, 2}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
// A decode step's key scores for 4 heads of 32 values (one layer): each head's row alone
// (together 0), or the heads' blocks interleaved in one call (together 1), as attention runs them.
void BM_DecodeKeyScores(benchmark::State& state) {
  const int64_t H = 4, D = 32, cap = 256, n = state.range(0);
  const bool together = state.range(1) != 0;
  Tensor q = Tensor::zeros(DType::f32, {H, D}), k = Tensor::zeros(DType::f32, {H, cap, D}), s = Tensor::zeros(DType::f32, {H, cap});
  fill_normal(q, 1, 1, 0, 1), fill_normal(k, 1, 4, 0, 1);
  std::vector<const float*> rows(static_cast<size_t>(H * n));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < n; ++j) rows[static_cast<size_t>(h * n + j)] = k.data<float>() + (h * cap + j) * D;
  std::array<cpu::KeyScoreRow, 4> list{};
  for (int64_t h = 0; h < H; ++h)
    list[static_cast<size_t>(h)] = {q.data<float>() + h * D, rows.data() + h * n, n, s.data<float>() + h * cap};
  const cpu::MatmulIsa isa = cpu::matmul_active_isa();
  for (auto _ : state) {
    if (together) cpu::key_scores_rows(isa, D, list);
    else
      for (const cpu::KeyScoreRow& r : list) cpu::key_scores(isa, r.q, D, r.k, r.n, r.s);
    benchmark::DoNotOptimize(s.raw());
  }
}
BENCHMARK(BM_DecodeKeyScores)->ArgNames({"length", "together"})->ArgsProduct({{8, 40, 63, 255}, {0, 1}});
