// ONNX import: models built with the protobuf classes, imported and run through the Runtime;
// every malformed or unsupported model is one clear error naming the node, op, opset and the
// attribute or input; the CLI runs .onnx models on .pb and .npy files.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>

#include "onnx/importer.h"
#include "onnx_maker.h"
#include "onnx/onnx_util.h"
#include "test_util.h"
#include "volta/onnx.h"
#include "volta/runtime.h"

namespace volta {
namespace {

namespace fs = std::filesystem;
using test::ModelMaker;
using test::set_int;

// A two-layer MLP: Gemm (transB) -> Relu -> MatMul + Add, weights as initializers.
ModelMaker mlp() {
  ModelMaker mm;
  mm.input("x", {2, 3}).output("y", {2, 2});
  mm.init("w1", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}).init("b1", {4}, {0, 0, 0, -10});
  mm.init("w2", {4, 2}, {1, 0, 0, 1, 1, 1, 1, -1}).init("b2", {2}, {0.5f, -0.5f});
  set_int(mm.node("Gemm", {"x", "w1", "b1"}, {"h"}, "fc1"), "transB", 1);
  mm.node("Relu", {"h"}, {"hr"}, "act");
  mm.node("MatMul", {"hr", "w2"}, {"m"}, "fc2");
  mm.node("Add", {"m", "b2"}, {"y"}, "bias2");
  return mm;
}

// Every ONNX op type in the op table (ops.def's ONNX column) imports.
TEST(OnnxImport, EveryOnnxNameInTheOpTableImports) {
  for (const ir::OpInfo& info : ir::kOpTable)
    if (*info.onnx) {
      EXPECT_TRUE(onnx::is_supported_op(info.onnx)) << info.name << " -> " << info.onnx;
    }
}

TEST(OnnxImport, MlpRunsThroughTheRuntime) {
  if (!onnx::available()) GTEST_SKIP();
  auto m = onnx::import_model(mlp().bytes(), "mlp.onnx");
  ASSERT_OK(m);
  ASSERT_EQ(m->inputs.size(), 1u);
  EXPECT_EQ(m->inputs[0].name, "x");
  ASSERT_EQ(m->outputs.size(), 1u);
  EXPECT_EQ(m->graph.node(m->outputs[0].node).name, "y");  // the last IR node takes the ONNX name
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  auto out = rt.run(**plan, {{"x", Tensor::from_f32({2, 3}, {1, 2, 3, -1, -2, 4})}});
  ASSERT_OK(out);
  // h = [1,2,3,-4] -> relu [1,2,3,0]; y = [1+3, 2+3] + b2 ; row 2: h = [-1,-2,4,-9] -> [0,0,4,0] -> [4,4]
  const float* y = (*out)[0].data<float>();
  EXPECT_FLOAT_EQ(y[0], 4.5f);
  EXPECT_FLOAT_EQ(y[1], 4.5f);
  EXPECT_FLOAT_EQ(y[2], 4.5f);
  EXPECT_FLOAT_EQ(y[3], 3.5f);
}

TEST(OnnxImport, InitializersCanBecomeTrainableParams) {
  if (!onnx::available()) GTEST_SKIP();
  onnx::ImportOptions opts;
  opts.initializers_as_params = true;
  auto m = onnx::import_model(mlp().bytes(), "mlp.onnx", opts);
  ASSERT_OK(m);
  EXPECT_EQ(m->params.size(), 4u);
  EXPECT_EQ(m->graph.node(m->graph.find("w1")).op, ir::Op::Param);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  Bindings b = m->params;
  b["x"] = Tensor::from_f32({2, 3}, {1, 2, 3, -1, -2, 4});
  auto out = rt.run(**plan, b);
  ASSERT_OK(out);
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[3], 3.5f);
}

