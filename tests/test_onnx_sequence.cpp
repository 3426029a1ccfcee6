// ONNX sequence and optional values: the sequence ops as list work at import, sequence inputs
// bound per run from their elements, sequence and optional outputs, the files that hold them
// (SequenceProto / OptionalProto, and the bytes the two share), and the errors.
#include <filesystem>
#include <fstream>

#include "onnx/importer.h"
#include "onnx_maker.h"
#include "test_util.h"
#include "volta/onnx.h"
#include "volta/runtime.h"

namespace volta {
namespace {

using test::ModelMaker;
using test::set_int;

// A graph value typed sequence<elem[dims]> (optional: optional<...>).
void set_sequence_type(::onnx::ValueInfoProto* v, const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
                       bool optional = false) {
  v->set_name(name);
  ::onnx::TypeProto* t = v->mutable_type();
  if (optional) t = t->mutable_optional_type()->mutable_elem_type();
  auto* tt = t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) shape->add_dim()->set_dim_param("n");
    else shape->add_dim()->set_dim_value(d);
  }
}

Tensor f32(Shape s, std::initializer_list<float> v) { return Tensor::from_f32(std::move(s), v); }

Result<std::vector<Tensor>> run(const onnx::Model& m, const Bindings& b) {
  Runtime rt(make_cpu_backend());
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(m.graph));
  return rt.run(*plan, b);
}

TEST(OnnxSequence, SequenceOpsAreListWorkAtImport) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(13);
  mm.input("a", {2, 3}).input("b", {2, 3}).input("c", {2, 3});
  mm.init_i64("one", {}, {1}).init_i64("last", {}, {-1}).init_i64("zero", {}, {0}).init_i64("split", {2}, {1, 2});
  mm.node("SequenceConstruct", {"a", "b"}, {"s"});
  mm.node("SequenceInsert", {"s", "c", "one"}, {"s2"});  // [a, c, b]
  mm.node("SequenceLength", {"s2"}, {"len"});
  mm.node("SequenceAt", {"s2", "last"}, {"at"});   // b
  mm.node("SequenceErase", {"s2", "zero"}, {"s3"});  // [c, b]
  set_int(mm.node("ConcatFromSequence", {"s3"}, {"cat"}, "cat"), "axis", 0);
  auto* stack = mm.node("ConcatFromSequence", {"s3"}, {"stk"}, "stack");
  set_int(stack, "axis", -1);
  set_int(stack, "new_axis", 1);
  auto* pieces = mm.node("SplitToSequence", {"a"}, {"cols"}, "cols");
  set_int(pieces, "axis", 1);
  set_int(pieces, "keepdims", 0);
  mm.node("SequenceAt", {"cols", "one"}, {"col1"});
  set_int(mm.node("SplitToSequence", {"a", "split"}, {"parts"}, "parts"), "axis", 1);
  mm.node("SequenceEmpty", {}, {"empty"});
  mm.node("SequenceLength", {"empty"}, {"elen"});
  mm.node("Optional", {"a"}, {"opt"});
  mm.node("OptionalHasElement", {"opt"}, {"has"});
  mm.node("OptionalGetElement", {"opt"}, {"got"});
  auto* none = mm.node("Optional", {}, {"none"}, "none");
  auto* ta = none->add_attribute();
  ta->set_name("type");
  ta->set_type(::onnx::AttributeProto::TYPE_PROTO);
  ta->mutable_tp()->mutable_tensor_type()->set_elem_type(1);
  mm.node("OptionalHasElement", {"none"}, {"hasn"});
  mm.output("len", {}, 7).output("at", {2, 3}).output("cat", {4, 3}).output("stk", {2, 3, 2}).output("col1", {2});
  set_sequence_type(mm.g().add_output(), "parts", 1, {2, -1});
  mm.output("elen", {}, 7).output("has", {}, 9).output("got", {2, 3}).output("hasn", {}, 9);
  auto m = onnx::import_model(mm.bytes(), "seq.onnx");
  ASSERT_OK(m);
  const onnx::IoValue& parts = m->outputs[5];
  EXPECT_TRUE(parts.sequence);
  ASSERT_EQ(parts.elements.size(), 2u);
  const Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({2, 3}, {7, 8, 9, 10, 11, 12}), c = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  auto out = run(*m, {{"a", a}, {"b", b}, {"c", c}});
  ASSERT_OK(out);
  ASSERT_EQ(out->size(), 11u);  // ten outputs, the sequence one per element
  EXPECT_TRUE((*out)[0].bitwise_equal(Tensor::from_i64({}, {3})));
  EXPECT_TRUE((*out)[1].bitwise_equal(b));
  EXPECT_TRUE((*out)[2].bitwise_equal(f32({4, 3}, {-1, -2, -3, -4, -5, -6, 7, 8, 9, 10, 11, 12})));
  EXPECT_TRUE((*out)[3].bitwise_equal(f32({2, 3, 2}, {-1, 7, -2, 8, -3, 9, -4, 10, -5, 11, -6, 12})));
  EXPECT_TRUE((*out)[4].bitwise_equal(f32({2}, {2, 5})));
  EXPECT_TRUE((*out)[5].bitwise_equal(f32({2, 1}, {1, 4})));
  EXPECT_TRUE((*out)[6].bitwise_equal(f32({2, 2}, {2, 3, 5, 6})));
  EXPECT_TRUE((*out)[7].bitwise_equal(Tensor::from_i64({}, {0})));
  EXPECT_TRUE((*out)[8].bitwise_equal(f32({}, {1})));  // BOOL as f32 1
  EXPECT_TRUE((*out)[9].bitwise_equal(a));
  EXPECT_TRUE((*out)[10].bitwise_equal(f32({}, {0})));
}

