#include <algorithm>
#include <cmath>

#include "test_util.h"
#include "tiny_lm.h"
#include "volta/runtime.h"
#include "volta/builder.h"
#include "volta/passes.h"
#include "volta/plan.h"
#include "volta/text.h"

namespace volta {
namespace {

using plan::MemClass;

size_t cls(MemClass c) { return static_cast<size_t>(c); }

// x -> a=exp(x) -> b=exp(a) -> c=exp(b) -> d=add(b, c); every value is 64 bytes.
ir::Graph chain() {
  auto g = ir::parse_graph(R"(graph chain {
  %x: f32[16] = input()
  %a: f32[16] = exp(%x)
  %b: f32[16] = exp(%a)
  %c: f32[16] = exp(%b)
  %d: f32[16] = add(%b, %c)
  return %d
})");
  EXPECT_TRUE(g.is_ok());
  return *g;
}

TEST(Plan, ExactPeakBytesOnAKnownGraph) {
  auto p = plan::make_plan(chain(), 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  EXPECT_EQ(p->schedule, (std::vector<int32_t>{1, 2, 3, 4}));
  // Lifetimes (steps): a 0..1, b 1..3, c 2..3, d 3..3 (output).
  EXPECT_EQ(p->values[1].first_step, 0);
  EXPECT_EQ(p->values[1].last_step, 1);
  EXPECT_EQ(p->values[2].last_step, 3);
  // a and c never live together, so c reuses a's bytes: the arena holds 3 of 4 values.
  EXPECT_EQ(p->values[3].offset, p->values[1].offset);
  const plan::MemoryReport& m = p->memory;
  EXPECT_EQ(m.arena_bytes, 192u);
  EXPECT_EQ(m.external_bytes, 64u);
  EXPECT_EQ(m.peak_bytes, 256u);
  EXPECT_EQ(m.naive_bytes, 320u);
  EXPECT_EQ(m.peak_live_bytes, 256u);
  EXPECT_EQ(m.peak[cls(MemClass::Input)], 64u);
  EXPECT_EQ(m.peak[cls(MemClass::Activation)], 128u);
  EXPECT_EQ(m.naive[cls(MemClass::Activation)], 192u);
  EXPECT_EQ(m.peak[cls(MemClass::Output)], 64u);
  ASSERT_OK(plan::verify_schedule(p->graph, p->schedule));
  ASSERT_OK(plan::verify_allocation(*p));
}

// x -> a=exp(x) -> r=reshape(a) -> s=reshape(r) -> b=exp(x) -> c=add(s, b): the reshapes are views
// of a, so a lives until c reads s, and b may not take a's bytes.
TEST(Plan, ReshapesAreViewsThatExtendTheirRootsLifetime) {
  auto g = ir::parse_graph(R"(graph views {
  %x: f32[16] = input()
  %a: f32[16] = exp(%x)
  %r: f32[4,4] = reshape(%a) {shape=[4, 4]}
  %s: f32[2,8] = reshape(%r) {shape=[2, 8]}
  %b: f32[2,8] = exp(%s)
  %c: f32[2,8] = add(%s, %b)
  %o: f32[16] = reshape(%c) {shape=[16]}
  return %o, %r
})");
  ASSERT_OK(g);
  auto p = plan::make_plan(*g, 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  const auto& v = p->values;
  EXPECT_EQ(v[2].view_of, 1);  // r views a
  EXPECT_EQ(v[3].view_of, 1);  // s views a too: the root, not r
  EXPECT_EQ(v[6].view_of, 5);  // the output o views c
  for (int id : {2, 3, 6}) {
    EXPECT_FALSE(v[static_cast<size_t>(id)].in_arena);
    EXPECT_EQ(v[static_cast<size_t>(id)].bytes, 0u);
  }
  EXPECT_EQ(v[1].last_step, static_cast<int32_t>(p->schedule.size()) - 1);  // r is an output
  EXPECT_EQ(v[1].cls, MemClass::Output);
  EXPECT_EQ(v[5].cls, MemClass::Output);
  EXPECT_NE(v[4].offset, v[1].offset);  // b is written while a (as s) is still read
  ASSERT_OK(plan::verify_allocation(*p));
  EXPECT_NE(plan::format_plan(*p).find("view of %a"), std::string::npos);

  // Run it: the views read and return the right bytes, and no reshape kernel runs.
  Runtime rt(make_cpu_backend());
  auto compiled = rt.compile(*g);
  ASSERT_OK(compiled);
  Tensor x = Tensor::zeros(DType::f32, {16});
  for (int i = 0; i < 16; ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i);
  auto out = rt.run(**compiled, {{"x", x}});
  ASSERT_OK(out);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].shape(), (Shape{16}));
  EXPECT_EQ((*out)[1].shape(), (Shape{4, 4}));
  for (int i = 0; i < 16; ++i) {
    const float a = std::exp(0.1f * static_cast<float>(i));
    EXPECT_FLOAT_EQ((*out)[1].data<float>()[i], a);
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], a + std::exp(a));
  }
}