TEST(OnnxImport, ShapeOperandsAreReadAsConstants) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(14);
  mm.input("x", {2, 3}).input("shape", {2}, 7).output("y", {3, 2});
  mm.node("Reshape", {"x", "shape"}, {"y"}, "r");
  // Without a value for 'shape' the import says which input must be constant.
  EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "Reshape node 'r' (opset 14): input 1 'shape' must be known at import");
  onnx::ImportOptions opts;
  opts.input_values["shape"] = Tensor::from_i64({2}, {-1, 2});
  auto m = onnx::import_model(mm.bytes(), "m.onnx", opts);
  ASSERT_OK(m);
  EXPECT_EQ(m->inputs[1].node, -1);  // folded: not an IR input
  EXPECT_EQ(m->graph.find("shape"), -1);
  EXPECT_EQ(m->outputs[0].type.shape, (Shape{3, 2}));
}

// An input given at import that is also a graph output (no node between) is still an IR input,
// bound at run time (its interface entry named no node, so `volta run` left it unbound).
TEST(OnnxImport, AnInputReturnedAsAnOutputStaysAnInput) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(14);
  mm.input("x", {2, 3}).output("x", {2, 3});
  onnx::ImportOptions opts;
  opts.input_values["x"] = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto m = onnx::import_model(mm.bytes(), "m.onnx", opts);
  ASSERT_OK(m);
  ASSERT_GE(m->inputs[0].node, 0);
  EXPECT_EQ(m->inputs[0].node, m->outputs[0].node);
  EXPECT_EQ(m->graph.node(m->inputs[0].node).op, ir::Op::Input);
}

TEST(OnnxImport, MalformedFilesAreClearErrors) {
  if (!onnx::available()) GTEST_SKIP();
  EXPECT_ERROR_CONTAINS(onnx::import_model("this is not protobuf \xff\xff\xff", "junk.onnx"), "junk.onnx: not an ONNX model");
  const std::string good = mlp().bytes();
  for (size_t cut : {size_t{1}, good.size() / 3, good.size() / 2, good.size() - 1}) {
    auto r = onnx::import_model(good.substr(0, cut), "cut.onnx");
    EXPECT_FALSE(r.is_ok()) << "truncated at " << cut;
    if (!r.is_ok()) {
      EXPECT_NE(r.status().message().find("cut.onnx"), std::string::npos) << r.status().message();
    }
  }
  EXPECT_ERROR_CONTAINS(onnx::load_model("/nonexistent/model.onnx"), "cannot open");
  EXPECT_ERROR_CONTAINS(onnx::import_model("", "empty.onnx"), "no graph");
}

