// conv2d, the pools and their gradients: the window family's shape rules, and the Window their
// kernels and the ONNX exporter read, built from the node's typed attributes.
#include <string>
#include <vector>

#include "ir/infer_rules.h"
#include "volta/ir.h"
#include "volta/op_attrs.h"

namespace volta::ir {

using namespace rules;

int64_t Window::out_dim(size_t d, int64_t in) const {
  const int64_t span = dilations[d] * (kernel[d] - 1) + 1;
  const int64_t room = in + pads[d] + pads[d + kernel.size()] - span;
  if (room < 0) return 0;
  int64_t out = room / strides[d] + 1;
  if (ceil_mode && room % strides[d] != 0) {
    // One more window, unless it would start inside the end padding (PyTorch and ONNX drop it).
    if ((out) * strides[d] < in + pads[d]) ++out;
  }
  return out;
}

namespace {

// The window of an op whose typed struct is `at` (conv2d's has no kernel, the pools' no groups),
// checked.
template <typename A>
Result<Window> make_window(Op op, const A& at, size_t spatial, const std::vector<int64_t>* kernel) {
  Window w;
  if constexpr (requires { at.kernel; }) w.kernel = kernel ? *kernel : at.kernel;
  else if (kernel) w.kernel = *kernel;
  else return fail(op, "has no kernel attribute: give the weight's trailing dims");
  w.strides = at.strides.value_or(std::vector<int64_t>(spatial, 1));
  w.pads = at.pads.value_or(std::vector<int64_t>(2 * spatial, 0));
  if constexpr (requires { at.dilations; }) w.dilations = at.dilations.value_or(std::vector<int64_t>(spatial, 1));
  else w.dilations.assign(spatial, 1);
  if constexpr (requires { at.groups; }) w.groups = at.groups;
  if constexpr (requires { at.ceil_mode; }) {
    if (at.ceil_mode != 0 && at.ceil_mode != 1) return fail(op, "ceil_mode must be 0 or 1, got " + std::to_string(at.ceil_mode));
    w.ceil_mode = at.ceil_mode != 0;
  }
  if constexpr (requires { at.count_include_pad; }) {
    if (at.count_include_pad != 0 && at.count_include_pad != 1)
      return fail(op, "count_include_pad must be 0 or 1, got " + std::to_string(at.count_include_pad));
    w.count_include_pad = at.count_include_pad != 0;
  }
  if (w.kernel.size() != spatial || w.strides.size() != spatial || w.dilations.size() != spatial ||
      w.pads.size() != 2 * spatial)
    return fail(op, "kernel, strides and dilations need " + std::to_string(spatial) + " entries and pads " +
                        std::to_string(2 * spatial) + ", got kernel " + shape_to_string(w.kernel) + ", strides " +
                        shape_to_string(w.strides) + ", dilations " + shape_to_string(w.dilations) + ", pads " +
                        shape_to_string(w.pads));
  constexpr int64_t kMax = int64_t{1} << 24;
  for (size_t d = 0; d < spatial; ++d) {
    if (w.kernel[d] < 1 || w.kernel[d] > kMax || w.strides[d] < 1 || w.strides[d] > kMax || w.dilations[d] < 1 ||
        w.dilations[d] > kMax)
      return fail(op, "kernel, strides and dilations must be in [1, 2^24], got kernel " + shape_to_string(w.kernel) +
                          ", strides " + shape_to_string(w.strides) + ", dilations " + shape_to_string(w.dilations));
  }
  for (int64_t p : w.pads)
    if (p < 0 || p > kMax) return fail(op, "pads must be in [0, 2^24], got " + shape_to_string(w.pads));
  if (w.groups < 1 || w.groups > kMax) return fail(op, "groups must be >= 1, got " + std::to_string(w.groups));
  if (op != Op::Conv2d && op != Op::Conv2dGradInput && op != Op::Conv2dGradWeight) {
    for (size_t d = 0; d < spatial; ++d)  // every window must see at least one input element
      if (w.pads[d] >= w.dilations[d] * (w.kernel[d] - 1) + 1 || w.pads[d + spatial] >= w.dilations[d] * (w.kernel[d] - 1) + 1)
        return fail(op, "pads " + shape_to_string(w.pads) + " must be smaller than the window " + shape_to_string(w.kernel));
  }
  return w;
}

// Calls f(op constant) for the window family's ops; anything else is an internal error.
template <typename F>
auto with_window_op(Op op, F&& f) -> decltype(f.template operator()<Op::Conv2d>()) {
  switch (op) {
    case Op::Conv2d: return f.template operator()<Op::Conv2d>();
    case Op::Conv2dGradInput: return f.template operator()<Op::Conv2dGradInput>();
    case Op::Conv2dGradWeight: return f.template operator()<Op::Conv2dGradWeight>();
    case Op::MaxPool: return f.template operator()<Op::MaxPool>();
    case Op::MaxPoolGrad: return f.template operator()<Op::MaxPoolGrad>();
    case Op::AvgPool: return f.template operator()<Op::AvgPool>();
    case Op::AvgPoolGrad: return f.template operator()<Op::AvgPoolGrad>();
    default: return internal_error("[" + std::string(op_name(op)) + "] has no window");
  }
}

}  // namespace

Result<Window> window_attrs(Op op, const Attrs& attrs, size_t spatial, const std::vector<int64_t>* kernel) {
  return with_window_op(op, [&]<Op o>() -> Result<Window> {
    VOLTA_ASSIGN_OR_RETURN(const AttrsOf<o> at, tagged(o, parse_attrs<o>(attrs)));
    return make_window(o, at, spatial, kernel);
  });
}

Result<Window> window_of(const Node& n, size_t spatial, const std::vector<int64_t>* kernel) {
  return with_window_op(n.op, [&]<Op o>() -> Result<Window> {
    VOLTA_ASSIGN_OR_RETURN(const auto at, typed_attrs<o>(n));
    auto w = make_window(o, *at, spatial, kernel);
    if (!w.is_ok()) return invalid_argument(w.status().message() + " " + node_ref(n));
    return w;
  });
}

namespace rules {

// [N, C, spatial...] -> [N, channels, out spatial...]
Result<Shape> window_out_shape(Op op, const Shape& x, const Window& w, int64_t channels) {
  Shape out = {x[0], channels};
  for (size_t d = 0; d + 2 < x.size(); ++d) {
    int64_t o = w.out_dim(d, x[d + 2]);
    if (o < 1)
      return fail(op, "window " + shape_to_string(w.kernel) + " (dilations " + shape_to_string(w.dilations) +
                          ", pads " + shape_to_string(w.pads) + ") does not fit input " + shape_to_string(x));
    out.push_back(o);
  }
  return out;
}

Result<TensorType> infer_conv2d(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  // conv2d: (x, w[, b]); conv2d_grad_input: (w, dy) with shape = x; conv2d_grad_weight: (x, dy) with shape = w
  for (size_t i = 0; i < in.size(); ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], "operand"));
  Shape x, wt;
  if (op == Op::Conv2d) {
    x = in[0].shape, wt = in[1].shape;
  } else {
    VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, tagged(op, attrs.get_ints("shape")));
    x = op == Op::Conv2dGradInput ? shape : in[0].shape;
    wt = op == Op::Conv2dGradInput ? in[0].shape : shape;
  }
  if (x.size() != 4 || wt.size() != 4)
    return fail(op, "x must be [N, C, H, W] and w [M, C/groups, kH, kW], got " + shape_to_string(x) + " and " +
                        shape_to_string(wt));
  for (int64_t d : x) if (d < 0) return fail(op, "negative dim in " + shape_to_string(x));
  for (int64_t d : wt) if (d < 0) return fail(op, "negative dim in " + shape_to_string(wt));
  std::vector<int64_t> kernel = {wt[2], wt[3]};
  VOLTA_ASSIGN_OR_RETURN(Window w, window_attrs(op, attrs, 2, &kernel));
  if (x[1] % w.groups != 0 || wt[0] % w.groups != 0 || wt[1] * w.groups != x[1])
    return fail(op, "channels do not fit groups=" + std::to_string(w.groups) + ": x " + shape_to_string(x) + ", w " +
                        shape_to_string(wt));
  if (op == Op::Conv2d && in.size() == 3 && in[2].shape != Shape{wt[0]})
    return fail(op, "bias must be [" + std::to_string(wt[0]) + "], got " + in[2].to_string());
  VOLTA_ASSIGN_OR_RETURN(Shape y, window_out_shape(op, x, w, wt[0]));
  if (op == Op::Conv2d) return TensorType{DType::f32, y};
  if (in[1].shape != y) return fail(op, "dy must be " + shape_to_string(y) + ", got " + in[1].to_string());
  return TensorType{DType::f32, op == Op::Conv2dGradInput ? x : wt};
}

