// The ONNX converters of convolutions and pools, with their shared window attributes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

// auto_pad, kernel_shape, strides, pads, dilations of Conv and the pools as IR attributes.
Result<ir::Attrs> window(Importer& im, const Shape& x, std::vector<int64_t> kernel, bool with_dilations) {
  const size_t sr = x.size() - 2;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> ks, im.attr_ints("kernel_shape"));
  if (!ks.empty() && !kernel.empty() && ks != kernel)
    return im.fail("attribute 'kernel_shape' " + shape_to_string(ks) + " does not match the weight's " + shape_to_string(kernel));
  if (kernel.empty()) kernel = ks;
  if (kernel.size() != sr) return im.fail("attribute 'kernel_shape' must have " + std::to_string(sr) + " entries, got " + shape_to_string(kernel));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> strides, im.attr_ints("strides"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> pads, im.attr_ints("pads"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> dil, im.attr_ints("dilations"));
  VOLTA_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_string("auto_pad", "NOTSET"));
  if (strides.empty()) strides.assign(sr, 1);
  if (dil.empty()) dil.assign(sr, 1);
  if (strides.size() != sr) return im.fail("attribute 'strides' must have " + std::to_string(sr) + " entries");
  if (dil.size() != sr) return im.fail("attribute 'dilations' must have " + std::to_string(sr) + " entries");
  if (!with_dilations && dil != std::vector<int64_t>(sr, 1)) return im.unsupported("attribute 'dilations' is not supported");
  if (auto_pad == "NOTSET") {
    if (pads.empty()) pads.assign(2 * sr, 0);
  } else if (auto_pad == "VALID") {
    pads.assign(2 * sr, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * sr, 0);
    for (size_t d = 0; d < sr; ++d) {
      if (strides[d] < 1 || dil[d] < 1 || kernel[d] < 1 || kernel[d] > (int64_t{1} << 24) || dil[d] > (int64_t{1} << 24))
        return im.fail("bad kernel_shape, strides or dilations");
      const int64_t out = (x[d + 2] + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - x[d + 2]);
      const int64_t small = total / 2, big = total - small;
      pads[d] = auto_pad == "SAME_UPPER" ? small : big;
      pads[d + sr] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else {
    return im.unsupported("attribute 'auto_pad' = '" + auto_pad + "' is not supported");
  }
  if (pads.size() != 2 * sr) return im.fail("attribute 'pads' must have " + std::to_string(2 * sr) + " entries");
  ir::Attrs a{{"strides", strides}, {"pads", pads}};
  if (with_dilations) a.set("dilations", dil);
  a.set("kernel", kernel);
  return a;
}

// A 3-D convolution as one conv2d: X padded along D, then for each output depth od the kD input
// planes it reads (od * stride + kd * dilation) gathered and folded into the channels, the output
// depths into the batch: X' [Do * N, C * kD, H, W] (channel c * kD + kd, so each group keeps its
// channels together) against W [M, C/g * kD, kH, kW]. Each output is then the 2-D one's sum over
// c, kd, kh, kw (in double, rounded once), and the result is moved back to [N, M, Do, Ho, Wo].
Result<int32_t> conv3d_as_2d(Importer& im, int32_t x, int32_t w, std::vector<int32_t> bias, const std::vector<int64_t>& strides,
                             const std::vector<int64_t>& pads, const std::vector<int64_t>& dil, int64_t group) {
  const Shape xs = im.type(x).shape, ws = im.type(w).shape;
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4], M = ws[0], kD = ws[2];
  if (pads[0] > 0 || pads[3] > 0) {
    VOLTA_ASSIGN_OR_RETURN(x, im.emit(Op::Pad, {x}, {{"axis", int64_t{2}}, {"before", pads[0]}, {"after", pads[3]}}));
  }
  const int64_t Dp = D + pads[0] + pads[3], span = (kD - 1) * dil[0] + 1;
  if (strides[0] < 1 || span > Dp) return im.fail("the kernel's depth does not fit the padded input");
  const int64_t Do = (Dp - span) / strides[0] + 1;
  if (Do * kD > (int64_t{1} << 24)) return im.unsupported("a 3-D convolution of " + std::to_string(Do * kD) + " depth taps is too large");
  Tensor taps = Tensor::zeros(DType::i64, {Do * kD});
  for (int64_t od = 0; od < Do; ++od)
    for (int64_t kd = 0; kd < kD; ++kd) taps.data<int64_t>()[od * kD + kd] = od * strides[0] + kd * dil[0];
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.constant(taps));
  VOLTA_ASSIGN_OR_RETURN(int32_t g, im.emit(Op::Gather, {x, idx}, {{"axis", int64_t{2}}}));  // [N, C, Do kD, H, W]
  VOLTA_ASSIGN_OR_RETURN(g, im.reshape(g, {N, C, Do, kD, H, W}));
  VOLTA_ASSIGN_OR_RETURN(g, im.emit(Op::Transpose, {g}, {{"perm", std::vector<int64_t>{2, 0, 1, 3, 4, 5}}}));
  VOLTA_ASSIGN_OR_RETURN(g, im.reshape(g, {Do * N, C * kD, H, W}));
  VOLTA_ASSIGN_OR_RETURN(int32_t w2, im.reshape(w, {M, ws[1] * kD, ws[3], ws[4]}));
  std::vector<int32_t> ins = {g, w2};
  ins.insert(ins.end(), bias.begin(), bias.end());
  ir::Attrs ca{{"strides", std::vector<int64_t>{strides[1], strides[2]}},
               {"pads", std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]}},
               {"dilations", std::vector<int64_t>{dil[1], dil[2]}}, {"groups", group}};
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Conv2d, ins, ca));  // [Do N, M, Ho, Wo]
  const Shape ys = im.type(y).shape;
  VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y, {Do, N, M, ys[2], ys[3]}));
  return im.emit(Op::Transpose, {y}, {{"perm", std::vector<int64_t>{1, 2, 0, 3, 4}}});
}

