// ONNX's own backend node tests (Debian's libonnx-testdata): every test whose ops are all in
// the supported list is imported, run through the Runtime and compared with rtol 1e-3, atol
// 1e-7 (ONNX's runner's tolerances, NaN == NaN). A test either passes or is listed in
// tests/data/onnx/conformance_expected.txt with the reason it is refused, and a refused test
// must fail at import with a clean error, never run to a wrong answer.
// VOLTA_ONNX_REPORT=FILE writes the per-op table of docs/onnx.md.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "test_util.h"
#include "volta/onnx.h"
#include "volta/runtime.h"

namespace volta {
namespace {

namespace fs = std::filesystem;

// The op list of issue 6 plus Sign and Pad, then the comparison, logic and index ops of exported
// transformers models (docs/onnx.md): a test is in the suite when all its ops are.
const std::set<std::string> kSuiteOps = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Erf", "Neg", "Abs", "Clip", "Relu",
    "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather",
    "Unsqueeze", "Squeeze", "Flatten", "Where", "Equal", "Cast", "ReduceMean", "ReduceSum", "ReduceMax", "Identity",
    "Dropout", "Constant", "ConstantOfShape", "Shape", "Expand", "Range", "Trilu", "Sign", "Pad",
    "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "Max", "Min",
    "Size", "GatherElements", "GatherND", "ScatterND", "CumSum", "TopK", "ArgMax", "ArgMin", "Tile", "OneHot",
    "SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceLength", "SequenceInsert", "SequenceErase",
    "ConcatFromSequence", "SplitToSequence", "Optional", "OptionalHasElement", "OptionalGetElement"};

// The peer kit's subset (../shared/peers/onnx_conformance.py SUPPORTED, the list its ONNX
// Runtime runner also uses with --ops-only): its count is reported beside the suite's, so the two
// runners' totals compare on the same tests.
const std::set<std::string> kPeerSubsetOps = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Erf", "Neg", "Abs", "Clip", "Relu",
    "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather",
    "Unsqueeze", "Squeeze", "Flatten", "Where", "Equal", "Cast", "ReduceMean", "ReduceSum", "ReduceMax", "Identity",
    "Dropout", "Constant", "ConstantOfShape", "Shape", "Expand", "Range", "Trilu"};

std::string node_tests_dir() {
  const char* env = std::getenv("VOLTA_ONNX_NODE_TESTS");
  return env ? env : "/usr/share/libonnx-testdata/data/node";
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "test_name reason..." lines; '#' starts a comment.
std::map<std::string, std::string> read_expectations() {
  std::map<std::string, std::string> out;
  std::ifstream f(std::string(VOLTA_SOURCE_DIR) + "/tests/data/onnx/conformance_expected.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    out[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return out;
}

// data_set files sorted by their index (input_10 after input_9).
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 3 && name.ends_with(".pb"))
      files.emplace_back(std::atoi(name.c_str() + prefix.size()), e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& [i, p] : files) out.push_back(p);
  return out;
}

double as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::i32: return t.data<int32_t>()[i];
    case DType::i64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::f64: return t.data<double>()[i];
    case DType::bf16: return bf16_to_f32(t.data<uint16_t>()[i]);
    case DType::f16: return f16_to_f32(t.data<uint16_t>()[i]);
  }
  return 0;
}

// ONNX's test data before onnx 1.13 (Debian's) stores bfloat16 values as UINT16 tensors of their
// bits: read them as the bfloat16 values they are, as ONNX's own runner does.
onnx::TypedTensor bfloat16_from_bits(onnx::TypedTensor t) {
  if (t.onnx_type != onnx::ElemType::kUint16) return t;
  Tensor bits = Tensor::zeros(DType::bf16, t.tensor.shape());
  for (int64_t i = 0; i < bits.numel(); ++i) bits.data<uint16_t>()[i] = static_cast<uint16_t>(t.tensor.data<int32_t>()[i]);
  t.tensor = std::move(bits);
  t.onnx_type = onnx::ElemType::kBfloat16;
  return t;
}

enum class Outcome { Passed, Refused, Wrong };
struct Result1 {
  Outcome outcome;
  std::string detail;
};