// A slice of one contiguous block and a transpose that only moves size-1 dims are views too;
// a real transpose and a strided slice are not.
TEST(Plan, ContiguousSlicesAndTrivialTransposesAreViews) {
  auto g = ir::parse_graph(R"(graph views {
  %x: f32[1,3,4] = input()
  %e: f32[1,3,4] = exp(%x)
  %s: f32[1,1,4] = slice(%e) {axis=1, start=1, end=2}
  %t: f32[1,4,1] = transpose(%s) {perm=[0, 2, 1]}
  %u: f32[1,4,3] = transpose(%e) {perm=[0, 2, 1]}
  %c: f32[1,3,2] = slice(%e) {axis=2, start=2, end=4}
  return %t, %u, %c
})");
  ASSERT_OK(g);
  auto p = plan::make_plan(*g, 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  const auto& v = p->values;
  EXPECT_EQ(v[2].view_of, 1);
  EXPECT_EQ(v[2].view_offset, 16u);  // row 1 of 4 floats
  EXPECT_EQ(v[3].view_of, 1);
  EXPECT_EQ(v[3].view_offset, 16u);
  EXPECT_EQ(v[4].view_of, -1);
  EXPECT_EQ(v[5].view_of, -1);  // every row contributes a piece: not one block
  Runtime rt(make_cpu_backend());
  auto compiled = rt.compile(*g);
  ASSERT_OK(compiled);
  Tensor x = Tensor::zeros(DType::f32, {1, 3, 4});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i);
  auto out = rt.run(**compiled, {{"x", x}});
  ASSERT_OK(out);
  for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ((*out)[0].data<float>()[j], std::exp(0.1f * static_cast<float>(4 + j)));
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i)
      EXPECT_FLOAT_EQ((*out)[1].data<float>()[j * 3 + i], std::exp(0.1f * static_cast<float>(i * 4 + j)));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      EXPECT_FLOAT_EQ((*out)[2].data<float>()[i * 2 + j], std::exp(0.1f * static_cast<float>(i * 4 + 2 + j)));
}

