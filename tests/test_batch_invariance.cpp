// Batch invariance, part of the strict level: a sequence's logits are bitwise identical whatever
// the batch size and whatever its row in the batch, for the prefill and for a decode step on the
// KV cache, for both TinyLM variants and any thread count. It holds because every kernel computes
// each row of its output from that row alone with a fixed reduction order (the matmul's chain
// over k does not depend on M; row kernels see one row), and tasks are split by shape.
#include <cstring>
#include <vector>

#include "model/generate.h"
#include "test_util.h"
#include "tiny_lm.h"
#include "volta/rng.h"

namespace volta {
namespace {

// The logits of one sequence: the prefill's at its last position and a decode step's after it.
struct RowLogits {
  std::vector<std::byte> prefill, decode;
};

// Runs a batch of B sequences where row r is `seq` and the others are filler that differs by row
// and batch size; returns row r's logits.
Result<RowLogits> row_logits(Runtime& rt, const model::TinyLMConfig& c, const Bindings& params, const std::vector<int32_t>& seq,
                             int64_t B, int64_t r) {
  const int64_t T = c.context - 1;  // the prefill's length; the decode step writes position T
  Tensor prompt = Tensor::zeros(DType::i32, {B, T});
  Tensor next = Tensor::zeros(DType::i32, {B, 1});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i <= T; ++i) {
      const int32_t tok = b == r ? seq[static_cast<size_t>(i)] : static_cast<int32_t>((7 * b + 3 * i + B) % c.vocab);
      if (i < T) prompt.data<int32_t>()[b * T + i] = tok;
      else next.data<int32_t>()[b] = tok;
    }
  VOLTA_ASSIGN_OR_RETURN(model::Generator gen, model::Generator::create(rt, c, params));
  VOLTA_RETURN_IF_ERROR(gen.reserve(B));
  VOLTA_ASSIGN_OR_RETURN(auto prefill, gen.prefill_plan(B, T));
  VOLTA_ASSIGN_OR_RETURN(auto decode, gen.decode_plan(B));
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> p, rt.run(*prefill, {{"tokens", prompt}}, &gen.state()));
  Tensor at = Tensor::zeros(DType::i32, {1});
  at.data<int32_t>()[0] = static_cast<int32_t>(T);
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> d, rt.run(*decode, {{"tokens", next}, {"position", at}}, &gen.state()));
  auto row = [&](const Tensor& t) {
    const size_t bytes = t.bytes() / static_cast<size_t>(B);
    std::vector<std::byte> out(bytes);
    std::memcpy(out.data(), t.raw() + static_cast<size_t>(r) * bytes, bytes);
    return out;
  };
  return RowLogits{row(p[0]), row(d[0])};
}

// On the CPU at 1 and 2 threads, or (cuda) once on the CUDA backend.
void expect_batch_invariant(const model::TinyLMConfig& c, bool cuda = false) {
  auto g = model::build_tinylm_loss(c, 1, c.context);
  ASSERT_OK(g);
  auto params = init_params(*g, 5);
  ASSERT_OK(params);
  const std::vector<int32_t> seq = {3, 7, 1, 9, 2, 2, 5, 10};
  for (int threads : cuda ? std::vector<int>{0} : std::vector<int>{1, 2}) {
    set_cpu_threads(threads);
    auto backend = cuda ? make_cuda_backend() : Result<std::unique_ptr<Backend>>(make_cpu_backend());
    ASSERT_OK(backend);
    Runtime rt(std::move(*backend));
    auto alone = row_logits(rt, c, *params, seq, 1, 0);
    ASSERT_OK(alone);
    for (int64_t B = 1; B <= 16; ++B)
      for (int64_t r = 0; r < B; ++r) {
        auto got = row_logits(rt, c, *params, seq, B, r);
        ASSERT_OK(got);
        EXPECT_EQ(got->prefill, alone->prefill) << "prefill, batch " << B << " row " << r << " threads " << threads;
        EXPECT_EQ(got->decode, alone->decode) << "decode, batch " << B << " row " << r << " threads " << threads;
      }
  }
  set_cpu_threads(0);
}

TEST(BatchInvariance, GptLogitsDoNotDependOnBatchSizeOrRow) { expect_batch_invariant(test::tiny_gpt()); }
TEST(BatchInvariance, LlamaLogitsDoNotDependOnBatchSizeOrRow) { expect_batch_invariant(test::tiny_llama()); }

// The same on CUDA at strict (Volta's own kernels: each output row from its own row, the fused
// attention per query row).
TEST(CudaBatchInvariance, LogitsDoNotDependOnBatchSizeOrRow) {
  if (auto gpu = make_cuda_backend(); !gpu.is_ok()) GTEST_SKIP() << "no CUDA device: " << gpu.status().message();
  expect_batch_invariant(test::tiny_gpt(), true);
  expect_batch_invariant(test::tiny_llama(), true);
}

}  // namespace
}  // namespace volta