Result1 run_one(const fs::path& dir, Runtime& rt) {
  const std::string bytes = read_all(dir / "model.onnx");
  auto info = onnx::read_model_info(bytes, (dir / "model.onnx").string());
  if (!info.is_ok()) return {Outcome::Refused, info.status().message()};
  const fs::path data = dir / "test_data_set_0";
  const auto in_files = numbered(data, "input_"), out_files = numbered(data, "output_");
  onnx::ImportOptions opts;
  std::map<std::string, onnx::ValueFile> given;
  std::map<std::string, std::string> unreadable;  // input -> why its file is refused (a dtype Volta does not hold)
  for (size_t k = 0; k < in_files.size() && k < info->inputs.size(); ++k) {
    // A file the import may refuse anyway (a dtype Volta does not hold): the import names the
    // reason, or this does.
    auto v = onnx::read_value_file(in_files[k].string());
    if (v.is_ok()) {
      const Status s = onnx::as_declared(&*v, info->input_sequence[k], info->input_optional[k], in_files[k].string());
      if (!s.is_ok()) v = s;
    }
    if (!v.is_ok()) {
      unreadable[info->inputs[k]] = v.status().message();
      continue;
    }
    if (info->input_types[k] == onnx::ElemType::kBfloat16)
      for (onnx::TypedTensor& t : v->tensors) t = bfloat16_from_bits(t);
    given[info->inputs[k]] = *v;
    onnx::give_input(opts, info->inputs[k], *v);
  }
  auto model = onnx::import_model(bytes, dir.filename().string(), opts);
  if (!model.is_ok()) {
    if (model.status().code() == StatusCode::kInternal) return {Outcome::Wrong, "internal error: " + model.status().message()};
    return {Outcome::Refused, model.status().message()};
  }
  Bindings bindings = model->params;
  for (const onnx::IoValue& io : model->inputs) {
    if (io.node < 0 && !io.sequence) continue;  // folded into constants, or an empty optional
    auto it = given.find(io.name);
    if (it == given.end() && unreadable.count(io.name)) return {Outcome::Wrong, "input file: " + unreadable.at(io.name)};
    if (it == given.end()) return {Outcome::Wrong, "no data for input '" + io.name + "'"};
    const Status bound = onnx::bind_input(it->second, io, model->graph, dir.filename().string(), &bindings);
    if (!bound.is_ok()) return {Outcome::Wrong, bound.message()};
  }
  auto plan = rt.compile(model->graph);
  if (!plan.is_ok()) return {Outcome::Wrong, "compile: " + plan.status().message()};
  auto outs = rt.run(**plan, bindings);
  if (!outs.is_ok()) return {Outcome::Wrong, "run: " + outs.status().message()};
  if (model->outputs.size() != out_files.size()) return {Outcome::Wrong, "output count differs"};
  size_t next = 0;
  for (size_t k = 0; k < out_files.size(); ++k) {
    auto want = onnx::read_value_file(out_files[k].string());
    if (!want.is_ok() && want.status().code() == StatusCode::kUnimplemented) return {Outcome::Refused, want.status().message()};
    if (!want.is_ok()) return {Outcome::Wrong, want.status().message()};
    const onnx::IoValue& io = model->outputs[k];
    auto got = onnx::output_value(io, *outs, &next);
    if (!got.is_ok()) return {Outcome::Wrong, got.status().message()};
    if (got->sequence != want->sequence || got->absent != want->absent || got->tensors.size() != want->tensors.size())
      return {Outcome::Wrong, "output '" + io.name + "' is not the expected kind of value or length"};
    // bfloat16 compares in f32 with rtol >= 2^-6, as ONNX's runner does (onnx >= 1.16).
    const bool bf16 = io.onnx_type == onnx::ElemType::kBfloat16;
    const double rtol = bf16 ? 1.0 / 64 : 1e-3;
    for (size_t e = 0; e < got->tensors.size(); ++e) {
      const onnx::TypedTensor w = bf16 ? bfloat16_from_bits(want->tensors[e]) : want->tensors[e];
      const Tensor& g = got->tensors[e].tensor;
      const std::string oname = io.name + (io.sequence ? " element " + std::to_string(e) : "");
      if (w.onnx_type != io.onnx_type || w.tensor.shape() != g.shape() || w.tensor.dtype() != g.dtype())
        return {Outcome::Wrong, "output '" + oname + "' is " + g.type().to_string() + " but expected " + w.tensor.type().to_string()};
      for (int64_t i = 0; i < g.numel(); ++i) {
        const double gv = as_double(g, i), wv = as_double(w.tensor, i);
        const bool ok = (std::isnan(gv) && std::isnan(wv)) || gv == wv || std::fabs(gv - wv) <= 1e-7 + rtol * std::fabs(wv);
        if (!ok) return {Outcome::Wrong, "output '" + oname + "' element " + std::to_string(i) + ": " + std::to_string(gv) + " vs " + std::to_string(wv)};
      }
    }
  }
  if (next != outs->size()) return {Outcome::Wrong, "the run returned more values than the outputs hold"};
  return {Outcome::Passed, ""};
}