// Conv with 1, 2 or 3 spatial dims: 2-D is conv2d; 1-D is conv2d over a height of 1; 3-D is
// conv3d_as_2d.
Status conv(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  for (size_t k = 0; k < 3; ++k)
    if (k < 2 || im.has_input(k)) VOLTA_RETURN_IF_ERROR(require_float(im, k));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t w, im.input(1));
  const Shape xs = im.type(x).shape, ws = im.type(w).shape;
  if (xs.size() < 3 || xs.size() > 5 || ws.size() != xs.size())
    return im.unsupported("Conv with 1, 2 or 3 spatial dims is supported (X [N, C, ...] and W of the same rank), got X " +
                          im.type(x).to_string() + " and W " + im.type(w).to_string());
  VOLTA_ASSIGN_OR_RETURN(ir::Attrs a, window(im, xs, std::vector<int64_t>(ws.begin() + 2, ws.end()), true));
  VOLTA_ASSIGN_OR_RETURN(int64_t group, im.attr_int("group", 1));
  std::vector<int64_t> strides = *a.get_ints("strides"), pads = *a.get_ints("pads"), dil = *a.get_ints("dilations");
  std::vector<int32_t> bias;
  if (im.has_input(2)) {
    VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(2));
    bias.push_back(b);
  }
  if (xs.size() == 5) {
    VOLTA_ASSIGN_OR_RETURN(int32_t y, conv3d_as_2d(im, x, w, bias, strides, pads, dil, group));
    return im.set_output(0, y, kFloat);
  }
  const bool one_d = xs.size() == 3;
  if (one_d) {  // [N, C, L] as [N, C, 1, L]
    VOLTA_ASSIGN_OR_RETURN(x, im.reshape(x, {xs[0], xs[1], 1, xs[2]}));
    VOLTA_ASSIGN_OR_RETURN(w, im.reshape(w, {ws[0], ws[1], 1, ws[2]}));
    strides = {1, strides[0]};
    pads = {0, pads[0], 0, pads[1]};
    dil = {1, dil[0]};
  }
  ir::Attrs ca{{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"groups", group}};
  std::vector<int32_t> ins = {x, w};
  ins.insert(ins.end(), bias.begin(), bias.end());
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Conv2d, ins, ca));
  if (one_d) {
    const Shape ys = im.type(y).shape;
    VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y, {ys[0], ys[1], ys[3]}));
  }
  return im.set_output(0, y, kFloat);
}

