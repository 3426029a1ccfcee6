// The ONNX API when Volta is built without libonnx-dev: every call says so.
#include "volta/onnx.h"

namespace volta::onnx {

namespace {
Status absent() { return unimplemented("this Volta was built without ONNX support (install libonnx-dev and reconfigure)"); }
}  // namespace

const char* elem_type_name(int32_t) { return "unknown type"; }
Result<DType> volta_dtype(int32_t) { return absent(); }
bool available() { return false; }
Result<Model> import_model(std::string_view, const std::string&, const ImportOptions&) { return absent(); }
Result<Model> load_model(const std::string&, const ImportOptions&) { return absent(); }
Result<ModelInfo> read_model_info(std::string_view, const std::string&) { return absent(); }
struct ShapedModel::Impl {};
ShapedModel::ShapedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShapedModel::ShapedModel(ShapedModel&&) noexcept = default;
ShapedModel& ShapedModel::operator=(ShapedModel&&) noexcept = default;
ShapedModel::~ShapedModel() = default;
Result<ShapedModel> ShapedModel::load(const std::string&, ImportOptions) { return absent(); }
Result<ShapedModel> ShapedModel::parse(std::string_view, const std::string&, ImportOptions) { return absent(); }
Result<std::shared_ptr<const Model>> ShapedModel::bind(const std::map<std::string, Shape>&) { return absent(); }
uint64_t ShapedModel::hits() const { return 0; }
uint64_t ShapedModel::misses() const { return 0; }
Result<std::string> export_model(const ir::Graph&, const Bindings&, const ExportOptions&) { return absent(); }
Status save_model(const std::string&, const ir::Graph&, const Bindings&, const ExportOptions&) { return absent(); }
Result<TypedTensor> parse_tensor_proto(std::string_view, const std::string&) { return absent(); }
Result<std::string> serialize_tensor_proto(const Tensor&, ElemType, const std::string&) { return absent(); }
Result<TypedTensor> parse_npy(std::string_view, const std::string&) { return absent(); }
Result<std::string> serialize_npy(const Tensor&, ElemType) { return absent(); }
Result<TypedTensor> read_tensor_file(const std::string&) { return absent(); }
Status write_tensor_file(const std::string&, const Tensor&, ElemType, const std::string&) { return absent(); }
Result<Tensor> as_input(const TypedTensor&, const IoValue&, const std::string&) { return absent(); }
Result<ValueFile> read_value_file(const std::string&) { return absent(); }
Result<ValueFile> parse_value(std::string, const std::string&) { return absent(); }
Status as_declared(ValueFile*, bool, bool, const std::string&) { return absent(); }
Status write_value_file(const std::string&, const ValueFile&, const std::string&) { return absent(); }
void give_input(ImportOptions&, const std::string&, const ValueFile&) {}
Status bind_input(const ValueFile&, const IoValue&, const ir::Graph&, const std::string&, Bindings*) { return absent(); }
Result<ValueFile> output_value(const IoValue&, const std::vector<Tensor>&, size_t*) { return absent(); }

}  // namespace volta::onnx
