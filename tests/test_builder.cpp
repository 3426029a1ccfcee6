#include <limits>

#include "test_util.h"
#include "volta/builder.h"
#include "volta/verify.h"

namespace volta {
namespace {

using ir::Op;

TEST(Builder, BuildsMlpWithInferredTypes) {
  ModelBuilder b("mlp");
  Value x = b.input("x", {DType::f32, {8, 4}});
  Value w1 = b.param("w1", {DType::f32, {4, 16}}, ParamInit::normal(0.5));
  Value b1 = b.param("b1", {DType::f32, {16}}, ParamInit::zeros());
  Value h = b.relu(b.add(b.matmul(x, w1, "h.mm"), b1, "h.pre"), "h");
  Value w2 = b.param("w2", {DType::f32, {16, 3}});
  Value logits = b.matmul(h, w2, "logits");
  Value y = b.input("y", {DType::i32, {8}});
  Value loss = b.cross_entropy(logits, y, "loss");
  b.output(loss);
  EXPECT_EQ(b.type(h), (TensorType{DType::f32, {8, 16}}));
  EXPECT_EQ(b.type(logits), (TensorType{DType::f32, {8, 3}}));
  EXPECT_EQ(b.type(loss), (TensorType{DType::f32, {}}));
  auto g = b.build();
  ASSERT_OK(g);
  EXPECT_EQ(g->name, "mlp");
  EXPECT_EQ(g->size(), 10u);
  for (size_t i = 0; i < g->size(); ++i) EXPECT_EQ(g->nodes[i].id, static_cast<int32_t>(i));
  EXPECT_EQ(g->node(g->outputs[0]).name, "loss");
  ASSERT_OK(ir::verify_graph(*g));
}

TEST(Builder, TaggedShapeErrorNamesNode) {
  ModelBuilder b;
  Value x = b.input("x", {DType::f32, {2, 3}});
  Value w = b.param("w", {DType::f32, {4, 5}});
  Value q = b.matmul(x, w, "attn.q");
  EXPECT_FALSE(q.valid());
  EXPECT_EQ(b.status().message(), "[matmul] inner dims 3 != 4 (f32[2,3] @ f32[4,5]) (node 'attn.q')");
  // Later calls are no-ops; build() returns the first error.
  b.output(b.relu(q));
  EXPECT_ERROR_CONTAINS(b.build(), "inner dims 3 != 4");
}

TEST(Builder, DuplicateNameIsAnError) {
  ModelBuilder b;
  b.input("x", {DType::f32, {2}});
  b.input("x", {DType::f32, {2}});
  EXPECT_ERROR_CONTAINS(b.build(), "value 'x' is defined twice");
}

TEST(Builder, AutoNamesAreUnique) {
  ModelBuilder b;
  Value x = b.input("x", {DType::f32, {2}});
  Value y = b.exp(b.exp(x));
  b.output(y);
  auto g = b.build();
  ASSERT_OK(g);
  EXPECT_EQ(g->node(1).name, "exp.1");
  EXPECT_EQ(g->node(2).name, "exp.2");
}

TEST(Builder, ForeignHandleIsAnError) {
  ModelBuilder b;
  b.relu(Value{7});
  EXPECT_ERROR_CONTAINS(b.build(), "does not belong to this builder");
}

TEST(Builder, NoOutputsIsAnError) {
  ModelBuilder b("empty");
  b.input("x", {DType::f32, {2}});
  EXPECT_ERROR_CONTAINS(b.build(), "graph 'empty' has no outputs");
}

TEST(Builder, DtypeErrors) {
  ModelBuilder b;
  Value ids = b.input("ids", {DType::i32, {4}});
  b.exp(ids, "e");  // relu, neg, abs, sign and the arithmetic have integer math; exp has not
  EXPECT_ERROR_CONTAINS(b.build(), "[exp] x must be f32 but is i32[4] (node 'e')");
}

// Flags are 0 or 1: a 2 was read as 1.
TEST(Builder, FlagAttributesAreZeroOrOne) {
  const TensorType m{DType::f32, {4, 4}}, x{DType::f32, {1, 1, 4, 4}};
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{m, m}, {{"transpose_a", int64_t{2}}}),
                        "transpose_a and transpose_b must be 0 or 1, got 2 and 0");
  const std::vector<int64_t> k2{2, 2};
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::AvgPool, std::vector<TensorType>{x}, {{"kernel", k2}, {"ceil_mode", int64_t{2}}}),
                        "ceil_mode must be 0 or 1, got 2");
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::AvgPool, std::vector<TensorType>{x}, {{"kernel", k2}, {"count_include_pad", int64_t{-1}}}),
                        "count_include_pad must be 0 or 1, got -1");
  ASSERT_OK(ir::infer_type(ir::Op::AvgPool, std::vector<TensorType>{x}, {{"kernel", k2}, {"ceil_mode", int64_t{1}}}));
  ModelBuilder b;
  Value w = b.param("w", {DType::f32, {2}}, ParamInit::zeros());
  b.output(b.relu(w, "y"));
  ASSERT_OK_AND_ASSIGN(ir::Graph g, b.build());
  g.nodes[static_cast<size_t>(g.find("w"))].attrs.set("trainable", int64_t{2});
  EXPECT_ERROR_CONTAINS(ir::verify_graph(g), "attribute 'trainable' must be 0 or 1, got 2");
}

