#include "test_util.h"
#include "volta/passes.h"
#include "volta/text.h"
#include "volta/verify.h"

namespace volta {
namespace {

ir::Graph parse(const std::string& text) {
  auto g = ir::parse_graph(text, "test");
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : ir::Graph{};
}

// Runs one pass, verifies its result and compares the printed IR with `expected`.
void expect_pass(Result<ir::Graph> (*pass)(const ir::Graph&), const std::string& before, const std::string& expected) {
  ir::Graph g = parse(before);
  ASSERT_OK(ir::verify_graph(g));
  std::string printed_before = ir::print_graph(g);
  auto out = pass(g);
  ASSERT_OK(out);
  ASSERT_OK(ir::verify_graph(*out));
  EXPECT_EQ(ir::print_graph(*out), expected);
  EXPECT_EQ(ir::print_graph(g), printed_before) << "a pass must not change its input";
}

TEST(Passes, DeadCodeEliminationDropsUnusedButKeepsInputsAndParams) {
  expect_pass(passes::eliminate_dead_code, R"(graph g {
  %x: f32[4] = input()
  %unused_in: f32[2] = input()
  %w: f32[4] = param()
  %dead: f32[4] = exp(%x)
  %y: f32[4] = relu(%x)
  return %y
})",
              "graph g {\n"
              "  %x: f32[4] = input()\n"
              "  %unused_in: f32[2] = input()\n"
              "  %w: f32[4] = param()\n"
              "  %y: f32[4] = relu(%x)\n"
              "  return %y\n"
              "}\n");
}

TEST(Passes, CommonSubexpressionsMergeIntoTheFirst) {
  expect_pass(passes::eliminate_common_subexpressions, R"(graph g {
  %x: f32[4] = input()
  %a: f32[4] = exp(%x)
  %b: f32[4] = exp(%x)
  %c: f32[4] = add(%a, %x)
  %d: f32[4] = add(%b, %x)
  %s: f32[4] = softmax(%x) {axis=0}
  %t: f32[4] = softmax(%x) {axis=-1}
  %e: f32[4] = mul(%c, %d)
  %f: f32[4] = mul(%e, %s)
  %g: f32[4] = mul(%f, %t)
  return %g
})",
              "graph g {\n"
              "  %x: f32[4] = input()\n"
              "  %a: f32[4] = exp(%x)\n"
              "  %c: f32[4] = add(%a, %x)\n"
              "  %s: f32[4] = softmax(%x) {axis=0}\n"
              "  %t: f32[4] = softmax(%x) {axis=-1}\n"
              "  %e: f32[4] = mul(%c, %c)\n"
              "  %f: f32[4] = mul(%e, %s)\n"
              "  %g: f32[4] = mul(%f, %t)\n"
              "  return %g\n"
              "}\n");
}

TEST(Passes, CseNeverMergesInputsOrParamsButMergesEqualConstants) {
  expect_pass(passes::eliminate_common_subexpressions, R"(graph g {
  %x: f32[2] = input()
  %y: f32[2] = input()
  %w: f32[2] = param()
  %v: f32[2] = param()
  %c1: f32[2] = constant([1.0, 2.0])
  %c2: f32[2] = constant([1.0, 2.0])
  %c3: f32[2] = constant([1.0, 3.0])
  %a: f32[2] = add(%x, %y)
  %b: f32[2] = add(%w, %v)
  %d: f32[2] = add(%c1, %c2)
  %e: f32[2] = add(%d, %c3)
  %f: f32[2] = add(%a, %b)
  %h: f32[2] = add(%f, %e)
  return %h
})",
              "graph g {\n"
              "  %x: f32[2] = input()\n"
              "  %y: f32[2] = input()\n"
              "  %w: f32[2] = param()\n"
              "  %v: f32[2] = param()\n"
              "  %c1: f32[2] = constant([1.0, 2.0])\n"
              "  %c3: f32[2] = constant([1.0, 3.0])\n"
              "  %a: f32[2] = add(%x, %y)\n"
              "  %b: f32[2] = add(%w, %v)\n"
              "  %d: f32[2] = add(%c1, %c1)\n"
              "  %e: f32[2] = add(%d, %c3)\n"
              "  %f: f32[2] = add(%a, %b)\n"
              "  %h: f32[2] = add(%f, %e)\n"
              "  return %h\n"
              "}\n");
}

