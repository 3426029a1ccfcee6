// The CPU backend's optimizer kernels against the reference over several steps. Every op's
// kernel against its reference kernel, one step, is the op-test harness's job (tests/ops/).
#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"
#include "test_util.h"
#include "volta/optim.h"
#include "volta/rng.h"

namespace volta {
namespace {

// The backend's float optimizer updates against the double reference, over many steps.
TEST(CpuParity, OptimizerUpdatesMatchTheReference) {
  for (optim::Kind kind : {optim::Kind::Sgd, optim::Kind::Adam, optim::Kind::AdamW}) {
    const int64_t n = 40000;
    Tensor p_fast = Tensor::zeros(DType::f32, {n}), g = Tensor::zeros(DType::f32, {n});
    fill_normal(p_fast, 9, 0, 0.0f, 1.0f);
    Tensor p_ref = p_fast.clone();
    const int slots = kind == optim::Kind::Sgd ? 1 : 2;
    std::vector<Tensor> s_fast, s_ref;
    for (int i = 0; i < slots; ++i) s_fast.push_back(Tensor::zeros(DType::f32, {n})), s_ref.push_back(Tensor::zeros(DType::f32, {n}));
    auto refs = [](std::vector<Tensor>& ts) {
      std::vector<TensorRef> r;
      for (Tensor& t : ts) r.push_back({t.raw(), t.type()});
      return r;
    };
    auto rf = refs(s_fast), rr = refs(s_ref);
    for (int64_t step = 1; step <= 5; ++step) {
      fill_normal(g, 10, static_cast<uint64_t>(step), 0.0f, 0.5f);
      const optim::UpdateStep u{kind, 1e-2, 0.9, 0.99, 1e-8, 0.9, 0.1, step, 0.8};
      const TensorRef gr{g.raw(), g.type()};
      ASSERT_OK(cpu::fast_optimizer_update(u, TensorRef{p_fast.raw(), p_fast.type()}, gr, rf));
      ASSERT_OK(cpu::optimizer_update(u, TensorRef{p_ref.raw(), p_ref.type()}, gr, rr));
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p_fast.data<float>()[i], p_ref.data<float>()[i], 1e-6) << i;
  }
  Tensor x = Tensor::zeros(DType::f32, {100003});
  fill_normal(x, 11, 0, 0.0f, 1.0f);
  const TensorRef xr{x.raw(), x.type()};
  EXPECT_NEAR(cpu::fast_sum_of_squares(xr), cpu::sum_of_squares(xr), 1e-5 * cpu::sum_of_squares(xr));
}

}  // namespace
}  // namespace volta
