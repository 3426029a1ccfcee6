// Reference batched matmul: out[..., m, n] = sum_k A[..., m, k] * B[..., k, n], where A and B
// are the operands with their last two dims optionally swapped and the batch dims broadcast.
#include <cmath>
#include <numbers>

#include "backends/cpu/ref_util.h"
#include "ir/packed_weight.h"
#include "ir/scalar_math.h"

namespace volta::cpu::ref {

namespace {

// dst = transpose(src of shape s, perm) (dst's shape: s permuted).
void permute(const float* src, const Shape& s, const std::vector<int64_t>& perm, float* dst) {
  const Strides st = contiguous_strides(s);
  Shape ps;
  Strides walk;  // element strides in s of the permuted shape's dims
  for (int64_t p : perm) ps.push_back(s[static_cast<size_t>(p)]), walk.push_back(st[static_cast<size_t>(p)]);
  for_each_index(ps, std::array<Strides, 1>{walk}, [&](int64_t n, const std::array<int64_t, 1>& off) {
    dst[n] = src[off[0]];
  });
}

Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
  return out;
}

}  // namespace

Status Matmul(const KernelArgs& a) {
  if (a.node.attrs.has("b_packed")) {  // a packed weight: the plain product on its unpacked copy
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
    const Shape& bs = a.in[1].shape();
    const auto [kc, nr] = std::pair{(*at->b_packed)[0], (*at->b_packed)[1]};
    // f32 values, or the bits of bf16 / f16 ones (the half branch below widens them).
    std::vector<float> plain_b(static_cast<size_t>(a.in[1].numel()));
    if (is_half(a.in[1].type.dtype))
      ir::repack_weight(a.in[1].as<const uint16_t>(), reinterpret_cast<uint16_t*>(plain_b.data()), bs[0], bs[1], kc, nr, false);
    else
      ir::repack_weight(in_f32(a, 1), plain_b.data(), bs[0], bs[1], kc, nr, false);
    ir::Node plain = a.node;
    plain.attrs = ir::Attrs{{"transpose_a", at->transpose_a}, {"activation", at->activation}, {"residual", at->residual}};
    if (at->a_perm) plain.attrs.set("a_perm", *at->a_perm);
    if (at->out_perm) plain.attrs.set("out_perm", *at->out_perm);
    std::vector<TensorRef> in(a.in.begin(), a.in.end());
    in[1].data = reinterpret_cast<std::byte*>(plain_b.data());
    return Matmul(KernelArgs{plain, in, a.out, a.workspace});
  }
  // Operands read through a perm, a permuted result: the plain product on transposed copies.
  if (a.node.attrs.has("a_perm") || a.node.attrs.has("b_perm") || a.node.attrs.has("out_perm")) {
    VOLTA_RETURN_IF_ERROR(require_f32(a));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
    std::vector<std::vector<float>> bufs(3);
    std::vector<TensorRef> in(a.in.begin(), a.in.end());
    const std::optional<std::vector<int64_t>>* perms[2] = {&at->a_perm, &at->b_perm};
    for (size_t i = 0; i < 2; ++i) {
      if (!perms[i]->has_value()) continue;
      bufs[i].resize(static_cast<size_t>(in[i].numel()));
      permute(in_f32(a, i), in[i].shape(), **perms[i], bufs[i].data());
      in[i] = {reinterpret_cast<std::byte*>(bufs[i].data()), {DType::f32, permuted(in[i].shape(), **perms[i])}};
    }
    ir::Node plain = a.node;
    plain.attrs = ir::Attrs{{"transpose_a", at->transpose_a},
                            {"transpose_b", at->transpose_b},
                            {"activation", at->activation},
                            {"residual", at->residual}};
    TensorRef out = a.out;
    if (at->out_perm) {  // the product in its own buffer, then its transpose into the output
      Shape ps(a.out.shape().size());
      for (size_t k = 0; k < ps.size(); ++k) ps[static_cast<size_t>((*at->out_perm)[k])] = a.out.shape()[k];
      bufs[2].resize(static_cast<size_t>(a.out.numel()));
      out = {reinterpret_cast<std::byte*>(bufs[2].data()), {DType::f32, ps}};
    }
    VOLTA_RETURN_IF_ERROR(Matmul(KernelArgs{plain, in, out, a.workspace}));
    if (at->out_perm) permute(bufs[2].data(), out.shape(), *at->out_perm, out_f32(a));
    return Status::ok();
  }
  if (is_half(a.in[1].type.dtype)) {  // bf16 / f16 weights: the same product on their exact f32 values
    std::vector<float> wide(static_cast<size_t>(a.in[1].numel()));
    const bool bf = a.in[1].type.dtype == DType::bf16;
    for (size_t i = 0; i < wide.size(); ++i) {
      const uint16_t h = a.in[1].as<const uint16_t>()[i];
      wide[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
    std::vector<TensorRef> in(a.in.begin(), a.in.end());
    in[1] = {reinterpret_cast<std::byte*>(wide.data()), {DType::f32, a.in[1].type.shape}};
    return Matmul(KernelArgs{a.node, in, a.out, a.workspace});
  }
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
  const int64_t ta = at->transpose_a, tb = at->transpose_b;
  const Shape& as = a.in[0].shape();
  const Shape& bs = a.in[1].shape();
  const Shape& os = a.out.shape();
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2) {
    return internal_error(op_prefix(a.node) + "operands must have rank >= 2 " + ir::node_ref(a.node));
  }
  const int64_t M = os[os.size() - 2];
  const int64_t N = os[os.size() - 1];
  const int64_t K = ta ? as[as.size() - 2] : as[as.size() - 1];

  // Element strides of A(m, k) and B(k, n) inside one matrix of the stored operands.
  const int64_t a_m = ta ? 1 : K, a_k = ta ? M : 1;
  const int64_t b_k = tb ? 1 : N, b_n = tb ? K : 1;

  const Shape batch(os.begin(), os.end() - 2);
  const Shape a_batch(as.begin(), as.end() - 2);
  const Shape b_batch(bs.begin(), bs.end() - 2);
  const std::array<Strides, 3> st = {broadcast_strides(a_batch, batch, M * K),
                                     broadcast_strides(b_batch, batch, K * N), contiguous_strides(batch, M * N)};
  const float* A = in_f32(a, 0);
  const float* B = in_f32(a, 1);
  float* out = out_f32(a);
  for_each_index(batch, st, [&](int64_t, const std::array<int64_t, 3>& off) {
    const float* pa = A + off[0];
    const float* pb = B + off[1];
    float* po = out + off[2];
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0.0;  // k order, double: the accuracy oracle for fast kernels
        for (int64_t k = 0; k < K; ++k) {
          acc += static_cast<double>(pa[m * a_m + k * a_k]) * static_cast<double>(pb[k * b_k + n * b_n]);
        }
        po[m * N + n] = static_cast<float>(acc);
      }
    }
  });
  // The epilogue, as the unfused add, relu / gelu (or gelu_grad, mul) and residual add would compute it.
  const std::string& act = at->activation;
  VOLTA_ASSIGN_OR_RETURN(const MatmulEpilogueInputs ins, matmul_epilogue_inputs(a.node, *at, a.in.size()));
  const auto input = [&a](int i) { return i < 0 ? nullptr : in_f32(a, static_cast<size_t>(i)); };
  const float* bias = input(ins.bias);
  const float* pre = input(ins.pre);
  const float* residual = input(ins.residual);
  for (int64_t i = 0; i < a.out.numel(); ++i) {
    double x = out[i];
    if (bias) x = static_cast<float>(ir::scalar_binary<ir::Op::Add>(x, static_cast<double>(bias[i % N])));
    if (act == "relu") x = ir::scalar_unary<ir::Op::Relu>(x);
    if (act == "gelu") x = ir::gelu_erf(x);
    if (pre) x = (act == "mul" ? static_cast<double>(pre[i]) : ir::gelu_erf_derivative(static_cast<double>(pre[i]))) * x;
    if (residual) x = ir::scalar_binary<ir::Op::Add>(static_cast<double>(residual[i]), static_cast<double>(static_cast<float>(x)));
    out[i] = static_cast<float>(x);
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