// The values a run never writes (a team's kernels read them without waiting): bound leaves and
// their views, but not a leaf some step writes in place, nor anything a step computes.
TEST(Plan, FixedValuesAreTheLeavesNoStepWrites) {
  for (const model::TinyLMConfig& c : {test::tiny_gpt(), test::tiny_llama()}) {
    auto g = model::build_tinylm_decode(c, 2);
    ASSERT_OK(g);
    Runtime rt(make_cpu_backend());
    auto compiled = rt.compile(*g);
    ASSERT_OK(compiled);
    const plan::ExecutionPlan& p = **compiled;
    const std::vector<bool> fixed = plan::fixed_values(p);
    ASSERT_EQ(fixed.size(), p.graph.size());
    int leaves = 0, caches = 0, writes = 0;
    for (const ir::Node& n : p.graph.nodes) {
      const bool is_fixed = fixed[static_cast<size_t>(n.id)];
      if (n.op == ir::Op::CacheAttention) {
        ++writes;
        EXPECT_FALSE(is_fixed) << n.name;
      } else if (n.name.rfind("cache.", 0) == 0) {
        ++caches;
        EXPECT_FALSE(is_fixed) << n.name;
      } else if (ir::is_leaf(n.op)) {
        ++leaves;
        EXPECT_TRUE(is_fixed) << n.name;  // the tokens, the position, the weights
      } else if (p.values[static_cast<size_t>(n.id)].view_of < 0) {
        EXPECT_FALSE(is_fixed) << n.name;
      }
    }
    EXPECT_EQ(caches, 2 * c.layers);
    EXPECT_EQ(writes, c.layers);  // cache_attention: the writes fused into the attention that reads them
    EXPECT_GT(leaves, 3);
  }
  // A view of an input is fixed; a counter a step increments, and its view, are not.
  auto g = ir::parse_graph(R"(graph views {
  %x: f32[2,4] = input()
  %n: i64[] = param()
  %r: f32[8] = reshape(%x) {shape=[8]}
  %e: f32[8] = exp(%r)
  %i: i64[] = increment(%n)
  %v: i64[1] = reshape(%n) {shape=[1]}
  return %e, %i, %v
})");
  ASSERT_OK(g);
  auto p = plan::make_plan(*g, 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  EXPECT_EQ(plan::fixed_values(*p), (std::vector<bool>{true, false, true, false, false, false}));
}

TEST(Plan, WorkspacesArePlannedAsTemp) {
  auto workspace = [](const ir::Graph&, const ir::Node& n) -> size_t { return n.op == ir::Op::Exp ? 100 : 0; };
  auto p = plan::make_plan(chain(), 0, "test", workspace, {});
  ASSERT_OK(p);
  EXPECT_EQ(p->memory.peak[cls(MemClass::Temp)], 128u);  // 100 rounded up to the alignment
  EXPECT_EQ(p->memory.naive[cls(MemClass::Temp)], 384u);
  EXPECT_EQ(p->workspaces[0].bytes, 128u);
  EXPECT_EQ(p->workspaces[3].bytes, 0u);
  ASSERT_OK(plan::verify_allocation(*p));
}

