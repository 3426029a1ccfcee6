// ONNX export: every exportable op round-trips (export, ONNX's checker, import, run) to the
// values of the original graph; a TinyLM checkpoint exported by the CLI and run by `volta run`
// gives the checkpoint's logits; what cannot be exported fails naming the node.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/tinylm.h"
#include "test_util.h"
#include "train/lm.h"
#include "volta/builder.h"
#include "volta/checkpoint.h"
#include "volta/onnx.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {
namespace {

using ir::Op;

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

Result<std::vector<Tensor>> run_graph(const ir::Graph& g, const Bindings& b) {
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(g));
  return rt.run(*plan, b);
}

// Largest |a - b| / (1 + |b|) over two tensors of one type; +inf on a type mismatch.
double max_rel(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x, y;
    switch (a.dtype()) {
      case DType::f32: x = a.data<float>()[i], y = b.data<float>()[i]; break;
      case DType::i32: x = a.data<int32_t>()[i], y = b.data<int32_t>()[i]; break;
      default: x = static_cast<double>(a.data<int64_t>()[i]), y = static_cast<double>(b.data<int64_t>()[i]); break;
    }
    if (std::isinf(x) && x == y) continue;
    worst = std::max(worst, std::isnan(x) != std::isnan(y) ? INFINITY : std::isnan(x) ? 0.0 : std::fabs(x - y) / (1 + std::fabs(y)));
  }
  return worst;
}

// Exports `g` with `params`, imports the bytes back and checks both graphs give the same
// outputs on `inputs` (and that the imported model declares the same inputs and outputs).
void expect_round_trip(const std::string& label, const ir::Graph& g, const Bindings& params, const Bindings& inputs,
                       double tol = 1e-6) {
  SCOPED_TRACE(label);
  auto bytes = onnx::export_model(g, params);
  ASSERT_OK(bytes);
  auto m = onnx::import_model(*bytes, label);
  ASSERT_OK(m);
  Bindings all = params;
  all.insert(inputs.begin(), inputs.end());
  auto want = run_graph(g, all);
  ASSERT_OK(want);
  Bindings in2;
  for (const onnx::IoValue& io : m->inputs) {
    ASSERT_TRUE(inputs.count(io.name)) << "unexpected input " << io.name;
    in2[io.name] = inputs.at(io.name);
  }
  EXPECT_EQ(m->inputs.size(), inputs.size());
  auto got = run_graph(m->graph, in2);
  ASSERT_OK(got);
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < want->size(); ++k) {
    EXPECT_EQ(m->outputs[k].name, g.node(g.outputs[k]).name);
    EXPECT_LE(max_rel((*got)[k], (*want)[k]), tol) << "output " << k << " " << (*want)[k].type().to_string();
  }
}

Tensor normal(Shape s, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::f32, std::move(s));
  fill_normal(t, seed, 0, 0.0f, 1.0f);
  return t;
}

struct OpCase {
  const char* label;
  std::function<Value(ModelBuilder&, Value x)> body;  // x: input "x" f32[2, 3, 4, 5]
  double tol = 1e-6;
};

