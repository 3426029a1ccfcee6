#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "volta/runtime.h"  // available_memory

namespace volta::io {

namespace {

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9) return false;
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') return false;
    if (i + n >= s.size()) return true;  // a character cut by the end of the sample
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

const char* file_kind_name(FileKind k) {
  switch (k) {
    case FileKind::Checkpoint: return "a Volta checkpoint (safetensors)";
    case FileKind::Onnx: return "an ONNX / protobuf file";
    case FileKind::Npy: return "a NumPy .npy file";
    case FileKind::IrText: return "a Volta model (IR text)";
    case FileKind::Text: return "a text file";
    case FileKind::Binary: return "a binary file";
  }
  return "a file";
}

FileKind detect_file_kind(std::string_view head) {
  if (head.substr(0, 6) == "\x93NUMPY") return FileKind::Npy;
  if (head.size() >= 9) {
    uint64_t n = 0;
    std::memcpy(&n, head.data(), 8);
    if (n >= 2 && n < (uint64_t{100} << 20) && head[8] == '{') return FileKind::Checkpoint;
  }
  // The IR text: comments and blank lines, then "graph".
  size_t i = 0;
  while (i < head.size()) {
    while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) ++i;
    if (i < head.size() && head[i] == '#') {
      while (i < head.size() && head[i] != '\n') ++i;
      continue;
    }
    break;
  }
  if (head.substr(i, 6) == "graph ") return FileKind::IrText;
  if (valid_utf8(head)) return FileKind::Text;
  // Archives and programs whose first byte would pass for a protobuf key below (a zip's 'P': a
  // PyTorch checkpoint).
  for (std::string_view magic : {std::string_view("PK\x03\x04"), std::string_view("\x1f\x8b"), std::string_view("\x7f" "ELF"),
                                 std::string_view("BZh"), std::string_view("\xfd" "7zXZ"), std::string_view("\x89PNG")})
    if (head.starts_with(magic)) return FileKind::Binary;
  if (head.size() > 262 && head.substr(257, 5) == "ustar") return FileKind::Binary;
  // Protobuf: a field-1..15 key with a valid wire type first (ModelProto: ir_version, varint).
  const auto c = static_cast<unsigned char>(head.empty() ? 0 : head[0]);
  if ((c >> 3) >= 1 && (c >> 3) <= 15 && ((c & 7) == 0 || (c & 7) == 2 || (c & 7) == 5)) return FileKind::Onnx;
  return FileKind::Binary;
}

namespace {

// Whether `head` (the first bytes of a file) starts with a JSON object or array: a profile, or
// the first line of a JSON-lines log. One cut by the head's end passes (as does a log's first
// line cut by a full disk). Text that merely starts with '{' or '[' (Cargo.toml's "[package]", a
// README's "[![badge]") does not, nor text starting with a number or a word ("2024-01-01 ...").
bool starts_with_json(const std::string& head) {
  struct Prefix : nlohmann::json_sax<nlohmann::json> {
    size_t end;
    bool cut = false;  // the parse failed only because the head ends
    explicit Prefix(size_t n) : end(n) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
      cut = position >= end;
      return false;
    }
  } sax(head.size());
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (head[first] != '{' && head[first] != '[')) return false;  // a number, a word
  const bool parsed = nlohmann::json::sax_parse(head, &sax, nlohmann::json::input_format_t::json, /*strict=*/false);
  return parsed || sax.cut;
}

const char* writes_name(Writes w) {
  switch (w) {
    case Writes::Json: return "the JSON this flag writes";
    case Writes::Checkpoint: return "a Volta checkpoint (safetensors)";
    case Writes::Onnx: return "an ONNX model";
    case Writes::Any: break;
  }
  return "a file";
}

// Whether the regular file at `path` (st its stat) may be replaced by what `writes` names; an
// unreadable file passes (its write fails with the system's reason).
Status check_replaced_kind(const std::string& path, const struct stat& st, Writes writes, const std::string& what) {
  if (writes == Writes::Any || !S_ISREG(st.st_mode) || st.st_size == 0) return Status::ok();
  std::string head;
  const Status read = read_file_with(path, {uint64_t{1} << 62, what, false}, [&](int fd, uint64_t size) {
    return read_all(fd, std::min<uint64_t>(size, 4096), path, {}, &head);
  });
  if (!read.is_ok() || head.empty()) return Status::ok();
  FileKind kind = detect_file_kind(head);
  bool same = false;
  if (writes == Writes::Json) {
    same = kind == FileKind::Text && starts_with_json(head);
  } else if (writes == Writes::Onnx) {
    // A model's first field is its ir_version (key 0x08), as every ONNX writer orders them; a
    // file that only looks like some protobuf (Latin-1 text starting with 'b') is not one.
    same = kind == FileKind::Onnx && head[0] == '\x08';
    if (kind == FileKind::Onnx && !same) kind = FileKind::Binary;
  } else {
    same = kind == FileKind::Checkpoint;
  }
  if (same) return Status::ok();
  return invalid_argument(what + ": '" + path + "' exists and is " + file_kind_name(kind) + ", not " + writes_name(writes) +
                          ": refusing to overwrite it (remove it or choose another name)");
}

}  // namespace

