// dtypes, shapes and host tensors with 64-byte aligned storage.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "volta/status.h"

namespace volta {

// f64 is internal to the training step (the global gradient norm and the learning rate travel
// as f64[] scalars so their arithmetic stays in double); graphs from users are f32 / i32 / i64.
// bf16 and f16 are storage dtypes for weights: a matmul's right operand may be one (converted
// to f32 in registers, accumulated in f32); every other op computes in f32.
enum class DType : uint8_t { f32, i32, i64, f64, bf16, f16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
Result<DType> parse_dtype(std::string_view name);
inline bool is_integer(DType t) { return t == DType::i32 || t == DType::i64; }
inline bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// Conversions of the 16-bit storage dtypes, exact where the value fits: widening is exact;
// narrowing rounds to nearest even, keeps infinities, turns a NaN into a quiet NaN of the same
// sign, and (f16) overflows to infinity and rounds into subnormals.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// A static shape: every dim is known and >= 0. Rank 0 is a scalar.
using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_to_string(const Shape& s);  // "[2,3]"

// The type of an SSA value.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  int64_t numel() const { return volta::numel(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string to_string() const;  // "f32[2,3]"
  bool operator==(const TensorType&) const = default;
};

constexpr size_t kAlignment = 64;
inline size_t align_up(size_t n, size_t a = kAlignment) { return (n + a - 1) / a * a; }

// A host tensor: a type and contiguous row-major storage, shared on copy.
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  static Tensor zeros(DType dtype, Shape shape);
  // Contents unspecified: only for buffers that are written in full before they are read.
  static Tensor empty(DType dtype, Shape shape);
  static Tensor from_f32(Shape shape, std::initializer_list<float> values);
  static Tensor from_f32(Shape shape, std::span<const float> values);
  static Tensor from_i32(Shape shape, std::initializer_list<int32_t> values);
  static Tensor from_i64(Shape shape, std::initializer_list<int64_t> values);

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t numel() const { return type_.numel(); }
  size_t bytes() const { return type_.bytes(); }
  bool defined() const { return storage_ != nullptr; }

  std::byte* raw() { return storage_.get(); }
  const std::byte* raw() const { return storage_.get(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(storage_.get()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(storage_.get()); }

  // How many tensors share this storage (a device runtime drops its copy of a param nobody
  // else holds).
  long use_count() const { return storage_.use_count(); }
  // A deep copy with its own storage.
  Tensor clone() const;
  // Same bytes and type.
  bool bitwise_equal(const Tensor& other) const;

 private:
  TensorType type_;
  std::shared_ptr<std::byte> storage_;  // kAlignment-aligned, at least one byte
};

// An f32 tensor's values narrowed to bf16 or f16 (`dtype`; any other is returned as is), and a
// bf16 or f16 tensor widened to f32 (any other as is).
Tensor narrow_to(const Tensor& t, DType dtype);
Tensor widen_to_f32(const Tensor& t);

// 64-bit FNV-1a over bytes: a stable content hash for outputs, graphs and cache keys.
uint64_t fnv1a64(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);
// A fast content hash of large payloads (imported weights in graph hashes and listings); not
// fnv1a64, whose byte loop is what artifacts' golden hashes are written in.
uint64_t content_hash64(const void* data, size_t n);
inline uint64_t fnv1a64(std::string_view s, uint64_t seed = 0xcbf29ce484222325ull) {
  return fnv1a64(s.data(), s.size(), seed);
}
std::string hash_to_hex(uint64_t h);  // 16 lowercase hex digits

}  // namespace volta
