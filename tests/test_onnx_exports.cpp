// Real exporter output (tests/data/onnx/exports/, made by scripts/make_onnx_exports.py): small
// BERT and GPT-2 models with random weights exported by transformers + torch.onnx (TorchScript
// at opsets 14 and 17, dynamo at opset 18, static and dynamic axes) import without surgery and
// match PyTorch's outputs; dynamic axes bind per shape, each shape imported and planned once.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cli_util.h"
#include "test_util.h"
#include "volta/onnx.h"
#include "volta/runtime.h"

namespace volta {
namespace {

namespace fs = std::filesystem;

const fs::path kExports = fs::path(VOLTA_SOURCE_DIR) / "tests/data/onnx/exports";

// PyTorch and Volta both compute in f32; their reduction orders differ.
constexpr double kAtol = 1e-5, kRtol = 1e-4;

struct Set {
  std::map<std::string, onnx::TypedTensor> inputs;  // in_K_NAME.npy
  Tensor expected;                                  // out_K.npy
};

std::vector<Set> sets_of(const fs::path& dir) {
  std::vector<Set> sets;
  for (int k = 0;; ++k) {
    const fs::path out = dir / ("out_" + std::to_string(k) + ".npy");
    if (!fs::exists(out)) break;
    Set s;
    auto e = onnx::read_tensor_file(out.string());
    EXPECT_TRUE(e.is_ok()) << out;
    if (!e.is_ok()) break;
    s.expected = e->tensor;
    const std::string prefix = "in_" + std::to_string(k) + "_";
    for (const auto& f : fs::directory_iterator(dir)) {
      const std::string name = f.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      auto t = onnx::read_tensor_file(f.path().string());
      EXPECT_TRUE(t.is_ok()) << f.path();
      if (t.is_ok()) s.inputs[name.substr(prefix.size(), name.size() - prefix.size() - 4)] = *t;
    }
    sets.push_back(std::move(s));
  }
  return sets;
}

std::map<std::string, Shape> shapes_of(const Set& s) {
  std::map<std::string, Shape> out;
  for (const auto& [name, t] : s.inputs) out[name] = t.tensor.shape();
  return out;
}

// Runs `m` on the set's inputs; the output tensor.
Result<Tensor> run(Runtime& rt, const onnx::Model& m, const Set& s) {
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(m.graph));
  Bindings b = m.params;
  for (const onnx::IoValue& io : m.inputs) {
    if (io.node < 0) continue;
    auto it = s.inputs.find(io.name);
    if (it == s.inputs.end()) return invalid_argument("no input file for " + io.name);
    VOLTA_ASSIGN_OR_RETURN(b[io.name], onnx::as_input(it->second, io, io.name));
  }
  VOLTA_ASSIGN_OR_RETURN(auto outs, rt.run(*plan, b));
  return outs.at(0);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    const double err = std::fabs(g - w);
    worst = std::max(worst, err);
    ASSERT_LE(err, kAtol + kRtol * std::fabs(w)) << what << " element " << i << ": " << g << " vs PyTorch " << w;
  }
  std::printf("%-40s %-14s max abs diff vs PyTorch %.2e\n", what.c_str(), shape_to_string(got.shape()).c_str(), worst);
}

TEST(OnnxExports, EveryExportMatchesPyTorchAndRepeatsBitwise) {
  if (!onnx::available()) GTEST_SKIP();
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(kExports)) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GE(dirs.size(), 6u);
  for (const fs::path& dir : dirs) {
    const std::vector<Set> sets = sets_of(dir);
    ASSERT_FALSE(sets.empty()) << dir;
    for (size_t k = 0; k < sets.size(); ++k) {
      const std::string what = dir.filename().string() + " set " + std::to_string(k);
      onnx::ImportOptions opts;  // as `volta run` imports: the inputs' files bind the dynamic dims
      for (const auto& [name, t] : sets[k].inputs) opts.input_values[name] = t.tensor;
      auto m = onnx::load_model((dir / "model.onnx").string(), opts);
      ASSERT_TRUE(m.is_ok()) << what << ": " << m.status().message();
      Runtime rt(make_cpu_backend());
      auto a = run(rt, *m, sets[k]);
      ASSERT_TRUE(a.is_ok()) << what << ": " << a.status().message();
      expect_close(*a, sets[k].expected, what);
      auto b = run(rt, *m, sets[k]);
      ASSERT_OK(b);
      EXPECT_TRUE(a->bitwise_equal(*b)) << what;
    }
  }
}

