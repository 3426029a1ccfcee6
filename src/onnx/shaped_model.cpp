// onnx::ShapedModel: one parse, one import per distinct set of input shapes (the cache that
// lets a model with dynamic dims run at many shapes, each imported and planned once).
#include "onnx/importer.h"

namespace volta::onnx {

struct ShapedModel::Impl {
  ::onnx::ModelProto proto;
  std::string origin, model_path;  // model_path: the loaded file, beside its external data
  ImportOptions options;
  std::map<std::map<std::string, Shape>, std::shared_ptr<const Model>> bound;
  uint64_t hits = 0, misses = 0;
};

ShapedModel::ShapedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShapedModel::ShapedModel(ShapedModel&&) noexcept = default;
ShapedModel& ShapedModel::operator=(ShapedModel&&) noexcept = default;
ShapedModel::~ShapedModel() = default;

Result<ShapedModel> ShapedModel::parse(std::string_view bytes, const std::string& origin, ImportOptions options) {
  auto impl = std::make_unique<Impl>();
  VOLTA_ASSIGN_OR_RETURN(impl->proto, parse_model(bytes, origin));
  impl->origin = origin;
  impl->options = std::move(options);
  return ShapedModel(std::move(impl));
}

Result<ShapedModel> ShapedModel::load(const std::string& path, ImportOptions options) {
  auto impl = std::make_unique<Impl>();
  VOLTA_ASSIGN_OR_RETURN(impl->proto, read_model(path));
  impl->origin = path;
  impl->model_path = path;
  impl->options = std::move(options);
  return ShapedModel(std::move(impl));
}

Result<std::shared_ptr<const Model>> ShapedModel::bind(const std::map<std::string, Shape>& shapes) {
  if (auto it = impl_->bound.find(shapes); it != impl_->bound.end()) {
    ++impl_->hits;
    return it->second;
  }
  ImportOptions opts = impl_->options;
  for (const auto& [name, shape] : shapes) opts.input_shapes[name] = shape;
  Importer im(impl_->proto, opts, impl_->origin);
  im.set_model_path(impl_->model_path);
  VOLTA_ASSIGN_OR_RETURN(Model m, im.run());
  ++impl_->misses;
  auto shared = std::make_shared<const Model>(std::move(m));
  impl_->bound.emplace(shapes, shared);
  return shared;
}

uint64_t ShapedModel::hits() const { return impl_->hits; }
uint64_t ShapedModel::misses() const { return impl_->misses; }

}  // namespace volta::onnx
