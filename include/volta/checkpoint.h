// Checkpoint format v2: a safetensors file (so other tools can open the weights) carrying
// Volta's metadata.
//
//   bytes 0..8      header length N, little-endian u64
//   bytes 8..8+N    JSON header, keys sorted, padded with spaces so the data starts at a
//                   64-byte boundary: {"__metadata__": {...}, "<tensor>": {"dtype": "F32",
//                   "shape": [...], "data_offsets": [begin, end]}, ...}
//   then            the tensors' bytes, contiguous, in key order
//
// __metadata__ (string values, as safetensors requires): "format" = "volta.checkpoint",
// "format_version" = "2", "checksum" = FNV-1a 64 of the data section, "header_checksum" =
// FNV-1a 64 of the header's compact JSON without that entry (so a changed metadata byte fails
// to load as a changed tensor byte does), and free-form JSON strings such as "model_config",
// "tokenizer", "train_state" chosen by the caller. Version 1 (no header_checksum) still loads.
// The same contents always give the same bytes. Saving is atomic: a temporary file in the same
// folder is written, flushed and renamed over the target.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "volta/tensor.h"

namespace volta::io {

constexpr const char* kCheckpointFormat = "volta.checkpoint";
constexpr int kCheckpointVersion = 2;

struct Checkpoint {
  std::map<std::string, std::string> metadata;  // besides format, format_version and the checksums
  std::map<std::string, Tensor> tensors;
};

// The file's bytes.
std::string serialize_checkpoint(const Checkpoint& c);
// Validates everything (size, header bounds, JSON, dtypes, shapes, offsets, coverage, format,
// version, both checksums); errors name the source and the byte offset or key that is wrong.
Result<Checkpoint> parse_checkpoint(std::string_view bytes, const std::string& source = "<checkpoint>");

Status save_checkpoint(const Checkpoint& c, const std::string& path);
// Writes a temporary file next to `path`, flushes it and renames it over `path`.
Status write_file_atomic(const std::string& path, std::string_view bytes);
Result<Checkpoint> load_checkpoint(const std::string& path);
// The metadata of the checkpoint at `path` from its header alone (no tensor is read or checked).
Result<std::map<std::string, std::string>> load_checkpoint_metadata(const std::string& path);

}  // namespace volta::io
