// The matmul's shape rule: operands optionally read through perms, transposed, batch dims
// broadcast; a bias or gelu_grad's x; a permuted result.
#include "ir/infer_rules.h"

namespace volta::ir::rules {

namespace {

// The operands and result of a matmul as its perm attributes make them: the shape of
// transpose(x, perm), with the permutation checked.
Result<Shape> permuted(Op op, const Attrs& attrs, const char* name, const Shape& s) {
  if (!attrs.has(name)) return s;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, tagged(op, attrs.get_ints(name)));
  std::vector<bool> seen(s.size(), false);
  if (perm.size() != s.size()) return fail(op, std::string(name) + " must have " + std::to_string(s.size()) + " entries");
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[static_cast<size_t>(p)])
      return fail(op, std::string(name) + " must be a permutation of 0.." + std::to_string(s.size() - 1));
    seen[static_cast<size_t>(p)] = true;
    out.push_back(s[static_cast<size_t>(p)]);
  }
  return out;
}

Result<TensorType> infer_matmul_logical(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Matmul;
  VOLTA_ASSIGN_OR_RETURN(const int64_t residual, tagged(op, attrs.get_int("residual", 0)));
  if (residual != 0 && residual != 1) return fail(op, "attribute 'residual' must be 0 or 1, got " + std::to_string(residual));
  if (residual) {  // the last input is r, of the result's type; the rest as without it
    if (in.size() < 3) return fail(op, "residual = 1 needs r, of the result's type, as the last input");
    Attrs rest = attrs;
    rest.set("residual", int64_t{0});
    VOLTA_ASSIGN_OR_RETURN(TensorType result, infer_matmul_logical(in.first(in.size() - 1), rest));
    if (in.back() != result)
      return fail(op, "residual r must be " + result.to_string() + " (the result's type), got " + in.back().to_string());
    return result;
  }
  if (in.size() > 3) return fail(op, "a fourth input is the residual r: it needs residual = 1");
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "a"));
  if (!is_half(in[1].dtype)) VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "b"));  // weights may be bf16 / f16
  VOLTA_ASSIGN_OR_RETURN(int64_t ta, tagged(op, attrs.get_int("transpose_a", 0)));
  VOLTA_ASSIGN_OR_RETURN(int64_t tb, tagged(op, attrs.get_int("transpose_b", 0)));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return fail(op, "transpose_a and transpose_b must be 0 or 1, got " + std::to_string(ta) + " and " + std::to_string(tb));
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  if (a.size() < 2 || b.size() < 2)
    return fail(op, "operands must have rank >= 2, got " + in[0].to_string() + " and " + in[1].to_string());
  int64_t m = ta ? a[a.size() - 1] : a[a.size() - 2];
  int64_t ka = ta ? a[a.size() - 2] : a[a.size() - 1];
  int64_t kb = tb ? b[b.size() - 1] : b[b.size() - 2];
  int64_t n = tb ? b[b.size() - 2] : b[b.size() - 1];
  if (ka != kb)
    return fail(op, "inner dims " + std::to_string(ka) + " != " + std::to_string(kb) + " (" + in[0].to_string() +
                        " @ " + in[1].to_string() + ")");
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto batch = broadcast_shapes(batch_a, batch_b);
  if (!batch.is_ok())
    return fail(op, "batch dims " + shape_to_string(batch_a) + " and " + shape_to_string(batch_b) + " do not broadcast");
  Shape out = *batch;
  out.push_back(m);
  out.push_back(n);
  VOLTA_ASSIGN_OR_RETURN(std::string act, tagged(op, attrs.get_string("activation", "none")));
  if (act != "none" && act != "relu" && act != "gelu" && act != "gelu_grad" && act != "mul")
    return fail(op, "attribute 'activation' must be \"none\", \"relu\", \"gelu\", \"gelu_grad\" or \"mul\", got \"" + act + "\"");
  const TensorType result{DType::f32, out};
  if (attrs.has("b_packed")) {
    VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> packed, tagged(op, attrs.get_ints("b_packed")));
    if (packed.size() != 2 || packed[0] < 1 || packed[1] < 1 || (in[1].dtype != DType::f32 && !is_half(in[1].dtype)) ||
        b.size() != 2 || tb || n % packed[1] != 0 || attrs.has("b_perm"))
      return fail(op, "b_packed [kc, nr] needs kc, nr >= 1 and b f32, bf16 or f16 [K, N], not transposed, N a multiple of nr; got b " +
                          in[1].to_string());
  }
  if (act == "gelu_grad" || act == "mul") {  // the third input is x, of the result's type
    if (in.size() != 3 || in[2] != result)
      return fail(op, "activation " + act + " needs x " + result.to_string() + " as the third input" +
                          (in.size() == 3 ? ", got " + in[2].to_string() : ""));
  } else if (in.size() == 3) {
    VOLTA_RETURN_IF_ERROR(require_f32(op, in[2], "bias"));
    if (in[2].shape != Shape{n}) return fail(op, "bias must be [" + std::to_string(n) + "] (one per column), got " + in[2].to_string());
  }
  return result;
}

}  // namespace

Result<TensorType> infer_matmul(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Matmul;
  const bool perms = attrs.has("a_perm") || attrs.has("b_perm") || attrs.has("out_perm");
  if (!perms) return infer_matmul_logical(in, attrs);
  if (in[0].dtype != DType::f32 || in[1].dtype != DType::f32) return fail(op, "operands read through a perm must be f32");
  std::vector<TensorType> logical(in.begin(), in.end());
  VOLTA_ASSIGN_OR_RETURN(logical[0].shape, permuted(op, attrs, "a_perm", in[0].shape));
  VOLTA_ASSIGN_OR_RETURN(logical[1].shape, permuted(op, attrs, "b_perm", in[1].shape));
  VOLTA_ASSIGN_OR_RETURN(TensorType result, infer_matmul_logical(logical, attrs));
  if (!attrs.has("out_perm")) return result;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, tagged(op, attrs.get_ints("out_perm")));
  VOLTA_ASSIGN_OR_RETURN(std::string act, tagged(op, attrs.get_string("activation", "none")));
  if (in.size() > 2 || act != "none") return fail(op, "out_perm takes no bias, activation or residual");
  if (perm.empty() || perm.back() != static_cast<int64_t>(perm.size()) - 1)
    return fail(op, "out_perm must keep the last axis last");
  VOLTA_ASSIGN_OR_RETURN(result.shape, permuted(op, attrs, "out_perm", result.shape));
  return result;
}

}  // namespace volta::ir::rules
