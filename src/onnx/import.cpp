// ONNX ModelProto -> ir::Graph: the import driver. Values are created lazily: a graph input
// or initializer becomes an IR leaf when a node first reads it as a tensor, so an input that
// only feeds shape operands (given in ImportOptions::input_values) never becomes an IR input.
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "backends/cpu/kernels.h"
#include "onnx/importer.h"

namespace volta::onnx {

namespace {

// Past 17: axes of the reductions and Pad become inputs and Split gains num_outputs (18), Gelu is
// added (20); the other changes up to 22 add dtypes or ops Volta refuses by name.
constexpr int64_t kMinOpset = 1, kMaxOpset = 22;
constexpr int64_t kMaxElements = int64_t{1} << 40;   // any value
constexpr int64_t kMaxFoldElements = int64_t{1} << 16;  // values evaluated at import

// numel without overflow; -1 when above kMaxElements.
int64_t bounded_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || (d != 0 && n > kMaxElements / d)) return -1;
    n *= d;
  }
  return n;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

// The declared type of a graph input or output; -1 for each dynamic dim, {-1} for no shape.
Result<std::pair<ElemType, TensorType>> declared_type(const ::onnx::ValueInfoProto& v, const std::string& what) {
  const auto* inner = inner_tensor_type(v.type());
  if (!inner)
    return unimplemented(what + " " + quote(v.name()) +
                         " is not a tensor, a sequence of tensors or an optional of either (map and sparse values are not supported)");
  const auto& tt = *inner;
  VOLTA_ASSIGN_OR_RETURN(DType dt, [&]() -> Result<DType> {
    auto d = volta_dtype(tt.elem_type());
    if (!d.is_ok()) return Status(d.status().code(), what + " " + quote(v.name()) + ": " + d.status().message());
    return d;
  }());
  TensorType t{dt, {}};
  if (!tt.has_shape()) {
    t.shape = {-1};
    return std::make_pair(static_cast<ElemType>(tt.elem_type()), t);
  }
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value()) {
      t.shape.push_back(-1);
      continue;
    }
    if (d.dim_value() < 0) return invalid_argument(what + " " + quote(v.name()) + " has a negative dimension");
    t.shape.push_back(d.dim_value());
  }
  return std::make_pair(static_cast<ElemType>(tt.elem_type()), t);
}

// "INT64[batch,sequence]": a declared type as written, symbolic dims by name, unknown ones as ?
// (a sequence's or optional's: its tensors').
std::string declared_string(const ::onnx::ValueInfoProto& v) {
  const auto* inner = inner_tensor_type(v.type());
  if (!inner) return "not a tensor";
  const auto& tt = *inner;
  std::string s = elem_type_name(tt.elem_type());
  if (!tt.has_shape()) return s + " (no shape)";
  s += "[";
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    s += (d ? "," : "") + (dim.has_dim_value() ? std::to_string(dim.dim_value()) : dim.has_dim_param() ? dim.dim_param() : "?");
  }
  return s + "]";
}