// The exported chains of GELU (BERT's erf form, GPT-2's tanh form) and LayerNorm become Volta's
// gelu and layer_norm, and their scaled dot-product attention (scale factors, additive mask,
// softmax, nan guard) becomes attention at import: a plan of these exports has no erf, tanh, pow,
// sqrt, reduce_mean, softmax or equal left, and as many gelu, layer_norm and attention nodes as
// the models have (2 layers: an attention, a GELU and 2 LayerNorms each, and the embeddings' or
// the final LayerNorm). Their outputs still match PyTorch (EveryExportMatchesPyTorchAndRepeatsBitwise).
TEST(OnnxExports, ExportedGeluLayerNormAndAttentionRunAsVoltasOps) {
  if (!onnx::available()) GTEST_SKIP();
  for (const char* name : {"bert_torchscript_opset14", "bert_torchscript_opset17_dynamic", "bert_dynamo", "gpt2_dynamo"}) {
    const fs::path dir = kExports / name;
    const std::vector<Set> sets = sets_of(dir);
    ASSERT_FALSE(sets.empty()) << name;
    onnx::ImportOptions opts;
    for (const auto& [input, t] : sets[0].inputs) opts.input_values[input] = t.tensor;
    auto m = onnx::load_model((dir / "model.onnx").string(), opts);
    ASSERT_OK(m);
    Runtime rt(make_cpu_backend());
    auto plan = rt.compile(m->graph);
    ASSERT_OK(plan);
    std::map<ir::Op, int> count;
    int gelus = 0;  // gelu nodes, and matmuls with a GELU epilogue (fuse_matmul_epilogue folds erf GELUs)
    for (const ir::Node& n : (*plan)->graph.nodes) {
      ++count[n.op];
      gelus += n.op == ir::Op::Gelu || *n.attrs.get_string("activation", "") == "gelu";
    }
    EXPECT_EQ(gelus, 2) << name;
    EXPECT_EQ(count[ir::Op::LayerNorm], 5) << name;
    // scaled dot-product attention with its mask and nan guard: one attention node per layer
    EXPECT_EQ(count[ir::Op::Attention], 2) << name;
    for (const ir::Node& n : (*plan)->graph.nodes)
      if (n.op == ir::Op::Attention) {
        EXPECT_EQ(n.inputs.size(), 4u) << name << ": the additive mask";
        EXPECT_EQ(*n.attrs.get_int("zero_nan_probs", 0), 1) << name;
        EXPECT_NEAR(*n.attrs.get_float("scale", 0), 0.25, 1e-7) << name << ": 1/sqrt(16)";
      }
    for (ir::Op op : {ir::Op::Erf, ir::Op::Tanh, ir::Op::Pow, ir::Op::Sqrt, ir::Op::ReduceMean, ir::Op::Softmax,
                      ir::Op::Equal})
      EXPECT_EQ(count[op], 0) << name << ": " << ir::op_name(op) << " left";
    for (const ir::Node& n : (*plan)->graph.nodes) {
      if (n.op == ir::Op::Gelu) {
        EXPECT_EQ(*n.attrs.get_string("approximate", ""), std::string(name).starts_with("gpt2") ? "tanh" : "none") << name;
      }
    }
  }
}

// One parse, one import and one plan per distinct shape: a repeated shape hits both caches. The
// two exporters of the same BERT (TorchScript opset 17, dynamo opset 18) compute the same bits.
TEST(OnnxExports, DynamicAxesBindPerShapeOncePerShape) {
  if (!onnx::available()) GTEST_SKIP();
  const fs::path dir = kExports / "bert_torchscript_opset17_dynamic";
  const std::vector<Set> sets = sets_of(dir);
  ASSERT_EQ(sets.size(), 2u);
  ASSERT_NE(shapes_of(sets[0]), shapes_of(sets[1]));
  auto model = onnx::ShapedModel::load((dir / "model.onnx").string());
  ASSERT_OK(model);
  Runtime rt(make_cpu_backend());
  std::vector<Tensor> first;
  for (size_t k : {0u, 1u, 0u, 1u}) {
    auto m = model->bind(shapes_of(sets[k]));
    ASSERT_OK(m);
    auto y = run(rt, **m, sets[k]);
    ASSERT_OK(y);
    expect_close(*y, sets[k].expected, "bound set " + std::to_string(k));
    if (first.size() < 2) first.push_back(*y);
    else EXPECT_TRUE(y->bitwise_equal(first[k])) << "set " << k;
  }
  EXPECT_EQ(model->misses(), 2u);
  EXPECT_EQ(model->hits(), 2u);
  EXPECT_EQ(rt.cache().misses(), 2u);
  EXPECT_EQ(rt.cache().hits(), 2u);

  auto dynamo = onnx::ShapedModel::load((kExports / "bert_dynamo_dynamic/model.onnx").string());
  ASSERT_OK(dynamo);
  auto m = dynamo->bind(shapes_of(sets[1]));
  ASSERT_OK(m);
  auto y = run(rt, **m, sets[1]);
  ASSERT_OK(y);
  EXPECT_TRUE(y->bitwise_equal(first[1]));

  // Unbound, and bound inconsistently: errors naming the dim.
  EXPECT_ERROR_CONTAINS(model->bind({}), "graph input 'input_ids' has a dynamic dimension 'batch': give its shape (--shape input_ids=");
  EXPECT_ERROR_CONTAINS(model->bind({{"input_ids", {2, 16}}, {"attention_mask", {2, 8}}}),
                        "dimension 'sequence' is 16 in input 'input_ids' but 8 in input 'attention_mask'");
  EXPECT_ERROR_CONTAINS(model->bind({{"input_ids", {2, 16, 1}}, {"attention_mask", {2, 16}}}), "but is given shape [2,16,1]");
}

}  // namespace
}  // namespace volta

