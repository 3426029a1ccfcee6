// libFuzzer target: the fused_elementwise `program` attribute. The first byte picks the number of
// inputs (1 to 16), the rest is the program text. A program that parses must print to text that
// parses to the same program, and must run through the whole pipeline on the CPU backend.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/elementwise_program.h"
#include "volta/builder.h"
#include "volta/runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t inputs = 1 + data[0] % 16;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto p = volta::ir::parse_elementwise_program(text, inputs);
  if (!p.is_ok()) return 0;
  const std::string printed = volta::ir::print_elementwise_program(*p);
  auto again = volta::ir::parse_elementwise_program(printed, inputs);
  if (!again.is_ok() || volta::ir::print_elementwise_program(*again) != printed) __builtin_trap();

  volta::ModelBuilder b("fuzz");
  std::vector<volta::Value> in;
  for (int32_t i = 0; i < inputs; ++i) in.push_back(b.input("x" + std::to_string(i), {volta::DType::f32, {7}}));
  b.output(b.op(volta::ir::Op::FusedElementwise, in, {{"program", printed}}, "y"));
  auto g = b.build();
  if (!g.is_ok()) return 0;  // a program the op's type rule refuses is a clean error
  volta::Runtime rt(volta::make_cpu_backend());
  auto plan = rt.compile(*g);
  if (!plan.is_ok()) return 0;
  auto x = volta::random_inputs(*g, 1);
  if (!x.is_ok()) __builtin_trap();
  (void)rt.run(**plan, *x);
  return 0;
}