// A graph input's type with its dynamic dims bound: from ImportOptions::input_shapes, else from
// the value given at import. A symbolic dim (dim_param) takes one size across all inputs.
Result<std::pair<ElemType, TensorType>> Importer::bound_input_type(const ::onnx::ValueInfoProto& v) {
  auto decl = declared_type(v, "graph input");
  if (!decl.is_ok()) return Status(decl.status().code(), origin_ + ": " + decl.status().message());
  TensorType& t = decl->second;
  const std::string& name = v.name();
  const Shape* given = nullptr;
  if (auto it = options_.input_shapes.find(name); it != options_.input_shapes.end()) given = &it->second;
  else if (auto iv = options_.input_values.find(name); iv != options_.input_values.end()) given = &iv->second.shape();
  const auto& tt = *inner_tensor_type(v.type());  // declared_type checked it
  const auto& dims = tt.shape().dim();
  if (given) {
    if (!tt.has_shape()) {
      t.shape = *given;
    } else if (given->size() != t.shape.size()) {
      return invalid_argument(origin_ + ": graph input " + quote(name) + " is declared " + declared_string(v) + " but is given shape " +
                              shape_to_string(*given));
    } else {
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (t.shape[d] >= 0 && t.shape[d] != (*given)[d])
          return invalid_argument(origin_ + ": graph input " + quote(name) + " is declared " + declared_string(v) +
                                  " but is given shape " + shape_to_string(*given));
        t.shape[d] = (*given)[d];
      }
    }
  }
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const std::string param = d < static_cast<size_t>(dims.size()) && dims[static_cast<int>(d)].has_dim_param()
                                  ? dims[static_cast<int>(d)].dim_param() : std::string();
    if (t.shape[d] < 0)
      return invalid_argument(origin_ + ": graph input " + quote(name) + " has a dynamic dimension" + (param.empty() ? "" : " " + quote(param)) +
                           ": give its shape (--shape " + name + "=DIMS, an input file, or ImportOptions::input_shapes)");
    if (param.empty()) continue;
    auto [it, fresh] = dim_params_.emplace(param, std::make_pair(t.shape[d], name));
    if (!fresh && it->second.first != t.shape[d])
      return invalid_argument(origin_ + ": dimension " + quote(param) + " is " + std::to_string(it->second.first) + " in input " +
                              quote(it->second.second) + " but " + std::to_string(t.shape[d]) + " in input " + quote(name));
  }
  if (bounded_numel(t.shape) < 0) return invalid_argument(origin_ + ": graph input " + quote(name) + " is too large");
  return decl;
}

Importer::Importer(const ::onnx::ModelProto& model, const ImportOptions& options, std::string origin, bool consume)
    : model_(model), consume_(consume), options_(options), origin_(std::move(origin)) {}

Status Importer::fail(const std::string& what) const {
  return invalid_argument(origin_ + ": " + node_->op_type() + " node " + quote(node_->name().empty() ? "#" + std::to_string(node_index_) : node_->name()) +
                          " (opset " + std::to_string(opset_) + "): " + what);
}

Status Importer::unsupported(const std::string& what) const {
  last_refusal_ = what;
  Status s = fail(what);
  return unimplemented(s.message());
}

std::string Importer::fresh_name(const std::string& base) {
  std::string name = base;
  for (int i = 1; reserved_.count(name) || used_.count(name); ++i) name = base + "." + std::to_string(i);
  return name;
}

Result<int32_t> Importer::add_node(ir::Node n) {
  if (bounded_numel(n.type.shape) < 0) return fail("value " + quote(n.name) + " " + n.type.to_string() + " is too large");
  n.id = static_cast<int32_t>(graph_.nodes.size());
  used_.insert(n.name);
  graph_.nodes.push_back(std::move(n));
  return graph_.nodes.back().id;
}

Result<int32_t> Importer::materialize(const std::string& name, OnnxValue& v) {
  if (v.id >= 0) return v.id;
  ir::Node n;
  n.name = name;
  if (v.initializer) {
    ElemType t;
    int64_t elements = 1;  // from the dims; tensor_from_proto checks them against the data
    for (int64_t d : v.initializer->dims()) elements = d > 0 && elements <= (int64_t{1} << 40) / d ? elements * d : 0;
    const bool release = consume_ && elements > kMaxFoldElements;  // the proto's bytes go right after
    auto value = initializer_value(*v.initializer, model_path_, origin_ + ": initializer " + quote(name), &t, release);
    if (!value.is_ok()) return value.status();
    if (release) {
      loaded_[name] = *value;
      // consume_: the proto is ours. Swapped out, not cleared: clear() keeps the string's capacity.
      std::string().swap(*const_cast<::onnx::TensorProto*>(v.initializer)->mutable_raw_data());
    }
    n.type = value->type();
    if (options_.initializers_as_params && value->dtype() == DType::f32 && computed_type(t) == ElemType::kFloat && !value->shape().empty()) {
      n.op = ir::Op::Param;
      n.attrs.set("init", std::string("zeros"));
      params_[name] = *value;
    } else {
      n.op = ir::Op::Constant;
      n.value = *value;
      if (value->numel() <= kMaxFoldElements) known_[static_cast<int32_t>(graph_.nodes.size())] = *value;
    }
  } else {
    VOLTA_ASSIGN_OR_RETURN(auto decl, bound_input_type(*v.input));
    n.op = ir::Op::Input;
    n.type = decl.second;
  }
  VOLTA_ASSIGN_OR_RETURN(v.id, add_node(std::move(n)));
  return v.id;
}