TEST(OnnxImport, BadGraphsNameNodeOpOpsetAndInput) {
  if (!onnx::available()) GTEST_SKIP();
  {  // dangling input name
    ModelMaker mm;
    mm.input("x", {2}).output("y", {2});
    mm.node("Add", {"x", "nowhere"}, {"y"}, "adder");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"),
                          "Add node 'adder' (opset 13): input 1 'nowhere' is not defined by any earlier node");
  }
  {  // missing input
    ModelMaker mm;
    mm.input("x", {2}).output("y", {2});
    mm.node("Add", {"x"}, {"y"}, "adder");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "Add node 'adder' (opset 13): input 1 is missing");
  }
  {  // unsupported op
    ModelMaker mm;
    mm.input("x", {2}).output("y", {2});
    mm.node("Hardmax", {"x"}, {"y"}, "hm");
    auto r = onnx::import_model(mm.bytes(), "m.onnx");
    EXPECT_ERROR_CONTAINS(r, "Hardmax node 'hm' (opset 13): op type 'Hardmax' is not supported");
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  }
  {  // unsupported attribute value and unknown attribute
    ModelMaker mm;
    mm.input("x", {1, 1, 4, 4}).output("y", {1, 1, 2, 2});
    auto* n = mm.node("MaxPool", {"x"}, {"y"}, "pool");
    auto* a = n->add_attribute();
    a->set_name("kernel_shape");
    a->set_type(::onnx::AttributeProto::INTS);
    a->add_ints(2), a->add_ints(2);
    set_int(n, "storage_order", 2);
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "MaxPool node 'pool' (opset 13): attribute 'storage_order' must be 0 or 1");
    set_int(n, "bogus", 1);
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "attribute 'bogus' is not supported");
  }
  {  // dynamic dimension
    ModelMaker mm;
    mm.input("x", {2}).output("y", {2});
    mm.g().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
    mm.node("Relu", {"x"}, {"y"}, "r");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "graph input 'x' has a dynamic dimension 'batch': give its shape");
    onnx::ImportOptions opts;
    opts.input_shapes["x"] = {3};
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx", opts), "graph output 'y' is declared FLOAT[2]");
  }
  {  // unsupported dtype; DOUBLE is held in f32 and computes there
    ModelMaker mm;
    mm.input("x", {2}, 14).output("y", {2}, 14);
    mm.node("Relu", {"x"}, {"y"}, "r");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "dtype COMPLEX64 is not supported");
    ModelMaker md;
    md.input("x", {2}, 11).output("y", {2}, 11);
    md.node("Relu", {"x"}, {"y"}, "r");
    auto m = onnx::import_model(md.bytes(), "m.onnx");
    ASSERT_OK(m);
    EXPECT_EQ(m->inputs[0].onnx_type, onnx::ElemType::kDouble);
    EXPECT_EQ(m->outputs[0].onnx_type, onnx::ElemType::kDouble);
    EXPECT_EQ(m->graph.node(m->outputs[0].node).type, (TensorType{DType::f32, {2}}));
  }
  {  // an output nobody produces, and a declared shape that disagrees
    ModelMaker mm;
    mm.input("x", {2}).output("ghost", {2});
    mm.node("Relu", {"x"}, {"y"}, "r");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "graph output 'ghost' is not produced");
    ModelMaker mm2;
    mm2.input("x", {2}).output("y", {3});
    mm2.node("Relu", {"x"}, {"y"}, "r");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm2.bytes(), "m.onnx"), "is declared FLOAT[3] but the import computes FLOAT[2]");
  }
  {  // shape rule failures carry the node too
    ModelMaker mm;
    mm.input("a", {2, 3}).input("b", {4, 5}).output("y", {2, 5});
    mm.node("MatMul", {"a", "b"}, {"y"}, "mm");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "MatMul node 'mm' (opset 13): [matmul] inner dims 3 != 4");
  }
  {  // opset out of range
    ModelMaker mm(23);
    mm.input("x", {2}).output("y", {2});
    mm.node("Relu", {"x"}, {"y"}, "r");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "opset 23 is not supported (1 to 22 are)");
  }
  {  // an initializer whose data does not match its dims
    ModelMaker mm;
    mm.input("x", {2}).output("y", {2}).init("w", {3}, {1, 2});
    mm.node("Add", {"x", "w"}, {"y"}, "a");
    EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "m.onnx"), "initializer 'w'");
  }
}