// A scale is a finite number (nan gave all-nan probabilities with exit 0); a gradient op's checks
// of its forward's attributes name the gradient op.
TEST(Builder, ScalesAreFiniteAndGradientRulesNameTheirOp) {
  const TensorType x{DType::f32, {2, 3, 3}};
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Softmax, std::vector<TensorType>{x}, {{"scale", nan}}),
                        "[softmax] attribute 'scale' must be finite, got nan");
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Attention, std::vector<TensorType>{x, x, x}, {{"scale", inf}}),
                        "[attention] attribute 'scale' must be finite, got inf");
  ASSERT_OK(ir::infer_type(ir::Op::Softmax, std::vector<TensorType>{x}, {{"scale", 0.125}}));
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::SoftmaxGrad, std::vector<TensorType>{x, x}, {{"axis", int64_t{5}}}),
                        "[softmax_grad] axis 5 out of range");
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::GeluGrad, std::vector<TensorType>{x, x}, {{"approximate", std::string("erf")}}),
                        "[gelu_grad] attribute 'approximate' must be");
}

// The decode step's run-time position (i32, one element): attention's fourth input, softmax's
// second; and cache_write's rule.
// Offsets far past any length would overflow `row + offset` in the kernels; verify bounds them.
TEST(Builder, CausalOffsetsAreBounded) {
  const TensorType x{DType::f32, {2, 3, 3}};
  auto build = [&](ir::Op op, const char* key, int64_t v) {
    ModelBuilder b;
    Value in = b.input("x", x);
    if (op == ir::Op::Attention) b.output(b.op(op, {in, in, in}, {{key, v}}, "y"));
    else b.output(b.op(op, {in}, {{key, v}}, "y"));
    return b.build();
  };
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  ASSERT_OK(build(ir::Op::CausalMask, "offset", int64_t{1} << 40));
  ASSERT_OK(build(ir::Op::Softmax, "causal_offset", -(int64_t{1} << 40)));
  EXPECT_ERROR_CONTAINS(build(ir::Op::CausalMask, "offset", big), "[causal_mask] attribute 'offset' must be in [-2^40, 2^40], got 9223372036854775807");
  EXPECT_ERROR_CONTAINS(build(ir::Op::Softmax, "causal_offset", small), "[softmax] attribute 'causal_offset' must be in [-2^40, 2^40]");
  EXPECT_ERROR_CONTAINS(build(ir::Op::Attention, "causal_offset", big), "[attention] attribute 'causal_offset' must be in");
}