Result<int32_t> Importer::input(size_t k) {
  if (!has_input(k)) return fail("input " + std::to_string(k) + " is missing");
  const std::string& name = node_->input(static_cast<int>(k));
  auto it = values_.find(name);
  if (it == values_.end())
    return fail("input " + std::to_string(k) + " " + quote(name) + " is not defined by any earlier node, input or initializer");
  if (it->second.sequence) return unsupported("input " + std::to_string(k) + " " + quote(name) + " is a sequence, which only the sequence ops and Identity take");
  if (it->second.absent) return fail("input " + std::to_string(k) + " " + quote(name) + " is an optional that holds nothing");
  return materialize(name, it->second);
}

Result<ElemType> Importer::input_type(size_t k) {
  VOLTA_RETURN_IF_ERROR(input_exists(k));
  return values_.at(node_->input(static_cast<int>(k))).type;
}

Status Importer::input_exists(size_t k) {
  if (!has_input(k)) return fail("input " + std::to_string(k) + " is missing");
  const std::string& name = node_->input(static_cast<int>(k));
  if (!values_.count(name))
    return fail("input " + std::to_string(k) + " " + quote(name) + " is not defined by any earlier node, input or initializer");
  return Status::ok();
}

Result<Tensor> Importer::constant_input(size_t k) {
  VOLTA_RETURN_IF_ERROR(input_exists(k));
  const std::string& name = node_->input(static_cast<int>(k));
  OnnxValue& v = values_.at(name);
  if (v.initializer) {
    if (auto it = loaded_.find(name); it != loaded_.end()) return it->second;
    ElemType t;
    return initializer_value(*v.initializer, model_path_, origin_ + ": initializer " + quote(name), &t);
  }
  if (v.input) {
    auto given = options_.input_values.find(name);
    if (given != options_.input_values.end()) {
      VOLTA_ASSIGN_OR_RETURN(auto decl, bound_input_type(*v.input));
      if (given->second.type() != decl.second)
        return fail("input " + std::to_string(k) + " " + quote(name) + " is declared " + decl.second.to_string() +
                    " but the value given at import is " + given->second.type().to_string());
      return given->second;
    }
  }
  if (v.id >= 0) {
    auto it = known_.find(v.id);
    if (it != known_.end()) return it->second;
  }
  return unsupported("input " + std::to_string(k) + " " + quote(name) +
                     " must be known at import (an initializer, a Constant, or a graph input given a value): it "
                     "determines a shape or attribute");
}

Result<std::vector<int64_t>> Importer::ints_input(size_t k) {
  VOLTA_ASSIGN_OR_RETURN(Tensor t, constant_input(k));
  if (!is_integer(t.dtype()))
    return fail("input " + std::to_string(k) + " " + quote(node_->input(static_cast<int>(k))) + " must be an integer tensor, got " +
                t.type().to_string());
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    out[static_cast<size_t>(i)] = t.dtype() == DType::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
  return out;
}

Status Importer::allow_attrs(std::initializer_list<const char*> names) const {
  for (const auto& a : node_->attribute()) {
    bool ok = false;
    for (const char* n : names) ok = ok || a.name() == n;
    if (!ok) return unsupported("attribute " + quote(a.name()) + " is not supported");
  }
  return Status::ok();
}

