#include <chrono>
#include <cmath>

#include "volta/autograd.h"
#include "volta/train.h"

namespace volta::train {

TrainState TrainState::clone() const {
  TrainState s;
  for (const auto& [name, t] : params) s.params.emplace(name, t.clone());
  for (const auto& [name, ts] : slots)
    for (const Tensor& t : ts) s.slots[name].push_back(t.clone());
  s.step = step;
  s.seed = seed;
  return s;
}

bool TrainState::bitwise_equal(const TrainState& o) const {
  if (step != o.step || seed != o.seed || params.size() != o.params.size() || slots.size() != o.slots.size()) return false;
  for (const auto& [name, t] : params) {
    auto it = o.params.find(name);
    if (it == o.params.end() || !t.bitwise_equal(it->second)) return false;
  }
  for (const auto& [name, ts] : slots) {
    auto it = o.slots.find(name);
    if (it == o.slots.end() || it->second.size() != ts.size()) return false;
    for (size_t i = 0; i < ts.size(); ++i)
      if (!ts[i].bitwise_equal(it->second[i])) return false;
  }
  return true;
}

Result<TrainingPlan> compile_training(Runtime& rt, const ir::Graph& forward, const TrainingOptions& opts) {
  VOLTA_RETURN_IF_ERROR(optim::validate(opts.optimizer));
  VOLTA_RETURN_IF_ERROR(optim::validate(opts.schedule, opts.optimizer.lr));
  VOLTA_ASSIGN_OR_RETURN(autograd::GradientGraph gg, autograd::build_backward(forward, opts.loss));
  TrainingPlan tp;
  tp.options = opts;
  tp.params = gg.params;
  CompileOptions compile = opts.compile;
  compile.plan.output_classes.assign(gg.graph.outputs.size(), plan::MemClass::Grad);
  compile.plan.output_classes[0] = plan::MemClass::Output;  // the loss
  size_t state_bytes = 0;
  for (const std::string& name : gg.params) {
    const TensorType& t = gg.graph.node(gg.graph.find(name)).type;
    tp.param_types.push_back(t);
    tp.decay.push_back(!opts.optimizer.decay_matrices_only || t.shape.size() >= 2);
    state_bytes += static_cast<size_t>(optim::state_slots(opts.optimizer)) * align_up(t.bytes());
  }
  compile.plan.extra_bound[static_cast<size_t>(plan::MemClass::OptState)] = state_bytes;
  VOLTA_ASSIGN_OR_RETURN(tp.step, rt.compile(gg.graph, compile));
  return tp;
}

Result<TrainState> init_state(const TrainingPlan& tp, Bindings params, uint64_t seed) {
  TrainState s;
  s.seed = seed;
  for (size_t i = 0; i < tp.params.size(); ++i) {
    const std::string& name = tp.params[i];
    auto it = params.find(name);
    if (it == params.end()) return invalid_argument("trainable param '" + name + "' has no initial value");
    if (it->second.type() != tp.param_types[i])
      return invalid_argument("param '" + name + "' is " + tp.param_types[i].to_string() + " but its initial value is " +
                              it->second.type().to_string());
    for (int k = 0; k < optim::state_slots(tp.options.optimizer); ++k)
      s.slots[name].push_back(Tensor::zeros(DType::f32, tp.param_types[i].shape));
  }
  s.params = std::move(params);
  return s;
}

namespace {
TensorRef ref(Tensor& t) { return TensorRef{t.raw(), t.type()}; }
}  // namespace

Result<StepStats> train_step(Runtime& rt, const TrainingPlan& tp, const Bindings& batch, TrainState& state) {
  Bindings all = batch;
  for (const auto& [name, t] : state.params) all.insert_or_assign(name, t);
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(*tp.step, all));

  StepStats stats;
  stats.loss = out[0].data<float>()[0];
  // Global gradient norm, summed in param order.
  double sq = 0.0;
  for (size_t i = 0; i < tp.params.size(); ++i) {
    VOLTA_ASSIGN_OR_RETURN(double s, rt.backend().sum_of_squares(ref(out[i + 1])));
    sq += s;
  }
  stats.grad_norm = std::sqrt(sq);
  const optim::OptimizerConfig& c = tp.options.optimizer;
  double scale = 1.0;
  if (c.clip_norm > 0 && stats.grad_norm > c.clip_norm) scale = c.clip_norm / (stats.grad_norm + 1e-6);
  stats.lr = tp.options.schedule.lr_at(c.lr, state.step);

  optim::UpdateStep u{c.kind, stats.lr, c.beta1, c.beta2, c.eps, c.momentum, 0.0, state.step + 1, scale};
  const auto update_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < tp.params.size(); ++i) {
    const std::string& name = tp.params[i];
    u.weight_decay = tp.decay[i] ? c.weight_decay : 0.0;
    std::vector<TensorRef> slots;
    for (Tensor& t : state.slots[name]) slots.push_back(ref(t));
    Tensor& param = state.params.at(name);
    VOLTA_RETURN_IF_ERROR(rt.backend().optimizer_update(u, ref(param), ref(out[i + 1]), slots));
    VOLTA_RETURN_IF_ERROR(rt.check_numerics(ref(param), "[" + std::string(optim::kind_name(c.kind)) + "] update of param '" + name + "'"));
  }
  if (rt.profiler()) rt.profiler()->record_span(std::string("optimizer_") + optim::kind_name(c.kind), update_start,
                                                std::chrono::steady_clock::now());
  ++state.step;
  return stats;
}

}  // namespace volta::train
