// The op table (include/volta/ops.def) is the one place an op is described: these tests check
// that it is well formed and that the places derived from it agree with it: docs/ops.md's
// tables, the elementwise class and verify's attribute checks.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cuda/capabilities.h"
#include "ir/elementwise_program.h"
#include "test_util.h"
#include "volta/backend.h"
#include "volta/ir.h"
#include "volta/op_attrs.h"
#include "volta/verify.h"

namespace volta {
namespace {

using ir::AttrKind;
using ir::AttrPresence;
using ir::AttrSpec;
using ir::Op;
using ir::OpCategory;
using ir::OpInfo;

constexpr OpCategory kCategoryOrder[] = {
    OpCategory::Leaf,      OpCategory::Linear,    OpCategory::Unary,  OpCategory::Binary,   OpCategory::Elementwise,
    OpCategory::Norm,      OpCategory::Attention, OpCategory::Fused,  OpCategory::Layout,   OpCategory::Select,
    OpCategory::Pool,      OpCategory::Reduction, OpCategory::Loss,   OpCategory::Gradient, OpCategory::Training,
    OpCategory::Cache};

const char* category_heading(OpCategory c) {
  switch (c) {
    case OpCategory::Leaf: return "Leaves";
    case OpCategory::Linear: return "Linear algebra";
    case OpCategory::Unary: return "Elementwise, one operand (fusable)";
    case OpCategory::Binary: return "Elementwise, two operands, numpy broadcasting (fusable)";
    case OpCategory::Elementwise: return "Elementwise with attributes";
    case OpCategory::Norm: return "Normalisation over one axis";
    case OpCategory::Attention: return "Attention";
    case OpCategory::Fused: return "Fused elementwise chains";
    case OpCategory::Layout: return "Indexing and layout";
    case OpCategory::Select: return "Selection and masking";
    case OpCategory::Pool: return "Pooling over `[N, C, spatial...]` (1 to 3 spatial dims)";
    case OpCategory::Reduction: return "Reductions";
    case OpCategory::Loss: return "Losses (scalar results)";
    case OpCategory::Gradient: return "Gradient ops (written by autograd, valid in hand-written IR; no gradient themselves)";
    case OpCategory::Training: return "The training step's state updates (in place on the model's state; no gradient)";
    case OpCategory::Cache: return "The KV cache (written in place; no gradient)";
  }
  return "?";
}

std::string number(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string attr_text(const AttrSpec& a) {
  std::string t = "`" + std::string(a.name) + "` (" + ir::attr_kind_name(a.kind);
  switch (a.presence) {
    case AttrPresence::Required: t += ", required"; break;
    case AttrPresence::Optional: t += ", optional"; break;
    case AttrPresence::Default:
      t += ", default ";
      t += a.kind == AttrKind::Int     ? std::to_string(a.int_default)
           : a.kind == AttrKind::Float ? number(a.float_default)
                                       : "`" + std::string(a.str_default) + "`";
      break;
  }
  return t + "): " + a.doc;
}

// docs/ops.md's op tables, as the table describes the ops.
std::string ops_markdown() {
  std::string md;
  for (OpCategory c : kCategoryOrder) {
    md += "### " + std::string(category_heading(c)) + "\n\n";
    md += "| op | inputs | attributes | result | gradient | ONNX |\n|---|---|---|---|---|---|\n";
    for (const OpInfo& info : ir::kOpTable) {
      if (info.category != c) continue;
      std::string attrs;
      for (size_t i = 0; i < info.num_attrs(); ++i) attrs += (i ? "; " : "") + attr_text(info.attrs[i]);
      md += "| `" + std::string(info.name) + "` | " + info.inputs_doc + " | " + (attrs.empty() ? "—" : attrs) + " | " +
            info.result_doc + " | " + (info.grad == ir::OpGrad::Diff ? "yes" : "no") + " | " +
            (*info.onnx ? "`" + std::string(info.onnx) + "`" : "—") + " |\n";
    }
    md += "\n";
  }
  return md;
}

constexpr const char* kBegin =
    "<!-- The op tables below are generated from include/volta/ops.def by tests/test_op_table.cpp;\n"
    "     regenerate: VOLTA_UPDATE_DOCS=1 build/release/tests/volta_tests --gtest_filter=OpTable.* -->\n";
constexpr const char* kEnd = "<!-- end of the generated op tables -->\n";

TEST(OpTable, DocsMatchTheTable) {
  const std::string path = test::source_path("docs/ops.md");
  const std::string doc = test::read_file(path);
  const size_t b = doc.find(kBegin), e = doc.find(kEnd);
  ASSERT_NE(b, std::string::npos) << "docs/ops.md lacks the generated-tables marker";
  ASSERT_NE(e, std::string::npos) << "docs/ops.md lacks the end marker";
  ASSERT_LT(b, e);
  const std::string want = std::string(kBegin) + "\n" + ops_markdown() + kEnd;
  const std::string have = doc.substr(b, e + std::string(kEnd).size() - b);
  if (have != want && std::getenv("VOLTA_UPDATE_DOCS") != nullptr) {
    std::ofstream(path, std::ios::binary) << doc.substr(0, b) << want << doc.substr(e + std::string(kEnd).size());
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(have, want) << "docs/ops.md is out of date with include/volta/ops.def; regenerate it (see the marker)";
}

TEST(OpTable, EveryRowIsWellFormed) {
  std::set<std::string> names, onnx_names;
  for (int i = 0; i < ir::kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    const OpInfo& info = ir::op_info(op);
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate op name";
    auto parsed = ir::parse_op(info.name);
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, op);
    EXPECT_LE(info.min_inputs, info.max_inputs);
    EXPECT_EQ(ir::is_leaf(op), info.category == OpCategory::Leaf);
    EXPECT_EQ(ir::is_leaf(op), info.max_inputs == 0);
    EXPECT_GT(std::string(info.inputs_doc).size(), 0u);
    EXPECT_GT(std::string(info.result_doc).size(), 0u);
    if (*info.onnx) {
      EXPECT_TRUE(onnx_names.insert(info.onnx).second) << "two ops map to ONNX " << info.onnx;
    }
    // The schema: distinct names, each documented, found by lookup.
    EXPECT_LT(info.num_attrs(), ir::kMaxOpAttrs) << "raise kMaxOpAttrs";
    std::set<std::string> keys;
    for (size_t a = 0; a < info.num_attrs(); ++a) {
      const AttrSpec& s = info.attrs[a];
      EXPECT_TRUE(keys.insert(s.name).second) << "duplicate attribute " << s.name;
      EXPECT_GT(std::string(s.doc).size(), 0u) << s.name;
      EXPECT_EQ(info.attr(s.name), &s);
      EXPECT_TRUE(ir::op_allows_attr(op, s.name));
    }
    EXPECT_EQ(info.attr("no_such_attribute"), nullptr);
    // The elementwise class is the category: the fusable ops are exactly Unary and Binary, with
    // no attributes (a fused step has none), f32 in and out.
    const int arity = ir::elementwise_arity(op);
    EXPECT_EQ(arity, info.category == OpCategory::Unary ? 1 : info.category == OpCategory::Binary ? 2 : 0);
    if (arity > 0) {
      EXPECT_EQ(info.min_inputs, arity);
      EXPECT_EQ(info.max_inputs, arity);
      EXPECT_EQ(info.num_attrs(), 0u);
    }
  }
}

// verify rejects what the schema rules out, naming the op, the node and the attribute.
TEST(OpTable, VerifyChecksAttributesAgainstTheSchema) {
  auto graph = [](ir::Attrs attrs) {
    ir::Graph g;
    g.nodes.resize(2);
    g.nodes[0] = ir::Node{0, "x", Op::Input, {}, {}, TensorType{DType::f32, {2, 3}}, {}};
    g.nodes[1] = ir::Node{1, "y", Op::Slice, {0}, std::move(attrs), TensorType{DType::f32, {2, 1}}, {}};
    g.outputs = {1};
    return g;
  };
  ASSERT_OK(ir::verify_graph(graph({{"axis", int64_t{1}}, {"start", int64_t{0}}, {"end", int64_t{1}}})));
  EXPECT_ERROR_CONTAINS(ir::verify_graph(graph({{"axis", int64_t{1}}, {"start", int64_t{0}}})),
                        "[slice] missing attribute 'end' (node 'y')");
  EXPECT_ERROR_CONTAINS(ir::verify_graph(graph({{"axis", 1.0}, {"start", int64_t{0}}, {"end", int64_t{1}}})),
                        "[slice] attribute 'axis' must be an int (node 'y')");
  ir::Graph t = graph({});
  t.nodes[1].op = Op::Transpose;
  t.nodes[1].attrs = ir::Attrs{{"perm", int64_t{1}}};
  t.nodes[1].type = TensorType{DType::f32, {3, 2}};
  EXPECT_ERROR_CONTAINS(ir::verify_graph(t), "[transpose] attribute 'perm' must be an int list (node 'y')");
  EXPECT_ERROR_CONTAINS(
      ir::verify_graph(graph({{"axis", int64_t{1}}, {"start", int64_t{0}}, {"end", int64_t{1}}, {"step", int64_t{1}}})),
      "[slice] unknown attribute 'step' (node 'y')");
  // An int widens to a float attribute; a string never does.
  ir::Graph g;
  g.nodes.resize(2);
  g.nodes[0] = ir::Node{0, "x", Op::Input, {}, {}, TensorType{DType::f32, {4}}, {}};
  g.nodes[1] = ir::Node{1, "y", Op::LeakyRelu, {0}, {{"alpha", int64_t{1}}}, TensorType{DType::f32, {4}}, {}};
  g.outputs = {1};
  ASSERT_OK(ir::verify_graph(g));
  g.nodes[1].attrs = {{"alpha", std::string("0.1")}};
  EXPECT_ERROR_CONTAINS(ir::verify_graph(g), "[leaky_relu] attribute 'alpha' must be a float (node 'y')");
}


// Each backend's capabilities come from its kernel table: the CPU runs every op (a reference
// kernel each, or its own), CUDA names each op of its table once.
// The typed attribute structs carry ops.def's defaults; a node's struct is bound once with its
// plan, read back as is, and dropped when an attribute changes.
TEST(OpTable, TypedAttributesCarryTheSchemaAndAreBoundOnce) {
  ir::Node n;
  n.op = ir::Op::Attention;
  n.name = "att";
  auto d = ir::typed_attrs<ir::Op::Attention>(n);
  ASSERT_OK(d);
  EXPECT_EQ((*d)->scale, 1.0);
  EXPECT_FALSE((*d)->causal_offset.has_value());
  EXPECT_FALSE((*d)->prefix.has_value());
  n.attrs.set("scale", 0.25);
  n.attrs.set("causal_offset", int64_t{3});
  {  // parsed from an unbound node, the struct belongs to the result and outlives the node
    std::optional<ir::AttrsRef<ir::attrs::Attention>> kept;
    {
      const ir::Node unbound = n;
      auto r = ir::typed_attrs<ir::Op::Attention>(unbound);
      ASSERT_OK(r);
      kept.emplace(*r);
    }
    EXPECT_EQ((*kept)->scale, 0.25);
    EXPECT_EQ((*kept)->causal_offset, 3);
  }
  ir::Graph g;
  g.nodes.push_back(n);
  g.nodes[0].id = 0;
  ASSERT_OK(ir::bind_typed_attrs(g));
  const void* bound = g.nodes[0].attrs.typed().get();
  ASSERT_NE(bound, nullptr);
  auto t = ir::typed_attrs<ir::Op::Attention>(g.nodes[0]);
  ASSERT_OK(t);
  EXPECT_EQ(&**t, bound);  // the bound struct itself, borrowed: no lookup, no reference count
  EXPECT_EQ((*t)->scale, 0.25);
  EXPECT_EQ((*t)->causal_offset, 3);
  g.nodes[0].attrs.set("scale", 0.5);  // a changed attribute drops the struct
  EXPECT_EQ(g.nodes[0].attrs.typed(), nullptr);
  ir::Attrs same = g.nodes[0].attrs;
  same.bind_typed(std::make_shared<int>(0));
  EXPECT_EQ(same, g.nodes[0].attrs);  // equality compares the attributes only
  // Defaults from ops.def: eps, approximate, clip's bounds, a string and an integer list.
  ir::Node ln, ge, cl, pa, tr;
  ln.op = ir::Op::LayerNorm, ge.op = ir::Op::Gelu, cl.op = ir::Op::Clip, pa.op = ir::Op::Param, tr.op = ir::Op::Transpose;
  tr.attrs.set("perm", std::vector<int64_t>{1, 0});
  EXPECT_EQ((*ir::typed_attrs<ir::Op::LayerNorm>(ln))->eps, 1e-5);
  EXPECT_EQ((*ir::typed_attrs<ir::Op::Gelu>(ge))->approximate, "none");
  EXPECT_EQ((*ir::typed_attrs<ir::Op::Clip>(cl))->min, -INFINITY);
  EXPECT_EQ((*ir::typed_attrs<ir::Op::Param>(pa))->init, "normal");
  EXPECT_EQ((*ir::typed_attrs<ir::Op::Transpose>(tr))->perm, (std::vector<int64_t>{1, 0}));
  // Read as another op's struct, or with a wrong kind, it is an error naming the node.
  EXPECT_ERROR_CONTAINS(ir::typed_attrs<ir::Op::Softmax>(n), "[attention] read as the attributes of softmax (node 'att')");
  n.attrs.set("scale", std::string("big"));
  EXPECT_ERROR_CONTAINS(ir::typed_attrs<ir::Op::Attention>(n), "[attention] attribute 'scale' must be a number but is");
}

TEST(OpTable, BackendCapabilitiesComeFromTheirKernelTables) {
  auto cpu = make_cpu_backend();
  for (int i = 0; i < ir::kNumOps; ++i) {
    const auto op = static_cast<ir::Op>(i);
    EXPECT_NE(cpu::cpu_kernel(op).run, nullptr) << ir::op_name(op);
    EXPECT_EQ(cpu->capabilities().supports(op), !ir::is_leaf(op)) << ir::op_name(op);
  }
  const Capabilities cuda = cuda::capabilities();
  std::set<ir::Op> seen;
  for (ir::Op op : cuda.ops) EXPECT_TRUE(seen.insert(op).second) << ir::op_name(op) << " listed twice";
  for (int i = 0; i < ir::kNumOps; ++i) {  // the elementwise template covers both categories whole
    if (ir::elementwise_arity(static_cast<ir::Op>(i)) > 0) {
      EXPECT_TRUE(seen.count(static_cast<ir::Op>(i))) << ir::op_name(static_cast<ir::Op>(i));
    }
  }
}

// Kernels live in one file per op family, mirrored across backends: ref_<family>.cpp (the
// reference), <family>[_<part>].cpp (the CPU backend's own) and <family>[_<part>].cu (CUDA). A
// file named by technique rather than family fails here; the few that hold no kernel are listed.
TEST(OpTable, KernelFilesAreNamedByOpFamilyAndMirrored) {
  namespace fs = std::filesystem;
  const fs::path cpu_dir = test::source_path("src/backends/cpu"), cuda_dir = test::source_path("src/backends/cuda");
  const std::set<std::string> not_kernels = {"cpu_backend", "kernels", "parallel", "tuner", "vec_dispatch"};
  std::set<std::string> families;
  for (const auto& e : fs::directory_iterator(cpu_dir))
    if (e.path().extension() == ".cpp" && e.path().stem().string().starts_with("ref_"))
      families.insert(e.path().stem().string().substr(4));
  EXPECT_GE(families.size(), 10u);
  int cpu_files = 0, cuda_files = 0;
  for (const auto& e : fs::directory_iterator(cpu_dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".cpp" || stem.starts_with("ref_") || not_kernels.count(stem)) continue;
    ++cpu_files;
    EXPECT_TRUE(families.count(stem.substr(0, stem.find('_')))) << e.path() << " has no ref_<family>.cpp";
  }
  for (const auto& e : fs::directory_iterator(cuda_dir)) {
    if (e.path().extension() != ".cu") continue;
    ++cuda_files;
    const std::string stem = e.path().stem().string();  // <family> or <family>_<variant>, as on the CPU
    EXPECT_TRUE(families.count(stem.substr(0, stem.find('_')))) << e.path() << " has no cpu/ref_<family>.cpp";
  }
  EXPECT_GE(cpu_files, 8);
  EXPECT_GE(cuda_files, 8);
}

// conv2d's and the pools' kernels read their window from the typed attributes (no key lookups).
TEST(OpTable, WindowsComeFromTypedAttributes) {
  ir::Node pool;
  pool.op = ir::Op::AvgPool, pool.name = "p";
  pool.attrs.set("kernel", std::vector<int64_t>{3, 2});
  pool.attrs.set("strides", std::vector<int64_t>{2, 1});
  pool.attrs.set("count_include_pad", int64_t{1});
  auto w = ir::window_of(pool, 2);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ(w->kernel, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(w->strides, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(w->pads, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(w->dilations, (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(w->count_include_pad);
  EXPECT_FALSE(w->ceil_mode);
  ir::Node conv;  // conv2d's kernel is the weight's trailing dims
  conv.op = ir::Op::Conv2d, conv.name = "c";
  conv.attrs.set("groups", int64_t{2});
  conv.attrs.set("dilations", std::vector<int64_t>{2, 2});
  const std::vector<int64_t> kernel = {5, 5};
  auto cw = ir::window_of(conv, 2, &kernel);
  ASSERT_TRUE(cw.is_ok()) << cw.status().message();
  EXPECT_EQ(cw->kernel, kernel);
  EXPECT_EQ(cw->groups, 2);
  EXPECT_EQ(cw->dilations, (std::vector<int64_t>{2, 2}));
  // A bad window is an error naming the op and the node; a non-window op is an internal error.
  pool.attrs.set("pads", std::vector<int64_t>{3, 0, 0, 0});
  EXPECT_ERROR_CONTAINS(ir::window_of(pool, 2), "[avg_pool] pads [3,0,0,0] must be smaller than the window [3,2] (node 'p')");
  EXPECT_ERROR_CONTAINS(ir::window_of(conv, 2), "[conv2d] has no kernel attribute");
  ir::Node relu;
  relu.op = ir::Op::Relu;
  EXPECT_ERROR_CONTAINS(ir::window_of(relu, 2), "[relu] has no window");
}

}  // namespace
}  // namespace volta