TEST(Builder, RunTimePositionAndCacheWriteRules) {
  const TensorType q{DType::f32, {1, 2, 1, 4}}, cache{DType::f32, {1, 2, 6, 4}};
  auto build = [&](TensorType position, ir::Attrs attrs) {
    ModelBuilder b;
    Value x = b.input("q", q);
    b.output(b.op(ir::Op::Attention, {x, b.input("kc", cache), b.input("vc", cache), b.input("n", position)}, attrs, "att"));
    return b.build();
  };
  auto ok = build({DType::i32, {1}}, {{"causal_offset", int64_t{0}}});
  ASSERT_OK(ok);
  EXPECT_EQ(ok->node(ok->outputs[0]).type.shape, (Shape{1, 2, 1, 4}));
  EXPECT_ERROR_CONTAINS(build({DType::f32, {1}}, {}), "[attention] mask f32[1] does not broadcast to the scores f32[1,2,1,6] "
                                                      "(its last dim must be the keys, 6; a fourth input is an f32 mask or an "
                                                      "i32 position with one element) (node 'att')");
  EXPECT_ERROR_CONTAINS(build({DType::i64, {1}}, {}), "[attention] position must be i32 with one element, got i64[1]");
  EXPECT_ERROR_CONTAINS(build({DType::i32, {2}}, {}), "[attention] position must be i32 with one element, got i32[2]");
  EXPECT_ERROR_CONTAINS(build({DType::i32, {1}}, {{"prefix", int64_t{3}}}), "[attention] prefix and a position input cannot both be given");
  auto softmax = [&](TensorType position, ir::Attrs attrs) {
    ModelBuilder b;
    b.output(b.op(ir::Op::Softmax, {b.input("s", cache), b.input("n", position)}, attrs, "p"));
    return b.build();
  };
  ASSERT_OK(softmax({DType::i32, {1}}, {{"causal_offset", int64_t{0}}}));
  EXPECT_ERROR_CONTAINS(softmax({DType::i32, {1}}, {}), "[softmax] a position input needs the causal_offset attribute (node 'p')");
  EXPECT_ERROR_CONTAINS(softmax({DType::i64, {1}}, {{"causal_offset", int64_t{0}}}), "[softmax] position must be i32 with one element");
  auto write = [&](TensorType rows, TensorType position) {
    ModelBuilder b;
    const ParamInit state{"zeros", 0.0, 0.0, false};
    b.output(b.op(ir::Op::CacheWrite, {b.param("c", cache, state), b.input("r", rows), b.input("n", position)}, {}, "w"));
    return b.build();
  };
  auto w = write({DType::f32, {1, 2, 3, 4}}, {DType::i32, {1}});
  ASSERT_OK(w);
  EXPECT_EQ(w->node(w->outputs[0]).type, cache);
  EXPECT_ERROR_CONTAINS(write({DType::f32, {1, 2, 7, 4}}, {DType::i32, {1}}), "[cache_write] rows f32[1,2,7,4] do not fit cache f32[1,2,6,4]");
  EXPECT_ERROR_CONTAINS(write({DType::f32, {1, 3, 1, 4}}, {DType::i32, {1}}), "do not fit cache");
  EXPECT_ERROR_CONTAINS(write({DType::f32, {1, 2, 1, 4}}, {DType::f32, {1}}), "[cache_write] position must be i32 with one element");
  ModelBuilder b;  // a cache that is not state
  Value c = b.input("c", cache);
  b.output(b.op(ir::Op::CacheWrite, {c, c, b.input("n", {DType::i32, {1}})}, {}, "w"));
  EXPECT_ERROR_CONTAINS(b.build(), "[cache_write] writes 'c' in place, which must be a param (the model's state) (node 'w')");
}

// cache_attention: q, the two caches (state), the new rows, the position; what does not fit is
// an error naming the node.
TEST(Builder, CacheAttentionRules) {
  const TensorType q{DType::f32, {1, 4, 1, 8}}, cache{DType::f32, {1, 2, 6, 8}}, rows{DType::f32, {1, 2, 1, 8}};
  const TensorType position{DType::i32, {1}};
  auto build = [&](std::vector<TensorType> in, bool state = true) {
    ModelBuilder b;
    const ParamInit zeros{"zeros", 0.0, 0.0, false};
    std::vector<Value> v;
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      v.push_back(state && (i == 1 || i == 2) ? b.param(name, in[i], zeros) : b.input(name, in[i]));
    }
    b.output(b.op(ir::Op::CacheAttention, v, {{"scale", 0.5}, {"causal_offset", int64_t{0}}}, "att"));
    return b.build();
  };
  auto ok = build({q, cache, cache, rows, rows, position});
  ASSERT_OK(ok);
  EXPECT_EQ(ok->node(ok->outputs[0]).type.shape, (Shape{1, 4, 1, 8}));
  EXPECT_ERROR_CONTAINS(build({q, cache, cache, rows, rows, {DType::f32, {1}}}),
                        "[cache_attention] position must be i32 with one element, got f32[1] (node 'att')");
  EXPECT_ERROR_CONTAINS(build({q, {DType::f32, {1, 3, 6, 8}}, {DType::f32, {1, 3, 6, 8}}, rows, rows, position}),
                        "[cache_attention] k cache f32[1,3,6,8] and v cache f32[1,3,6,8] do not match q f32[1,4,1,8]");
  EXPECT_ERROR_CONTAINS(build({q, cache, cache, {DType::f32, {1, 2, 2, 8}}, rows, position}),
                        "[cache_attention] k f32[1,2,2,8] and v f32[1,2,1,8] must be the caches' rows for q's 1 positions, "
                        "f32[1,2,1,8] and f32[1,2,1,8], at most the caches' 6 rows");
  EXPECT_ERROR_CONTAINS(build({{DType::f32, {1, 4, 7, 8}}, cache, cache, {DType::f32, {1, 2, 7, 8}}, {DType::f32, {1, 2, 7, 8}}, position}),
                        "at most the caches' 6 rows");
  EXPECT_ERROR_CONTAINS(build({q, cache, cache, rows, rows, position}, false),
                        "[cache_attention] writes 'x1' in place, which must be a param (the model's state) (node 'att')");
}

