// ONNX export: an inference graph becomes a ModelProto at opset 17. One emitter per IR op,
// in one table; an op with no single ONNX counterpart is written as a short standard subgraph.
// The result is checked with ONNX's checker and strict shape inference before it is returned.
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx/exporter.h"
#include "volta/checkpoint.h"

namespace volta::onnx {

namespace {

Result<ElemType> elem_type(DType t) {
  switch (t) {
    case DType::f32: return ElemType::kFloat;
    case DType::i32: return ElemType::kInt32;
    case DType::i64: return ElemType::kInt64;
    case DType::f64: break;  // internal to the training step, never exported
    case DType::bf16:
    case DType::f16: return unimplemented(std::string("export: ") + dtype_name(t) + " weights are not exported (export the f32 model)");
  }
  return internal_error("export: unknown dtype");
}

}  // namespace

Status Exporter::run() {
  out_->set_name(g_.name.empty() ? "main" : g_.name);
  names_.resize(g_.size());
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(g_));
  for (int32_t id : order) {
    n_ = &g_.node(id);
    names_[static_cast<size_t>(id)] = fresh(n_->name.empty() ? "v" + std::to_string(id) : n_->name);
    VOLTA_RETURN_IF_ERROR(emit());
  }
  return outputs();
}

Status Exporter::leaf() {
  if (n_->op == Op::Constant) {
    VOLTA_ASSIGN_OR_RETURN(ElemType t, elem_type(n_->value.dtype()));
    return initializer(n_->value, t, self()).status();
  }
  VOLTA_ASSIGN_OR_RETURN(ElemType t, elem_type(n_->type.dtype));
  if (n_->op == Op::Input) {
    ::onnx::ValueInfoProto* v = out_->add_input();
    v->set_name(self());
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int32_t>(t));
    for (int64_t d : n_->type.shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
    return Status::ok();
  }
  auto p = params_.find(n_->name);
  if (p == params_.end()) return fail("the param has no value");
  if (p->second.type() != n_->type)
    return fail("the value is " + p->second.type().to_string() + " but the graph declares " + n_->type.to_string());
  return initializer(p->second, t, self()).status();
}

// matmul with its transposes as Transpose nodes of the last two dims.
Status Exporter::matmul() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Matmul>(*n_));
  if (at->activation == "gelu_grad" || at->activation == "mul")
    return fail("the " + at->activation + " epilogue (a backward op) has no ONNX form");
  if (at->a_perm || at->b_perm || at->out_perm) return fail("operands read through a perm: export the graph before the passes");
  if (at->b_packed) return fail("a packed weight (b_packed): export the graph before the passes");
  if (at->residual) return fail("a residual epilogue: export the graph before the passes");
  std::string ab[2] = {in(0), in(1)};
  const int64_t transposed[2] = {at->transpose_a, at->transpose_b};
  for (size_t k = 0; k < 2; ++k) {
    if (!transposed[k]) continue;
    std::vector<int64_t> perm(in_type(k).shape.size());
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    std::string name = temp(k == 0 ? "a_t" : "b_t");
    attr(node("Transpose", {ab[k]}, name), "perm", perm);
    ab[k] = name;
  }
  // The epilogue: Add of the bias, then Relu or the gelu subgraph.
  const std::string& act = at->activation;
  const bool bias = n_->inputs.size() == 3;
  std::string y = bias || act != "none" ? temp("mm") : self();
  node("MatMul", {ab[0], ab[1]}, y);
  if (bias) {
    const std::string z = act != "none" ? temp("biased") : self();
    node("Add", {y, in(2)}, z);
    y = z;
  }
  if (act == "relu") node("Relu", {y}, self());
  if (act == "gelu") return gelu_of(y, self(), false);
  return Status::ok();
}

// gelu: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Status Exporter::gelu() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Gelu>(*n_));
  return gelu_of(in(0), self(), at->approximate == "tanh");
}

