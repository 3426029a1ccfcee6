// The training step as one plan (include/volta/train.h): the forward graph, its autograd
// backward, then grad_norm over every gradient, one optimizer_update per param (on the param
// and its slots, bound from the session's State) and the step counter's increment.
#include "volta/train.h"

#include <algorithm>

#include "volta/autograd.h"
#include "volta/builder.h"

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

std::string slot_name(int slot, const std::string& param) { return (slot == 0 ? "optim.m." : "optim.v.") + param; }

namespace {

// forward + backward (outputs: loss, gradients in param order) -> the whole step.
Result<ir::Graph> step_graph(const autograd::GradientGraph& gg, const TrainingOptions& opts, const std::vector<bool>& decay) {
  const optim::OptimizerConfig& c = opts.optimizer;
  ir::Graph start = gg.graph;
  start.outputs.clear();
  ModelBuilder b(std::move(start));  // a name the model already uses is an error of build()
  const Value loss{gg.graph.outputs[0]};
  std::vector<Value> grads;
  for (size_t i = 1; i < gg.graph.outputs.size(); ++i) grads.push_back({gg.graph.outputs[i]});
  // The seam for data parallelism: an all-reduce of `grads` across replicas would go here.
  const Value norm = b.op(ir::Op::GradNorm, grads, {}, "optim.grad_norm");
  const Value lr = b.input(kLearningRate, {DType::f64, {}});
  ParamInit state_init = ParamInit::zeros();  // set by the session, never trained
  state_init.trainable = false;
  const Value step = b.param(kStepCounter, {DType::i64, {}}, state_init);
  const int slots = optim::state_slots(c);
  std::vector<Value> after = {step};
  for (size_t i = 0; i < gg.params.size(); ++i) {
    const std::string& name = gg.params[i];
    const Value param{gg.graph.find(name)};
    std::vector<Value> in = {param, grads[i], norm, lr, step};
    for (int k = 0; k < slots; ++k) in.push_back(b.param(slot_name(k, name), b.type(param), state_init));
    ir::Attrs at{{"kind", std::string(optim::kind_name(c.kind))}, {"beta1", c.beta1},       {"beta2", c.beta2},
                 {"eps", c.eps},                                  {"momentum", c.momentum}, {"clip", c.clip_norm},
                 {"weight_decay", decay[i] ? c.weight_decay : 0.0}};
    after.push_back(b.op(ir::Op::OptimizerUpdate, std::move(in), std::move(at), "optim.update." + name));
  }
  const Value count = b.op(ir::Op::Increment, std::move(after), {}, "optim.step_count");
  b.output(loss);
  b.output(norm);
  b.output(count);
  return b.build();
}

}  // namespace

Result<TrainingPlan> compile_training(Runtime& rt, const ir::Graph& forward, const TrainingOptions& opts) {
  VOLTA_RETURN_IF_ERROR(optim::validate(opts.optimizer));
  VOLTA_RETURN_IF_ERROR(optim::validate(opts.schedule, opts.optimizer.lr));
  VOLTA_ASSIGN_OR_RETURN(autograd::GradientGraph gg, autograd::build_backward(forward, opts.loss));
  TrainingPlan tp;
  tp.options = opts;
  tp.params = gg.params;
  for (const std::string& name : gg.params) {
    const TensorType& t = gg.graph.node(gg.graph.find(name)).type;
    tp.param_types.push_back(t);
    tp.decay.push_back(!opts.optimizer.decay_matrices_only || t.shape.size() >= 2);
  }
  for (const ir::Node& n : forward.nodes)
    if (n.op == ir::Op::Param && std::find(tp.params.begin(), tp.params.end(), n.name) == tp.params.end())
      tp.frozen.push_back(n.name);
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, step_graph(gg, opts, tp.decay));
  VOLTA_ASSIGN_OR_RETURN(tp.step, rt.compile(g, opts.compile));
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