const ::onnx::AttributeProto* Importer::attr(const char* name) const {
  for (const auto& a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Result<int64_t> Importer::attr_int(const char* name, int64_t fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::INT) return fail("attribute " + quote(name) + " must be an INT");
  return a->i();
}

Result<double> Importer::attr_float(const char* name, double fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::FLOAT) return fail("attribute " + quote(name) + " must be a FLOAT");
  return static_cast<double>(a->f());
}

Result<std::vector<int64_t>> Importer::attr_ints(const char* name) const {
  const auto* a = attr(name);
  if (!a) return std::vector<int64_t>{};
  if (a->type() != ::onnx::AttributeProto::INTS) return fail("attribute " + quote(name) + " must be INTS");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<std::string> Importer::attr_string(const char* name, std::string fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::STRING) return fail("attribute " + quote(name) + " must be a STRING");
  return a->s();
}

Result<int32_t> Importer::emit(ir::Op op, std::vector<int32_t> inputs, ir::Attrs attrs) {
  std::vector<TensorType> types;
  for (int32_t id : inputs) {
    if (id < 0 || id >= static_cast<int32_t>(graph_.nodes.size())) return internal_error("emit: bad input id");
    types.push_back(graph_.node(id).type);
  }
  auto t = ir::infer_type(op, types, attrs);
  if (!t.is_ok()) return fail(t.status().message());
  ir::Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.type = *t;
  const std::string base = node_->output_size() > 0 && !node_->output(0).empty() ? node_->output(0) : node_->op_type();
  n.name = fresh_name(base + "/" + ir::op_name(op));
  // Values computed from known values are known too (small ones; constant folding does the rest).
  bool all_known = bounded_numel(n.type.shape) >= 0 && n.type.numel() <= kMaxFoldElements;
  std::vector<Tensor> args;
  for (int32_t id : n.inputs) {
    auto it = known_.find(id);
    if (it == known_.end()) { all_known = false; break; }
    args.push_back(it->second);
  }
  if (all_known) {
    auto v = cpu::evaluate_reference(n, args);
    if (!v.is_ok()) return fail(v.status().message());
    known_[static_cast<int32_t>(graph_.nodes.size())] = *v;
  }
  return add_node(std::move(n));
}

Result<int32_t> Importer::constant(Tensor value) {
  ir::Node n;
  n.op = ir::Op::Constant;
  n.type = value.type();
  n.value = value;
  const std::string base = node_->output_size() > 0 && !node_->output(0).empty() ? node_->output(0) : node_->op_type();
  n.name = fresh_name(base + "/constant");
  if (value.numel() <= kMaxFoldElements) known_[static_cast<int32_t>(graph_.nodes.size())] = value;
  return add_node(std::move(n));
}

Result<int32_t> Importer::reshape(int32_t x, Shape shape) {
  if (type(x).shape == shape) return x;
  return emit(ir::Op::Reshape, {x}, {{"shape", shape}});
}

Status Importer::set_output(size_t k, int32_t id, ElemType t) {
  if (k >= static_cast<size_t>(node_->output_size()) || node_->output(static_cast<int>(k)).empty()) return Status::ok();
  const std::string& name = node_->output(static_cast<int>(k));
  if (values_.count(name)) return fail("output " + quote(name) + " is defined twice");
  // A node made for this ONNX node takes the ONNX value's name.
  if (id >= node_first_id_ && !used_.count(name) && !reserved_.count(graph_.node(id).name)) {
    used_.erase(graph_.node(id).name);
    graph_.node(id).name = name;
    used_.insert(name);
  }
  OnnxValue v;
  v.id = id;
  v.type = t;
  values_[name] = v;
  return Status::ok();
}