namespace volta {
namespace {

// The CLI on a dynamic export: `inspect --shape` binds the dims, `run` binds them from its input
// files, and an unbound or malformed shape is one line naming the flag.
TEST(OnnxExports, CliBindsDynamicDimsFromShapesAndInputFiles) {
  if (!onnx::available()) GTEST_SKIP();
  const std::string dir = "tests/data/onnx/exports/gpt2_dynamo_dynamic/";
  Cli r = volta("inspect " + dir + "model.onnx --shape input_ids=3x5");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string empty = ::testing::TempDir() + "volta_empty_" + std::to_string(::getpid()) + ".npy";
  std::ofstream{empty};
  EXPECT_NE(r.out.find("input  input_ids            INT64[3,5]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output out                  FLOAT[3,5,100]"), std::string::npos) << r.out;
  r = volta("run " + dir + "model.onnx --input input_ids=" + dir + "in_1_input_ids.npy");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("out                  FLOAT[1,9,100]"), std::string::npos) << r.out;
  expect_bad_cases({
      {"inspect " + dir + "model.onnx", 1, "graph input 'input_ids' has a dynamic dimension 'batch': give its shape (--shape input_ids=DIMS"},
      {"inspect " + dir + "model.onnx --shape input_ids=3x", 1, "--shape: expected NAME=DIMS such as input_ids=1x128, got 'input_ids=3x'"},
      {"inspect " + dir + "model.onnx --shape input_ids=3x5x2", 1, "is declared INT64[batch,sequence] but is given shape [3,5,2]"},
      {"inspect " + dir + "model.onnx --shape input_ids=3x5 --shape nope=1x1", 1, "--shape: model '" + dir + "model.onnx' has no input named 'nope'"},
      {"run " + dir + "model.onnx --input input_ids=" + empty, 1, "--input input_ids: '" + empty + "' is empty, not a .npy array or an ONNX TensorProto"},
  });
  std::remove(empty.c_str());
}

}  // namespace
}  // namespace volta

namespace volta {
namespace {

// `bench model` times any model: an ONNX export with seeded inputs, a .vir model, and refuses
// flags that do not apply.
TEST(OnnxExports, BenchModelTimesOnnxAndIrModels) {
  if (!onnx::available()) GTEST_SKIP();
  Cli r = volta("bench model tests/data/onnx/exports/gpt2_dynamo_dynamic/model.onnx --shape input_ids=2x7 --runs 3 --warmup 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* key : {"\"bench\":\"model\"", "\"compile_ms\":", "\"first_run_ms\":", "\"median_ms\":", "\"p90_ms\":", "\"runs\":3",
                          "\"peak_rss_bytes\":", "\"plan_bytes\":"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  // --weights bf16: the export's matmul weights (GPT-2's nine projections) are stored in bf16,
  // and the plan's weight bytes shrink.
  auto plan_bytes = [](const std::string& out) { return std::stoll(out.substr(out.find("\"plan_bytes\":") + 13)); };
  Cli half = volta("bench model tests/data/onnx/exports/gpt2_dynamo/model.onnx --runs 2 --warmup 0 --json --weights bf16");
  Cli full = volta("bench model tests/data/onnx/exports/gpt2_dynamo/model.onnx --runs 2 --warmup 0 --json");
  ASSERT_EQ(half.code, 0) << half.err;
  EXPECT_NE(half.out.find("\"weights\":\"bf16\",\"weights_narrowed\":9"), std::string::npos) << half.out;
  EXPECT_LT(plan_bytes(half.out), plan_bytes(full.out));
  r = volta("bench model tests/data/twin_outputs.vir --runs 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("steady state median"), std::string::npos) << r.out;
  expect_bad_cases({
      {"bench model tests/data/twin_outputs.vir --shape x=1x2", 1, "--shape: only ONNX models have dynamic dims"},
      {"bench model tests/data/onnx/exports/gpt2_dynamo/model.onnx --runs 0", 1, "--runs must be in [1, 100000], got 0"},
      {"bench model tests/data/twin_outputs.vir --weights f64", 1, "--weights must be f32, bf16 or f16, got 'f64'"},
  });
}

}  // namespace
}  // namespace volta