TEST(OnnxConformance, NodeTests) {
  if (!onnx::available()) GTEST_SKIP() << "built without ONNX";
  const fs::path root = node_tests_dir();
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is missing (apt-get install libonnx-testdata)";
  const auto expected = read_expectations();
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx") && fs::is_directory(e.path() / "test_data_set_0")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());

  Runtime rt(make_cpu_backend());
  int passed = 0, refused = 0, wrong = 0, peer_subset = 0, peer_passed = 0;
  // op -> {passed, refused, failed}; a test counts for each op it uses.
  std::map<std::string, std::array<int, 3>> per_op;
  std::map<std::string, std::set<std::string>> reasons;  // op -> refusal reasons
  std::set<std::string> in_suite;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    if (name.find("training_dropout") != std::string::npos) continue;  // random outputs
    auto info = onnx::read_model_info(read_all(dir / "model.onnx"), name);
    if (!info.is_ok()) continue;
    std::set<std::string> ops(info->op_types.begin(), info->op_types.end());
    if (!std::includes(kSuiteOps.begin(), kSuiteOps.end(), ops.begin(), ops.end())) continue;
    in_suite.insert(name);
    const Result1 r = run_one(dir, rt);
    if (std::includes(kPeerSubsetOps.begin(), kPeerSubsetOps.end(), ops.begin(), ops.end()))
      ++peer_subset, peer_passed += r.outcome == Outcome::Passed;
    const auto exp = expected.find(name);
    for (const std::string& op : ops) ++per_op[op][r.outcome == Outcome::Passed ? 0 : r.outcome == Outcome::Refused ? 1 : 2];
    switch (r.outcome) {
      case Outcome::Passed:
        ++passed;
        EXPECT_TRUE(exp == expected.end()) << name << " passes now: remove it from conformance_expected.txt";
        break;
      case Outcome::Refused:
        ++refused;
        for (const std::string& op : ops) reasons[op].insert(exp == expected.end() ? r.detail : exp->second);
        EXPECT_TRUE(exp != expected.end()) << name << " is refused but not listed: " << r.detail;
        EXPECT_FALSE(r.detail.empty()) << name;
        break;
      case Outcome::Wrong:
        ++wrong;
        ADD_FAILURE() << name << " FAILED: " << r.detail;
        break;
    }
  }
  for (const auto& [name, why] : expected)
    EXPECT_TRUE(in_suite.count(name)) << name << " is listed in conformance_expected.txt but not in the suite";
  std::printf("onnx node tests: %zu in the suite, %d passed, %d refused (listed), %d failed; the peer kit's subset: %d of %d passed\n",
              in_suite.size(), passed, refused, wrong, peer_passed, peer_subset);
  EXPECT_GT(passed, 250);

  if (const char* report = std::getenv("VOLTA_ONNX_REPORT")) {
    std::ofstream f(report);
    f << "| op | tests passed | refused | failed | why refused |\n|---|---|---|---|---|\n";
    for (const auto& [op, c] : per_op) {
      std::string why;
      for (const std::string& r : reasons[op]) why += (why.empty() ? "" : "; ") + r;
      f << "| " << op << " | " << c[0] << " | " << c[1] << " | " << c[2] << " | " << why << " |\n";
    }
    f << "\nTotal: " << in_suite.size() << " tests, " << passed << " passed, " << refused << " refused, " << wrong << " failed; "
      << "in the peer kit's subset (`../shared/peers/onnx_conformance.py`'s op list) " << peer_passed << " of " << peer_subset
      << " passed.\n";
  }
}

}  // namespace
}  // namespace volta