// One error for every refused node: the first refusal's own message when it is the only one,
// else each (op type, reason) with its count and first node names, on one line.
Status Importer::refusal_report() const {
  size_t nodes = 0;
  for (const Refusal& r : refusals_) nodes += r.nodes.size();
  const std::string unchecked =
      skipped_ == 0 ? "" : " (" + std::to_string(skipped_) + " node" + (skipped_ == 1 ? "" : "s") + " reading their outputs not checked)";
  if (nodes == 1) return unimplemented(first_refusal_.message() + unchecked);
  std::string msg = origin_ + ": " + std::to_string(nodes) + " nodes are not supported, " + std::to_string(refusals_.size()) +
                    " distinct reason" + (refusals_.size() == 1 ? "" : "s") + unchecked + ": ";
  for (size_t i = 0; i < refusals_.size(); ++i) {
    const Refusal& r = refusals_[i];
    std::string names;
    for (size_t k = 0; k < r.nodes.size() && k < 3; ++k) names += (k ? ", " : "") + quote(r.nodes[k]);
    if (r.nodes.size() > 3) names += ", ...";
    msg += (i ? "; " : "") + r.op_type + " x" + std::to_string(r.nodes.size()) + " (" + names + "): " + r.what;
  }
  return unimplemented(msg);
}

