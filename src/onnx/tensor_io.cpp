// Tensor files: ONNX TensorProto (.pb, through the protobuf classes) and numpy .npy (v1/v2,
// little-endian, C order). Every size is checked against the bytes before anything is read.
// (value_file.cpp: a .pb that holds a sequence or an optional, and binding files to a model's
// inputs and outputs.)
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "onnx/onnx_util.h"
// After onnx_util.h: onnx_pb.h defines the ONNX_API this header uses.
#include <onnx/onnx-data.pb.h>  // SequenceProto, OptionalProto

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace volta::onnx {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 32;

Status bad(const std::string& origin, const std::string& what) { return parse_error(origin + ": " + what); }

// Element count of `dims`, or an error for negative or too large shapes (no overflow).
Result<int64_t> checked_numel(const Shape& dims, const std::string& origin) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return bad(origin, "negative dim in shape " + shape_to_string(dims));
    if (d != 0 && n > kMaxElements / d) return bad(origin, "shape " + shape_to_string(dims) + " is too large");
    n *= d;
  }
  return n;
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// `count` little-endian doubles at `bytes`, rounded to f32 (DOUBLE values are held in f32).
void narrow_doubles(const char* bytes, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) {
    double d;
    std::memcpy(&d, bytes + 8 * i, 8);
    out[i] = static_cast<float>(d);
  }
}

// An f32 tensor's values as little-endian doubles (a DOUBLE value Volta computed in f32).
std::string widened(const Tensor& t) {
  std::string raw(static_cast<size_t>(t.numel()) * 8, '\0');
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double d = t.data<float>()[i];
    std::memcpy(raw.data() + 8 * static_cast<size_t>(i), &d, 8);
  }
  return raw;
}

// The integer types held in a wider Volta dtype: INT8, UINT8, INT16 and UINT16 in i32, UINT32 in
// i64 (all exactly), UINT64 in i64 as the same bits. `bytes` is the file's element size.
struct Narrow {
  size_t bytes = 0;
  bool is_signed = false;
};
std::optional<Narrow> narrow_int(int32_t t) {
  switch (t) {
    case 2: return Narrow{1, false};
    case 3: return Narrow{1, true};
    case 4: return Narrow{2, false};
    case 5: return Narrow{2, true};
    case 12: return Narrow{4, false};
    case 13: return Narrow{8, false};
    default: return std::nullopt;
  }
}

// Bytes of one element of ONNX type t in a file (.pb raw data or .npy): BOOL 1, the 16-bit
// floats 2, INT64 and DOUBLE 8, the narrow integers their width, the others 4.
size_t file_elem_bytes(int32_t t) {
  if (auto nt = narrow_int(t)) return nt->bytes;
  return t == 9 ? 1 : t == 7 || t == 11 ? 8 : t == 10 || t == 16 ? 2 : 4;
}

// The .npy dtypes Volta reads and writes, in the order the error message lists them.
constexpr std::pair<ElemType, const char*> kNpyDescr[] = {
    {ElemType::kFloat, "<f4"},  {ElemType::kDouble, "<f8"}, {ElemType::kFloat16, "<f2"}, {ElemType::kInt32, "<i4"},
    {ElemType::kInt64, "<i8"},  {ElemType::kInt8, "|i1"},   {ElemType::kUint8, "|u1"},   {ElemType::kInt16, "<i2"},
    {ElemType::kUint16, "<u2"}, {ElemType::kUint32, "<u4"}, {ElemType::kUint64, "<u8"},  {ElemType::kBool, "|b1"}};

// `count` little-endian elements of `nt` at `bytes`, widened into `out` (i32 or i64) from `first`.
void widen_ints(const char* bytes, size_t count, Narrow nt, Tensor& out, size_t first = 0) {
  for (size_t i = first; i < first + count; ++i) {
    uint64_t u = 0;
    std::memcpy(&u, bytes + nt.bytes * (i - first), nt.bytes);  // little-endian host
    int64_t v = static_cast<int64_t>(u);
    if (nt.is_signed && nt.bytes < 8 && (u >> (8 * nt.bytes - 1)) != 0) v -= int64_t{1} << (8 * nt.bytes);
    if (out.dtype() == DType::i32) out.data<int32_t>()[i] = static_cast<int32_t>(v);
    else out.data<int64_t>()[i] = v;
  }
}

