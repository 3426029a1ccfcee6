#include "gradcheck.h"

#include <cmath>

#include "volta/autograd.h"
#include "volta/rng.h"

namespace volta::test {

namespace {
constexpr double kStep = 1e-2;  // f32 losses: larger steps keep rounding noise below truncation error
}

Result<GradCheckResult> gradcheck_graph(const ir::Graph& g, Bindings values, int64_t max_per_param) {
  VOLTA_ASSIGN_OR_RETURN(autograd::GradientGraph gg, autograd::build_backward(g));
  Runtime rt(make_cpu_backend());
  VOLTA_ASSIGN_OR_RETURN(auto train, rt.compile(gg.graph));
  ir::Graph loss_only = g;
  loss_only.outputs = {g.outputs[0]};
  VOLTA_ASSIGN_OR_RETURN(auto fwd, rt.compile(loss_only));
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> analytic, rt.run(*train, values));

  GradCheckResult r;
  for (size_t p = 0; p < gg.params.size(); ++p) {
    Tensor& param = values.at(gg.params[p]);
    const Tensor& grad = analytic[p + 1];
    // At most max_per_param elements, spread evenly over the tensor.
    const int64_t stride = std::max<int64_t>(1, param.numel() / std::max<int64_t>(max_per_param, 1));
    for (int64_t i = 0; i < param.numel(); i += stride) {
      float* v = param.data<float>() + i;
      const float saved = *v;
      *v = saved + static_cast<float>(kStep);
      VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> up, rt.run(*fwd, values));
      *v = saved - static_cast<float>(kStep);
      VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> down, rt.run(*fwd, values));
      *v = saved;
      // The actual step is what float rounding made of it.
      const double h2 = (static_cast<double>(saved + static_cast<float>(kStep)) - (saved - static_cast<float>(kStep)));
      const double fd = (static_cast<double>(up[0].data<float>()[0]) - down[0].data<float>()[0]) / h2;
      const double ad = grad.data<float>()[i];
      const double err = std::fabs(ad - fd);
      r.max_abs = std::max(r.max_abs, err);
      r.max_rel = std::max(r.max_rel, err / std::max(std::fabs(fd), 1e-2));
      ++r.checked;
    }
  }
  return r;
}

Result<GradCheckResult> gradcheck(ModelBuilder& b, Value y, Bindings values, bool positive) {
  const TensorType t = b.type(y);
  Tensor r = Tensor::zeros(DType::f32, t.shape);
  fill_normal(r, 99, 1, 0.0f, 1.0f);
  Value weights = b.constant("gradcheck.r", r);
  Value loss = t.shape.empty() ? b.mul(y, weights, "gradcheck.loss")
                               : b.reduce_sum(b.mul(y, weights), [&] {
                                   std::vector<int64_t> axes;
                                   for (size_t i = 0; i < t.shape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
                                   return axes;
                                 }(), false, "gradcheck.loss");
  b.output(loss);
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Param || values.count(n.name)) continue;
    Tensor v = Tensor::zeros(DType::f32, n.type.shape);
    fill_normal(v, 7, stream_for(n.name), 0.0f, 1.0f);
    if (positive)
      for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = std::fabs(v.data<float>()[i]) + 0.5f;
    values.emplace(n.name, v);
  }
  return gradcheck_graph(g, std::move(values));
}

}  // namespace volta::test
