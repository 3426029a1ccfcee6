// ModelBuilder: the C++ way to write a graph. Every call validates its operands at once.
// The first error is kept (later calls become no-ops) and returned by build(), so model code
// reads as a straight layer loop:
//
//   ModelBuilder b("mlp");
//   auto x  = b.input("x", {DType::f32, {32, 4}});
//   auto w1 = b.param("w1", {DType::f32, {4, 16}}, ParamInit::normal(0.5));
//   auto h  = b.relu(b.matmul(x, w1, "h"));
//   b.output(h);
//   Result<ir::Graph> g = b.build();   // "[matmul] inner dims 3 != 4 (node 'h')" on error
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "volta/ir.h"

namespace volta {

// A handle to a value being built (a node id); invalid after an error.
struct Value {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

struct ParamInit {
  std::string kind = "normal";  // normal | uniform | zeros | ones
  double std = 0.02;            // normal
  double scale = 0.0;           // uniform in [-scale, scale]
  bool trainable = true;
  static ParamInit normal(double std) { return {"normal", std, 0.0, true}; }
  static ParamInit uniform(double scale) { return {"uniform", 0.0, scale, true}; }
  static ParamInit zeros() { return {"zeros", 0.0, 0.0, true}; }
  static ParamInit ones() { return {"ones", 0.0, 0.0, true}; }
};

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string graph_name = "main");
  // Continues building on top of an existing graph (its values are Value{id}).
  explicit ModelBuilder(ir::Graph start);

  // Leaves
  Value input(const std::string& name, TensorType type);
  Value param(const std::string& name, TensorType type, const ParamInit& init = {});
  Value constant(const std::string& name, Tensor value);
  Value scalar(float v, const std::string& name = "");  // f32[] constant

  // Any op from the op table; `name` empty -> "<op>.<id>".
  Value op(ir::Op op, std::vector<Value> inputs, ir::Attrs attrs = {}, const std::string& name = "");

  Value matmul(Value a, Value b, const std::string& name = "", bool transpose_a = false, bool transpose_b = false);
  Value add(Value a, Value b, const std::string& name = "") { return op(ir::Op::Add, {a, b}, {}, name); }
  Value sub(Value a, Value b, const std::string& name = "") { return op(ir::Op::Sub, {a, b}, {}, name); }
  Value mul(Value a, Value b, const std::string& name = "") { return op(ir::Op::Mul, {a, b}, {}, name); }
  Value div(Value a, Value b, const std::string& name = "") { return op(ir::Op::Div, {a, b}, {}, name); }
  Value neg(Value x, const std::string& name = "") { return op(ir::Op::Neg, {x}, {}, name); }
  Value exp(Value x, const std::string& name = "") { return op(ir::Op::Exp, {x}, {}, name); }
  Value log(Value x, const std::string& name = "") { return op(ir::Op::Log, {x}, {}, name); }
  Value sqrt(Value x, const std::string& name = "") { return op(ir::Op::Sqrt, {x}, {}, name); }
  Value tanh(Value x, const std::string& name = "") { return op(ir::Op::Tanh, {x}, {}, name); }
  Value relu(Value x, const std::string& name = "") { return op(ir::Op::Relu, {x}, {}, name); }
  Value gelu(Value x, const std::string& name = "", bool tanh_approx = false);
  Value silu(Value x, const std::string& name = "") { return op(ir::Op::Silu, {x}, {}, name); }
  Value sigmoid(Value x, const std::string& name = "") { return op(ir::Op::Sigmoid, {x}, {}, name); }
  Value softmax(Value x, int64_t axis = -1, const std::string& name = "");
  Value log_softmax(Value x, int64_t axis = -1, const std::string& name = "");
  Value layer_norm(Value x, Value gamma, Value beta, double eps = 1e-5, const std::string& name = "");
  Value layer_norm(Value x, Value gamma, double eps = 1e-5, const std::string& name = "");
  Value rms_norm(Value x, Value gamma, double eps = 1e-5, const std::string& name = "");
  Value embedding(Value table, Value ids, const std::string& name = "");
  Value reshape(Value x, std::vector<int64_t> shape, const std::string& name = "");
  Value transpose(Value x, std::vector<int64_t> perm, const std::string& name = "");
  Value slice(Value x, int64_t axis, int64_t start, int64_t end, const std::string& name = "");
  Value concat(std::vector<Value> xs, int64_t axis, const std::string& name = "");
  Value reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims = false, const std::string& name = "");
  Value reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims = false, const std::string& name = "");
  Value reduce_max(Value x, std::vector<int64_t> axes, bool keepdims = false, const std::string& name = "");
  Value where(Value cond, Value a, Value b, const std::string& name = "") { return op(ir::Op::Where, {cond, a, b}, {}, name); }
  Value causal_mask(Value x, int64_t offset = 0, const std::string& name = "");
  Value cross_entropy(Value logits, Value targets, const std::string& name = "");
  Value cross_entropy(Value logits, Value targets, int64_t ignore_index, const std::string& name);
  Value mse(Value a, Value b, const std::string& name = "") { return op(ir::Op::Mse, {a, b}, {}, name); }
  // Rotary position embeddings of x [..., T, D] from tables [P, D/2] (rope_table), at positions
  // 0..T-1 or, with `position` (i32 [1]), position..position+T-1.
  Value rope(Value x, Value cos, Value sin, Value position = {}, const std::string& name = "");

  void output(Value v);

  // The type of a built value (f32[] for an invalid handle).
  TensorType type(Value v) const;
  // The first error so far, ok if none.
  const Status& status() const { return status_; }
  // The graph, or the first error. The builder may be reused only after build().
  Result<ir::Graph> build();

 private:
  Value add_node(ir::Node node);
  bool usable(std::initializer_list<Value> vs);
  Status status_;
  ir::Graph graph_;
  std::unordered_set<std::string> names_;  // of graph_'s nodes: a constant-time duplicate check (membership only)
};

// A rotary table [positions, dim / 2] for the rope op: cos (or, with `sine`, sin) of
// p * theta^(-2i / dim) at row p, column i, computed in double and rounded to f32.
Tensor rope_table(int64_t positions, int64_t dim, double theta, bool sine);

}  // namespace volta