TEST(OnnxExport, EveryForwardOpRoundTrips) {
  if (!onnx::available()) GTEST_SKIP();
  auto attrs_op = [](Op op, ir::Attrs a = {}) { return [op, a](ModelBuilder& b, Value x) { return b.op(op, {x}, a); }; };
  auto binary = [](Op op) {
    return [op](ModelBuilder& b, Value x) { return b.op(op, {x, b.param("w", f32({4, 5}), ParamInit::normal(1.0))}); };
  };
  const std::vector<OpCase> cases = {
      {"matmul", [](ModelBuilder& b, Value x) { return b.matmul(x, b.param("w", f32({5, 6}), ParamInit::normal(1.0))); }},
      {"matmul transposes",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Matmul, {x, b.param("w", f32({3, 6, 4}), ParamInit::normal(1.0))}, {{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{1}}});
       }},
      {"matmul bias gelu",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Matmul, {x, b.param("w", f32({5, 6}), ParamInit::normal(1.0)), b.param("bias", f32({6}), ParamInit::normal(1.0))},
                     {{"activation", std::string("gelu")}});
       }, 1e-5},
      {"matmul relu", [](ModelBuilder& b, Value x) { return b.op(Op::Matmul, {x, b.param("w", f32({6, 5}), ParamInit::normal(1.0))}, {{"transpose_b", int64_t{1}}, {"activation", std::string("relu")}}); }},
      {"add", binary(Op::Add)}, {"sub", binary(Op::Sub)}, {"mul", binary(Op::Mul)}, {"div", binary(Op::Div)},
      {"pow", [](ModelBuilder& b, Value x) { return b.op(Op::Pow, {b.op(Op::Abs, {x}), b.constant("e", Tensor::from_f32({}, {1.5f}))}); }},
      {"neg", attrs_op(Op::Neg)}, {"exp", attrs_op(Op::Exp)}, {"tanh", attrs_op(Op::Tanh)}, {"relu", attrs_op(Op::Relu)},
      {"sigmoid", attrs_op(Op::Sigmoid)}, {"erf", attrs_op(Op::Erf)}, {"abs", attrs_op(Op::Abs)}, {"sign", attrs_op(Op::Sign)},
      {"log sqrt", [](ModelBuilder& b, Value x) { return b.op(Op::Log, {b.op(Op::Sqrt, {b.op(Op::Exp, {x})})}); }},
      {"gelu", attrs_op(Op::Gelu), 1e-5},
      {"gelu tanh", attrs_op(Op::Gelu, {{"approximate", std::string("tanh")}}), 1e-5},
      {"silu", attrs_op(Op::Silu), 1e-6},
      {"clip", attrs_op(Op::Clip, {{"min", -0.5}, {"max", 0.25}})},
      {"clip min only", attrs_op(Op::Clip, {{"min", -0.5}})},
      {"leaky_relu", attrs_op(Op::LeakyRelu, {{"alpha", 0.2}})},
      {"cast", [](ModelBuilder& b, Value x) { return b.op(Op::Cast, {b.op(Op::Cast, {x}, {{"to", std::string("i32")}})}, {{"to", std::string("f32")}}); }},
      {"softmax", attrs_op(Op::Softmax, {{"axis", int64_t{1}}})},
      {"softmax scale causal", attrs_op(Op::Softmax, {{"axis", int64_t{-1}}, {"scale", 0.5}, {"causal_offset", int64_t{1}}})},
      {"log_softmax", attrs_op(Op::LogSoftmax, {{"axis", int64_t{-1}}})},
      {"attention",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Attention, {x, b.param("k", f32({2, 3, 6, 5}), ParamInit::normal(1.0)), b.param("v", f32({2, 3, 6, 7}), ParamInit::normal(1.0))},
                     {{"scale", 0.5}});
       }, 1e-5},
      {"attention grouped queries causal",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Attention, {x, b.param("k", f32({2, 1, 6, 5}), ParamInit::normal(1.0)), b.param("v", f32({2, 1, 6, 7}), ParamInit::normal(1.0))},
                     {{"scale", 0.5}, {"causal_offset", int64_t{2}}});
       }, 1e-5},
      {"rope",
       [](ModelBuilder& b, Value x) {
         return b.rope(b.transpose(x, {0, 1, 3, 2}), b.constant("cos", rope_table(9, 4, 100.0, false)),
                       b.constant("sin", rope_table(9, 4, 100.0, true)));
       }},
      {"swiglu", [](ModelBuilder& b, Value x) { return b.op(Op::Swiglu, {b.reshape(x, {2, 3, 20})}); }, 1e-6},
      {"attention mask nan guard",  // row 0 of batch 1 has every key masked: zeros, not nan
       [](ModelBuilder& b, Value x) {
         const float ninf = -std::numeric_limits<float>::infinity();
         std::vector<float> m(2 * 4 * 6, 0.0f);
         for (size_t i = 0; i < m.size(); ++i) m[i] = i % 5 == 1 || (i >= 24 && i < 30) ? ninf : i % 7 == 0 ? -2.0f : 0.0f;
         return b.op(Op::Attention, {x, b.param("k", f32({2, 3, 6, 5}), ParamInit::normal(1.0)), b.param("v", f32({2, 3, 6, 7}), ParamInit::normal(1.0)),
                                     b.constant("mask", Tensor::from_f32({2, 1, 4, 6}, m))},
                     {{"scale", 0.5}, {"zero_nan_probs", int64_t{1}}});
       }, 1e-5},
      {"attention two blocks causal",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Attention, {x, b.param("k", f32({2, 3, 2, 5}), ParamInit::normal(1.0)), b.param("v", f32({2, 3, 2, 3}), ParamInit::normal(1.0)),
                                     b.param("k2", f32({2, 3, 4, 5}), ParamInit::normal(1.0)), b.param("v2", f32({2, 3, 4, 3}), ParamInit::normal(1.0))},
                     {{"scale", 0.25}, {"causal_offset", int64_t{1}}});
       }, 1e-5},
      {"attention prefix",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Attention, {x, b.param("k", f32({2, 3, 8, 5}), ParamInit::normal(1.0)), b.param("v", f32({2, 3, 8, 3}), ParamInit::normal(1.0)),
                                     b.param("k2", f32({2, 3, 1, 5}), ParamInit::normal(1.0)), b.param("v2", f32({2, 3, 1, 3}), ParamInit::normal(1.0))},
                     {{"causal_offset", int64_t{2}}, {"prefix", int64_t{3}}});
       }, 1e-5},
      {"layer_norm",
       [](ModelBuilder& b, Value x) {
         return b.layer_norm(x, b.param("g", f32({5}), ParamInit::normal(1.0)), b.param("beta", f32({5}), ParamInit::normal(1.0)), 1e-3);
       }},
      {"layer_norm no bias", [](ModelBuilder& b, Value x) { return b.layer_norm(x, b.param("g", f32({5}), ParamInit::normal(1.0)), 1e-5); }},
      {"rms_norm", [](ModelBuilder& b, Value x) { return b.op(Op::RmsNorm, {x, b.param("g", f32({5}), ParamInit::normal(1.0))}, {{"eps", 1e-4}}); }, 1e-5},
      {"embedding",
       [](ModelBuilder& b, Value x) {
         return b.add(b.embedding(b.param("table", f32({7, 5}), ParamInit::normal(1.0)), b.constant("ids", Tensor::from_i32({4}, {6, 0, 3, 3}))), x);
       }},
      {"gather", [](ModelBuilder& b, Value x) { return b.op(Op::Gather, {x, b.constant("idx", Tensor::from_i64({2, 2}, {0, -1, 2, 0}))}, {{"axis", int64_t{2}}}); }},
      {"reshape", [](ModelBuilder& b, Value x) { return b.reshape(x, {6, 20}); }},
      {"transpose", [](ModelBuilder& b, Value x) { return b.transpose(x, {3, 0, 2, 1}); }},
      {"slice", [](ModelBuilder& b, Value x) { return b.slice(x, -2, 1, 3); }},
      {"concat", [](ModelBuilder& b, Value x) { return b.concat({x, b.op(Op::Neg, {x}), x}, 3); }},
      {"trilu", attrs_op(Op::Trilu, {{"upper", int64_t{0}}, {"k", int64_t{-1}}})},
      {"conv2d",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Conv2d, {x, b.param("w", f32({4, 3, 2, 3}), ParamInit::normal(1.0)), b.param("bias", f32({4}), ParamInit::normal(1.0))},
                     {{"strides", std::vector<int64_t>{1, 2}}, {"pads", std::vector<int64_t>{1, 0, 1, 1}}, {"dilations", std::vector<int64_t>{1, 1}}});
       }, 1e-5},
      {"conv2d groups",
       [](ModelBuilder& b, Value x) {
         return b.op(Op::Conv2d, {b.concat({x, x}, 1), b.param("w", f32({2, 3, 2, 2}), ParamInit::normal(1.0))},
                     {{"groups", int64_t{2}}, {"dilations", std::vector<int64_t>{2, 1}}});
       }, 1e-5},
      {"max_pool", attrs_op(Op::MaxPool, {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 1}}, {"ceil_mode", int64_t{1}}})},
      {"max_pool indices", attrs_op(Op::MaxPool, {{"kernel", std::vector<int64_t>{2, 3}}, {"pads", std::vector<int64_t>{1, 1, 0, 1}}, {"indices", int64_t{1}}})},
      {"integer math",  // x * 1000 as i32: wrapping products, truncating division, powers, back to f32
       [](ModelBuilder& b, Value x) {
         Value i = b.op(Op::Cast, {b.mul(x, b.scalar(1000.0f))}, {{"to", std::string("i32")}});
         Value seven = b.constant("seven", Tensor::from_i32({}, {7}));
         Value three = b.constant("three", Tensor::from_i32({}, {3}));
         Value v = b.op(Op::Div, {b.op(Op::Mul, {i, i}), seven});
         v = b.op(Op::Sub, {b.op(Op::Pow, {b.op(Op::Abs, {i}), three}), b.op(Op::Neg, {v})});
         return b.op(Op::Cast, {b.op(Op::Add, {v, b.op(Op::Sign, {i})})}, {{"to", std::string("f32")}});
       }},
      {"avg_pool",
       attrs_op(Op::AvgPool, {{"kernel", std::vector<int64_t>{3, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 0}}, {"count_include_pad", int64_t{0}}})},
      {"avg_pool include pad", attrs_op(Op::AvgPool, {{"kernel", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}})},
      {"reduce_sum", attrs_op(Op::ReduceSum, {{"axes", std::vector<int64_t>{1, -1}}, {"keepdims", int64_t{0}}})},
      {"reduce_mean", attrs_op(Op::ReduceMean, {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{1}}})},
      {"reduce_max", attrs_op(Op::ReduceMax, {{"axes", std::vector<int64_t>{0, 3}}})},
      {"where equal",
       [](ModelBuilder& b, Value x) {
         Value r = b.op(Op::Relu, {x});
         Value eq = b.op(Op::Equal, {r, b.constant("zero", Tensor::from_f32({}, {0.0f}))});
         return b.op(Op::Where, {eq, b.op(Op::Neg, {x}), x});
       }},
      {"causal_mask", attrs_op(Op::CausalMask, {{"offset", int64_t{0}}, {"value", -1e9}})},
      {"broadcast", [](ModelBuilder& b, Value x) { return b.op(Op::Broadcast, {b.slice(x, 0, 0, 1)}, {{"shape", std::vector<int64_t>{3, 2, 3, 4, 5}}}); }},
      {"pad", attrs_op(Op::Pad, {{"axis", int64_t{-2}}, {"before", int64_t{2}}, {"after", int64_t{1}}})},
  };
  for (const OpCase& c : cases) {
    ModelBuilder b(c.label);
    Value x = b.input("x", f32({2, 3, 4, 5}));
    b.output(c.body(b, x));
    auto g = b.build();
    ASSERT_TRUE(g.is_ok()) << c.label << ": " << g.status().message();
    auto params = init_params(*g, 3);
    ASSERT_OK(params);
    expect_round_trip(c.label, *g, *params, {{"x", normal({2, 3, 4, 5}, 7)}}, c.tol);
  }
}