// A node a pass appended (here d, id 5, read by b, id 2) runs where its reader stands, as soon
// as its input is ready: 1, 5, 2, 3, 4. Smallest ready id first ran it after c, which does not
// need it (1, 3, 5, 2, 4), as the training step's fused norm parameter gradients ran after the
// whole backward pass.
TEST(Plan, AnAppendedNodeRunsWhereItsReaderStands) {
  auto g = ir::parse_graph(R"(graph appended {
  %x: f32[16] = input()
  %a: f32[16] = exp(%x)
  %b: f32[16] = add(%x, %x)
  %c: f32[16] = exp(%a)
  %e: f32[16] = add(%b, %c)
  return %e
})");
  ASSERT_OK(g);
  ir::Graph h = *g;
  ir::Node d = h.node(1);  // d = abs(x), appended; b reads it
  d.id = 5, d.name = "d", d.op = ir::Op::Abs;
  h.nodes.push_back(d);
  h.node(2).inputs = {0, 5};
  auto p = plan::make_plan(h, 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  EXPECT_EQ(p->schedule, (std::vector<int32_t>{1, 5, 2, 3, 4}));
  ASSERT_OK(plan::verify_schedule(p->graph, p->schedule));
  // A graph in topological order keeps its order.
  auto q = plan::make_plan(*g, 0, "cpu", nullptr, {});
  ASSERT_OK(q);
  EXPECT_EQ(q->schedule, (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(Plan, VerifyAllocationCatchesOverlap) {
  auto p = plan::make_plan(chain(), 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  p->values[3].offset = p->values[2].offset;  // c onto b: both live at steps 2..3
  EXPECT_ERROR_CONTAINS(plan::verify_allocation(*p), "live buffers overlap");
  p->values[3].offset = 8;
  EXPECT_ERROR_CONTAINS(plan::verify_allocation(*p), "misaligned");
}

TEST(Plan, VerifyScheduleCatchesOrderErrors) {
  ir::Graph g = chain();
  ASSERT_OK(plan::verify_schedule(g, {1, 2, 3, 4}));
  EXPECT_ERROR_CONTAINS(plan::verify_schedule(g, {2, 1, 3, 4}), "before its input 'a'");
  EXPECT_ERROR_CONTAINS(plan::verify_schedule(g, {1, 2, 3}), "never runs");
  EXPECT_ERROR_CONTAINS(plan::verify_schedule(g, {1, 1, 2, 3, 4}), "twice");
  EXPECT_ERROR_CONTAINS(plan::verify_schedule(g, {0, 1, 2, 3, 4}), "leaf");
}

TEST(Plan, BudgetTooSmallIsAClearError) {
  plan::PlanOptions opts;
  opts.memory_budget_bytes = 255;
  auto p = plan::make_plan(chain(), 0, "cpu", nullptr, opts);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(p.status().message(),
            "plan for graph 'chain' needs 256 bytes (arena 192 + bound inputs, params and constants 64) but the memory "
            "budget is 255 bytes");
  opts.memory_budget_bytes = 256;
  ASSERT_OK(plan::make_plan(chain(), 0, "cpu", nullptr, opts));
}

TEST(Plan, TransformerBlockReusesMemoryAndIsDeterministic) {
  auto g = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(g);
  auto opt = passes::run_pipeline(*g, {});
  ASSERT_OK(opt);
  auto a = plan::make_plan(*opt, 1, "cpu", nullptr, {});
  auto b = plan::make_plan(*opt, 1, "cpu", nullptr, {});
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_GT(a->memory.peak_bytes, 0u);
  EXPECT_LT(a->memory.peak_bytes, a->memory.naive_bytes);
  EXPECT_LT(a->memory.peak[cls(MemClass::Activation)], a->memory.naive[cls(MemClass::Activation)]);
  EXPECT_GE(a->memory.peak_bytes, a->memory.peak_live_bytes);
  EXPECT_EQ(plan::plan_to_json(*a), plan::plan_to_json(*b));
  ASSERT_OK(plan::verify_allocation(*a));
  // Params are bound by the caller: planned == naive for them.
  EXPECT_EQ(a->memory.peak[cls(MemClass::Param)], a->memory.naive[cls(MemClass::Param)]);
}

TEST(Plan, UnusedValueStillGetsBytesWhenDceIsOff) {
  auto g = ir::parse_graph(R"(graph g {
  %x: f32[16] = input()
  %dead: f32[16] = exp(%x)
  %y: f32[16] = relu(%x)
  return %y
})");
  ASSERT_OK(g);
  auto p = plan::make_plan(*g, 0, "cpu", nullptr, {});
  ASSERT_OK(p);
  EXPECT_EQ(p->values[1].first_step, 0);
  EXPECT_EQ(p->values[1].last_step, 0);
  ASSERT_OK(plan::verify_allocation(*p));
}

TEST(PlanCache, CountsHitsAndMisses) {
  plan::PlanCache cache;
  plan::PlanKey k1{1, "x=f32[2]", "cpu", ""}, k2{1, "x=f32[3]", "cpu", ""};
  EXPECT_EQ(cache.find(k1), nullptr);
  cache.insert(k1, std::make_shared<plan::ExecutionPlan>());
  EXPECT_NE(cache.find(k1), nullptr);
  EXPECT_EQ(cache.find(k2), nullptr);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace volta

namespace volta {
namespace {

// The documented placement, written the plain quadratic way: largest first, each at the lowest
// aligned offset no time-overlapping placed buffer uses. The planner's indexed version must give
// the same offsets.
void expect_reference_placement(const plan::ExecutionPlan& p) {
  std::vector<const plan::Buffer*> arena;
  for (const plan::Buffer& b : p.values)
    if (b.in_arena) arena.push_back(&b);
  for (const plan::Buffer& b : p.workspaces) arena.push_back(&b);
  std::sort(arena.begin(), arena.end(), [](const plan::Buffer* a, const plan::Buffer* b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    if (a->first_step != b->first_step) return a->first_step < b->first_step;
    if (a->cls != b->cls) return a->cls < b->cls;
    return a->node < b->node;
  });
  std::vector<std::pair<const plan::Buffer*, size_t>> placed;  // buffer, reference offset
  size_t arena_bytes = 0;
  for (const plan::Buffer* b : arena) {
    if (b->bytes == 0 || b->last_step < b->first_step) continue;
    std::vector<std::pair<size_t, size_t>> conflicts;  // offset, bytes
    for (const auto& [q, off] : placed)
      if (q->first_step <= b->last_step && b->first_step <= q->last_step) conflicts.emplace_back(off, q->bytes);
    std::sort(conflicts.begin(), conflicts.end());
    size_t offset = 0;
    for (const auto& [off, bytes] : conflicts) {
      if (off >= offset + b->bytes) break;
      offset = std::max(offset, align_up(off + bytes));
    }
    EXPECT_EQ(b->offset, offset) << p.graph.node(b->node).name;
    arena_bytes = std::max(arena_bytes, offset + b->bytes);
    placed.emplace_back(b, offset);
  }
  EXPECT_EQ(p.memory.arena_bytes, arena_bytes);
}

TEST(Plan, IndexedPlacementMatchesTheReferenceOnRealGraphs) {
  Runtime rt(make_cpu_backend());
  for (const char* example : {"examples/gpt_block.vir", "examples/mlp.vir"}) {
    ASSERT_OK_AND_ASSIGN(ir::Graph g, ir::load_graph(test::source_path(example)));
    ASSERT_OK_AND_ASSIGN(auto p, rt.compile(g));
    expect_reference_placement(*p);
    ASSERT_OK(plan::verify_allocation(*p));
  }
}

// A long chain of elementwise ops: fusion stops growing a tree at the program's step limit (no
// recursion as deep as the chain), and planning is no longer quadratic in the chain's length.
ir::Graph elementwise_chain(int n) {
  ModelBuilder b("chain");
  Value v = b.input("x", {DType::f32, {4}});
  for (int i = 0; i < n; ++i) v = i % 2 ? b.tanh(v, "t" + std::to_string(i)) : b.relu(v, "r" + std::to_string(i));
  b.output(v);
  auto g = b.build();
  EXPECT_TRUE(g.is_ok());
  return *g;
}

TEST(Plan, AHundredThousandNodeChainPlansAndRuns) {
  const ir::Graph g = elementwise_chain(100000);
  Runtime rt(make_cpu_backend());
  ASSERT_OK_AND_ASSIGN(auto fused, rt.compile(g));
  EXPECT_LT(fused->graph.size(), 2000u);
  const Bindings x = {{"x", Tensor::from_f32({4}, {-1.0f, 0.0f, 0.5f, 2.0f})}};
  ASSERT_OK_AND_ASSIGN(auto out, rt.run(*fused, x));
  CompileOptions unfused;
  unfused.pipeline.disabled.insert("fuse_elementwise");
  ASSERT_OK_AND_ASSIGN(auto plain, rt.compile(g, unfused));
  EXPECT_EQ(plain->graph.size(), g.size());
  ASSERT_OK_AND_ASSIGN(auto out2, rt.run(*plain, x));
  EXPECT_TRUE(out[0].bitwise_equal(out2[0]));
  // The reference placement is quadratic: checked on a shorter chain.
  ASSERT_OK_AND_ASSIGN(auto shorter, rt.compile(elementwise_chain(3000), unfused));
  expect_reference_placement(*shorter);
}

}  // namespace
}  // namespace volta
