#include "ir/elementwise_program.h"

#include <charconv>
#include <sstream>

namespace volta::ir {

namespace {

// "x3" -> 3, "t2" -> inputs + 2 (only steps before `step`).
Result<int32_t> operand(const std::string& tok, int32_t inputs, size_t step) {
  int32_t i = -1;
  if (tok.size() >= 2 && (tok[0] == 'x' || tok[0] == 't')) {
    auto [end, ec] = std::from_chars(tok.data() + 1, tok.data() + tok.size(), i);
    if (ec != std::errc() || end != tok.data() + tok.size()) i = -1;
  }
  if (i >= 0 && tok[0] == 'x' && i < inputs) return i;
  if (i >= 0 && tok[0] == 't' && static_cast<size_t>(i) < step) return inputs + i;
  return invalid_argument("step " + std::to_string(step) + ": operand '" + tok + "' is not an input x0..x" +
                          std::to_string(inputs - 1) + (step > 0 ? " or an earlier step t0..t" + std::to_string(step - 1) : ""));
}

}  // namespace

Result<ElementwiseProgram> parse_elementwise_program(const std::string& text, int32_t inputs) {
  ElementwiseProgram p;
  p.inputs = inputs;
  std::stringstream steps(text);
  std::string step_text;
  while (std::getline(steps, step_text, ';')) {
    std::stringstream words(step_text);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    const size_t index = p.steps.size();
    if (w.empty()) return invalid_argument("step " + std::to_string(index) + " is empty");
    if (index == kMaxElementwiseSteps) return invalid_argument("more than " + std::to_string(kMaxElementwiseSteps) + " steps");
    auto op = parse_op(w[0]);
    const int arity = op.is_ok() ? elementwise_arity(*op) : 0;
    if (arity == 0) return invalid_argument("step " + std::to_string(index) + ": '" + w[0] + "' is not a fusable elementwise op");
    if (static_cast<int>(w.size()) != arity + 1)
      return invalid_argument("step " + std::to_string(index) + ": " + w[0] + " takes " + std::to_string(arity) +
                              " operand(s), got " + std::to_string(w.size() - 1));
    ElementwiseStep s{*op};
    VOLTA_ASSIGN_OR_RETURN(s.a, operand(w[1], inputs, index));
    if (arity == 2) {
      VOLTA_ASSIGN_OR_RETURN(s.b, operand(w[2], inputs, index));
    }
    p.steps.push_back(s);
  }
  if (p.steps.empty()) return invalid_argument("the program has no steps");
  return p;
}

std::string print_elementwise_program(const ElementwiseProgram& p) {
  auto name = [&](int32_t o) { return o < p.inputs ? "x" + std::to_string(o) : "t" + std::to_string(o - p.inputs); };
  std::string out;
  for (const ElementwiseStep& s : p.steps) {
    if (!out.empty()) out += "; ";
    out += std::string(op_name(s.op)) + " " + name(s.a);
    if (s.b >= 0) out += " " + name(s.b);
  }
  return out;
}

}  // namespace volta::ir