TEST(Passes, FoldConstantsEvaluatesConstantSubgraphs) {
  expect_pass(passes::fold_constants, R"(graph g {
  %x: f32[2] = input()
  %four: f32[] = constant(4.0)
  %one: f32[] = constant(1.0)
  %r: f32[] = sqrt(%four)
  %half: f32[] = div(%one, %r)
  %y: f32[2] = mul(%x, %half)
  return %y
})",
              "graph g {\n"
              "  %x: f32[2] = input()\n"
              "  %four: f32[] = constant(4.0)\n"
              "  %one: f32[] = constant(1.0)\n"
              "  %r: f32[] = constant(2.0)\n"
              "  %half: f32[] = constant(0.5)\n"
              "  %y: f32[2] = mul(%x, %half)\n"
              "  return %y\n"
              "}\n");
}

TEST(Passes, FoldConstantsLeavesLargeResultsAlone) {
  // [300,1] + [1,300] broadcasts to 90000 elements, above kMaxFoldElements.
  std::string values;
  for (int i = 0; i < 300; ++i) values += (i ? ", " : "") + std::to_string(i) + ".0";
  ir::Graph g = parse("graph g {\n  %a: f32[300,1] = constant([" + values + "])\n  %b: f32[1,300] = constant([" + values +
                      "])\n  %c: f32[300,300] = add(%a, %b)\n  return %c\n}\n");
  static_assert(300 * 300 > passes::kMaxFoldElements);
  auto out = passes::fold_constants(g);
  ASSERT_OK(out);
  EXPECT_EQ(out->node(2).op, ir::Op::Add);
}

TEST(Passes, FoldingReportsKernelErrorsWithTheNode) {
  ir::Graph g = parse(R"(graph g {
  %table: f32[2,2] = constant([1.0, 2.0, 3.0, 4.0])
  %ids: i32[1] = constant([5])
  %e: f32[1,2] = embedding(%table, %ids)
  return %e
})");
  EXPECT_ERROR_CONTAINS(passes::fold_constants(g), "'e'");
}

TEST(Passes, PipelineIsListedOnceAndSwitchable) {
  std::vector<std::string> names;
  for (const auto& p : passes::pipeline()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fold_constants", "eliminate_common_subexpressions", "eliminate_dead_code"}));
  passes::PipelineOptions opts;
  EXPECT_EQ(passes::pipeline_signature(opts), "fold_constants,eliminate_common_subexpressions,eliminate_dead_code");
  opts.disabled = {"eliminate_dead_code"};
  EXPECT_EQ(passes::pipeline_signature(opts), "fold_constants,eliminate_common_subexpressions");
  opts.disabled = {"no_such_pass"};
  EXPECT_ERROR_CONTAINS(passes::run_pipeline(parse("graph g {\n %x: f32[1] = input()\n return %x\n}\n"), opts),
                        "unknown pass 'no_such_pass'");
}

TEST(Passes, WholePipelineOnTheExamplesVerifiesAfterEachPassAndIsDeterministic) {
  for (const char* file : {"examples/gpt_block.vir", "examples/mlp.vir"}) {
    auto g = ir::load_graph(test::source_path(file));
    ASSERT_OK(g);
    passes::PipelineOptions opts;
    opts.verify_each = true;
    std::vector<std::string> dumped;
    opts.dump_after = "fold_constants";
    opts.dump = [&](const std::string& pass, const ir::Graph&) { dumped.push_back(pass); };
    auto a = passes::run_pipeline(*g, opts);
    auto b = passes::run_pipeline(*g, opts);
    ASSERT_OK(a);
    ASSERT_OK(b);
    EXPECT_EQ(ir::print_graph(*a), ir::print_graph(*b));
    EXPECT_EQ(dumped, (std::vector<std::string>{"fold_constants", "fold_constants"}));
    EXPECT_LE(a->size(), g->size());
  }
}

TEST(Passes, GraphHashIdentifiesGraphAndPipeline) {
  ir::Graph g = parse("graph g {\n %x: f32[2] = input()\n %y: f32[2] = exp(%x)\n return %y\n}\n");
  ir::Graph same = parse("graph g {\n  %x: f32[2] = input()   # same graph, other spacing\n  %y = exp(%x)\n  return %y\n}\n");
  ir::Graph other = parse("graph g {\n %x: f32[2] = input()\n %y: f32[2] = log(%x)\n return %y\n}\n");
  EXPECT_EQ(passes::graph_hash(g, "a"), passes::graph_hash(same, "a"));
  EXPECT_NE(passes::graph_hash(g, "a"), passes::graph_hash(other, "a"));
  EXPECT_NE(passes::graph_hash(g, "a"), passes::graph_hash(g, "b"));
}

}  // namespace
}  // namespace volta