Status Exporter::gelu_of(const std::string& x, const std::string& y, bool tanh_form) {
  std::string inner;
  if (tanh_form) {
    VOLTA_ASSIGN_OR_RETURN(std::string c3, scalar(0.044715, "c3"));
    VOLTA_ASSIGN_OR_RETURN(std::string k, scalar(std::sqrt(2.0 / std::numbers::pi), "k"));
    const std::string x2 = temp("x2"), x3 = temp("x3"), cx3 = temp("cx3"), s = temp("sum"), u = temp("u");
    node("Mul", {x, x}, x2);
    node("Mul", {x2, x}, x3);
    node("Mul", {x3, c3}, cx3);
    node("Add", {x, cx3}, s);
    node("Mul", {s, k}, u);
    inner = temp("tanh");
    node("Tanh", {u}, inner);
  } else {
    VOLTA_ASSIGN_OR_RETURN(std::string r, scalar(1.0 / std::numbers::sqrt2, "rsqrt2"));
    const std::string u = temp("u");
    node("Mul", {x, r}, u);
    inner = temp("erf");
    node("Erf", {u}, inner);
  }
  VOLTA_ASSIGN_OR_RETURN(std::string one, scalar(1.0, "one"));
  VOLTA_ASSIGN_OR_RETURN(std::string half, scalar(0.5, "half"));
  const std::string p = temp("1p"), hx = temp("hx");
  node("Add", {inner, one}, p);
  node("Mul", {x, half}, hx);
  node("Mul", {hx, p}, y);
  return Status::ok();
}

// softmax(scale * x) with columns j > i + causal_offset set to -inf first (exactly 0 after).
Status Exporter::softmax() {
  if (n_->inputs.size() == 2) return fail("a run-time causal offset (a decode step) has no ONNX form here");
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Softmax>(*n_));
  std::string x = in(0);
  if (at->scale != 1.0) {
    VOLTA_ASSIGN_OR_RETURN(std::string c, scalar(at->scale, "scale"));
    std::string y = temp("scaled");
    node("Mul", {x, c}, y);
    x = y;
  }
  if (at->causal_offset) {
    VOLTA_ASSIGN_OR_RETURN(std::string keep, causal_keep(in_type(0).shape, *at->causal_offset));
    VOLTA_ASSIGN_OR_RETURN(std::string ninf, scalar(-std::numeric_limits<double>::infinity(), "ninf"));
    std::string y = temp("masked");
    node("Where", {keep, x, ninf}, y);
    x = y;
  }
  attr(node("Softmax", {x}, self()), "axis", at->axis);
  return Status::ok();
}

Status Exporter::layer_norm() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::LayerNorm>(*n_));
  ::onnx::NodeProto* p = node("LayerNormalization", all_inputs(), self());
  attr(p, "axis", int64_t{-1});
  attr(p, "epsilon", at->eps);
  return Status::ok();
}

// x / sqrt(mean(x^2 over the last axis) + eps) * g
Status Exporter::rms_norm() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::RmsNorm>(*n_));
  VOLTA_ASSIGN_OR_RETURN(std::string e, scalar(at->eps, "eps"));
  const std::string sq = temp("sq"), ms = temp("ms"), mse = temp("ms_eps"), rms = temp("rms"), xn = temp("xn");
  node("Mul", {in(0), in(0)}, sq);
  ::onnx::NodeProto* r = node("ReduceMean", {sq}, ms);
  attr(r, "axes", std::vector<int64_t>{-1});
  attr(r, "keepdims", int64_t{1});
  node("Add", {ms, e}, mse);
  node("Sqrt", {mse}, rms);
  node("Div", {in(0), rms}, xn);
  node("Mul", {xn, in(1)}, self());
  return Status::ok();
}

Status Exporter::slice() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Slice>(*n_));
  VOLTA_ASSIGN_OR_RETURN(std::string s, ints({at->start}, "starts"));
  VOLTA_ASSIGN_OR_RETURN(std::string e, ints({at->end}, "ends"));
  VOLTA_ASSIGN_OR_RETURN(std::string a, ints({at->axis}, "axes"));
  node("Slice", {in(0), s, e, a}, self());
  return Status::ok();
}

Status Exporter::reduce(const char* op_type) {
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, (ir::field_of<Op::ReduceSum, Op::ReduceMean, Op::ReduceMax>(
                                                              *n_, [](const auto& a) { return a.axes; })));
  VOLTA_ASSIGN_OR_RETURN(const int64_t keepdims, (ir::field_of<Op::ReduceSum, Op::ReduceMean, Op::ReduceMax>(
                                                     *n_, [](const auto& a) { return a.keepdims; })));
  ::onnx::NodeProto* p = nullptr;
  if (n_->op == Op::ReduceSum) {  // axes became an input of ReduceSum at opset 13, of the others at 18
    VOLTA_ASSIGN_OR_RETURN(std::string a, ints(axes, "axes"));
    p = node(op_type, {in(0), a}, self());
  } else {
    p = node(op_type, {in(0)}, self());
    attr(p, "axes", axes);
  }
  attr(p, "keepdims", keepdims);
  return Status::ok();
}