Result<TrainSession> TrainSession::start(Runtime& rt, const TrainingPlan& tp, const TrainState& snapshot) {
  auto state = std::make_unique<State>(rt.backend());
  const int slots = optim::state_slots(tp.options.optimizer);
  const ir::Graph& g = tp.step->graph;
  for (const auto& [name, t] : snapshot.params) {
    const int32_t id = g.find(name);
    if (id < 0 || g.node(id).op != ir::Op::Param)
      return invalid_argument("param '" + name + "' is not a param of the model (another config?)");
  }
  auto put_param = [&](const std::string& name, const TensorType& type) -> Status {
    auto it = snapshot.params.find(name);
    if (it == snapshot.params.end()) return invalid_argument("param '" + name + "' has no value");
    if (it->second.type() != type)
      return invalid_argument("param '" + name + "' is " + type.to_string() + " in the model but " +
                              it->second.type().to_string() + " in the state");
    return state->put(name, it->second, plan::MemClass::Param);
  };
  for (size_t i = 0; i < tp.params.size(); ++i) {
    const std::string& name = tp.params[i];
    VOLTA_RETURN_IF_ERROR(put_param(name, tp.param_types[i]));
    auto it = snapshot.slots.find(name);
    const size_t have = it == snapshot.slots.end() ? 0 : it->second.size();
    if (have != static_cast<size_t>(slots))
      return invalid_argument("param '" + name + "' has " + std::to_string(have) + " optimizer state tensors, " +
                              optim::kind_name(tp.options.optimizer.kind) + " keeps " + std::to_string(slots));
    for (int k = 0; k < slots; ++k) {
      const Tensor& t = it->second[static_cast<size_t>(k)];
      if (t.type() != tp.param_types[i])
        return invalid_argument("optimizer state '" + slot_name(k, name) + "' is " + t.type().to_string() + " but param '" +
                                name + "' is " + tp.param_types[i].to_string());
      VOLTA_RETURN_IF_ERROR(state->put(slot_name(k, name), t, plan::MemClass::OptState));
    }
  }
  for (const std::string& name : tp.frozen) VOLTA_RETURN_IF_ERROR(put_param(name, g.node(g.find(name)).type));
  if (snapshot.step < 0) return invalid_argument("the state's step count is negative");
  Tensor step = Tensor::zeros(DType::i64, {});
  step.data<int64_t>()[0] = snapshot.step;
  VOLTA_RETURN_IF_ERROR(state->put(kStepCounter, step, plan::MemClass::OptState));
  return TrainSession(rt, tp, std::move(state), snapshot.step, snapshot.seed);
}

Result<StepStats> TrainSession::step(const Bindings& batch) {
  StepStats stats;
  stats.lr = tp_->options.schedule.lr_at(tp_->options.optimizer.lr, steps_);
  Bindings all = batch;
  Tensor lr = Tensor::zeros(DType::f64, {});
  lr.data<double>()[0] = stats.lr;
  all.insert_or_assign(kLearningRate, std::move(lr));
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt_->run(*tp_->step, all, state_.get()));
  stats.loss = out[0].data<float>()[0];
  stats.grad_norm = out[1].data<double>()[0];
  if (out[2].data<int64_t>()[0] != steps_ + 1)
    return internal_error("the step counter reads " + std::to_string(out[2].data<int64_t>()[0]) + " after step " +
                          std::to_string(steps_ + 1));
  ++steps_;
  return stats;
}

Result<TrainState> TrainSession::snapshot() const {
  TrainState s;
  s.step = steps_;
  s.seed = seed_;
  const int slots = optim::state_slots(tp_->options.optimizer);
  for (const std::string& name : tp_->params) {
    VOLTA_ASSIGN_OR_RETURN(Tensor p, state_->get(name));
    s.params.emplace(name, std::move(p));
    for (int k = 0; k < slots; ++k) {
      VOLTA_ASSIGN_OR_RETURN(Tensor t, state_->get(slot_name(k, name)));
      s.slots[name].push_back(std::move(t));
    }
  }
  for (const std::string& name : tp_->frozen) {
    VOLTA_ASSIGN_OR_RETURN(Tensor p, state_->get(name));
    s.params.emplace(name, std::move(p));
  }
  return s;
}

}  // namespace volta::train