// The values of an i32 / i64 tensor as little-endian elements of `nt` (their low bytes).
std::string narrowed_ints(const Tensor& t, Narrow nt) {
  std::string raw(static_cast<size_t>(t.numel()) * nt.bytes, '\0');
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto v = static_cast<uint64_t>(t.dtype() == DType::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]);
    std::memcpy(raw.data() + nt.bytes * static_cast<size_t>(i), &v, nt.bytes);
  }
  return raw;
}

// memcpy(dst, src, n) in slices, each whole page of src behind the copy handed back to the
// system (MADV_DONTNEED: the pages read as zeros afterwards; the caller frees src next).
void copy_releasing(std::byte* dst, const char* src, size_t n) {
  constexpr size_t kSlice = size_t{4} << 20;
#ifdef __linux__
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t released = (reinterpret_cast<uintptr_t>(src) + page - 1) / page * page;  // first whole page
#endif
  for (size_t off = 0; off < n; off += kSlice) {
    const size_t len = std::min(kSlice, n - off);
    std::memcpy(dst + off, src + off, len);  // little-endian host
#ifdef __linux__
    const uintptr_t end = (reinterpret_cast<uintptr_t>(src) + off + len) / page * page;
    if (end > released) {
      madvise(reinterpret_cast<void*>(released), end - released, MADV_DONTNEED);  // advice: a failure costs only memory
      released = end;
    }
#endif
  }
}

}  // namespace

const char* elem_type_name(int32_t t) {
  if (::onnx::TensorProto_DataType_IsValid(t))
    return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(t)).c_str();
  return "unknown type";
}

Result<DType> volta_dtype(int32_t t) {
  switch (t) {
    case 1: case 8: case 9: case 11: return DType::f32;  // STRING: the numbers the strings spell
    case 2: case 3: case 4: case 5: case 6: return DType::i32;
    case 7: case 12: case 13: return DType::i64;
    case 10: return DType::f16;   // storage dtypes: values feed casts and matmul weights
    case 16: return DType::bf16;
    default:
      return unimplemented(std::string("dtype ") + elem_type_name(t) + " is not supported (FLOAT, DOUBLE, FLOAT16, BFLOAT16, BOOL and the integer types are)");
  }
}

bool available() { return true; }

Status check_data_bytes(const ::onnx::TensorProto& p, size_t available, const std::string& origin) {
  if (p.data_type() == 8 || !volta_dtype(p.data_type()).is_ok()) return Status::ok();  // the conversion explains
  const Shape dims(p.dims().begin(), p.dims().end());
  VOLTA_ASSIGN_OR_RETURN(const int64_t n, checked_numel(dims, origin));
  const size_t need = static_cast<size_t>(n) * file_elem_bytes(p.data_type());
  if (need == available) return Status::ok();
  return bad(origin, "tensor '" + p.name() + "' " + shape_to_string(dims) + " of " + elem_type_name(p.data_type()) + " needs " +
                         std::to_string(need) + " bytes of data but has " + std::to_string(available));
}