TEST(OnnxTensorFiles, ProtoAndNpyRoundTrip) {
  if (!onnx::available()) GTEST_SKIP();
  const Tensor f = Tensor::from_f32({2, 2}, {1.5f, -2, 0, 3});
  const Tensor i = Tensor::from_i64({3}, {1, -7, 1LL << 40});
  for (const char* ext : {".pb", ".npy"}) {
    const std::string path = (fs::temp_directory_path() / (std::string("volta_onnx_t") + ext)).string();
    ASSERT_OK(onnx::write_tensor_file(path, f, onnx::ElemType::kFloat, "f"));
    auto back = onnx::read_tensor_file(path);
    ASSERT_OK(back);
    EXPECT_TRUE(back->tensor.bitwise_equal(f)) << ext;
    EXPECT_EQ(back->onnx_type, onnx::ElemType::kFloat);
    ASSERT_OK(onnx::write_tensor_file(path, i, onnx::ElemType::kInt64, "i"));
    back = onnx::read_tensor_file(path);
    ASSERT_OK(back);
    EXPECT_TRUE(back->tensor.bitwise_equal(i)) << ext;
    const Tensor b = Tensor::from_f32({3}, {1, 0, 1});
    ASSERT_OK(onnx::write_tensor_file(path, b, onnx::ElemType::kBool, "b"));
    back = onnx::read_tensor_file(path);
    ASSERT_OK(back);
    EXPECT_EQ(back->onnx_type, onnx::ElemType::kBool);
    EXPECT_TRUE(back->tensor.bitwise_equal(b)) << ext;
    // DOUBLE is held in f32: written widened (8 bytes a value), read back rounded to f32.
    ASSERT_OK(onnx::write_tensor_file(path, f, onnx::ElemType::kDouble, "d"));
    EXPECT_EQ(fs::file_size(path) >= 32u, true) << ext;
    back = onnx::read_tensor_file(path);
    ASSERT_OK(back);
    EXPECT_EQ(back->onnx_type, onnx::ElemType::kDouble);
    EXPECT_TRUE(back->tensor.bitwise_equal(f)) << ext;
    fs::remove(path);
  }
  ::onnx::TensorProto d;  // double_data, and raw doubles rounded to the nearest f32
  d.set_data_type(11);
  d.add_dims(2);
  d.add_double_data(0.1);
  d.add_double_data(-1e300);
  auto dd = onnx::parse_tensor_proto(d.SerializeAsString(), "d.pb");
  ASSERT_OK(dd);
  EXPECT_EQ(dd->tensor.data<float>()[0], 0.1f);
  EXPECT_EQ(dd->tensor.data<float>()[1], -std::numeric_limits<float>::infinity());
  static const char kCut[] = "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4',";
  EXPECT_ERROR_CONTAINS(onnx::parse_npy(std::string_view(kCut, sizeof kCut - 1), "x.npy"), "truncated");
  EXPECT_ERROR_CONTAINS(onnx::parse_npy("NOTNUMPY00", "x.npy"), "bad magic");
  {  // a key twice (NumPy takes the last); a tab after a colon reads as a space does
    const auto npy = [](const std::string& dict) {
      std::string h = dict;
      h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
      h += '\n';
      return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() & 0xff) + static_cast<char>(h.size() >> 8) + h +
             std::string(4, '\0');
    };
    EXPECT_ERROR_CONTAINS(onnx::parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }"), "d.npy"),
                          ".npy header names 'shape' twice");
    auto tab = onnx::parse_npy(npy("{'descr':\t'<f4', 'fortran_order':\tFalse, 'shape':\t(1,), }"), "t.npy");
    ASSERT_OK(tab);
    EXPECT_EQ(tab->tensor.type().to_string(), "f32[1]");
  }
  {  // a file longer than its header's shape is refused from the header, as read_value_file reads it
    const std::string path = (fs::temp_directory_path() / ("volta_onnx_long_" + std::to_string(::getpid()) + ".npy")).string();
    ASSERT_OK(onnx::write_tensor_file(path, Tensor::from_f32({1}, {1.0f}), onnx::ElemType::kFloat, "x"));
    const uint64_t header = fs::file_size(path) - 4;
    fs::resize_file(path, uint64_t{1} << 30);  // sparse
    const std::string said = ".npy data has " + std::to_string((uint64_t{1} << 30) - header) + " bytes but shape (1,) needs 4";
    EXPECT_ERROR_CONTAINS(onnx::read_value_file(path), said);
    EXPECT_ERROR_CONTAINS(onnx::read_tensor_file(path), said);
    fs::remove(path);
  }
  ::onnx::TensorProto p;
  p.set_data_type(1);
  p.add_dims(1000000);
  p.add_float_data(1.0f);
  EXPECT_ERROR_CONTAINS(onnx::parse_tensor_proto(p.SerializeAsString(), "t.pb"), "needs 4000000 bytes of data but has 4");

  // The integer types held in a wider dtype keep their own values through both formats.
  ::onnx::TensorProto u8;  // int32_data: the low byte of each entry
  u8.set_data_type(2);
  u8.add_dims(3);
  for (int v : {0, 200, 255}) u8.add_int32_data(v);
  auto r8 = onnx::parse_tensor_proto(u8.SerializeAsString(), "u8.pb");
  ASSERT_OK(r8);
  EXPECT_EQ(r8->onnx_type, onnx::ElemType::kUint8);
  EXPECT_TRUE(r8->tensor.bitwise_equal(Tensor::from_i32({3}, {0, 200, 255})));
  const struct {
    onnx::ElemType type;
    Tensor values;
  } narrow[] = {{onnx::ElemType::kInt8, Tensor::from_i32({3}, {-128, 0, 127})},
                {onnx::ElemType::kUint16, Tensor::from_i32({2}, {0, 65535})},
                {onnx::ElemType::kInt16, Tensor::from_i32({2}, {-32768, 7})},
                {onnx::ElemType::kUint32, Tensor::from_i64({2}, {4294967295LL, 3})},
                {onnx::ElemType::kUint64, Tensor::from_i64({2}, {-1, 5})}};  // 2^64 - 1 as its bits
  for (const auto& [type, values] : narrow)
    for (const char* ext : {".pb", ".npy"}) {
      const std::string path = (fs::temp_directory_path() / (std::string("volta_onnx_n") + ext)).string();
      ASSERT_OK(onnx::write_tensor_file(path, values, type, "n"));
      auto back = onnx::read_tensor_file(path);
      ASSERT_OK(back);
      EXPECT_EQ(back->onnx_type, type) << ext;
      EXPECT_TRUE(back->tensor.bitwise_equal(values)) << ext << " " << onnx::elem_type_name(static_cast<int32_t>(type));
      fs::remove(path);
    }
}