Result<Model> Importer::run() {
  // The default domain's opset decides attribute and input forms.
  bool have_default = false;
  for (const auto& o : model_.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      opset_ = o.version();
      have_default = true;
    }
  }
  if (!have_default) return unimplemented(origin_ + ": the model imports no default-domain (ai.onnx) opset");
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return unimplemented(origin_ + ": opset " + std::to_string(opset_) + " is not supported (" + std::to_string(kMinOpset) +
                         " to " + std::to_string(kMaxOpset) + " are)");
  const ::onnx::GraphProto& g = model_.graph();
  graph_.name = g.name().empty() ? "onnx" : g.name();
  if (g.sparse_initializer_size() > 0) return unimplemented(origin_ + ": sparse initializers are not supported");

  for (const auto& init : g.initializer()) {
    if (init.name().empty()) return invalid_argument(origin_ + ": an initializer has no name");
    if (values_.count(init.name())) return invalid_argument(origin_ + ": initializer " + quote(init.name()) + " is defined twice");
    OnnxValue v;
    v.initializer = &init;
    v.type = computed_type(static_cast<ElemType>(init.data_type()));
    values_[init.name()] = v;
    reserved_.insert(init.name());
  }
  std::vector<const ::onnx::ValueInfoProto*> inputs;
  for (const auto& in : g.input()) {
    if (in.name().empty()) return invalid_argument(origin_ + ": a graph input has no name");
    auto it = values_.find(in.name());
    if (it != values_.end()) {
      if (it->second.initializer) continue;  // an initializer listed as input (IR < 4): a constant
      return invalid_argument(origin_ + ": graph input " + quote(in.name()) + " is listed twice");
    }
    auto decl = declared_type(in, "graph input");
    if (!decl.is_ok()) return Status(decl.status().code(), origin_ + ": " + decl.status().message());
    OnnxValue v;
    v.input = &in;
    v.type = computed_type(decl->first);
    values_[in.name()] = v;
    reserved_.insert(in.name());
    inputs.push_back(&in);
  }
  for (const auto& n : g.node())
    for (const auto& o : n.output()) reserved_.insert(o);
  VOLTA_RETURN_IF_ERROR(bind_sequence_inputs(inputs));
  for (const auto* in : inputs) {  // every dynamic dim bound
    const OnnxValue& v = values_.at(in->name());
    if (!v.sequence && !v.absent) VOLTA_RETURN_IF_ERROR(bound_input_type(*in).status());
  }

  std::set<std::string> refused_values;  // outputs of refused (or unchecked) nodes
  for (int i = 0; i < g.node_size(); ++i) {
    node_ = &g.node(i);
    node_index_ = i;
    node_first_id_ = static_cast<int32_t>(graph_.nodes.size());
    bool reads_refused = false;
    for (const auto& in : node_->input()) reads_refused = reads_refused || refused_values.count(in) != 0;
    Status s = Status::ok();
    if (reads_refused) {
      ++skipped_;
    } else {
      last_refusal_.clear();
      s = !node_->domain().empty() && node_->domain() != "ai.onnx" ? unsupported("domain " + quote(node_->domain()) + " is not supported")
                                                                  : convert(*this);
      if (s.is_ok()) continue;
      if (s.code() != StatusCode::kUnimplemented) return s;
      const std::string what = last_refusal_.empty() ? s.message() : last_refusal_;
      const std::string name = node_->name().empty() ? "#" + std::to_string(i) : node_->name();
      auto it = std::find_if(refusals_.begin(), refusals_.end(),
                             [&](const Refusal& r) { return r.op_type == node_->op_type() && r.what == what; });
      if (it == refusals_.end()) refusals_.push_back({node_->op_type(), what, {}}), it = refusals_.end() - 1;
      it->nodes.push_back(name);
      if (refusals_.size() == 1 && it->nodes.size() == 1) first_refusal_ = s;
    }
    for (const auto& o : node_->output()) {
      refused_values.insert(o);
      values_.erase(o);
    }
  }
  node_ = nullptr;
  if (!refusals_.empty()) return refusal_report();

  Model m;
  m.opset = opset_;
  m.producer = model_.producer_name() + (model_.producer_version().empty() ? "" : " " + model_.producer_version());
  // Inputs no node read as a tensor still belong to the interface unless given at import.
  for (const auto* in : inputs) {
    OnnxValue& v = values_.at(in->name());
    if (v.sequence || v.absent) {
      VOLTA_ASSIGN_OR_RETURN(IoValue io, sequence_input_io(*in, v));
      m.inputs.push_back(std::move(io));
      continue;
    }
    if (v.id < 0 && !options_.input_values.count(in->name())) VOLTA_RETURN_IF_ERROR(materialize(in->name(), v).status());
    IoValue io;
    io.name = in->name();
    VOLTA_ASSIGN_OR_RETURN(auto decl, bound_input_type(*in));
    io.onnx_type = decl.first;  // as declared (DOUBLE, not FLOAT)
    io.type = decl.second;
    io.node = v.id;
    io.optional = v.optional;
    m.inputs.push_back(io);
  }
  if (g.output_size() == 0) return invalid_argument(origin_ + ": the graph has no outputs");
  for (const auto& out : g.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end())
      return invalid_argument(origin_ + ": graph output " + quote(out.name()) + " is not produced by any node, input or initializer");
    bool sequence = false, optional = false;
    if (it->second.sequence || it->second.absent || (inner_tensor_type(out.type(), &sequence, &optional) && sequence)) {
      VOLTA_RETURN_IF_ERROR(add_sequence_output(out, it->second, m));
      continue;
    }
    VOLTA_ASSIGN_OR_RETURN(int32_t id, materialize(out.name(), it->second));
    VOLTA_ASSIGN_OR_RETURN(auto decl, declared_type(out, "graph output"));
    if (decl.first == ElemType::kString)
      return unimplemented(origin_ + ": graph output " + quote(out.name()) + " is STRING (STRING values only feed casts to float types)");
    const TensorType& got = graph_.node(id).type;
    bool shape_ok = decl.second.shape == Shape{-1} && !inner_tensor_type(out.type())->has_shape();
    if (!shape_ok && decl.second.shape.size() == got.shape.size()) {
      shape_ok = true;
      for (size_t d = 0; d < got.shape.size(); ++d) shape_ok = shape_ok && (decl.second.shape[d] < 0 || decl.second.shape[d] == got.shape[d]);
    }
    if (computed_type(decl.first) != it->second.type || !shape_ok)
      return invalid_argument(origin_ + ": graph output " + quote(out.name()) + " is declared " + elem_type_name(static_cast<int32_t>(decl.first)) +
                              shape_to_string(decl.second.shape) + " but the import computes " +
                              elem_type_name(static_cast<int32_t>(it->second.type)) + shape_to_string(got.shape));
    IoValue io;
    io.name = out.name();
    io.onnx_type = decl.first;  // as declared: a DOUBLE output is written back as DOUBLE
    io.type = got;
    io.node = id;
    io.optional = optional;
    m.outputs.push_back(io);
    graph_.outputs.push_back(id);
  }
  // An input given at import that is also a graph output became an IR input above: bound at run.
  for (IoValue& io : m.inputs)
    if (auto it = values_.find(io.name); io.node < 0 && it != values_.end() && !it->second.sequence) io.node = it->second.id;
  VOLTA_RETURN_IF_ERROR(recognize_exported_forms(graph_));
  m.graph = std::move(graph_);
  m.params = std::move(params_);
  return m;
}

