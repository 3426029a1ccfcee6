// ONNX initializers kept in external data files (TensorProto data_location EXTERNAL): read from
// the model's directory at their offset and length, and every bad location, range or size, and a
// model given as bytes, refused with the tensor and file named.
#include <filesystem>
#include <fstream>
#include <limits>

#include "cli_util.h"
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
  EXPECT_ERROR_CONTAINS(load(model("weights/data.bin", 100000000000000000, 24)),
                        "bytes [100000000000000000, 100000000000000024) are past the end of");
  EXPECT_ERROR_CONTAINS(load(model("weights/data.bin", std::numeric_limits<int64_t>::max(), 24)),
                        "offset '9223372036854775807' is not a byte count (at most 18 decimal digits");
  EXPECT_ERROR_CONTAINS(load(model("weights/data.bin", 16, 20)), "tensor 'w'");  // 20 bytes for 6 floats
  EXPECT_ERROR_CONTAINS(load(model("weights", 0, 24)), "weights' is a directory, not a regular file");
  EXPECT_ERROR_CONTAINS(load(model(".", 0, 24)), "location '.' is the model's directory, not a file in it");
  // A slice of another size than the tensor's is refused before it is read: to the end of a
  // 64 GiB (sparse) file, which was read whole first.
  std::ofstream(dir / "weights" / "huge.bin").close();
  std::filesystem::resize_file(dir / "weights" / "huge.bin", uint64_t{64} << 30);
  EXPECT_ERROR_CONTAINS(load(model("weights/huge.bin", 0, -1)), "tensor 'w' [2,3] of FLOAT needs 24 bytes of data but has 68719476736");
  std::filesystem::remove_all(dir);
}

// A location that is a link is followed only to where the model may read: its own directory, or
// the directory of the model file's target (a Hugging Face cache: the model and its data are
// links from snapshots/REV/ into one blobs/ folder). A link out of those is refused before a read.
TEST(OnnxExternalData, LinksMayNotLeadOutOfTheModelsDirectory) {
  if (!onnx::available()) GTEST_SKIP();
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("volta_ext_links_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "model");
  fs::create_directories(dir / "elsewhere");
  fs::create_directories(dir / "hub" / "blobs");
  fs::create_directories(dir / "hub" / "snapshots" / "rev");
  const float w[6] = {1, 2, 3, 4, 5, 6};
  for (const fs::path& p : {dir / "elsewhere" / "w.bin", dir / "hub" / "blobs" / "b2"})
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof w);
  ModelMaker mm(13);
  mm.input("x", {1, 2}).output("y", {1, 3});
  external_init(mm, "w", 1, {2, 3}, "w.bin", 0, 24);
  mm.node("MatMul", {"x", "w"}, {"y"});
  std::ofstream(dir / "model" / "m.onnx", std::ios::binary) << mm.bytes();
  fs::create_symlink(dir / "elsewhere" / "w.bin", dir / "model" / "w.bin");
  EXPECT_ERROR_CONTAINS(onnx::load_model((dir / "model" / "m.onnx").string()),
                        "external data of tensor 'w': location 'w.bin' is a link that leads out of the model's directory");
  fs::remove(dir / "model" / "w.bin");
  fs::create_directory_symlink(dir / "elsewhere", dir / "model" / "sub");  // a linked folder, the same
  ModelMaker sub(13);
  sub.input("x", {1, 2}).output("y", {1, 3});
  external_init(sub, "w", 1, {2, 3}, "sub/w.bin", 0, 24);
  sub.node("MatMul", {"x", "w"}, {"y"});
  std::ofstream(dir / "model" / "m.onnx", std::ios::binary) << sub.bytes();
  EXPECT_ERROR_CONTAINS(onnx::load_model((dir / "model" / "m.onnx").string()), "is a link that leads out of the model's directory");
  // The cache's layout loads: both links lead into blobs/.
  std::ofstream(dir / "hub" / "blobs" / "b1", std::ios::binary) << mm.bytes();
  fs::create_symlink("../../blobs/b1", dir / "hub" / "snapshots" / "rev" / "m.onnx");
  fs::create_symlink("../../blobs/b2", dir / "hub" / "snapshots" / "rev" / "w.bin");
  auto m = onnx::load_model((dir / "hub" / "snapshots" / "rev" / "m.onnx").string());
  ASSERT_OK(m);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  auto out = rt.run(**plan, {{"x", Tensor::from_f32({1, 2}, {1, 10})}});
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(Tensor::from_f32({1, 3}, {41, 52, 63})));
  fs::remove_all(dir);
}

// A node's extra inputs or outputs, or an attribute given twice, are refused, not dropped; and a
// NUL in a name from the file is printed escaped, so the CLI's line does not end there.
TEST(OnnxImportForm, ExtraInputsAndRepeatedAttributesAreRefused) {
  if (!onnx::available()) GTEST_SKIP();
  auto refused = [](const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, bool twice) {
    ModelMaker mm(13);
    mm.input("x", {2}).input("z", {2}).output("y", {2});
    auto* n = mm.node(op, std::move(ins), std::move(outs));
    n->set_name("n");
    for (int i = 0; i < (twice ? 2 : 0); ++i) {
      auto* a = n->add_attribute();
      a->set_name("axis");
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(0);
    }
    return onnx::import_model(mm.bytes(), "m.onnx");
  };
  EXPECT_ERROR_CONTAINS(refused("Relu", {"x", "z"}, {"y"}, false), "m.onnx: Relu node 'n' (opset 13): has 2 inputs; the op takes at most 1");
  EXPECT_ERROR_CONTAINS(refused("Add", {"x", "z", "x"}, {"y"}, false), "Add node 'n' (opset 13): has 3 inputs; the op takes at most 2");
  EXPECT_ERROR_CONTAINS(refused("Relu", {"x"}, {"y", "w"}, false), "has 2 outputs; the op gives at most 1");
  EXPECT_ERROR_CONTAINS(refused("Softmax", {"x"}, {"y"}, true), "Softmax node 'n' (opset 13): attribute 'axis' is given twice");
  ASSERT_OK(refused("Add", {"x", "z"}, {"y"}, false));

  ModelMaker mm(13);
  mm.input("x", {2}).output("y", {2});
  mm.node(std::string("Fr\0ob", 5), {"x"}, {"y"});
  const std::string path = ::testing::TempDir() + "volta_nul_" + std::to_string(::getpid()) + ".onnx";
  std::ofstream(path, std::ios::binary) << mm.bytes();
  const Cli r = volta("inspect " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("op type 'Fr\\x00ob' is not supported"), std::string::npos) << r.err;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace volta