// The llama variant's ops: grouped-query attention, rope and swiglu refuse what does not fit,
// naming the node.
TEST(Builder, GroupedQueriesRopeAndSwigluRules) {
  auto one = [](ir::Op op, std::vector<TensorType> in, ir::Attrs attrs = {}) -> Result<TensorType> {
    ModelBuilder b;
    std::vector<Value> xs;
    for (size_t i = 0; i < in.size(); ++i) xs.push_back(b.input("x" + std::to_string(i), in[i]));
    b.output(b.op(op, xs, attrs, "y"));
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());
    return g.node(g.outputs[0]).type;
  };
  const TensorType f32_2{DType::f32, {2, 8}}, pos{DType::i32, {1}};
  auto att = one(ir::Op::Attention, {{DType::f32, {2, 6, 5, 8}}, {DType::f32, {2, 2, 7, 8}}, {DType::f32, {2, 2, 7, 3}}});
  ASSERT_OK(att);
  EXPECT_EQ(att->shape, (Shape{2, 6, 5, 3}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::Attention, {{DType::f32, {2, 6, 5, 8}}, {DType::f32, {2, 4, 7, 8}}, {DType::f32, {2, 4, 7, 8}}}),
                        "or a divisor of q's heads) (node 'y')");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Attention, {{DType::f32, {2, 6, 5, 8}}, {DType::f32, {2, 2, 7, 8}}, {DType::f32, {2, 3, 7, 8}}}),
                        "do not match q");
  auto grad = one(ir::Op::AttentionGrad, {{DType::f32, {6, 5, 8}}, {DType::f32, {2, 5, 8}}, {DType::f32, {2, 5, 8}}, {DType::f32, {6, 5, 8}}});
  ASSERT_OK(grad);
  EXPECT_EQ(grad->shape, (Shape{3, 6, 5, 8}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::AttentionGrad, {{DType::f32, {6, 5, 8}}, {DType::f32, {2, 4, 8}}, {DType::f32, {2, 4, 8}}, {DType::f32, {6, 5, 8}}}),
                        "[attention_grad] q f32[6,5,8], k f32[2,4,8], v f32[2,4,8] and dy f32[6,5,8] do not fit self-attention");
  // store_probs: the output's elements, then the probabilities [..., H, T, S]; the gradient's p
  const TensorType q4{DType::f32, {2, 6, 5, 8}}, kv4{DType::f32, {2, 2, 7, 8}}, packed{DType::f32, {2, 5, 48}};
  const ir::Attrs store{{"store_probs", int64_t{1}}};
  auto stored = one(ir::Op::Attention, {q4, kv4, kv4}, store);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->shape, (Shape{2 * 6 * 5 * 8 + 2 * 6 * 5 * 7}));
  auto packed_store =
      one(ir::Op::Attention, {packed, packed, packed}, {{"store_probs", int64_t{1}}, {"packed_heads", int64_t{2}}});
  ASSERT_OK(packed_store);
  EXPECT_EQ(packed_store->shape, (Shape{2 * 5 * 16 + 2 * 2 * 5 * 5}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::Attention, {q4, kv4, kv4}, {{"store_probs", int64_t{2}}}),
                        "store_probs must be 0 or 1, got 2");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Attention, {q4, kv4, kv4}, {{"store_probs", int64_t{1}}, {"prefix", int64_t{3}}}),
                        "store_probs takes q, k and v only, without prefix");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Attention, {q4, kv4, kv4, {DType::f32, {5, 7}}}, store), "store_probs takes q, k and v only");
  const TensorType q3{DType::f32, {6, 5, 8}};
  ASSERT_OK(one(ir::Op::AttentionGrad, {q3, q3, q3, q3, {DType::f32, {6, 5, 5}}}));
  ASSERT_OK(one(ir::Op::AttentionGrad, {packed, packed, packed, {DType::f32, {2, 5, 16}}, {DType::f32, {2, 2, 5, 5}}},
                {{"packed_heads", int64_t{2}}}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::AttentionGrad, {q3, q3, q3, q3, {DType::f32, {6, 5, 4}}}),
                        "[attention_grad] p f32[6,5,4] must be f32[6,5,5] (the probabilities of q f32[6,5,8])");
  EXPECT_ERROR_CONTAINS(one(ir::Op::AttentionGrad, {q3, q3, q3, q3, {DType::i32, {6, 5, 5}}}), "p must be f32");
  auto rope = one(ir::Op::Rope, {{DType::f32, {2, 3, 5, 8}}, {DType::f32, {9, 4}}, {DType::f32, {9, 4}}});
  ASSERT_OK(rope);
  EXPECT_EQ(rope->shape, (Shape{2, 3, 5, 8}));
  ASSERT_OK(one(ir::Op::Rope, {{DType::f32, {2, 3, 1, 8}}, {DType::f32, {9, 4}}, {DType::f32, {9, 4}}, pos}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::Rope, {{DType::f32, {2, 7}}, {DType::f32, {9, 3}}, {DType::f32, {9, 3}}}),
                        "[rope] x must be [..., T, D] with D even, got f32[2,7] (node 'y')");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Rope, {f32_2, {DType::f32, {9, 4}}, {DType::f32, {8, 4}}}), "must both be [P, 4]");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Rope, {{DType::f32, {12, 8}}, {DType::f32, {9, 4}}, {DType::f32, {9, 4}}}),
                        "[rope] x f32[12,8] has 12 positions but the tables have 9");
  EXPECT_ERROR_CONTAINS(one(ir::Op::Rope, {f32_2, {DType::f32, {9, 4}}, {DType::f32, {9, 4}}, {DType::i64, {1}}}),
                        "[rope] position must be i32 with one element");
  auto sw = one(ir::Op::Swiglu, {{DType::f32, {3, 4, 10}}});
  ASSERT_OK(sw);
  EXPECT_EQ(sw->shape, (Shape{3, 4, 5}));
  EXPECT_ERROR_CONTAINS(one(ir::Op::Swiglu, {{DType::f32, {3, 7}}}), "[swiglu] x must be [..., 2F] (the gate, then the up projection), got f32[3,7]");
  EXPECT_ERROR_CONTAINS(one(ir::Op::SwigluGrad, {{DType::f32, {3, 8}}, {DType::f32, {3, 8}}}),
                        "[swiglu_grad] dy f32[3,8] must be x f32[3,8] with its last axis halved");
}