// A large weight read from a proto the caller owns: copied in slices, the copied pages of the
// proto's bytes handed back on the way; the tensor has every value.
TEST(OnnxTensorFiles, LargeRawDataCopiedWhileReleased) {
  if (!onnx::available()) GTEST_SKIP();
  ::onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(1);
  const int64_t n = (int64_t{9} << 20) / 4 + 7;  // a few slices and a ragged end
  p.add_dims(n);
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 1000) * 0.5f - static_cast<float>(i / 1000);
    std::memcpy(raw.data() + 4 * i, &v, 4);
  }
  p.set_raw_data(raw);
  onnx::ElemType t;
  auto got = onnx::tensor_from_proto(p, "w.pb", &t, /*release_raw=*/true);
  ASSERT_OK(got);
  ASSERT_EQ(got->numel(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got->data<float>()[i], static_cast<float>(i % 1000) * 0.5f - static_cast<float>(i / 1000)) << i;
}

// STRING values: read as the numbers they spell (Cast's spelling), only cast to float types.
TEST(OnnxImport, StringValuesAreTheNumbersTheySpell) {
  if (!onnx::available()) GTEST_SKIP();
  ::onnx::TensorProto p;
  p.set_data_type(8);
  p.add_dims(5);
  for (const char* v : {"1.5", "-INF", "nan", "1e-5", "+inf"}) p.add_string_data(v);
  auto t = onnx::parse_tensor_proto(p.SerializeAsString(), "s.pb");
  ASSERT_OK(t);
  EXPECT_EQ(t->onnx_type, onnx::ElemType::kString);
  const float* v = t->tensor.data<float>();
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_EQ(v[3], 1e-5f);
  EXPECT_EQ(v[4], std::numeric_limits<float>::infinity());
  for (const char* bad : {"1.5x", "", " 2", "abc"}) {
    ::onnx::TensorProto q;
    q.set_data_type(8);
    q.add_dims(1);
    q.add_string_data(bad);
    EXPECT_ERROR_CONTAINS(onnx::parse_tensor_proto(q.SerializeAsString(), "q.pb"), "is not a number");
  }
  EXPECT_ERROR_CONTAINS(onnx::serialize_tensor_proto(t->tensor, onnx::ElemType::kString, "s"), "STRING values cannot be written");

  ModelMaker cast(13);
  cast.input("s", {2}, 8).output("f", {2});
  set_int(cast.node("Cast", {"s"}, {"f"}), "to", 1);
  auto m = onnx::import_model(cast.bytes(), "c.onnx");
  ASSERT_OK(m);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  auto out = rt.run(**plan, {{"s", Tensor::from_f32({2}, {2.5f, -1.0f})}});
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(Tensor::from_f32({2}, {2.5f, -1.0f})));
  ModelMaker to_int(13);
  to_int.input("s", {2}, 8).output("i", {2}, 7);
  set_int(to_int.node("Cast", {"s"}, {"i"}, "c"), "to", 7);
  EXPECT_ERROR_CONTAINS(onnx::import_model(to_int.bytes(), "i.onnx"), "a cast from STRING to INT64 is not supported");
  ModelMaker relu(13);
  relu.input("s", {2}, 8).output("r", {2});
  relu.node("Relu", {"s"}, {"r"}, "r");
  EXPECT_ERROR_CONTAINS(onnx::import_model(relu.bytes(), "r.onnx"), "input 0 has type STRING, which only a Cast to a float type takes");
  ModelMaker pass(13);
  pass.input("s", {2}, 8).output("s", {2}, 8);
  EXPECT_ERROR_CONTAINS(onnx::import_model(pass.bytes(), "p.onnx"), "graph output 's' is STRING");
}

