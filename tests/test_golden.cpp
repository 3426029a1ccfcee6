// TinyLM against an independent PyTorch implementation (llm.c's test_gpt2 in spirit): the
// reference files tests/golden/tinylm_golden.safetensors (gpt) and
// tinylm_llama_golden.safetensors (llama) are written by scripts/make_tinylm_golden.py. Logits, loss, every parameter gradient and a 10-step AdamW
// loss curve must match on every backend that is available.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "model/tinylm.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/checkpoint.h"
#include "volta/train.h"

namespace volta {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(double(a.data<float>()[i])));
  return m;
}

void check_golden(const char* path) {
  auto file = io::load_checkpoint(test::source_path(path));
  ASSERT_OK(file);
  auto meta = nlohmann::json::parse(file->metadata.at("golden"));
  ASSERT_EQ(meta["magic"], "tinylm-golden");
  ASSERT_EQ(meta["version"], 1);
  auto config = model::config_from_json(meta["config"].dump());
  ASSERT_OK(config);
  const int64_t B = meta["batch"].get<int64_t>(), T = config->context;
  auto base = model::build_tinylm_loss(*config, B, T);
  ASSERT_OK(base);
  ir::Graph g = *base;
  g.outputs.push_back(g.find("logits"));  // outputs: loss, logits

  Bindings values{{"tokens", file->tensors.at("tokens")}, {"targets", file->tensors.at("targets")}};
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Param) values.emplace(n.name, file->tensors.at(n.name).clone());

  for (DeviceKind device : {DeviceKind::Cpu, DeviceKind::Cuda}) {
    auto backend = select_backend(device);
    if (!backend.is_ok()) {
      std::printf("golden: %s backend not available here (%s)\n", device_name(device), backend.status().message().c_str());
      continue;
    }
    Runtime rt(std::move(*backend));
    auto fwd = rt.compile(g);
    ASSERT_OK(fwd);
    auto out = rt.run(**fwd, values);
    ASSERT_OK(out);
    const double dloss = std::fabs((*out)[0].data<float>()[0] - meta["loss"].get<double>());
    const double dlogits = max_abs_diff((*out)[1], file->tensors.at("logits"));
    std::printf("golden [%s] loss diff %.3g, logits max diff %.3g\n", rt.backend().name().c_str(), dloss, dlogits);
    EXPECT_LT(dloss, 2e-5);
    EXPECT_LT(dlogits, 1e-4);

    auto gg = autograd::build_backward(*base);
    ASSERT_OK(gg);
    auto train = rt.compile(gg->graph);
    ASSERT_OK(train);
    auto grads = rt.run(**train, values);
    ASSERT_OK(grads);
    for (size_t i = 0; i < gg->params.size(); ++i) {
      const Tensor& want = file->tensors.at("grad." + gg->params[i]);
      const double diff = max_abs_diff((*grads)[i + 1], want);
      std::printf("golden [%s] grad.%-18s max diff %.3g (max |grad| %.3g)\n", rt.backend().name().c_str(), gg->params[i].c_str(),
                  diff, max_abs(want));
      EXPECT_LT(diff, 1e-5 + 1e-4 * max_abs(want)) << gg->params[i];
    }

    // 10 AdamW steps on the same batch.
    const auto& adamw = meta["adamw"];
    train::TrainingOptions opts;
    opts.optimizer.kind = optim::Kind::AdamW;
    opts.optimizer.lr = adamw["lr"].get<double>();
    opts.optimizer.beta1 = adamw["beta1"].get<double>();
    opts.optimizer.beta2 = adamw["beta2"].get<double>();
    opts.optimizer.eps = adamw["eps"].get<double>();
    opts.optimizer.weight_decay = adamw["weight_decay"].get<double>();
    opts.optimizer.decay_matrices_only = true;
    opts.optimizer.clip_norm = adamw["clip_norm"].get<double>();
    auto tp = train::compile_training(rt, *base, opts);
    ASSERT_OK(tp);
    Bindings params;
    for (const std::string& name : tp->params) params.emplace(name, values.at(name).clone());
    auto state = train::init_state(*tp, params, 0);
    ASSERT_OK(state);
    auto session = train::TrainSession::start(rt, *tp, *state);
    ASSERT_OK(session);
    const Bindings batch{{"tokens", file->tensors.at("tokens")}, {"targets", file->tensors.at("targets")}};
    double worst = 0;
    for (size_t s = 0; s < meta["losses"].size(); ++s) {
      auto st = session->step(batch);
      ASSERT_OK(st);
      const double diff = std::fabs(st->loss - meta["losses"][s].get<double>());
      worst = std::max(worst, diff);
      EXPECT_LT(diff, 1e-4) << "step " << s + 1;
    }
    std::printf("golden [%s] 10 AdamW steps: loss %.5f -> %.5f, max diff %.3g\n", rt.backend().name().c_str(),
                meta["losses"][0].get<double>(), meta["losses"].back().get<double>(), worst);
  }
}

TEST(Golden, TinyLMMatchesPyTorch) { check_golden("tests/golden/tinylm_golden.safetensors"); }

// RMSNorm, rope, grouped-query attention, SwiGLU and an untied head.
TEST(Golden, TinyLMLlamaMatchesPyTorch) { check_golden("tests/golden/tinylm_llama_golden.safetensors"); }

}  // namespace
}  // namespace volta
