#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "volta/tensor.h"

namespace volta {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  if (name == "f32") return DType::f32;
  if (name == "i32") return DType::i32;
  if (name == "i64") return DType::i64;
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  return invalid_argument("unknown dtype '" + std::string(name) + "' (expected f32, i32, i64, bf16 or f16)");
}

uint16_t f32_to_bf16(float f) {
  const uint32_t b = std::bit_cast<uint32_t>(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest even: add 0x7fff plus the lowest kept bit; a carry into the exponent is the
  // correct rounding up (to infinity past the largest finite bf16).
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  // Inf, or NaN made quiet with its payload kept (as the F16C instructions widen it).
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in f32.
  const float v = static_cast<float>(man) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  const uint32_t b = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (a >= 0x38800000u) {  // normal in f16 (>= 2^-14): re-bias, round the 13 dropped bits
    const uint32_t r = a - (112u << 23);
    return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Subnormal or zero in f16: the value in units of 2^-24, rounded to nearest even. a < 2^-14,
  // so the scaling by 2^24 is exact and the conversion to an integer rounds once.
  const float units = std::bit_cast<float>(a) * 0x1p24f;
  const auto whole = static_cast<uint32_t>(units);
  const float frac = units - static_cast<float>(whole);
  const uint32_t q = whole + (frac > 0.5f || (frac == 0.5f && (whole & 1u)) ? 1u : 0u);
  return static_cast<uint16_t>(sign | q);
}

Tensor narrow_to(const Tensor& t, DType dtype) {
  if (t.dtype() != DType::f32 || !is_half(dtype)) return t;
  Tensor out = Tensor::empty(dtype, t.shape());
  const float* src = t.data<float>();
  auto* dst = out.data<uint16_t>();
  const bool bf = dtype == DType::bf16;
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
  return out;
}

Tensor widen_to_f32(const Tensor& t) {
  if (!is_half(t.dtype())) return t;
  Tensor out = Tensor::empty(DType::f32, t.shape());
  const auto* src = t.data<uint16_t>();
  float* dst = out.data<float>();
  const bool bf = t.dtype() == DType::bf16;
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf ? bf16_to_f32(src[i]) : f16_to_f32(src[i]);
  return out;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string TensorType::to_string() const { return std::string(dtype_name(dtype)) + shape_to_string(shape); }

namespace {
std::shared_ptr<std::byte> allocate_aligned(size_t bytes, bool zero = true) {
  size_t n = align_up(bytes == 0 ? 1 : bytes);
  void* p = std::aligned_alloc(kAlignment, n);
  // Callers that can fail turn this into an out_of_memory Status (the CPU backend's allocate
  // and execute, the runtime's run); the CLI's last line of defence reports it otherwise.
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, n);
  return {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
}
}  // namespace

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t;
  t.type_ = {dtype, std::move(shape)};
  t.storage_ = allocate_aligned(t.bytes());
  return t;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.type_ = {dtype, std::move(shape)};
  t.storage_ = allocate_aligned(t.bytes(), false);
  return t;
}

namespace {
// memcpy of the first min(n, capacity) bytes; nothing for none (an empty list's pointer may be null).
void copy_values(void* dst, const void* src, size_t n, size_t capacity) {
  if (std::min(n, capacity) > 0) std::memcpy(dst, src, std::min(n, capacity));
}
}  // namespace

Tensor Tensor::from_f32(Shape shape, std::span<const float> values) {
  Tensor t = zeros(DType::f32, std::move(shape));
  copy_values(t.raw(), values.data(), values.size() * 4, t.bytes());
  return t;
}
Tensor Tensor::from_f32(Shape shape, std::initializer_list<float> values) {
  return from_f32(std::move(shape), std::span<const float>(values.begin(), values.size()));
}
Tensor Tensor::from_i32(Shape shape, std::initializer_list<int32_t> values) {
  Tensor t = zeros(DType::i32, std::move(shape));
  copy_values(t.raw(), values.begin(), values.size() * 4, t.bytes());
  return t;
}
Tensor Tensor::from_i64(Shape shape, std::initializer_list<int64_t> values) {
  Tensor t = zeros(DType::i64, std::move(shape));
  copy_values(t.raw(), values.begin(), values.size() * 8, t.bytes());
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t = zeros(type_.dtype, type_.shape);
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

bool Tensor::bitwise_equal(const Tensor& other) const {
  if (type_ != other.type_) return false;
  if (!defined() || !other.defined()) return defined() == other.defined();
  return std::memcmp(raw(), other.raw(), bytes()) == 0;
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t content_hash64(const void* data, size_t n) {
  // Four independent multiply-xorshift lanes over 8-byte words (about 10x fnv1a64's byte loop),
  // the tail and the length through fnv1a64, the lanes folded in order.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * static_cast<size_t>(k), 8);
      lane[k] = (lane[k] ^ w) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  }
  uint64_t h = fnv1a64(p + i, n - i, static_cast<uint64_t>(n) * kMul);
  for (uint64_t l : lane) h = (h ^ l) * kMul, h ^= h >> 31;
  return h;
}

std::string hash_to_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace volta