// A sequence input of any length: its elements are IR inputs, bound per import; the output's
// elements come back one per run output, and the files round trip.
TEST(OnnxSequence, SequenceInputsAndOutputsBindPerRun) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(13);
  set_sequence_type(mm.g().add_input(), "xs", 1, {-1, 2});
  mm.node("Identity", {"xs"}, {"ys"});
  set_int(mm.node("ConcatFromSequence", {"xs"}, {"cat"}, "cat"), "axis", 0);
  set_sequence_type(mm.g().add_output(), "ys", 1, {-1, 2});
  auto* cat_out = mm.g().add_output();  // no declared shape: it follows the sequence's length
  cat_out->set_name("cat");
  cat_out->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  // Without its value the import cannot know the length.
  EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "s.onnx"), "graph input 'xs' is a sequence: give its value");

  const auto dir = std::filesystem::temp_directory_path() / ("volta_seq_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int n : {2, 3}) {
    onnx::ValueFile file;
    file.sequence = true;
    for (int i = 0; i < n; ++i) file.tensors.push_back({f32({i + 1, 2}, {}), onnx::ElemType::kFloat, ""});
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < file.tensors[static_cast<size_t>(i)].tensor.numel(); ++k)
        file.tensors[static_cast<size_t>(i)].tensor.data<float>()[k] = static_cast<float>(10 * i + k);
    const std::string path = (dir / ("xs" + std::to_string(n) + ".pb")).string();
    ASSERT_OK(onnx::write_value_file(path, file, "xs"));
    auto back = onnx::read_value_file(path);
    ASSERT_OK(back);
    ASSERT_OK(onnx::as_declared(&*back, true, false, path));
    ASSERT_TRUE(back->sequence);
    ASSERT_EQ(back->tensors.size(), static_cast<size_t>(n));

    onnx::ImportOptions opts;
    onnx::give_input(opts, "xs", *back);
    auto m = onnx::import_model(mm.bytes(), "s.onnx", opts);
    ASSERT_OK(m);
    ASSERT_EQ(m->inputs.size(), 1u);
    EXPECT_TRUE(m->inputs[0].sequence);
    ASSERT_EQ(m->inputs[0].elements.size(), static_cast<size_t>(n));
    Bindings bindings;
    ASSERT_OK(onnx::bind_input(*back, m->inputs[0], m->graph, "xs", &bindings));
    EXPECT_EQ(bindings.size(), static_cast<size_t>(n));
    auto out = run(*m, bindings);
    ASSERT_OK(out);
    size_t next = 0;
    auto ys = onnx::output_value(m->outputs[0], *out, &next);
    auto cat = onnx::output_value(m->outputs[1], *out, &next);
    ASSERT_OK(ys);
    ASSERT_OK(cat);
    EXPECT_EQ(next, out->size());
    ASSERT_EQ(ys->tensors.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(ys->tensors[static_cast<size_t>(i)].tensor.bitwise_equal(back->tensors[static_cast<size_t>(i)].tensor));
    EXPECT_EQ(cat->tensors.at(0).tensor.shape(), (Shape{n * (n + 1) / 2, 2}));
    // A tensor file where the sequence is expected, and a sequence of the wrong length, are errors.
    onnx::ValueFile one;
    one.tensors.push_back({f32({1, 2}, {1, 2}), onnx::ElemType::kFloat, ""});
    EXPECT_ERROR_CONTAINS(onnx::bind_input(one, m->inputs[0], m->graph, "xs", &bindings), "is a sequence but the file holds a tensor");
    onnx::ValueFile shorter = *back;
    shorter.tensors.pop_back();
    EXPECT_ERROR_CONTAINS(onnx::bind_input(shorter, m->inputs[0], m->graph, "xs", &bindings), "elements but the file holds");
  }
  std::filesystem::remove_all(dir);
}

