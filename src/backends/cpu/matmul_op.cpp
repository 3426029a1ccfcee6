// The matmul op's kernel: a node's operands (a weight shared by a batch of rows, a batch of
// products, operands and result through perms) as the GEMM's strided matrices (matmul.cpp), and
// its epilogue, applied per task. Half weights go to matmul_half.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "ir/packed_weight.h"

namespace volta::cpu {

namespace {

struct Dims {
  int64_t M, N, K;
  bool ta, tb;
};

Result<Dims> dims_of(const ir::Node& node, const Shape& as, const Shape& os) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(node));
  const int64_t ta = at->transpose_a, tb = at->transpose_b;
  const int64_t M = os[os.size() - 2], N = os[os.size() - 1];
  const int64_t K = ta ? as[as.size() - 2] : as[as.size() - 1];
  return Dims{M, N, K, ta != 0, tb != 0};
}

}  // namespace

void MatmulEpilogue::apply(float* c, int64_t rows, int64_t cols) const {
  const int64_t off = c - out, col0 = N > 0 ? off % N : 0;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * N;
    if (bias) add_into(bias + col0, row, cols);
    switch (act) {
      case Act::kNone: break;
      case Act::kRelu:
        for (int64_t j = 0; j < cols; ++j) row[j] = std::isnan(row[j]) ? row[j] : (row[j] > 0.0f ? row[j] : 0.0f);
        break;
      case Act::kGelu: gelu_erf(row, row, cols); break;
      case Act::kGeluGrad: gelu_erf_grad(pre + off + r * N, row, row, cols); break;
      case Act::kMul: mul_into(pre + off + r * N, row, cols); break;  // x (a stored gelu') first, as gelu_grad's product has it
    }
    if (residual) add_into(residual + off + r * N, row, cols);
  }
}

size_t matmul_workspace_bytes(const ir::Graph& g, const ir::Node& node) {
  // The kernel packs into per-thread buffers and needs no workspace. It still reserves the
  // [K, N] a transposed right operand took before packing moved to those buffers, which keeps
  // memory plans (and the golden `inspect` outputs) unchanged.
  if (node.inputs.size() < 2) return 0;
  auto d = dims_of(node, g.node(node.inputs[0]).type.shape, node.type.shape);
  const size_t f32_bytes = d.is_ok() && d->tb ? static_cast<size_t>(d->K * d->N) * sizeof(float) : 0;
  return f32_bytes + matmul_half_workspace_bytes(g, node);
}

Result<MatmulEpilogue> matmul_epilogue_of(const KernelArgs& a, int64_t N) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
  return matmul_epilogue_of(a, *at, N);
}

Result<MatmulEpilogue> matmul_epilogue_of(const KernelArgs& a, const ir::attrs::Matmul& at, int64_t N) {
  const std::string_view act = at.activation;  // a view: each compare checks the length first
  MatmulEpilogue ep;
  ep.act = act == "none"        ? MatmulEpilogue::Act::kNone  // (most products: one compare)
           : act == "relu"      ? MatmulEpilogue::Act::kRelu
           : act == "gelu"      ? MatmulEpilogue::Act::kGelu
           : act == "gelu_grad" ? MatmulEpilogue::Act::kGeluGrad
           : act == "mul"       ? MatmulEpilogue::Act::kMul
                                : MatmulEpilogue::Act::kNone;
  VOLTA_ASSIGN_OR_RETURN(const MatmulEpilogueInputs in, matmul_epilogue_inputs(a.node, at, a.in.size()));
  const auto input = [&a](int i) { return i < 0 ? nullptr : a.in[static_cast<size_t>(i)].as<const float>(); };
  ep.bias = input(in.bias), ep.pre = input(in.pre), ep.residual = input(in.residual);
  ep.out = a.out.as<const float>();
  ep.N = N;
  return ep;
}