Result<::onnx::ModelProto> parse_model(std::string_view bytes, const std::string& origin) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return invalid_argument(origin + ": file is too large for protobuf");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return parse_error(origin + ": not an ONNX model (protobuf parse failed; truncated or not a ModelProto)");
  if (!model.has_graph()) return parse_error(origin + ": the model has no graph");
  return model;
}


Result<Model> import_model(std::string_view bytes, const std::string& origin, const ImportOptions& options) {
  VOLTA_ASSIGN_OR_RETURN(::onnx::ModelProto model, parse_model(bytes, origin));
  Importer im(model, options, origin);
  return im.run();
}

Result<::onnx::ModelProto> read_model(const std::string& path) {
  ::onnx::ModelProto model;
  // Streamed from the descriptor: the file's bytes are never held whole beside the parsed proto.
  const auto parse = [&](int fd, uint64_t) -> Status {
    std::string head(16, '\0');
    const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
    head.resize(n > 0 ? static_cast<size_t>(n) : 0);
    VOLTA_RETURN_IF_ERROR(io::expect_kind(head, io::FileKind::Onnx, path));
    google::protobuf::io::FileInputStream in(fd);
    if (!model.ParseFromZeroCopyStream(&in))
      return parse_error(path + ": not an ONNX model (protobuf parse failed; truncated or not a ModelProto)");
    return Status::ok();
  };
  VOLTA_RETURN_IF_ERROR(io::read_file_with(path, {uint64_t{2} << 30, ""}, parse));
  if (!model.has_graph()) return parse_error(path + ": the model has no graph");
  return model;
}

Result<Model> load_model(const std::string& path, const ImportOptions& options) {
  VOLTA_ASSIGN_OR_RETURN(::onnx::ModelProto model, read_model(path));
  Importer im(model, options, path, true);  // the proto's weights are released as they become tensors
  im.set_model_path(path);
  return im.run();
}

Result<ModelInfo> read_model_info(std::string_view bytes, const std::string& origin) {
  VOLTA_ASSIGN_OR_RETURN(::onnx::ModelProto model, parse_model(bytes, origin));
  ModelInfo info;
  const auto& g = model.graph();
  for (const auto& n : g.node()) info.op_types.push_back(n.op_type());
  std::set<std::string> inits;
  for (const auto& i : g.initializer()) inits.insert(i.name());
  bool sequence = false, optional = false;
  auto elem_type = [&](const ::onnx::ValueInfoProto& v) {
    const auto* tt = inner_tensor_type(v.type(), &sequence, &optional);
    return tt ? static_cast<ElemType>(tt->elem_type()) : ElemType::kUndefined;
  };
  for (const auto& i : g.input()) {
    if (inits.count(i.name())) continue;
    info.inputs.push_back(i.name());
    info.input_types.push_back(elem_type(i));
    info.input_sequence.push_back(sequence);
    info.input_optional.push_back(optional);
  }
  for (const auto& o : g.output()) {
    info.outputs.push_back(o.name());
    info.output_types.push_back(elem_type(o));
  }
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") info.opset = o.version();
  return info;
}

}  // namespace volta::onnx