// A SequenceProto of one tensor has the bytes of an OptionalProto holding it: the declared kind
// decides, and an empty optional reads as holding nothing.
TEST(OnnxSequence, FilesAreReadAsTheirInputDeclares) {
  if (!onnx::available()) GTEST_SKIP();
  const auto dir = std::filesystem::temp_directory_path() / ("volta_opt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  onnx::ValueFile held;
  held.optional = true;
  held.tensors.push_back({f32({3}, {1, 2, 3}), onnx::ElemType::kFloat, ""});
  const std::string path = (dir / "opt.pb").string();
  ASSERT_OK(onnx::write_value_file(path, held, "o"));
  auto v = onnx::read_value_file(path);
  ASSERT_OK(v);
  ASSERT_OK(onnx::as_declared(&*v, false, true, path));
  EXPECT_TRUE(v->optional);
  EXPECT_FALSE(v->sequence);
  ASSERT_EQ(v->tensors.size(), 1u);
  auto as_seq = onnx::read_value_file(path);
  ASSERT_OK(as_seq);
  ASSERT_OK(onnx::as_declared(&*as_seq, true, false, path));
  EXPECT_TRUE(as_seq->sequence);

  onnx::ValueFile empty;
  empty.optional = empty.absent = true;
  ASSERT_OK(onnx::write_value_file(path, empty, "o"));
  v = onnx::read_value_file(path);
  ASSERT_OK(v);
  ASSERT_OK(onnx::as_declared(&*v, false, true, path));
  EXPECT_TRUE(v->absent);
  EXPECT_ERROR_CONTAINS(onnx::write_value_file((dir / "s.npy").string(), held, "o"), "no .npy form");
  std::filesystem::remove_all(dir);

  // An optional input given nothing, through OptionalHasElement and Identity.
  ModelMaker mm(15);
  auto* in = mm.g().add_input();
  in->set_name("o");
  in->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  mm.node("OptionalHasElement", {"o"}, {"has"});
  mm.output("has", {}, 9);
  onnx::ImportOptions opts;
  onnx::give_input(opts, "o", empty);
  auto m = onnx::import_model(mm.bytes(), "o.onnx", opts);
  ASSERT_OK(m);
  EXPECT_TRUE(m->inputs[0].absent);
  auto out = run(*m, {});
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(f32({}, {0})));
}

