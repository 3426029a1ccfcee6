// Internal to the ONNX importer: the protobuf classes and helpers shared by its files.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "io/file.h"
#include "volta/onnx.h"

namespace volta::onnx {

// A TensorProto's payload as a Volta tensor; *type gets its ONNX type. release_raw: the caller
// owns p and drops its raw_data right after, so the pages of raw_data already copied are handed
// back to the system during the copy (a large weight is never held twice whole).
// Whether `available` bytes of data are what the tensor's dims and type need (raw data; the
// error names the tensor, its shape and both counts); STRING and unsupported types pass.
Status check_data_bytes(const ::onnx::TensorProto& p, size_t available, const std::string& origin);
Result<Tensor> tensor_from_proto(const ::onnx::TensorProto& p, const std::string& origin, ElemType* type,
                                 bool release_raw = false);
// `t` as a TensorProto of `onnx_type` (which must live in t's dtype; BOOL from f32 0/1).
Status tensor_to_proto(const Tensor& t, ElemType onnx_type, const std::string& name, ::onnx::TensorProto* p);
Result<std::string> read_file_bytes(const std::string& path);

}  // namespace volta::onnx