TEST(Builder, ShapeRulesOfLayoutOps) {
  ModelBuilder b;
  Value x = b.input("x", {DType::f32, {2, 3, 4}});
  EXPECT_EQ(b.type(b.reshape(x, {6, -1})).shape, (Shape{6, 4}));
  EXPECT_EQ(b.type(b.transpose(x, {2, 0, 1})).shape, (Shape{4, 2, 3}));
  EXPECT_EQ(b.type(b.slice(x, 1, 1, 100)).shape, (Shape{2, 2, 4}));
  EXPECT_EQ(b.type(b.slice(x, -1, -3, -1)).shape, (Shape{2, 3, 2}));
  EXPECT_EQ(b.type(b.concat({x, x}, 2)).shape, (Shape{2, 3, 8}));
  EXPECT_EQ(b.type(b.reduce_sum(x, {0, 2})).shape, (Shape{3}));
  EXPECT_EQ(b.type(b.reduce_mean(x, {-1}, true)).shape, (Shape{2, 3, 1}));
  Value w = b.param("w", {DType::f32, {4, 5}});
  EXPECT_EQ(b.type(b.matmul(x, w)).shape, (Shape{2, 3, 5}));
  Value bt = b.param("bt", {DType::f32, {7, 5, 4}});
  Value one = b.input("one", {DType::f32, {1, 3, 4}});
  EXPECT_EQ(b.type(b.matmul(one, bt, "", false, true)).shape, (Shape{7, 3, 5}));
  ASSERT_OK(b.status());
  b.reshape(x, {5, -1}, "bad");
  EXPECT_ERROR_CONTAINS(b.build(), "[reshape] cannot reshape f32[2,3,4] to [5,-1] (node 'bad')");
}

}  // namespace
}  // namespace volta