// Indices computed row-major (max_pool's), as storage_order = 1 wants them: column-major within
// each [H, W] plane, h + w H (2-D only).
Result<int32_t> column_major(Importer& im, int32_t idx, const Shape& xs) {
  if (xs.size() != 4) return im.unsupported("attribute 'storage_order' = 1 needs 2 spatial dims");
  const int64_t H = xs[2], W = xs[3];
  auto k = [&](int64_t v) { return int_constant(im, DType::i64, v); };
  VOLTA_ASSIGN_OR_RETURN(int32_t hw, k(H * W));
  VOLTA_ASSIGN_OR_RETURN(int32_t w_size, k(W));
  VOLTA_ASSIGN_OR_RETURN(int32_t h_size, k(H));
  VOLTA_ASSIGN_OR_RETURN(int32_t plane, im.emit(Op::Div, {idx, hw}));
  VOLTA_ASSIGN_OR_RETURN(int32_t base, im.emit(Op::Mul, {plane, hw}));
  VOLTA_ASSIGN_OR_RETURN(int32_t r, im.emit(Op::Sub, {idx, base}));
  VOLTA_ASSIGN_OR_RETURN(int32_t h, im.emit(Op::Div, {r, w_size}));
  VOLTA_ASSIGN_OR_RETURN(int32_t hw_row, im.emit(Op::Mul, {h, w_size}));
  VOLTA_ASSIGN_OR_RETURN(int32_t w, im.emit(Op::Sub, {r, hw_row}));
  VOLTA_ASSIGN_OR_RETURN(int32_t wh, im.emit(Op::Mul, {w, h_size}));
  VOLTA_ASSIGN_OR_RETURN(int32_t local, im.emit(Op::Add, {wh, h}));
  return im.emit(Op::Add, {base, local});
}

Status pool(Importer& im, Op op) {
  const bool is_max = op == Op::MaxPool;
  int64_t order = 0;
  if (is_max) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}));
    VOLTA_ASSIGN_OR_RETURN(order, im.attr_int("storage_order", 0));
    if (order != 0 && order != 1) return im.fail("attribute 'storage_order' must be 0 or 1, got " + std::to_string(order));
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}));
  }
  // The 8- and 16-bit integer types pool exactly in f32.
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  const bool small_int = is_max && (t == ElemType::kInt8 || t == ElemType::kUint8 || t == ElemType::kInt16 || t == ElemType::kUint16);
  if (!small_int) VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  if (small_int) {
    VOLTA_ASSIGN_OR_RETURN(x, im.emit(Op::Cast, {x}, {{"to", std::string("f32")}}));
  }
  const Shape xs = im.type(x).shape;
  if (xs.size() < 3 || xs.size() > 5) return im.unsupported("X must be [N, C, spatial...] with 1 to 3 spatial dims, got " + im.type(x).to_string());
  VOLTA_ASSIGN_OR_RETURN(ir::Attrs a, window(im, xs, {}, is_max));
  VOLTA_ASSIGN_OR_RETURN(int64_t ceil_mode, im.attr_int("ceil_mode", 0));
  if (ceil_mode) a.set("ceil_mode", int64_t{1});
  if (!is_max) {
    VOLTA_ASSIGN_OR_RETURN(int64_t cip, im.attr_int("count_include_pad", 0));
    if (cip) a.set("count_include_pad", int64_t{1});
  }
  if (is_max && im.wants_output(1)) {  // Indices: the same windows' first max, as flat indices into X
    ir::Attrs ai = a;
    ai.set("indices", int64_t{1});
    VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.emit(op, {x}, ai));
    if (order == 1) {
      VOLTA_ASSIGN_OR_RETURN(idx, column_major(im, idx, xs));
    }
    VOLTA_RETURN_IF_ERROR(im.set_output(1, idx, kInt64));
    if (!im.wants_output(0)) return Status::ok();
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, a));
  if (small_int) {
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {y}, {{"to", std::string("i32")}}));
    return im.set_output(0, y, t);
  }
  return im.set_output(0, y, kFloat);
}

Status global_average_pool(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const size_t rank = im.type(x).shape.size();
  if (rank < 3) return im.fail("X must be [N, C, spatial...], got " + im.type(x).to_string());
  std::vector<int64_t> axes;
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t{1}}}));
  return im.set_output(0, y, kFloat);
}

}  // namespace

void add_vision(ConverterMap& t) {
  t.insert({
      {"AveragePool", [](Importer& im) { return pool(im, Op::AvgPool); }},
      {"Conv", conv},
      {"GlobalAveragePool", global_average_pool},
      {"MaxPool", [](Importer& im) { return pool(im, Op::MaxPool); }},
  });
}

}  // namespace volta::onnx::conv