TEST(OnnxSequence, MisuseIsAClearError) {
  if (!onnx::available()) GTEST_SKIP();
  auto model = [](const std::string& op, std::vector<std::string> extra) {
    ModelMaker mm(13);
    mm.input("a", {2}).input("b", {2}).init_i64("five", {}, {5});
    mm.node("SequenceConstruct", {"a", "b"}, {"s"});
    std::vector<std::string> ins = {"s"};
    ins.insert(ins.end(), extra.begin(), extra.end());
    mm.node(op, ins, {"y"}, "n");
    mm.output("y", {2});
    return mm.bytes();
  };
  EXPECT_ERROR_CONTAINS(onnx::import_model(model("SequenceAt", {"five"}), "m.onnx"),
                        "SequenceAt node 'n' (opset 13): position 5 is out of range for a sequence of 2 elements");
  EXPECT_ERROR_CONTAINS(onnx::import_model(model("Relu", {}), "m.onnx"),
                        "Relu node 'n' (opset 13): input 0 's' is a sequence, which only the sequence ops and Identity take");
  ModelMaker mixed(13);
  mixed.input("a", {2}).input("i", {2}, 7);
  mixed.node("SequenceConstruct", {"a", "i"}, {"s"}, "n");
  mixed.node("SequenceLength", {"s"}, {"y"});
  mixed.output("y", {}, 7);
  EXPECT_ERROR_CONTAINS(onnx::import_model(mixed.bytes(), "m.onnx"), "input 1 is INT64 but the sequence holds FLOAT");
  ModelMaker get(15);
  auto* none = get.node("Optional", {}, {"o"}, "none");
  auto* ta = none->add_attribute();
  ta->set_name("type");
  ta->set_type(::onnx::AttributeProto::TYPE_PROTO);
  ta->mutable_tp()->mutable_tensor_type()->set_elem_type(1);
  get.node("OptionalGetElement", {"o"}, {"y"}, "get");
  get.output("y", {2});
  EXPECT_ERROR_CONTAINS(onnx::import_model(get.bytes(), "m.onnx"), "OptionalGetElement node 'get' (opset 15): input 0 is an optional that holds nothing");
}

// `volta run` reads a SequenceProto input file and writes the sequence output as one.
TEST(OnnxSequence, RunReadsAndWritesSequenceFiles) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(13);
  set_sequence_type(mm.g().add_input(), "xs", 1, {2});
  mm.init_i64("zero", {}, {0});
  mm.node("SequenceErase", {"xs", "zero"}, {"ys"});
  set_sequence_type(mm.g().add_output(), "ys", 1, {2});
  const auto dir = std::filesystem::temp_directory_path() / ("volta_seqcli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "m.onnx").string(), input = (dir / "xs.pb").string();
  { std::ofstream(model, std::ios::binary) << mm.bytes(); }
  onnx::ValueFile xs;
  xs.sequence = true;
  for (float v : {1.0f, 2.0f, 3.0f}) xs.tensors.push_back({f32({2}, {v, -v}), onnx::ElemType::kFloat, ""});
  ASSERT_OK(onnx::write_value_file(input, xs, "xs"));
  std::string out, err;
  const int code = test::run_command("env -u VOLTA_DEVICE " + std::string(VOLTA_CLI_PATH) + " run " + model + " --input xs=" + input +
                                         " --output " + (dir / "out").string(), &out, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(out.find("sequence of 2 FLOAT"), std::string::npos) << out;
  auto ys = onnx::read_value_file((dir / "out" / "ys.pb").string());
  ASSERT_OK(ys);
  ASSERT_TRUE(ys->sequence);
  ASSERT_EQ(ys->tensors.size(), 2u);
  EXPECT_TRUE(ys->tensors[0].tensor.bitwise_equal(f32({2}, {2, -2})));
  EXPECT_TRUE(ys->tensors[1].tensor.bitwise_equal(f32({2}, {3, -3})));
  // A plain tensor where the sequence is declared: one line naming the input.
  const std::string tensor_file = (dir / "t.pb").string();
  ASSERT_OK(onnx::write_tensor_file(tensor_file, f32({2}, {1, 2}), onnx::ElemType::kFloat, "t"));
  EXPECT_NE(test::run_command("env -u VOLTA_DEVICE " + std::string(VOLTA_CLI_PATH) + " run " + model + " --input xs=" + tensor_file, &out, &err), 0);
  EXPECT_NE(err.find("graph input 'xs' is a sequence but is given a tensor"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace volta