TEST(OnnxExport, OutputsThatAreLeavesOrRepeatedGetTheirOwnNames) {
  if (!onnx::available()) GTEST_SKIP();
  ModelBuilder b("outs");
  Value x = b.input("x", f32({2, 3}));
  Value w = b.param("w", f32({3}), ParamInit::normal(1.0));
  Value y = b.add(x, w, "y");
  b.output(y);
  b.output(y);
  b.output(x);
  b.output(w);
  auto g = b.build();
  ASSERT_OK(g);
  auto params = init_params(*g, 1);
  ASSERT_OK(params);
  auto bytes = onnx::export_model(*g, *params);
  ASSERT_OK(bytes);
  auto m = onnx::import_model(*bytes, "outs");
  ASSERT_OK(m);
  ASSERT_EQ(m->outputs.size(), 4u);
  EXPECT_EQ(m->outputs[0].name, "y");
  EXPECT_EQ(m->outputs[1].name, "y_out");
  EXPECT_EQ(m->outputs[2].name, "x_out");
  EXPECT_EQ(m->outputs[3].name, "w_out");
}

TEST(OnnxExport, RefusesWhatHasNoInferenceMeaning) {
  if (!onnx::available()) GTEST_SKIP();
  {
    ModelBuilder b;
    Value logits = b.input("logits", f32({4, 3}));
    b.output(b.cross_entropy(logits, b.input("t", {DType::i32, {4}}), "loss"));
    EXPECT_ERROR_CONTAINS(onnx::export_model(*b.build(), {}), "cross_entropy node 'loss': losses are not exported");
  }
  {
    ModelBuilder b;
    Value x = b.input("x", f32({4, 3}));
    b.output(b.op(Op::ReluGrad, {x, x}, {}, "rg"));
    EXPECT_ERROR_CONTAINS(onnx::export_model(*b.build(), {}), "relu_grad node 'rg': a training-only op has no ONNX export");
  }
  {
    ModelBuilder b;
    Value q = b.input("q", f32({1, 1, 4}));
    Value kc = b.input("kc", f32({1, 5, 4}));
    b.output(b.op(Op::Attention, {q, kc, kc, b.input("n", {DType::i32, {1}})}, {}, "att"));
    EXPECT_ERROR_CONTAINS(onnx::export_model(*b.build(), {}), "attention node 'att': a run-time position");
  }
  {
    ModelBuilder b;
    b.output(b.add(b.input("x", f32({3})), b.param("w", f32({3})), "y"));
    auto g = b.build();
    EXPECT_ERROR_CONTAINS(onnx::export_model(*g, {}), "param node 'w': the param has no value");
    EXPECT_ERROR_CONTAINS(onnx::export_model(*g, {{"w", Tensor::zeros(DType::f32, {4})}}),
                          "param node 'w': the value is f32[4] but the graph declares f32[3]");
  }
}