Status Exporter::window(const char* op_type) {
  const size_t spatial = in_type(0).shape.size() - 2;
  std::vector<int64_t> kernel;
  if (n_->op == Op::Conv2d) kernel.assign(in_type(1).shape.begin() + 2, in_type(1).shape.end());
  VOLTA_ASSIGN_OR_RETURN(ir::Window w, ir::window_of(*n_, spatial, n_->op == Op::Conv2d ? &kernel : nullptr));
  ::onnx::NodeProto* p = node(op_type, all_inputs(), self());
  if (n_->op == Op::MaxPool && n_->type.dtype == DType::i64) {  // indices: ONNX's second output
    p->set_output(0, temp("values"));
    p->add_output(self());
  }
  attr(p, "kernel_shape", w.kernel);
  attr(p, "strides", w.strides);
  attr(p, "pads", w.pads);
  if (n_->op != Op::AvgPool) attr(p, "dilations", w.dilations);
  if (n_->op == Op::Conv2d) attr(p, "group", w.groups);
  if (n_->op != Op::Conv2d) attr(p, "ceil_mode", int64_t{w.ceil_mode});
  if (n_->op == Op::AvgPool) attr(p, "count_include_pad", int64_t{w.count_include_pad});
  return Status::ok();
}

// Volta holds booleans as f32 0/1: ONNX's BOOL results are cast back, BOOL operands cast to.
Status Exporter::where() {
  const std::string c = temp("cond");
  attr(node("Cast", {in(0)}, c), "to", int64_t{static_cast<int32_t>(ElemType::kBool)});
  node("Where", {c, in(1), in(2)}, self());
  return Status::ok();
}

Status Exporter::equal() {
  const std::string b = temp("bool");
  node("Equal", {in(0), in(1)}, b);
  attr(node("Cast", {b}, self()), "to", int64_t{static_cast<int32_t>(ElemType::kFloat)});
  return Status::ok();
}