// INT8 ... UINT64 values computed at run time: arithmetic narrowed to the type's width,
// comparisons in the type's order, casts saturating from float and wrapping between integers.
TEST(OnnxImport, NarrowIntegerTypesKeepTheirSemantics) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(13);
  mm.input("a", {4}, 2).input("b", {4}, 2).input("c", {3}, 3).input("u", {2}, 13).input("v", {2}, 13);
  mm.input("f", {4}).input("w", {2}, 12);
  mm.output("sum", {4}, 2).output("diff", {4}, 2).output("neg", {3}, 3).output("prod", {3}, 3).output("big", {2}, 13);
  mm.output("i8", {4}, 3).output("u8", {3}, 2).output("w2", {2}, 12);
  mm.node("Add", {"a", "b"}, {"sum"});
  mm.node("Sub", {"a", "b"}, {"diff"});
  mm.node("Neg", {"c"}, {"neg"});
  mm.node("Mul", {"c", "c"}, {"prod"});
  mm.node("Max", {"u", "v"}, {"big"});
  set_int(mm.node("Cast", {"f"}, {"i8"}), "to", 3);
  set_int(mm.node("Cast", {"neg"}, {"u8"}), "to", 2);
  mm.node("Mul", {"w", "w"}, {"w2"});
  auto m = onnx::import_model(mm.bytes(), "narrow.onnx");
  ASSERT_OK(m);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  auto out = rt.run(**plan, {{"a", Tensor::from_i32({4}, {250, 3, 0, 128})},
                             {"b", Tensor::from_i32({4}, {10, 5, 0, 128})},
                             {"c", Tensor::from_i32({3}, {-128, 127, -3})},
                             {"u", Tensor::from_i64({2}, {-1, 5})},  // 2^64 - 1 and 5
                             {"v", Tensor::from_i64({2}, {7, std::numeric_limits<int64_t>::min()})},
                             {"f", Tensor::from_f32({4}, {300, -300, -1.9f, NAN})},
                             {"w", Tensor::from_i64({2}, {65536, 4294967295LL})}});
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(Tensor::from_i32({4}, {4, 8, 0, 0})));        // (250 + 10) % 256
  EXPECT_TRUE((*out)[1].bitwise_equal(Tensor::from_i32({4}, {240, 254, 0, 0})));    // 3 - 5 wraps to 254
  EXPECT_TRUE((*out)[2].bitwise_equal(Tensor::from_i32({3}, {-128, -127, 3})));     // -(-128) wraps to -128
  EXPECT_TRUE((*out)[3].bitwise_equal(Tensor::from_i32({3}, {0, 1, 9})));           // 16384 and 16129 wrap
  EXPECT_TRUE((*out)[4].bitwise_equal(Tensor::from_i64({2}, {-1, std::numeric_limits<int64_t>::min()})));  // unsigned max
  EXPECT_TRUE((*out)[5].bitwise_equal(Tensor::from_i32({4}, {127, -128, -1, 0})));  // saturates, truncates, nan -> 0
  EXPECT_TRUE((*out)[6].bitwise_equal(Tensor::from_i32({3}, {128, 129, 3})));       // INT8 -> UINT8 modulo 256
  EXPECT_TRUE((*out)[7].bitwise_equal(Tensor::from_i64({2}, {0, 1})));              // modulo 2^32

  ModelMaker refused(13);  // an op that does not take them says so
  refused.input("a", {4}, 2).output("s", {1}, 2);
  refused.node("ReduceSum", {"a"}, {"s"}, "sum");
  EXPECT_ERROR_CONTAINS(onnx::import_model(refused.bytes(), "r.onnx"), "input 0 has type UINT8, which only the arithmetic");
  ModelMaker udiv(13);
  udiv.input("u", {2}, 13).input("v", {2}, 13).output("q", {2}, 13);
  udiv.node("Div", {"u", "v"}, {"q"}, "div");
  EXPECT_ERROR_CONTAINS(onnx::import_model(udiv.bytes(), "d.onnx"), "UINT64 Div is not supported");
}