// The CLI path: `volta export` a TinyLM checkpoint, then `volta run` the file on tokens; the
// logits match the checkpoint's own graph, and the file carries the tokenizer.
TEST(OnnxExport, TinyLMCheckpointRoundTripsThroughTheCli) {
  if (!onnx::available()) GTEST_SKIP();
  const std::string dir = ::testing::TempDir() + "onnx_export_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string out, err;
  const std::string volta = std::string(VOLTA_CLI_PATH);
  train::LMCheckpoint ck;
  ck.recipe = train::shakespeare_char();
  ck.tokenizer = train::CharTokenizer::from_text("abcdefghij\n");
  model::TinyLMConfig llama{11, 8, 2, 4, 16, false};  // rope, grouped-query attention, swiglu, untied head
  llama.arch = model::Arch::Llama;
  llama.kv_heads = 2;
  llama.ffn = 24;
  for (const model::TinyLMConfig& config : {model::TinyLMConfig{11, 8, 2, 2, 16, true}, llama}) {
    SCOPED_TRACE(model::arch_name(config.arch));
    ck.recipe.model = config;
    ck.state = {};
    auto lg = model::build_tinylm_loss(ck.recipe.model, 1, 8);
    ASSERT_OK(lg);
    auto params = init_params(*lg, 5);
    ASSERT_OK(params);
    ck.state.params = *params;
    for (auto& [name, t] : ck.state.params)  // non-trivial LayerNorm gains and biases
      if (name.find(".g") != std::string::npos || name.find(".b") != std::string::npos) fill_normal(t, 9, 0, 0.5f, 0.3f);
    for (const auto& [name, t] : ck.state.params) ck.state.slots[name] = {Tensor::zeros(DType::f32, t.shape()), Tensor::zeros(DType::f32, t.shape())};
    ASSERT_OK(io::save_checkpoint(train::to_checkpoint(ck), dir + "/ck.safetensors"));

    ASSERT_EQ(test::run_command(volta + " export --checkpoint " + dir + "/ck.safetensors --onnx " + dir + "/m.onnx --batch 2 --seq 6", &out, &err), 0)
        << err;
    EXPECT_NE(out.find("tokens int32 [2, 6] -> logits [2, 6, 11]"), std::string::npos) << out;

    Tensor tokens = Tensor::from_i32({2, 6}, {1, 5, 10, 0, 3, 3, 9, 8, 7, 2, 2, 4});
    auto npy = onnx::serialize_npy(tokens, onnx::ElemType::kInt32);
    ASSERT_OK(npy);
    std::ofstream(dir + "/tokens.npy", std::ios::binary) << *npy;
    ASSERT_EQ(test::run_command(volta + " run " + dir + "/m.onnx --input tokens=" + dir + "/tokens.npy --output " + dir + "/out", &out, &err), 0)
        << err;
    auto logits = onnx::read_tensor_file(dir + "/out/logits.npy");
    ASSERT_OK(logits);

    auto g = model::build_tinylm_logits(ck.recipe.model, 2, 6);
    ASSERT_OK(g);
    Bindings b = ck.state.params;
    b["tokens"] = tokens;
    auto want = run_graph(*g, b);
    ASSERT_OK(want);
    ASSERT_EQ(logits->tensor.type(), (*want)[0].type());
    EXPECT_LE(max_rel(logits->tensor, (*want)[0]), 1e-5);
  }

  // The metadata carries what a tokenizer-aware runner needs.
  auto info = onnx::read_model_info(test::read_file(dir + "/m.onnx"), "m.onnx");
  ASSERT_OK(info);
  EXPECT_EQ(info->opset, onnx::kExportOpset);
  EXPECT_NE(test::read_file(dir + "/m.onnx").find(ck.tokenizer.to_json()), std::string::npos);

  // Bad flags are one-line errors.
  EXPECT_NE(test::run_command(volta + " export --checkpoint " + dir + "/ck.safetensors --onnx " + dir + "/x.onnx --seq 9", &out, &err), 0);
  EXPECT_NE(err.find("--seq must be in [1, 8]"), std::string::npos) << err;
  EXPECT_NE(test::run_command(volta + " export --checkpoint " + dir + "/ck.safetensors --onnx " + dir + "/x.onnx --seq 0", &out, &err), 0);
  EXPECT_NE(err.find("--seq must be in [1, 8] (the model's context), got 0"), std::string::npos) << err;
  EXPECT_NE(test::run_command(volta + " export --checkpoint " + dir + "/missing --onnx " + dir + "/x.onnx", &out, &err), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.onnx"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace volta
