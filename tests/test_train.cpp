#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"
#include "cpu_variant.h"
#include "test_util.h"
#include "train/spirals.h"
#include "volta/builder.h"
#include "volta/train.h"

namespace volta {
namespace {

TensorRef ref(Tensor& t) { return TensorRef{t.raw(), t.type()}; }

// Runs `steps` updates of one scalar param with the given gradients.
std::vector<float> updates(const optim::UpdateStep& base, std::vector<float> grads, int slots) {
  Tensor p = Tensor::from_f32({1}, {1.0f});
  std::vector<Tensor> state;
  for (int i = 0; i < slots; ++i) state.push_back(Tensor::zeros(DType::f32, {1}));
  std::vector<TensorRef> refs;
  for (Tensor& t : state) refs.push_back(ref(t));
  std::vector<float> out;
  for (size_t s = 0; s < grads.size(); ++s) {
    Tensor g = Tensor::from_f32({1}, {grads[s]});
    optim::UpdateStep u = base;
    u.t = static_cast<int64_t>(s) + 1;
    EXPECT_TRUE(cpu::fast_optimizer_update(u, ref(p), ref(g), refs).is_ok());
    out.push_back(p.data<float>()[0]);
  }
  return out;
}

TEST(Optimizer, SgdWithMomentumAndWeightDecay) {
  optim::UpdateStep u{optim::Kind::Sgd, 0.1, 0, 0, 0, 0.9, 0.0, 1, 1.0};
  auto p = updates(u, {0.5f, 0.5f}, 1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);   // buf = 0.5
  EXPECT_FLOAT_EQ(p[1], 0.855f);  // buf = 0.9 * 0.5 + 0.5 = 0.95
  u.momentum = 0.0;
  u.weight_decay = 0.1;
  p = updates(u, {0.5f}, 0);
  EXPECT_FLOAT_EQ(p[0], 0.94f);  // 1 - 0.1 * (0.5 + 0.1 * 1)
}

TEST(Optimizer, AdamBiasCorrection) {
  optim::UpdateStep u{optim::Kind::Adam, 0.1, 0.9, 0.999, 1e-8, 0, 0.0, 1, 1.0};
  auto p = updates(u, {0.5f, 0.25f}, 2);
  EXPECT_NEAR(p[0], 0.9, 1e-6);  // m^ = 0.5, v^ = 0.25: a full lr step
  // m = 0.07, v = 0.00031225; m^ = 0.07 / 0.19, v^ = 0.00031225 / 0.001999
  EXPECT_NEAR(p[1], 0.9 - 0.1 * (0.07 / 0.19) / std::sqrt(0.00031225 / 0.001999), 1e-6);
  EXPECT_NEAR(p[1], 0.806782, 1e-5);
}

TEST(Optimizer, AdamWDecouplesWeightDecay) {
  optim::UpdateStep u{optim::Kind::AdamW, 0.1, 0.9, 0.999, 1e-8, 0, 0.1, 1, 1.0};
  auto p = updates(u, {0.5f}, 2);
  EXPECT_NEAR(p[0], 1.0 * (1 - 0.1 * 0.1) - 0.1, 1e-6);  // 0.89
  optim::UpdateStep adam = u;
  adam.kind = optim::Kind::Adam;  // L2: the decay enters the moments instead
  auto q = updates(adam, {0.5f}, 2);
  EXPECT_NEAR(q[0], 0.9, 1e-6);  // g = 0.6, m^ / sqrt(v^) = 1
}

TEST(Optimizer, ScheduleValues) {
  optim::Schedule s{optim::Schedule::Kind::WarmupCosine, 10, 100, 0.1};
  EXPECT_DOUBLE_EQ(s.lr_at(1.0, 0), 1.0 / 11);
  EXPECT_DOUBLE_EQ(s.lr_at(1.0, 9), 10.0 / 11);
  EXPECT_DOUBLE_EQ(s.lr_at(1.0, 10), 1.0);
  EXPECT_NEAR(s.lr_at(1.0, 55), 0.55, 1e-12);
  EXPECT_NEAR(s.lr_at(1.0, 100), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.lr_at(1.0, 5000), 0.1);
  optim::Schedule c;
  EXPECT_DOUBLE_EQ(c.lr_at(0.3, 123), 0.3);
  EXPECT_ERROR_CONTAINS(optim::validate(optim::Schedule{optim::Schedule::Kind::WarmupCosine, 10, 5, 0.0}, 1.0),
                        "decay steps (5) must be greater than the warm-up steps (10)");
}

TEST(Optimizer, BadHyperParametersNameTheField) {
  optim::OptimizerConfig c;
  c.lr = std::numeric_limits<double>::quiet_NaN();
  EXPECT_ERROR_CONTAINS(optim::validate(c), "learning rate must be finite");
  c.lr = 1e-3;
  c.beta2 = 1.0;
  EXPECT_ERROR_CONTAINS(optim::validate(c), "beta2 must be in [0, 1)");
  c.beta2 = 0.99;
  c.weight_decay = -1;
  EXPECT_ERROR_CONTAINS(optim::validate(c), "weight decay");
}

// loss = sum(w * c) with c = [3, 4]: the gradient is c, its norm 5.
ir::Graph linear_loss() {
  ModelBuilder b("lin");
  Value w = b.param("w", {DType::f32, {2}}, ParamInit::zeros());
  Value c = b.constant("c", Tensor::from_f32({2}, {3.0f, 4.0f}));
  b.output(b.reduce_sum(b.mul(w, c), {0}, false, "loss"));
  return *b.build();
}

TEST(Training, ClippingByGlobalNorm) {
  Runtime rt(make_cpu_backend());
  train::TrainingOptions opts;
  opts.optimizer.kind = optim::Kind::Sgd;
  opts.optimizer.lr = 1.0;
  opts.optimizer.clip_norm = 1.0;
  auto tp = train::compile_training(rt, linear_loss(), opts);
  ASSERT_OK(tp);
  auto state = train::init_state(*tp, {{"w", Tensor::zeros(DType::f32, {2})}}, 0);
  ASSERT_OK(state);
  auto session = train::TrainSession::start(rt, *tp, *state);
  ASSERT_OK(session);
  auto st = session->step({});
  ASSERT_OK(st);
  EXPECT_DOUBLE_EQ(st->grad_norm, 5.0);
  auto after = session->snapshot();
  ASSERT_OK(after);
  EXPECT_NEAR(after->params.at("w").data<float>()[0], -0.6f, 1e-6);
  EXPECT_NEAR(after->params.at("w").data<float>()[1], -0.8f, 1e-6);
  EXPECT_EQ(after->step, 1);
  EXPECT_EQ(session->steps(), 1);
}

TEST(Training, MemoryReportSplitsGradAndOptimizerState) {
  Runtime rt(make_cpu_backend());
  train::SpiralsConfig c;
  auto model = train::build_spirals_mlp(c, c.batch);
  ASSERT_OK(model);
  auto tp = train::compile_training(rt, *model, {});
  ASSERT_OK(tp);
  const auto& m = tp->step->memory;
  const size_t param_bytes = m.naive[static_cast<size_t>(plan::MemClass::Param)];
  EXPECT_EQ(param_bytes, 512u + 256u + 768u + 64u);  // w1, b1, w2, b2, each 64-byte aligned
  // Gradients are planned temporaries, all live when grad_norm reads them.
  EXPECT_EQ(m.peak[static_cast<size_t>(plan::MemClass::Grad)], param_bytes);
  EXPECT_TRUE(tp->step->values[static_cast<size_t>(tp->step->graph.find("optim.grad_norm"))].in_arena);
  // adamw: m and v per param, plus the step counter (one aligned i64).
  EXPECT_EQ(m.peak[static_cast<size_t>(plan::MemClass::OptState)], 2 * param_bytes + 64u);
  EXPECT_GT(m.peak[static_cast<size_t>(plan::MemClass::Activation)], 0u);
  EXPECT_LT(m.peak_bytes, m.naive_bytes);
}

struct RunResult {
  train::TrainState state;
  std::vector<double> losses;
};

RunResult run_spirals(const train::SpiralsConfig& c, int64_t steps, uint64_t seed, optim::Kind kind = optim::Kind::AdamW) {
  Runtime rt(make_cpu_backend());
  train::TrainingOptions opts;
  opts.optimizer.kind = kind;
  opts.optimizer.lr = 1e-2;
  auto model = train::build_spirals_mlp(c, c.batch);
  auto tp = train::compile_training(rt, *model, opts);
  EXPECT_TRUE(tp.is_ok()) << tp.status().message();
  auto state = train::init_state(*tp, *init_params(*model, seed), seed);
  auto session = train::TrainSession::start(rt, *tp, *state);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  auto data = train::make_spirals(c, seed);
  RunResult r;
  for (int64_t s = 0; s < steps; ++s) {
    auto st = session->step(train::spirals_batch(c, data, seed, session->steps()));
    EXPECT_TRUE(st.is_ok()) << st.status().message();
    r.losses.push_back(st->loss);
  }
  r.state = std::move(*session->snapshot());
  return r;
}

TEST(Training, SpiralsLossFallsWellBelowTheStart) {
  for (const char* loss : {"ce", "mse"}) {
    train::SpiralsConfig c;
    c.loss = loss;
    RunResult r = run_spirals(c, 300, 1);
    double first = r.losses.front(), tail = 0;
    for (size_t i = r.losses.size() - 20; i < r.losses.size(); ++i) tail += r.losses[i] / 20;
    EXPECT_LT(tail, 0.3 * first) << loss << ": first " << first << ", mean of the last 20 " << tail;
  }
}

TEST(Training, SameSeedGivesByteIdenticalParamsAndLosses) {
  train::SpiralsConfig c;
  RunResult a = run_spirals(c, 50, 7), b = run_spirals(c, 50, 7), other = run_spirals(c, 50, 8);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(a.state.bitwise_equal(b.state));
  EXPECT_FALSE(a.state.bitwise_equal(other.state));
}

TEST(Training, ResumeFromACopiedStateContinuesBitForBit) {
  train::SpiralsConfig c;
  for (optim::Kind kind : {optim::Kind::AdamW, optim::Kind::Sgd}) {
    Runtime rt(make_cpu_backend());
    train::TrainingOptions opts;
    opts.optimizer.kind = kind;
    opts.optimizer.momentum = kind == optim::Kind::Sgd ? 0.9 : 0.0;
    opts.optimizer.lr = 1e-2;
    opts.schedule = {optim::Schedule::Kind::WarmupCosine, 5, 30, 1e-3};
    auto model = train::build_spirals_mlp(c, c.batch);
    auto tp = train::compile_training(rt, *model, opts);
    ASSERT_OK(tp);
    auto data = train::make_spirals(c, 3);
    auto init = train::init_state(*tp, *init_params(*model, 3), 3);
    ASSERT_OK(init);
    auto straight = train::TrainSession::start(rt, *tp, *init);
    ASSERT_OK(straight);
    std::optional<train::TrainState> saved;
    std::vector<double> tail_straight, tail_resumed;
    for (int s = 0; s < 30; ++s) {
      if (s == 12) saved = *straight->snapshot();  // read back from the backend, as a checkpoint is
      auto st = straight->step(train::spirals_batch(c, data, straight->seed(), straight->steps()));
      ASSERT_OK(st);
      if (s >= 12) tail_straight.push_back(st->loss);
    }
    // A fresh runtime, as after a restart, continues from the copy.
    Runtime rt2(make_cpu_backend());
    auto tp2 = train::compile_training(rt2, *model, opts);
    ASSERT_OK(tp2);
    EXPECT_EQ(saved->step, 12);
    auto resumed = train::TrainSession::start(rt2, *tp2, *saved);
    ASSERT_OK(resumed);
    while (resumed->steps() < 30) {
      auto st = resumed->step(train::spirals_batch(c, data, resumed->seed(), resumed->steps()));
      ASSERT_OK(st);
      tail_resumed.push_back(st->loss);
    }
    EXPECT_EQ(tail_straight, tail_resumed);
    EXPECT_TRUE(resumed->snapshot()->bitwise_equal(*straight->snapshot())) << optim::kind_name(kind);
  }
}

// On a backend whose memory is a device's, the state is uploaded once when the session starts;
// a step moves only the batch and the learning rate up and the loss, norm and step count down:
// no gradient, param or optimizer-state bytes cross. Checkpoint reads come back exact.
TEST(Training, DeviceStepsMoveOnlyTheBatchAndTheScalars) {
  auto owned = std::make_unique<test::CpuVariant>(test::CpuVariant::kDevice);
  Runtime rt(std::move(owned));
  train::SpiralsConfig c;
  auto model = train::build_spirals_mlp(c, c.batch);
  ASSERT_OK(model);
  train::TrainingOptions opts;
  opts.optimizer.clip_norm = 1.0;
  auto tp = train::compile_training(rt, *model, opts);
  ASSERT_OK(tp);
  auto init = train::init_state(*tp, *init_params(*model, 4), 4);
  ASSERT_OK(init);
  auto session = train::TrainSession::start(rt, *tp, *init);
  ASSERT_OK(session);
  size_t param_bytes = 0;
  for (const auto& [name, t] : init->params) param_bytes += t.bytes();
  const size_t state_bytes = 3 * param_bytes + 8;  // params, m and v, the step counter
  EXPECT_EQ(session->state().uploaded_bytes(), state_bytes);
  EXPECT_EQ(session->state().bytes(plan::MemClass::Param), param_bytes);
  EXPECT_EQ(session->state().bytes(plan::MemClass::OptState), 2 * param_bytes + 8);
  const auto data = train::make_spirals(c, 4);
  Bindings batch = train::spirals_batch(c, data, 4, 0);
  const size_t batch_bytes = batch.at("x").bytes() + batch.at("labels").bytes();
  ASSERT_OK(session->step(batch));  // the first run uploads nothing else either (no constants here)
  const TransferStats before = rt.transfers();
  for (int s = 1; s < 4; ++s) ASSERT_OK(session->step(train::spirals_batch(c, data, 4, session->steps())));
  EXPECT_EQ(rt.transfers().h2d_bytes - before.h2d_bytes, 3 * (batch_bytes + 8));
  EXPECT_EQ(rt.transfers().d2h_bytes - before.d2h_bytes, 3u * (4 + 8 + 8));
  EXPECT_EQ(rt.transfers().param_uploads, before.param_uploads);
  EXPECT_EQ(session->state().uploaded_bytes(), state_bytes);
  // The same steps on the CPU give the same bytes.
  Runtime cpu(make_cpu_backend());
  auto tp_cpu = train::compile_training(cpu, *model, opts);
  ASSERT_OK(tp_cpu);
  auto host = train::TrainSession::start(cpu, *tp_cpu, *init);
  ASSERT_OK(host);
  for (int s = 0; s < 4; ++s) ASSERT_OK(host->step(train::spirals_batch(c, data, 4, host->steps())));
  EXPECT_TRUE(session->snapshot()->bitwise_equal(*host->snapshot()));
}

// State that does not fit the plan is an error naming the tensor.
TEST(Training, StateThatDoesNotFitThePlanIsAClearError) {
  Runtime rt(make_cpu_backend());
  train::SpiralsConfig c;
  auto model = train::build_spirals_mlp(c, c.batch);
  ASSERT_OK(model);
  auto tp = train::compile_training(rt, *model, {});
  ASSERT_OK(tp);
  auto init = train::init_state(*tp, *init_params(*model, 1), 1);
  ASSERT_OK(init);
  train::TrainState wrong = init->clone();
  wrong.params["w1"] = Tensor::zeros(DType::f32, {3, 3});
  EXPECT_ERROR_CONTAINS(train::TrainSession::start(rt, *tp, wrong), "param 'w1' is f32[2,64] in the model but f32[3,3] in the state");
  wrong = init->clone();
  wrong.slots["b1"].pop_back();
  EXPECT_ERROR_CONTAINS(train::TrainSession::start(rt, *tp, wrong), "param 'b1' has 1 optimizer state tensors, adamw keeps 2");
  wrong = init->clone();
  wrong.slots["w2"][1] = Tensor::zeros(DType::i32, {64, 3});
  EXPECT_ERROR_CONTAINS(train::TrainSession::start(rt, *tp, wrong), "optimizer state 'optim.v.w2' is i32[64,3]");
  wrong = init->clone();
  wrong.params["extra"] = Tensor::zeros(DType::f32, {1});
  EXPECT_ERROR_CONTAINS(train::TrainSession::start(rt, *tp, wrong), "param 'extra' is not a param of the model");
  // A state on another backend cannot be bound.
  Runtime other(make_cpu_backend());
  auto session = train::TrainSession::start(rt, *tp, *init);
  ASSERT_OK(session);
  auto eval = other.compile(*model);
  ASSERT_OK(eval);
  const auto data = train::make_spirals(c, 1);
  EXPECT_ERROR_CONTAINS(other.run(**eval, train::spirals_batch(c, data, 1, 0), &session->state()), "another backend");
}

TEST(Training, BadInputsAreClearErrors) {
  Runtime rt(make_cpu_backend());
  train::SpiralsConfig c;
  auto model = train::build_spirals_mlp(c, c.batch);
  ASSERT_OK(model);
  // A loss that is not a scalar.
  train::TrainingOptions logits_loss;
  logits_loss.loss = "logits";
  EXPECT_ERROR_CONTAINS(train::compile_training(rt, *model, logits_loss), "the loss must be a scalar f32[] but 'logits' is f32[64,3]");
  // A learning rate that is not finite.
  train::TrainingOptions inf_lr;
  inf_lr.optimizer.lr = std::numeric_limits<double>::infinity();
  EXPECT_ERROR_CONTAINS(train::compile_training(rt, *model, inf_lr), "learning rate must be finite");

  auto tp = train::compile_training(rt, *model, {});
  ASSERT_OK(tp);
  auto init = train::init_state(*tp, *init_params(*model, 1), 1);
  ASSERT_OK(init);
  auto state = train::TrainSession::start(rt, *tp, *init);
  ASSERT_OK(state);
  auto data = train::make_spirals(c, 1);
  // Out-of-range class ids.
  Bindings batch = train::spirals_batch(c, data, 1, 0);
  batch.at("labels").data<int32_t>()[5] = 3;
  EXPECT_ERROR_CONTAINS(state->step(batch), "target 3 at flat position 5 is outside [0, 3)");
  // Targets with the wrong shape.
  batch = train::spirals_batch(c, data, 1, 0);
  batch["labels"] = Tensor::zeros(DType::i32, {63});
  EXPECT_ERROR_CONTAINS(state->step(batch), "'labels' is declared i32[64] but bound to i32[63]");
  // NaN in the data stops at once under fail-fast, and names where.
  batch = train::spirals_batch(c, data, 1, 0);
  batch.at("x").data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  rt.set_numerics(NumericsPolicy::FailFast);
  EXPECT_ERROR_CONTAINS(state->step(batch), "input 'x' has nan at element 7 of f32[64,2]");
  EXPECT_EQ(state->steps(), 0);
  // With check, the step runs and the report names the first non-finite value.
  rt.set_numerics(NumericsPolicy::Check);
  ASSERT_OK(state->step(batch));
  EXPECT_GT(rt.numerics_report().nonfinite_values, 0);
  EXPECT_NE(rt.numerics_report().first.find("input 'x' has nan"), std::string::npos);
  // A missing initial value.
  EXPECT_ERROR_CONTAINS(train::init_state(*tp, {}, 0), "trainable param 'w1' has no initial value");
}

TEST(Training, FailFastNamesTheFirstOpThatProducedANonFiniteValue) {
  ModelBuilder b("nan");
  Value x = b.input("x", {DType::f32, {4}});
  Value w = b.param("w", {DType::f32, {4}}, ParamInit::ones());
  Value l = b.log(b.mul(x, w, "xw"), "logx");  // log of a negative number
  b.output(b.reduce_sum(l, {0}, false, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  Runtime rt(make_cpu_backend());
  rt.set_numerics(NumericsPolicy::FailFast);
  auto tp = train::compile_training(rt, *g, {});
  ASSERT_OK(tp);
  auto init = train::init_state(*tp, *init_params(*g, 0), 0);
  ASSERT_OK(init);
  auto session = train::TrainSession::start(rt, *tp, *init);
  ASSERT_OK(session);
  EXPECT_ERROR_CONTAINS(session->step({{"x", Tensor::from_f32({4}, {1, 2, -3, 4})}}),
                        "[log] (node 'logx') output has nan at element 2 of f32[4]");
}

}  // namespace
}  // namespace volta
