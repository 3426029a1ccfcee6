// Initializers whose bytes live in a file beside the model (TensorProto data_location EXTERNAL:
// how exporters write models past protobuf's 2 GB). Read from the model's own directory, each
// tensor's slice of its file once; a model given as bytes has no directory, so such a tensor is
// refused there, and a location may not leave the model's directory: no absolute path, no ..,
// and no symbolic link out of it. A link may lead into the directory of the model file's own
// target (a Hugging Face cache links the model and its data into one blobs/ folder).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "io/file.h"
#include "onnx/importer.h"

namespace volta::onnx {

namespace {

// The non-negative integer an external_data entry spells, else -1.
int64_t entry_int(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

std::string not_a_count(const std::string& s) {
  return "'" + s + "' is not a byte count (at most 18 decimal digits, more than any file Volta reads)";
}

std::string model_dir_of(const std::string& model_path) {
  const std::string dir = std::filesystem::path(model_path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Whether `inner` (canonical) lies inside the directory `dir` (canonical).
bool inside(const std::filesystem::path& inner, const std::filesystem::path& dir) {
  auto [d, i] = std::mismatch(dir.begin(), dir.end(), inner.begin(), inner.end());
  return d == dir.end() && i != inner.end();
}

// Where the file at `path` resolves, through any links, when that is inside the model's directory
// or the directory of the model file's target; none when it leads elsewhere. A missing file is
// `path` itself: the read names it. The read opens the resolved path, so a link swapped after
// this check is not followed.
std::optional<std::string> resolve_inside(const std::string& path, const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::canonical(path, ec);
  if (ec) return path;
  const fs::path dir = fs::weakly_canonical(model_dir_of(model_path), ec);
  if (!ec && inside(target, dir)) return target.string();
  const fs::path model = fs::canonical(model_path, ec);
  if (!ec && inside(target, model.parent_path())) return target.string();
  return std::nullopt;
}

}  // namespace

Result<Tensor> initializer_value(const ::onnx::TensorProto& p, const std::string& model_path, const std::string& origin, ElemType* type,
                                 bool release_raw) {
  if (p.data_location() != ::onnx::TensorProto::EXTERNAL && p.external_data_size() == 0)
    return tensor_from_proto(p, origin, type, release_raw);
  const std::string what = origin + ": external data of tensor '" + p.name() + "'";
  if (model_path.empty())
    return unimplemented(what + ": only a model loaded from its file (onnx::load_model, the CLI) can read external data");
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : p.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset" && (offset = entry_int(e.value())) < 0) return invalid_argument(what + ": offset " + not_a_count(e.value()));
    else if (e.key() == "length" && (length = entry_int(e.value())) < 0) return invalid_argument(what + ": length " + not_a_count(e.value()));
  }
  const std::filesystem::path rel(location);
  bool escapes = location.empty() || rel.is_absolute() || location.find('\0') != std::string::npos;
  for (const auto& part : rel) escapes = escapes || part == "..";
  if (escapes) return invalid_argument(what + ": location '" + location + "' must be a path inside the model's directory");
  if (rel.lexically_normal() == "." || rel.lexically_normal() == "./")  // was named a link leading out
    return invalid_argument(what + ": location '" + location + "' is the model's directory, not a file in it");
  const std::optional<std::string> resolved = resolve_inside((std::filesystem::path(model_dir_of(model_path)) / rel).string(), model_path);
  if (!resolved)
    return invalid_argument(what + ": location '" + location + "' is a link that leads out of the model's directory " +
                            "(copy or hard-link the file into it)");
  const std::string& path = *resolved;
  // The slice as the tensor's raw data (tensor_from_proto checks it against the dims and type),
  // handed back page by page as it is copied.
  ::onnx::TensorProto q;
  q.set_name(p.name());
  q.set_data_type(p.data_type());
  *q.mutable_dims() = p.dims();
  VOLTA_RETURN_IF_ERROR(io::read_file_with(path, {uint64_t{1} << 40, what, false}, [&](int fd, uint64_t file_size) -> Status {
    const auto size = static_cast<int64_t>(file_size);
    if (length < 0) length = std::max<int64_t>(0, size - offset);  // to the end of the file
    if (offset > size || length > size - offset)
      return invalid_argument(what + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                              ") are past the end of '" + path + "' (" + std::to_string(size) + " bytes)");
    // A slice of another size than the tensor's is refused before it is read (a 4-byte tensor
    // read all of a 3 GB file to learn that).
    if (Status st = check_data_bytes(q, static_cast<size_t>(length), what); !st.is_ok()) return st;
    std::string* raw = q.mutable_raw_data();
    raw->resize(static_cast<size_t>(length));
    for (int64_t done = 0; done < length;) {
      const ssize_t n = ::pread(fd, raw->data() + done, static_cast<size_t>(length - done), offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return not_found(what + ": cannot read '" + path + "': " + (n < 0 ? std::strerror(errno) : "file shrank"));
      done += n;
    }
    return Status::ok();
  }));
  return tensor_from_proto(q, what, type, true);
}

}  // namespace volta::onnx