// The epilogue over the whole output, after the product (the paths that do not apply it per
// task): rows in tasks of about 16384 elements.
Status matmul_epilogue(const KernelArgs& a, int64_t N) {
  VOLTA_ASSIGN_OR_RETURN(const MatmulEpilogue ep, matmul_epilogue_of(a, N));
  if (!ep.active() || N == 0) return Status::ok();
  float* out = a.out.as<float>();
  parallel_rows(a.out.numel() / N, N, 16384, [&](int64_t r) { ep.apply(out + r * N, 1, N); });
  return Status::ok();
}

namespace {

// The general case: each matrix of the batch a strided view of the stored tensors (batch dims
// broadcast, operands read through a_perm / b_perm and the result written through out_perm, as
// fuse_matmul_layout writes them), which the GEMM reads like any MatView, so no transpose is
// ever written.
Status matmul_strided(const KernelArgs& a, const MatmulEpilogue& ep) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
  struct View {
    Shape shape;
    ref::Strides st;  // element strides of the stored tensor, per logical dim
  };
  auto view = [](const Shape& stored, const std::optional<std::vector<int64_t>>& perm) {
    const ref::Strides s = ref::contiguous_strides(stored);
    if (!perm) return View{stored, s};
    View v;
    for (int64_t p : *perm) v.shape.push_back(stored[static_cast<size_t>(p)]), v.st.push_back(s[static_cast<size_t>(p)]);
    return v;
  };
  const View va = view(a.in[0].shape(), at->a_perm), vb = view(a.in[1].shape(), at->b_perm);
  View vo{a.out.shape(), ref::contiguous_strides(a.out.shape())};
  if (at->out_perm) {  // the product's dim perm[k] is the stored output's dim k
    const View stored = vo;
    for (size_t k = 0; k < stored.shape.size(); ++k) {
      const auto d = static_cast<size_t>((*at->out_perm)[k]);
      vo.shape[d] = stored.shape[k], vo.st[d] = stored.st[k];
    }
  }
  const size_t ra = va.shape.size(), rb = vb.shape.size(), ro = vo.shape.size();
  if (ra < 2 || rb < 2 || ro < 2 || vo.st[ro - 1] != 1)
    return internal_error("[matmul] the permuted operands do not fit the product " + ir::node_ref(a.node));
  const bool ta = at->transpose_a != 0, tb = at->transpose_b != 0;
  const int64_t M = vo.shape[ro - 2], N = vo.shape[ro - 1], K = ta ? va.shape[ra - 2] : va.shape[ra - 1];
  const MatView av = ta ? MatView{nullptr, va.st[ra - 1], va.st[ra - 2]} : MatView{nullptr, va.st[ra - 2], va.st[ra - 1]};
  const MatView bv = tb ? MatView{nullptr, vb.st[rb - 1], vb.st[rb - 2]} : MatView{nullptr, vb.st[rb - 2], vb.st[rb - 1]};
  // Batch strides, right-aligned against the result's batch dims (a broadcast dim: 0).
  const Shape batch(vo.shape.begin(), vo.shape.end() - 2);
  auto batch_strides = [&](const View& v) {
    ref::Strides s(batch.size(), 0);
    const size_t vb_rank = v.shape.size() - 2;
    for (size_t i = 0; i < vb_rank; ++i)
      if (v.shape[i] != 1) s[batch.size() - vb_rank + i] = v.st[i];
    return s;
  };
  const std::array<ref::Strides, 3> st = {batch_strides(va), batch_strides(vb),
                                          ref::Strides(vo.st.begin(), vo.st.end() - 2)};
  const float* A = a.in[0].as<const float>();
  const float* B = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  std::vector<GemmOperands> mats;
  ref::for_each_index(batch, st, [&](int64_t, const std::array<int64_t, 3>& off) {
    mats.push_back({{A + off[0], av.rs, av.cs}, {B + off[1], bv.rs, bv.cs}, out + off[2]});
  });
  const MatmulIsa isa = matmul_active_isa();
  gemm_batch(isa, matmul_blocking_for(isa, M, N, K), mats, vo.st[ro - 2], M, N, K, at->out_perm ? nullptr : &ep);
  return Status::ok();
}