Result<TensorType> infer_pool(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  // max_pool, avg_pool: (x); max_pool_grad: (x, dy); avg_pool_grad: (dy) with shape = x
  for (size_t i = 0; i < in.size(); ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], "operand"));
  Shape x = in[0].shape;
  if (op == Op::AvgPoolGrad) {
    VOLTA_ASSIGN_OR_RETURN(x, tagged(op, attrs.get_ints("shape")));
  }
  if (x.size() < 3 || x.size() > 5) return fail(op, "x must be [N, C, spatial...] with 1 to 3 spatial dims, got " + shape_to_string(x));
  for (int64_t d : x) if (d < 0) return fail(op, "negative dim in " + shape_to_string(x));
  VOLTA_ASSIGN_OR_RETURN(Window w, window_attrs(op, attrs, x.size() - 2));
  VOLTA_ASSIGN_OR_RETURN(Shape y, window_out_shape(op, x, w, x[1]));
  if (op == Op::MaxPool) {
    VOLTA_ASSIGN_OR_RETURN(const int64_t indices, tagged(op, attrs.get_int("indices", 0)));
    if (indices != 0 && indices != 1) return fail(op, "indices must be 0 or 1, got " + std::to_string(indices));
    return TensorType{indices ? DType::i64 : DType::f32, y};
  }
  if (op == Op::AvgPool) return TensorType{DType::f32, y};
  const TensorType& dy = in[op == Op::MaxPoolGrad ? 1 : 0];
  if (dy.shape != y) return fail(op, "dy must be " + shape_to_string(y) + ", got " + dy.to_string());
  return TensorType{DType::f32, x};
}

}  // namespace rules

}  // namespace volta::ir