Status check_output_path(const std::string& path, const std::string& what, const std::vector<std::string>& reads, Writes writes) {
  if (const auto target = link_target(path); !target.is_ok()) return Status(target.status().code(), what + ": " + target.status().message());
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists) {
    // A character device (/dev/null, a terminal) takes writes; a directory or block device is
    // not an output; a FIFO is one only while something reads it (else opening it would block).
    if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode))
      return invalid_argument(what + ": '" + path + "' is " + kind_of(st.st_mode) + ", not a file to write");
    if (S_ISFIFO(st.st_mode)) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return invalid_argument(what + ": '" + path + "' is a FIFO that nothing reads");
      // Left open until the process ends (never closed on purpose): closing it would give a
      // reader such as `cat` its end of file now, and the output's own open later would then
      // wait for a reader forever.
      (void)fd;
    }
  }
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(path, ec);
  for (const std::string& r : reads) {
    if (r.empty()) continue;
    struct stat rs {};
    const bool same_inode = exists && ::stat(r.c_str(), &rs) == 0 && rs.st_dev == st.st_dev && rs.st_ino == st.st_ino;
    std::error_code rec;
    const bool same_name = !ec && std::filesystem::weakly_canonical(r, rec) == canonical && !rec;  // not written yet
    if (same_inode || same_name)
      return invalid_argument(what + ": '" + path + "' is '" + r + "', which this command reads or writes (refusing to overwrite it)");
  }
  // /dev/stdout into the shell's redirect file: appended to, nothing replaced.
  return exists && !is_stream_path(path) ? check_replaced_kind(path, st, writes, what) : Status::ok();
}

Status check_parent_dir(const std::string& given, const std::string& what) {
  // A symlink is written through: its target's directory must exist.
  const auto target = link_target(given);
  if (!target.is_ok()) return Status(target.status().code(), what + ": " + target.status().message());
  const std::string& path = *target;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty() || std::filesystem::exists(path, ec) || std::filesystem::is_directory(parent, ec)) return Status::ok();
  return invalid_argument(what + ": '" + given + "': there is no directory '" + parent.string() + "'");
}

Status expect_kind(std::string_view bytes, FileKind want, const std::string& path) {
  if (bytes.size() < 9) return Status::ok();  // too short to tell: the format's parser explains
  const FileKind got = detect_file_kind(bytes.substr(0, 4096));
  if (got == want || got == FileKind::Binary) return Status::ok();
  // Text that is not recognised: the IR parser names the line that is wrong; a protobuf may
  // happen to start like text.
  if (got == FileKind::Text && (want == FileKind::IrText || want == FileKind::Onnx)) return Status::ok();
  return parse_error("'" + path + "' is " + file_kind_name(got) + ", not " + file_kind_name(want));
}

Status read_file_with(const std::string& path, const ReadLimits& limits, const std::function<Status(int fd, uint64_t size)>& reader) {
  const std::string prefix = limits.what.empty() ? "" : limits.what + ": ";
  const std::string name = "'" + path + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return not_found(prefix + "cannot open " + name + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return not_found(prefix + "cannot open " + name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(prefix + name + " is " + kind_of(st.st_mode) + ", not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > limits.max_bytes)
    return invalid_argument(prefix + name + " has " + std::to_string(size) + " bytes, more than the " + std::to_string(limits.max_bytes) +
                            " this kind of file may have");
  const size_t avail = limits.whole ? available_memory() : 0;
  if (avail > 0 && size > avail)
    return out_of_memory(prefix + name + " has " + std::to_string(size) + " bytes, more than the " + std::to_string(avail) +
                         " bytes of memory available");
  return reader(fd, size);
}

Result<std::string> read_file(const std::string& path, const ReadLimits& limits) {
  std::string bytes;
  VOLTA_RETURN_IF_ERROR(read_file_with(path, limits, [&](int fd, uint64_t size) { return read_all(fd, size, path, limits, &bytes); }));
  return bytes;
}

Status read_all(int fd, uint64_t size, const std::string& path, const ReadLimits& limits, std::string* out) {
  const std::string prefix = limits.what.empty() ? "" : limits.what + ": ";
  const std::string name = "'" + path + "'";
  std::string& bytes = *out;
  bytes.assign(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {  // a file that shrinks while read ends early; one that grows is cut at its size
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return not_found(prefix + "cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return Status::ok();
}

bool keep_mode(const std::string& replaced, const std::string& replacement) {
  struct stat old {};
  if (::stat(replaced.c_str(), &old) != 0) return true;
  // A chown refused (not root, another owner) leaves this process's ids, as cp does.
  if (::chown(replacement.c_str(), old.st_uid, old.st_gid) != 0 && errno != EPERM) return false;
  return ::chmod(replacement.c_str(), old.st_mode & 0777) == 0;
}

}  // namespace volta::io