Status Exporter::emit() {
  const Op op = n_->op;
  auto same = [&](const char* op_type) { return node(op_type, all_inputs(), self()); };
  // The elementwise ops with an ONNX op type in the op table export one to one.
  if (ir::elementwise_arity(op) > 0 && *ir::op_info(op).onnx != '\0') {
    same(ir::op_info(op).onnx);
    return Status::ok();
  }
  switch (op) {
    case Op::Input: case Op::Param: case Op::Constant: return leaf();
    case Op::Matmul: return matmul();
    case Op::Concat: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Concat>(*n_));
      attr(same("Concat"), "axis", at->axis);
      return Status::ok();
    }
    case Op::Gelu: return gelu();
    case Op::Silu: {
      const std::string s = temp("sigmoid");
      node("Sigmoid", {in(0)}, s);
      node("Mul", {in(0), s}, self());
      return Status::ok();
    }
    case Op::Clip: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Clip>(*n_));
      VOLTA_ASSIGN_OR_RETURN(std::string a, scalar(at->min, "min"));
      VOLTA_ASSIGN_OR_RETURN(std::string b, scalar(at->max, "max"));
      node("Clip", {in(0), a, b}, self());
      return Status::ok();
    }
    case Op::LeakyRelu: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::LeakyRelu>(*n_));
      attr(same("LeakyRelu"), "alpha", at->alpha);
      return Status::ok();
    }
    case Op::Cast: {
      VOLTA_ASSIGN_OR_RETURN(ElemType t, elem_type(n_->type.dtype));
      attr(same("Cast"), "to", int64_t{static_cast<int32_t>(t)});
      return Status::ok();
    }
    case Op::Softmax: return softmax();
    case Op::Attention: return attention();
    case Op::Rope: return rope();
    case Op::Swiglu: return swiglu();
    case Op::LogSoftmax: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::LogSoftmax>(*n_));
      attr(same("LogSoftmax"), "axis", at->axis);
      return Status::ok();
    }
    case Op::LayerNorm: return layer_norm();
    case Op::RmsNorm: return rms_norm();
    case Op::Embedding: attr(same("Gather"), "axis", int64_t{0}); return Status::ok();
    case Op::Gather: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Gather>(*n_));
      attr(same("Gather"), "axis", at->axis);
      return Status::ok();
    }
    case Op::Reshape: case Op::Broadcast: {
      VOLTA_ASSIGN_OR_RETURN(std::string s, ints(n_->type.shape, "shape"));
      node(op == Op::Reshape ? "Reshape" : "Expand", {in(0), s}, self());
      return Status::ok();
    }
    case Op::Transpose: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Transpose>(*n_));
      attr(same("Transpose"), "perm", at->perm);
      return Status::ok();
    }
    case Op::Slice: return slice();
    case Op::Trilu: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Trilu>(*n_));
      VOLTA_ASSIGN_OR_RETURN(std::string kn, initializer(Tensor::from_i64({}, {at->k}), ElemType::kInt64, temp("k")));  // a scalar
      attr(node("Trilu", {in(0), kn}, self()), "upper", at->upper);
      return Status::ok();
    }
    case Op::Pad: {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Pad>(*n_));
      int64_t axis = at->axis;
      const int64_t before = at->before, after = at->after;
      const auto rank = static_cast<int64_t>(in_type(0).shape.size());
      if (axis < 0) axis += rank;
      std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
      pads[static_cast<size_t>(axis)] = before;
      pads[static_cast<size_t>(axis + rank)] = after;
      VOLTA_ASSIGN_OR_RETURN(std::string p, ints(pads, "pads"));
      node("Pad", {in(0), p}, self());
      return Status::ok();
    }
    case Op::Conv2d: return window("Conv");
    case Op::MaxPool: return window("MaxPool");
    case Op::AvgPool: return window("AveragePool");
    case Op::ReduceSum: return reduce("ReduceSum");
    case Op::ReduceMean: return reduce("ReduceMean");
    case Op::ReduceMax: return reduce("ReduceMax");
    case Op::Where: return where();
    case Op::Equal: return equal();
    case Op::CausalMask: return causal_mask();
    case Op::CrossEntropy: case Op::Mse:
      return fail("losses are not exported; export the inference graph (its logits) instead");
    default:
      return fail("a training-only op has no ONNX export; export the forward graph");
  }
}

// Graph outputs keep their node names; a leaf or a repeated output goes through Identity.
Status Exporter::outputs() {
  std::set<int32_t> seen;
  for (int32_t id : g_.outputs) {
    n_ = &g_.node(id);
    std::string name = names_[static_cast<size_t>(id)];
    if (ir::is_leaf(n_->op) || !seen.insert(id).second) {
      const std::string alias = fresh(name + "_out");
      node("Identity", {name}, alias);
      name = alias;
    }
    VOLTA_ASSIGN_OR_RETURN(ElemType t, elem_type(n_->type.dtype));
    ::onnx::ValueInfoProto* v = out_->add_output();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int32_t>(t));
    for (int64_t d : n_->type.shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  return Status::ok();
}

namespace {

// ONNX's checker and strict shape inference; they report by throwing.
Status check(::onnx::ModelProto& m) {
  try {
    ::onnx::checker::check_model(m);
    ::onnx::ModelProto inferred = m;
    ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
  } catch (const std::exception& e) {
    return internal_error(std::string("export: the ONNX checker rejects the exported model: ") + e.what());
  }
  return Status::ok();
}

}  // namespace

Result<std::string> export_model(const ir::Graph& g, const Bindings& params, const ExportOptions& options) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("volta");
  m.set_producer_version(VOLTA_VERSION);
  if (!options.doc.empty()) m.set_doc_string(options.doc);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  for (const auto& [key, value] : options.metadata) {
    auto* p = m.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  Exporter e(g, params, m.mutable_graph());
  VOLTA_RETURN_IF_ERROR(e.run());
  VOLTA_RETURN_IF_ERROR(check(m));
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return internal_error("export: cannot serialize the model (over 2 GiB?)");
  return bytes;
}

Status save_model(const std::string& path, const ir::Graph& g, const Bindings& params, const ExportOptions& options) {
  VOLTA_ASSIGN_OR_RETURN(std::string bytes, export_model(g, params, options));
  return io::write_file_atomic(path, bytes);
}

}  // namespace volta::onnx