Result<Tensor> tensor_from_proto(const ::onnx::TensorProto& p, const std::string& origin, ElemType* type_out,
                                 bool release_raw) {
  if (p.data_location() == ::onnx::TensorProto::EXTERNAL || p.external_data_size() > 0)
    return unimplemented(origin + ": tensor '" + p.name() + "' keeps its data in an external file");
  if (p.has_segment()) return unimplemented(origin + ": tensor '" + p.name() + "' is segmented");
  auto dt = volta_dtype(p.data_type());
  if (!dt.is_ok()) return Status(dt.status().code(), origin + ": tensor '" + p.name() + "': " + dt.status().message());
  Shape dims(p.dims().begin(), p.dims().end());
  VOLTA_ASSIGN_OR_RETURN(int64_t n, checked_numel(dims, origin));
  const auto count = static_cast<size_t>(n);
  const int32_t t = p.data_type();
  if (t == 8) {  // STRING: each element a number in ONNX's Cast spelling ("1e-5", "INF", "-inf", "NaN")
    if (p.string_data_size() != n)
      return bad(origin, "tensor '" + p.name() + "' " + shape_to_string(dims) + " of STRING needs " + std::to_string(n) +
                             " strings but has " + std::to_string(p.string_data_size()));
    Tensor out = Tensor::zeros(DType::f32, dims);
    for (int64_t i = 0; i < n; ++i) {
      const std::string& str = p.string_data(static_cast<int>(i));
      char* end = nullptr;
      const float v = str.empty() || std::isspace(static_cast<unsigned char>(str[0])) ? 0.0f : std::strtof(str.c_str(), &end);
      if (end == nullptr || end != str.c_str() + str.size())
        return unimplemented(origin + ": tensor '" + p.name() + "' STRING element " + std::to_string(i) + " \"" + str.substr(0, 40) +
                             "\" is not a number (STRING values are held as the numbers they spell)");
      out.data<float>()[i] = v;
    }
    *type_out = ElemType::kString;
    return out;
  }
  const bool half = t == 10 || t == 16;  // without raw_data: one value per int32_data entry
  const std::optional<Narrow> nt = narrow_int(t);
  const bool in_uint64_data = t == 12 || t == 13;  // without raw_data; the other narrow ones use int32_data
  const size_t file_elem = file_elem_bytes(t);
  // Never allocate more than the message can fill.
  const size_t available = p.has_raw_data()  ? p.raw_data().size()
                           : t == 1          ? static_cast<size_t>(p.float_data_size()) * 4
                           : t == 7          ? static_cast<size_t>(p.int64_data_size()) * 8
                           : t == 11         ? static_cast<size_t>(p.double_data_size()) * 8
                           : in_uint64_data  ? static_cast<size_t>(p.uint64_data_size()) * file_elem
                                             : static_cast<size_t>(p.int32_data_size()) * file_elem;
  VOLTA_RETURN_IF_ERROR(check_data_bytes(p, available, origin));
  // Not zeroed first: every byte is written below, and a zeroed copy of a large weight would be
  // resident in full beside its proto bytes before the copy starts to hand those back.
  Tensor out = p.has_raw_data() && !nt && t != 9 && t != 11 ? Tensor::empty(*dt, dims) : Tensor::zeros(*dt, dims);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    if (t == 9) {
      for (size_t i = 0; i < count; ++i) out.data<float>()[i] = raw[i] != 0 ? 1.0f : 0.0f;
    } else if (t == 11) {
      narrow_doubles(raw.data(), count, out.data<float>());
    } else if (nt) {
      widen_ints(raw.data(), count, *nt, out);
    } else if (count && release_raw) {
      copy_releasing(out.raw(), raw.data(), raw.size());
    } else if (count) {
      std::memcpy(out.raw(), raw.data(), raw.size());  // little-endian host
    }
  } else if (t == 1) {
    for (size_t i = 0; i < count; ++i) out.data<float>()[i] = p.float_data(static_cast<int>(i));
  } else if (t == 7) {
    for (size_t i = 0; i < count; ++i) out.data<int64_t>()[i] = p.int64_data(static_cast<int>(i));
  } else if (t == 11) {
    for (size_t i = 0; i < count; ++i) out.data<float>()[i] = static_cast<float>(p.double_data(static_cast<int>(i)));
  } else if (t == 6) {
    for (size_t i = 0; i < count; ++i) out.data<int32_t>()[i] = p.int32_data(static_cast<int>(i));
  } else if (in_uint64_data) {  // as bits: UINT32 values fit, UINT64 ones keep their bits in i64
    for (size_t i = 0; i < count; ++i) out.data<int64_t>()[i] = static_cast<int64_t>(p.uint64_data(static_cast<int>(i)));
  } else if (nt) {  // the low bytes of each int32_data entry, sign-extended for the signed types
    for (size_t i = 0; i < count; ++i) {
      const auto v = static_cast<uint32_t>(p.int32_data(static_cast<int>(i)));
      widen_ints(reinterpret_cast<const char*>(&v), 1, *nt, out, i);
    }
  } else if (half) {
    for (size_t i = 0; i < count; ++i) out.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
  } else {
    for (size_t i = 0; i < count; ++i) out.data<float>()[i] = p.int32_data(static_cast<int>(i)) != 0 ? 1.0f : 0.0f;
  }
  *type_out = static_cast<ElemType>(t);
  return out;
}

Result<TypedTensor> parse_tensor_proto(std::string_view bytes, const std::string& origin) {
  ::onnx::TensorProto p;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) || !p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return bad(origin, "not an ONNX TensorProto (protobuf parse failed)");
  TypedTensor out;
  VOLTA_ASSIGN_OR_RETURN(out.tensor, tensor_from_proto(p, origin, &out.onnx_type));
  out.name = p.name();
  return out;
}

