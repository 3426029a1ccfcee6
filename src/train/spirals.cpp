#include "train/spirals.h"

#include <cmath>
#include <cstring>

#include "volta/builder.h"
#include "volta/rng.h"

namespace volta::train {

Status validate(const SpiralsConfig& c) {
  if (c.classes < 2 || c.classes > 1000) return invalid_argument("--classes must be in [2, 1000], got " + std::to_string(c.classes));
  if (c.points_per_class < 1 || c.points_per_class > 1000000)
    return invalid_argument("--points must be in [1, 1000000], got " + std::to_string(c.points_per_class));
  if (c.hidden < 1 || c.hidden > 65536) return invalid_argument("--hidden must be in [1, 65536], got " + std::to_string(c.hidden));
  if (c.batch < 1 || c.batch > 1000000) return invalid_argument("--batch must be in [1, 1000000], got " + std::to_string(c.batch));
  if (c.loss != "ce" && c.loss != "mse") return invalid_argument("--loss must be ce or mse, got '" + c.loss + "'");
  return Status::ok();
}

SpiralData make_spirals(const SpiralsConfig& c, uint64_t seed) {
  const int64_t n = c.classes * c.points_per_class;
  SpiralData d{Tensor::zeros(DType::f32, {n, 2}), Tensor::zeros(DType::i32, {n}), Tensor::zeros(DType::f32, {n, c.classes})};
  const uint64_t stream = stream_for("spirals.noise");
  for (int64_t k = 0; k < c.classes; ++k)
    for (int64_t i = 0; i < c.points_per_class; ++i) {
      const int64_t j = k * c.points_per_class + i;
      const double r = static_cast<double>(i) / static_cast<double>(std::max<int64_t>(c.points_per_class - 1, 1));
      const double t = 4.0 * static_cast<double>(k) + 4.0 * r + 0.2 * standard_normal(seed, stream, static_cast<uint64_t>(j));
      d.x.data<float>()[2 * j] = static_cast<float>(r * std::sin(t));
      d.x.data<float>()[2 * j + 1] = static_cast<float>(r * std::cos(t));
      d.labels.data<int32_t>()[j] = static_cast<int32_t>(k);
      d.one_hot.data<float>()[j * c.classes + k] = 1.0f;
    }
  return d;
}

Result<ir::Graph> build_spirals_mlp(const SpiralsConfig& c, int64_t batch) {
  ModelBuilder b("mlp_spirals");
  Value x = b.input("x", {DType::f32, {batch, 2}});                                  // (B, 2)
  Value w1 = b.param("w1", {DType::f32, {2, c.hidden}}, ParamInit::normal(1.0));       // (2, H)
  Value b1 = b.param("b1", {DType::f32, {c.hidden}}, ParamInit::zeros());              // (H)
  Value w2 = b.param("w2", {DType::f32, {c.hidden, c.classes}},
                     ParamInit::normal(1.0 / std::sqrt(static_cast<double>(c.hidden))));  // (H, C)
  Value b2 = b.param("b2", {DType::f32, {c.classes}}, ParamInit::zeros());              // (C)
  Value h = b.relu(b.add(b.matmul(x, w1, "h.mm"), b1, "h.pre"), "h");                  // (B, H)
  Value logits = b.add(b.matmul(h, w2, "logits.mm"), b2, "logits");                     // (B, C)
  Value loss;
  if (c.loss == "ce") {
    Value labels = b.input("labels", {DType::i32, {batch}});
    loss = b.cross_entropy(logits, labels, "loss");
  } else {
    Value target = b.input("target", {DType::f32, {batch, c.classes}});
    loss = b.mse(logits, target, "loss");
  }
  b.output(loss);
  b.output(logits);
  return b.build();
}

Bindings spirals_batch(const SpiralsConfig& c, const SpiralData& d, uint64_t seed, int64_t step) {
  const int64_t n = d.labels.numel();
  Tensor x = Tensor::zeros(DType::f32, {c.batch, 2});
  Tensor labels = Tensor::zeros(DType::i32, {c.batch});
  Tensor target = Tensor::zeros(DType::f32, {c.batch, c.classes});
  const uint64_t stream = stream_for("spirals.batch");
  for (int64_t i = 0; i < c.batch; ++i) {
    auto r = philox4x32(seed, stream, static_cast<uint64_t>(step * c.batch + i));
    const int64_t j = static_cast<int64_t>(((static_cast<uint64_t>(r[0]) << 32) | r[1]) % static_cast<uint64_t>(n));
    std::memcpy(x.data<float>() + 2 * i, d.x.data<float>() + 2 * j, 2 * sizeof(float));
    labels.data<int32_t>()[i] = d.labels.data<int32_t>()[j];
    std::memcpy(target.data<float>() + i * c.classes, d.one_hot.data<float>() + j * c.classes,
                static_cast<size_t>(c.classes) * sizeof(float));
  }
  if (c.loss == "ce") return {{"x", x}, {"labels", labels}};
  return {{"x", x}, {"target", target}};
}

Result<std::unique_ptr<SpiralsTask>> SpiralsTask::create(const SpiralsConfig& c, uint64_t seed) {
  VOLTA_RETURN_IF_ERROR(validate(c));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, build_spirals_mlp(c, c.batch));
  return std::unique_ptr<SpiralsTask>(new SpiralsTask(c, make_spirals(c, seed), std::move(g)));
}

Result<SpiralsTask::Score> SpiralsTask::score(Runtime& rt, State& params) const {
  const int64_t n = data_.labels.numel();
  VOLTA_ASSIGN_OR_RETURN(ir::Graph full, build_spirals_mlp(c_, n));
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(full));
  const bool ce = c_.loss == "ce";
  const Bindings all = {{"x", data_.x}, {ce ? "labels" : "target", ce ? data_.labels : data_.one_hot}};
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(*plan, all, &params));
  const Tensor& logits = out[1];
  const int64_t classes = logits.shape()[1];
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data<float>() + i * classes;
    int64_t best = 0;
    for (int64_t k = 1; k < classes; ++k)
      if (row[k] > row[best]) best = k;
    right += best == data_.labels.data<int32_t>()[i];
  }
  return Score{static_cast<double>(out[0].data<float>()[0]), static_cast<double>(right) / static_cast<double>(n)};
}

}  // namespace volta::train