// A weight packed when the plan was made (b_packed, pack_matmul_weights): read in place when
// this ISA's GEMM takes that layout, else (an ISA other than the plan's, a decode-sized product)
// unpacked into a scratch copy and multiplied as a plain weight. The bits are the same either way.
Status matmul_packed_weight(const KernelArgs& a, const ir::attrs::Matmul& at, const MatmulEpilogue& ep) {
  const int64_t K = a.in[1].shape()[0], N = a.in[1].shape()[1], kc = (*at.b_packed)[0], nr = (*at.b_packed)[1];
  const float* B = a.in[1].as<const float>();
  const int64_t rows = N == 0 ? 0 : a.out.numel() / N;  // (from the output: with K = 0 A has no elements)
  const MatmulIsa isa = matmul_active_isa();
  if (!at.transpose_a && !at.a_perm && !at.out_perm && matmul_reads_packed_b(isa, rows, N, nr)) {
    if (matmul_small_packed(isa, rows, N)) {  // decode: no blocking to look up
      gemm_small_packed_all(isa, DType::f32, {a.in[0].as<const float>(), K, 1}, B, kc, a.out.as<float>(), N, rows, N, K, &ep);
      return Status::ok();
    }
    MatmulBlocking bl = matmul_blocking_for(isa, rows, N, K);
    bl.kc = kc;
    gemm(isa, bl, {a.in[0].as<const float>(), K, 1}, {B, N, 1}, a.out.as<float>(), N, rows, N, K, &ep, B);
    return Status::ok();
  }
  // Unpacked into this thread's scratch: in a team, on one rank (each rank's copy would be
  // another operand to place, parallel_for_resident).
  if (in_team()) return run_alone(matmul, a);
  thread_local std::vector<float> plain;
  plain.resize(static_cast<size_t>(K * N));
  ir::repack_weight(B, plain.data(), K, N, kc, nr, false);
  ir::Node node = a.node;
  node.attrs = {};
  for (const auto& [key, value] : a.node.attrs.items())
    if (key != "b_packed") node.attrs.set(key, value);
  std::vector<TensorRef> in(a.in.begin(), a.in.end());
  in[1].data = reinterpret_cast<std::byte*>(plain.data());
  return matmul(KernelArgs{node, in, a.out, a.workspace});
}

}  // namespace

Status matmul(const KernelArgs& a) {
  if (is_half(a.in[1].type.dtype)) return matmul_half_weights(a);
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
  const Shape& os = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const MatmulEpilogue ep, matmul_epilogue_of(a, *at, os.empty() ? 0 : os.back()));
  if (at->b_packed) return matmul_packed_weight(a, *at, ep);
  const Shape& as = a.in[0].shape();
  const Shape& bs = a.in[1].shape();
  const bool permuted = at->a_perm || at->b_perm || at->out_perm;
  if (!permuted) {
    // Row-major activations [..., M, K] against one weight (b's batch dims all 1): one taller product.
    VOLTA_ASSIGN_OR_RETURN(const Dims d, dims_of(a.node, as, os));
    const Shape batch(os.begin(), os.end() - 2), a_batch(as.begin(), as.end() - 2);
    const bool b_shared = std::all_of(bs.begin(), bs.end() - 2, [](int64_t s) { return s == 1; });
    if (!d.ta && b_shared && a_batch == batch) {
      const float* B = a.in[1].as<const float>();
      const int64_t rows = volta::numel(batch) * d.M;
      const MatmulIsa isa = matmul_active_isa();
      gemm(isa, matmul_blocking_for(isa, rows, d.N, d.K), {a.in[0].as<const float>(), d.K, 1},
           d.tb ? MatView{B, 1, d.K} : MatView{B, d.N, 1}, a.out.as<float>(), d.N, rows, d.N, d.K, &ep);
      return Status::ok();
    }
  }
  return matmul_strided(a, ep);
}

}  // namespace volta::cpu