Status tensor_to_proto(const Tensor& t, ElemType onnx_type, const std::string& name, ::onnx::TensorProto* p) {
  if (onnx_type == ElemType::kString) return unimplemented("STRING values cannot be written (they are held as numbers)");
  VOLTA_ASSIGN_OR_RETURN(DType want, volta_dtype(static_cast<int32_t>(onnx_type)));
  if (want != t.dtype())
    return invalid_argument("cannot write " + t.type().to_string() + " as " + elem_type_name(static_cast<int32_t>(onnx_type)));
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(onnx_type));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (onnx_type == ElemType::kBool) {
    std::string raw(static_cast<size_t>(t.numel()), '\0');
    for (int64_t i = 0; i < t.numel(); ++i) raw[static_cast<size_t>(i)] = t.data<float>()[i] != 0.0f ? 1 : 0;
    p->set_raw_data(raw);
  } else if (onnx_type == ElemType::kDouble) {
    p->set_raw_data(widened(t));
  } else if (auto nt = narrow_int(static_cast<int32_t>(onnx_type))) {
    p->set_raw_data(narrowed_ints(t, *nt));
  } else {
    p->set_raw_data(std::string(reinterpret_cast<const char*>(t.raw()), t.bytes()));
  }
  return Status::ok();
}

Result<std::string> serialize_tensor_proto(const Tensor& t, ElemType onnx_type, const std::string& name) {
  ::onnx::TensorProto p;
  VOLTA_RETURN_IF_ERROR(tensor_to_proto(t, onnx_type, name, &p));
  std::string out;
  if (!p.SerializeToString(&out)) return internal_error("cannot serialize tensor '" + name + "'");
  return out;
}

namespace {

// A .npy header: its element type, shape and where the data starts.
struct NpyHeader {
  ElemType type = ElemType::kUndefined;
  Shape dims;
  std::string shape_text;
  int64_t n = 0;
  size_t data = 0, elem = 0;
  size_t data_bytes() const { return static_cast<size_t>(n) * elem; }
};

Status npy_size_mismatch(const NpyHeader& h, uint64_t have, const std::string& origin) {
  return bad(origin, ".npy data has " + std::to_string(have) + " bytes but shape " + h.shape_text + " needs " + std::to_string(h.data_bytes()));
}

// `bytes` holds at least the header (all of the file, or its head).
Result<NpyHeader> parse_npy_header(std::string_view bytes, const std::string& origin) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6)) return bad(origin, "not a .npy file (bad magic)");
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad(origin, "truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    return bad(origin, ".npy version " + std::to_string(major) + " is not supported");
  }
  if (header_len > bytes.size() - start) return bad(origin, "truncated .npy header");
  const std::string header(bytes.substr(start, header_len));
  auto field = [&](const std::string& key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t colon = header.find(':', k);
    if (colon == std::string::npos) return "";
    size_t v = header.find_first_not_of(" \t", colon + 1);
    if (v == std::string::npos) return "";
    if (header[v] == '(') {
      size_t close = header.find(')', v);
      return close == std::string::npos ? "" : header.substr(v, close - v + 1);
    }
    size_t end = header.find_first_of(",}", v);
    return header.substr(v, end == std::string::npos ? std::string::npos : end - v);
  };
  for (const char* key : {"'descr'", "'fortran_order'", "'shape'"})  // NumPy would take the last, this reader the first
    if (const size_t at = header.find(key); at != std::string::npos && header.find(key, at + 1) != std::string::npos)
      return bad(origin, ".npy header names " + std::string(key) + " twice");
  const std::string descr = field("descr"), fortran = field("fortran_order"), shape_text = field("shape");
  ElemType type = ElemType::kUndefined;
  std::string known;
  for (const auto& [et, d] : kNpyDescr) {
    if (descr == "'" + std::string(d) + "'") type = et;
    known += std::string(known.empty() ? "" : ", ") + d;
  }
  if (type == ElemType::kUndefined)
    return unimplemented(origin + ": .npy dtype " + (descr.empty() ? "(missing)" : descr) + " is not supported (" + known + " are)");
  if (fortran != "False") return unimplemented(origin + ": Fortran-order .npy files are not supported");
  if (shape_text.size() < 2) return bad(origin, ".npy header has no shape");
  Shape dims;
  std::string inner = shape_text.substr(1, shape_text.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    item = item.substr(b);
    if (item.empty() || item.size() > 15 || item.find_first_not_of("0123456789") != std::string::npos)
      return bad(origin, ".npy shape " + shape_text + " is not a tuple of non-negative integers");
    dims.push_back(std::stoll(item));
  }
  VOLTA_ASSIGN_OR_RETURN(const int64_t n, checked_numel(dims, origin));
  return NpyHeader{type, std::move(dims), shape_text, n, start + header_len, file_elem_bytes(static_cast<int32_t>(type))};
}

}  // namespace