struct Cli {
  int code;
  std::string out, err;
};

Cli volta_cli(const std::string& args) {
  Cli r;
  r.code = test::run_command("env -u VOLTA_DEVICE " + std::string(VOLTA_CLI_PATH) + " " + args, &r.out, &r.err);
  return r;
}

TEST(OnnxCli, RunAndInspectOnnxModels) {
  if (!onnx::available()) GTEST_SKIP();
  const fs::path dir = fs::temp_directory_path() / ("volta_onnx_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "mlp.onnx").string();
  std::ofstream(model, std::ios::binary) << mlp().bytes();
  ASSERT_OK(onnx::write_tensor_file((dir / "x.npy").string(), Tensor::from_f32({2, 3}, {1, 2, 3, -1, -2, 4}), onnx::ElemType::kFloat, "x"));

  Cli r = volta_cli("run " + model + " --input x=" + (dir / "x.npy").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("y"), std::string::npos);
  auto y = onnx::read_tensor_file((dir / "out" / "y.npy").string());  // .npy in, .npy out
  ASSERT_OK(y);
  EXPECT_FLOAT_EQ(y->tensor.data<float>()[3], 3.5f);

  ASSERT_OK(onnx::write_tensor_file((dir / "x.pb").string(), Tensor::from_f32({2, 3}, {1, 2, 3, -1, -2, 4}), onnx::ElemType::kFloat, "x"));
  r = volta_cli("run " + model + " --input x=" + (dir / "x.pb").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  y = onnx::read_tensor_file((dir / "out" / "y.pb").string());
  ASSERT_OK(y);
  EXPECT_FLOAT_EQ(y->tensor.data<float>()[0], 4.5f);

  r = volta_cli("inspect " + model);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("matmul"), std::string::npos);
  EXPECT_NE(r.out.find("memory (bytes)"), std::string::npos);
  EXPECT_NE(r.out.find("compile (import, passes, plan) "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ms, peak RSS "), std::string::npos) << r.out;
  r = volta_cli("inspect " + model + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"compile_ms\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"peak_rss_bytes\":"), std::string::npos) << r.out;

  // Bad inputs: one clear line, exit 1.
  for (const std::string& args : {"run " + model, "run " + model + " --input nope=" + (dir / "x.pb").string(),
                                  "run " + model + " --input x=" + (dir / "missing.pb").string(),
                                  "run " + (dir / "x.pb").string() + ".onnx", "run " + model + " --input x=" + model}) {
    Cli bad = volta_cli(args);
    EXPECT_EQ(bad.code, 1) << args << "\n" << bad.err;
    EXPECT_NE(bad.err.find("error:"), std::string::npos) << args << "\n" << bad.err;
  }

  // Half and DOUBLE outputs: the summary line shows their values, the files keep their types.
  ModelMaker cast;
  cast.input("x", {2, 3}).output("h", {2, 3}, 16).output("d", {2, 3}, 11);
  cast.node("Cast", {"x"}, {"h"}, "to_half")->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("to"), a.set_type(::onnx::AttributeProto::INT), a.set_i(16);
    return a;
  }());
  cast.node("Cast", {"x"}, {"d"}, "to_double")->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("to"), a.set_type(::onnx::AttributeProto::INT), a.set_i(11);
    return a;
  }());
  const std::string cast_model = (dir / "cast.onnx").string();
  std::ofstream(cast_model, std::ios::binary) << cast.m.SerializeAsString();
  r = volta_cli("run " + cast_model + " --input x=" + (dir / "x.pb").string() + " --output " + (dir / "cast_out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("BFLOAT16[2,3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1, 2, 3, -1, ...]"), std::string::npos) << r.out;
  auto h = onnx::read_tensor_file((dir / "cast_out" / "h.pb").string());
  ASSERT_OK(h);
  EXPECT_EQ(h->onnx_type, onnx::ElemType::kBfloat16);
  auto dd = onnx::read_tensor_file((dir / "cast_out" / "d.pb").string());
  ASSERT_OK(dd);
  EXPECT_EQ(dd->onnx_type, onnx::ElemType::kDouble);
  EXPECT_EQ(dd->tensor.data<float>()[5], 4.0f);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace volta

namespace volta {
namespace {

// Every refused node is in one error: each (op type, reason) with its count and node names, and
// the nodes that read a refused value are counted as not checked instead of failing on it.
TEST(OnnxImport, OneErrorListsEveryRefusedNode) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm;
  mm.input("x", {2, 3}).output("y", {2, 3}).output("z", {2, 3});
  mm.node("Hardmax", {"x"}, {"h1"}, "hm1");
  mm.node("Hardmax", {"x"}, {"h2"}, "hm2");
  mm.node("Relu", {"h1"}, {"r"}, "reads_refused");
  set_int(mm.node("Softmax", {"x"}, {"s"}, "sm"), "bogus", 1);
  mm.node("Add", {"r", "s"}, {"y"}, "add");
  mm.node("Relu", {"x"}, {"z"}, "fine");
  auto r = onnx::import_model(mm.bytes(), "m.onnx");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(),
            "m.onnx: 3 nodes are not supported, 2 distinct reasons (2 nodes reading their outputs not checked): "
            "Hardmax x2 ('hm1', 'hm2'): op type 'Hardmax' is not supported; Softmax x1 ('sm'): attribute 'bogus' is not supported");
}

// Opset 18's forms: Split's num_outputs (the last chunk smaller), ReduceMean's axes input and
// Pad's axes input; opset 20's Gelu.
TEST(OnnxImport, Opset18FormsImport) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(20);
  mm.input("x", {2, 5}).output("a", {2, 2}).output("b", {2, 1}).output("m", {2}).output("p", {2, 7}).output("g", {2, 5});
  mm.init_i64("axes", {1}, {1}).init_i64("pads", {2}, {1, 1});
  auto* split = mm.node("Split", {"x"}, {"a0", "a1", "b"}, "split");
  set_int(split, "num_outputs", 3);
  set_int(split, "axis", 1);
  mm.node("Identity", {"a0"}, {"a"}, "id");
  mm.node("ReduceMean", {"x", "axes"}, {"m0"}, "mean");
  mm.node("Squeeze", {"m0", "axes"}, {"m"}, "sq");
  mm.node("Pad", {"x", "pads", "", "axes"}, {"p"}, "pad");
  mm.node("Gelu", {"x"}, {"g"}, "gelu");
  auto m = onnx::import_model(mm.bytes(), "m.onnx");
  ASSERT_OK(m);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(m->graph);
  ASSERT_OK(plan);
  Tensor x = Tensor::from_f32({2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5});
  auto out = rt.run(**plan, {{"x", x}});
  ASSERT_OK(out);
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ((*out)[1].data<float>()[0], 5.0f);  // chunks of 2, 2 and 1
  EXPECT_EQ((*out)[2].data<float>()[1], -3.0f);
  EXPECT_EQ((*out)[3].data<float>()[0], 0.0f);  // padded on axis 1 only
  EXPECT_EQ((*out)[3].data<float>()[1], 1.0f);
  EXPECT_NEAR((*out)[4].data<float>()[0], 0.8413447f, 1e-6);
}

}  // namespace
}  // namespace volta
