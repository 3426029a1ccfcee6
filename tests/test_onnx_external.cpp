// ONNX initializers kept in external data files (TensorProto data_location EXTERNAL): read from
// the model's directory at their offset and length, and every bad location, range or size, and a
// model given as bytes, refused with the tensor and file named.
#include <filesystem>
#include <fstream>

#include "onnx_maker.h"
#include "test_util.h"
#include "volta/onnx.h"
#include "volta/runtime.h"

namespace volta {
namespace {

using test::ModelMaker;

// Initializer `name` of `dims` whose data is external: location, offset, length (-1: none).
void external_init(ModelMaker& mm, const std::string& name, int32_t type, const std::vector<int64_t>& dims, const std::string& location,
                   int64_t offset, int64_t length) {
  auto* t = mm.g().add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  entry("location", location);
  if (offset >= 0) entry("offset", std::to_string(offset));
  if (length >= 0) entry("length", std::to_string(length));
}

TEST(OnnxExternalData, InitializersAreReadFromFilesBesideTheModel) {
  if (!onnx::available()) GTEST_SKIP();
  const auto dir = std::filesystem::temp_directory_path() / ("volta_ext_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "weights");
  {  // 16 bytes of something else, then w's 6 floats; b's 2 int64 alone in their own file
    std::ofstream f(dir / "weights" / "data.bin", std::ios::binary);
    f << std::string(16, 'x');
    const float w[6] = {1, 2, 3, 4, 5, 6};
    f.write(reinterpret_cast<const char*>(w), sizeof w);
    std::ofstream g(dir / "b.bin", std::ios::binary);
    const int64_t b[2] = {10, -20};
    g.write(reinterpret_cast<const char*>(b), sizeof b);
  }
  auto model = [&](const std::string& location, int64_t offset, int64_t length) {
    ModelMaker mm(13);
    mm.input("x", {1, 2}).output("y", {1, 3}).output("c", {2}, 7);
    external_init(mm, "w", 1, {2, 3}, location, offset, length);
    external_init(mm, "b", 7, {2}, "b.bin", -1, -1);
    mm.node("MatMul", {"x", "w"}, {"y"});
    mm.node("Identity", {"b"}, {"c"});
    return mm.bytes();
  };
  auto load = [&](const std::string& bytes) {
    { std::ofstream(dir / "m.onnx", std::ios::binary) << bytes; }
    return onnx::load_model((dir / "m.onnx").string());
  };
  auto m = load(model("weights/data.bin", 16, 24));
  ASSERT_OK(m);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  auto out = rt.run(**plan, {{"x", Tensor::from_f32({1, 2}, {1, 10})}});
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(Tensor::from_f32({1, 3}, {41, 52, 63})));  // [1, 10] @ [[1,2,3],[4,5,6]]
  EXPECT_TRUE((*out)[1].bitwise_equal(Tensor::from_i64({2}, {10, -20})));
  // ShapedModel reads them too.
  auto shaped = onnx::ShapedModel::load((dir / "m.onnx").string());
  ASSERT_OK(shaped);
  ASSERT_OK(shaped->bind({}));

  EXPECT_ERROR_CONTAINS(onnx::import_model(model("weights/data.bin", 16, 24), "m.onnx"),
                        "external data of tensor 'w': only a model loaded from its file");
  EXPECT_ERROR_CONTAINS(load(model("../data.bin", 0, 24)), "location '../data.bin' must be a path inside the model's directory");
  EXPECT_ERROR_CONTAINS(load(model("/etc/passwd", 0, 24)), "must be a path inside the model's directory");
  EXPECT_ERROR_CONTAINS(load(model("weights/none.bin", 0, 24)), "cannot open");
  EXPECT_ERROR_CONTAINS(load(model("weights/data.bin", 24, 24)), "bytes [24, 48) are past the end of");
  EXPECT_ERROR_CONTAINS(load(model("weights/data.bin", 16, 20)), "tensor 'w'");  // 20 bytes for 6 floats
  EXPECT_ERROR_CONTAINS(load(model("weights", 0, 24)), "weights' is a directory, not a regular file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace volta