Result<TypedTensor> parse_npy(std::string_view bytes, const std::string& origin) {
  VOLTA_ASSIGN_OR_RETURN(const NpyHeader h, parse_npy_header(bytes, origin));
  if (bytes.size() - h.data != h.data_bytes()) return npy_size_mismatch(h, bytes.size() - h.data, origin);
  const ElemType type = h.type;
  const Shape& dims = h.dims;
  const int64_t n = h.n;
  const size_t elem = h.elem, data = h.data;
  const std::optional<Narrow> nt = narrow_int(static_cast<int32_t>(type));
  TypedTensor out;
  out.onnx_type = type;
  VOLTA_ASSIGN_OR_RETURN(DType dt, volta_dtype(static_cast<int32_t>(type)));
  out.tensor = Tensor::zeros(dt, dims);
  if (type == ElemType::kBool) {
    for (int64_t i = 0; i < n; ++i) out.tensor.data<float>()[i] = bytes[data + static_cast<size_t>(i)] != 0 ? 1.0f : 0.0f;
  } else if (type == ElemType::kDouble) {
    narrow_doubles(bytes.data() + data, static_cast<size_t>(n), out.tensor.data<float>());
  } else if (nt) {
    widen_ints(bytes.data() + data, static_cast<size_t>(n), *nt, out.tensor);
  } else if (n) {
    std::memcpy(out.tensor.raw(), bytes.data() + data, static_cast<size_t>(n) * elem);
  }
  return out;
}

Result<std::string> serialize_npy(const Tensor& t, ElemType onnx_type) {
  if (onnx_type == ElemType::kString) return unimplemented("STRING values cannot be written (they are held as numbers)");
  VOLTA_ASSIGN_OR_RETURN(DType want, volta_dtype(static_cast<int32_t>(onnx_type)));
  if (want != t.dtype())
    return invalid_argument("cannot write " + t.type().to_string() + " as " + elem_type_name(static_cast<int32_t>(onnx_type)));
  if (onnx_type == ElemType::kBfloat16) return unimplemented(".npy has no bfloat16 dtype: write the output as .pb");
  const char* descr = "|b1";
  for (const auto& [et, d] : kNpyDescr)
    if (et == onnx_type) descr = d;
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ",";
  if (t.shape().size() > 1) shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put<uint16_t>(out, static_cast<uint16_t>(header.size()));
  out += header;
  if (onnx_type == ElemType::kBool) {
    for (int64_t i = 0; i < t.numel(); ++i) out += t.data<float>()[i] != 0.0f ? '\x01' : '\x00';
  } else if (onnx_type == ElemType::kDouble) {
    out += widened(t);
  } else if (auto nt = narrow_int(static_cast<int32_t>(onnx_type))) {
    out += narrowed_ints(t, *nt);
  } else {
    out.append(reinterpret_cast<const char*>(t.raw()), t.bytes());
  }
  return out;
}

Result<std::string> read_file_bytes(const std::string& path) {
  std::string bytes;
  VOLTA_RETURN_IF_ERROR(io::read_file_with(path, {uint64_t{2} << 30, ""}, [&](int fd, uint64_t size) -> Status {  // protobuf's own limit
    // A .npy whose header gives its data's size is refused before the rest is read when the
    // file holds another size (a 2 GB file under a header of one float was read whole first).
    std::string head(static_cast<size_t>(std::min<uint64_t>(size, 65536)), '\0');
    const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
    if (got > 0) head.resize(static_cast<size_t>(got));
    if (got > 0 && io::detect_file_kind(std::string_view(head).substr(0, 16)) == io::FileKind::Npy) {
      const auto h = parse_npy_header(head, path);
      if (h.is_ok() && size - h->data != h->data_bytes()) return npy_size_mismatch(*h, size - h->data, path);
    }
    return io::read_all(fd, size, path, {}, &bytes);
  }));
  return bytes;
}

Result<TypedTensor> read_tensor_file(const std::string& path) {
  VOLTA_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path));
  // The kind is in the bytes (a .NPY or a misnamed file is read as what it is).
  if (io::detect_file_kind(std::string_view(bytes).substr(0, 16)) == io::FileKind::Npy) return parse_npy(bytes, path);
  VOLTA_RETURN_IF_ERROR(io::expect_kind(bytes, io::FileKind::Onnx, path));
  return parse_tensor_proto(bytes, path);
}

}  // namespace volta::onnx
