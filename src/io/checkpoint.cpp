// Checkpoint format v2 (see include/volta/checkpoint.h; v1 files still load). The parser trusts nothing: every
// size, offset and JSON type is checked before use, and nlohmann::json is used without
// exceptions.
#include "volta/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/file.h"

namespace volta::io {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
  }
  return "?";
}

Result<DType> from_safetensors_dtype(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  return invalid_argument("unsupported dtype '" + s + "' (Volta reads F32, BF16, F16, I32 and I64)");
}

// The header's own checksum: FNV-1a 64 of the header's compact JSON without the
// "header_checksum" entry. Taken over the parsed JSON rather than the file's bytes, so the
// writer and the reader hash the same text (keys sorted, invalid UTF-8 replaced as written).
std::string header_hash(json header) {
  header["__metadata__"].erase("header_checksum");
  const std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  return "fnv1a64:" + hash_to_hex(fnv1a64(text.data(), text.size()));
}

// Version 1 carries no header checksum; a version 2 header must match its own. A changed
// metadata byte (a tokenizer symbol, the step) loaded from a v1 file and changed what it did.
Status check_header(const json& header, const std::string& version, const std::string& source) {
  if (version == "1") return Status::ok();
  const auto meta = header.find("__metadata__");
  const auto said = meta->find("header_checksum");
  if (said == meta->end() || !said->is_string()) return parse_error(source + ": version 2 header has no header_checksum");
  const std::string actual = header_hash(header);
  if (said->get<std::string>() != actual)
    return parse_error(source + ": header checksum mismatch: header_checksum says '" + said->get<std::string>() +
                       "', the header gives '" + actual + "' (the header was changed after it was written)");
  return Status::ok();
}

bool known_version(const std::string& v) { return v == "1" || v == std::to_string(kCheckpointVersion); }

}  // namespace

std::string serialize_checkpoint(const Checkpoint& c) {
  std::string data;
  json header = json::object();  // std::map underneath: keys sorted
  for (const auto& [name, t] : c.tensors) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.raw()), t.bytes());
    header[name] = {{"dtype", safetensors_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {begin, data.size()}}};
  }
  json meta = json::object();
  for (const auto& [k, v] : c.metadata) meta[k] = v;
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = std::to_string(kCheckpointVersion);
  meta["checksum"] = "fnv1a64:" + hash_to_hex(fnv1a64(data.data(), data.size()));
  header["__metadata__"] = meta;
  header["__metadata__"]["header_checksum"] = header_hash(header);
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);  // never throws
  text.append(align_up(8 + text.size()) - 8 - text.size(), ' ');  // data starts 64-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text + data;
}

namespace {

// The header length of a file of `size` bytes that begins with `head` (at least 8 bytes), or the
// error naming it when it runs past the end. load_checkpoint asks before reading the whole file.
Result<uint64_t> header_length(std::string_view head, uint64_t size, const std::string& source) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(head[static_cast<size_t>(i)])) << (8 * i);
  if (n > kMaxHeaderBytes || n > size - 8)
    return parse_error(source + ": header length " + std::to_string(n) + " at offset 0 runs past the end of the " +
                       std::to_string(size) + "-byte file");
  return n;
}
Status not_an_object(const std::string& source) { return parse_error(source + ": header at offset 8 is not a JSON object"); }

}  // namespace

Result<Checkpoint> parse_checkpoint(std::string_view bytes, const std::string& source) {
  auto fail = [&](const std::string& msg) { return parse_error(source + ": " + msg); };
  if (bytes.size() < 8) return fail("file is " + std::to_string(bytes.size()) + " bytes, too short for a header length");
  VOLTA_ASSIGN_OR_RETURN(const uint64_t n, header_length(bytes, bytes.size(), source));
  std::string_view text = bytes.substr(8, n);
  const std::string_view data = bytes.substr(8 + n);
  json header = json::parse(text.begin(), text.end(), nullptr, false);
  if (header.is_discarded() || !header.is_object()) return not_an_object(source);

  Checkpoint c;
  auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object()) return fail("header has no __metadata__ object: not a Volta checkpoint");
  for (auto it = meta->begin(); it != meta->end(); ++it) {
    if (!it->is_string()) return fail("metadata '" + it.key() + "' is not a string");
    c.metadata[it.key()] = it->get<std::string>();
  }
  if (c.metadata["format"] != kCheckpointFormat)
    return fail("format is '" + c.metadata["format"] + "', expected '" + kCheckpointFormat + "'");
  const std::string version = c.metadata["format_version"];
  if (!known_version(version))
    return fail("unsupported format version '" + version + "' (this Volta reads versions 1 to " + std::to_string(kCheckpointVersion) + ")");
  const std::string checksum = c.metadata["checksum"];
  for (const char* key : {"format", "format_version", "checksum", "header_checksum"}) c.metadata.erase(key);

  // Tensors must tile the data section exactly, in offset order (safetensors' own rule).
  std::map<uint64_t, std::string> by_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const json& e = *it;
    auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return bad("needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string()) return bad("dtype is not a string");
    auto dtype = from_safetensors_dtype(e["dtype"].get<std::string>());
    if (!dtype.is_ok()) return bad(dtype.status().message());
    const json& js = e["shape"];
    const json& jo = e["data_offsets"];
    if (!js.is_array() || js.size() > 64) return bad("shape is not a list of at most 64 dims");
    Shape shape;
    uint64_t count = 1;
    for (const json& d : js) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) return bad("shape has a dim that is not an integer in [0, 2^40]");
      shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      if (count != 0 && shape.back() != 0 && count > (uint64_t{1} << 50) / static_cast<uint64_t>(shape.back()))
        return bad("shape " + shape_to_string(shape) + " is too large");
      count *= static_cast<uint64_t>(shape.back());
    }
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      return bad("data_offsets is not [begin, end]");
    const uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
    if (begin > end || end > data.size())
      return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] lie outside the " +
                 std::to_string(data.size()) + "-byte data section (file offset " + std::to_string(8 + n) + ")");
    if (end - begin != count * dtype_size(*dtype))
      return bad("has " + std::to_string(end - begin) + " bytes but " + dtype_name(*dtype) + shape_to_string(shape) +
                 " needs " + std::to_string(count * dtype_size(*dtype)));
    if (end > begin) {  // an empty tensor covers no byte: it may start where another one does
      const auto [at, fresh] = by_offset.emplace(begin, name);
      if (!fresh) return bad("starts at data offset " + std::to_string(begin) + ", as tensor '" + at->second + "' does");
    }
    Tensor t = Tensor::zeros(*dtype, shape);
    std::memcpy(t.raw(), data.data() + begin, t.bytes());
    c.tensors.emplace(name, std::move(t));
  }
  uint64_t expect = 0;
  for (const auto& [begin, name] : by_offset) {
    if (begin != expect)
      return fail("tensor '" + name + "' starts at data offset " + std::to_string(begin) + " but the previous one ends at " +
                  std::to_string(expect));
    expect = begin + c.tensors.at(name).bytes();
  }
  if (expect != data.size())
    return fail("data section is " + std::to_string(data.size()) + " bytes but the tensors cover " + std::to_string(expect));
  // The header's checksum after its structure (whose errors say more), before the data's.
  VOLTA_RETURN_IF_ERROR(check_header(header, version, source));
  const std::string actual = "fnv1a64:" + hash_to_hex(fnv1a64(data.data(), data.size()));
  if (checksum != actual) return fail("checksum mismatch: header says '" + checksum + "', tensor bytes give '" + actual + "'");
  return c;
}

Status save_checkpoint(const Checkpoint& c, const std::string& path) { return write_file_atomic(path, serialize_checkpoint(c)); }

// (io/file.h)
void remove_stale_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name.size() - prefix.size() > 9) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      std::filesystem::remove(it->path(), rm);
    }
  }
}

// (io/file.h)
Result<std::string> link_target(const std::string& given) {
  std::filesystem::path p = given;
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own limit on a chain of links
    std::error_code ec;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) return p.string();
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) return not_found("cannot follow '" + p.string() + "': " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return invalid_argument("'" + given + "' is a loop of symlinks, not a file to write");
}

// (io/file.h)
bool is_stream_path(const std::string& path) { return path.starts_with("/dev/") || path.starts_with("/proc/"); }

// (io/file.h)
Status write_output(const std::string& given, std::string_view bytes) {
  // /dev/stdout, /dev/fd/N: this process's own descriptors (a pipe, a terminal, the shell's
  // redirect file), written in place and appended to, never resolved and replaced.
  const bool stream = is_stream_path(given);
  std::string path = given;
  if (!stream) {
    VOLTA_ASSIGN_OR_RETURN(path, link_target(given));
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!stream && (!exists || S_ISREG(st.st_mode))) return write_file_atomic(path, bytes);
  if (exists && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
    return invalid_argument("cannot write '" + given + "': it is not a regular file (refusing to replace it)");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);  // a FIFO's reader is held open (check_output_path)
  if (fd < 0) return not_found("cannot write '" + given + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return not_found("cannot write '" + given + "': " + why);
    }
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 ? Status::ok() : not_found("cannot write '" + given + "': " + std::strerror(errno));
}

Status write_file_atomic(const std::string& given, std::string_view bytes) {
  // The rename replaces whatever is at the path: only ever a regular file. A device (/dev/full),
  // FIFO or directory there is refused, and a symlink is written through to its target (one
  // whose target does not exist yet too: the link itself was replaced by a file).
  VOLTA_ASSIGN_OR_RETURN(const std::string path, link_target(given));
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    return invalid_argument("cannot write '" + given + "': it is not a regular file (refusing to replace it)");
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return not_found("cannot write '" + tmp + "': " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;  // the bytes are on disk before the rename makes them visible
  ok = std::fclose(f) == 0 && ok;
  // A file replaced keeps its mode (the new one had the umask's: a checkpoint kept 0600 became 0644).
  ok = ok && keep_mode(path, tmp);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return not_found("cannot write '" + path + "': " + why);
  }
  return Status::ok();
}

namespace {

// What parse_checkpoint would say first about a file of `size` bytes beginning with `head`, where
// the head already shows it: a header length past the end, or a header that does not open a JSON
// object. Otherwise ok (parse_checkpoint checks everything once the file is read).
Status check_head(std::string_view head, uint64_t size, const std::string& source) {
  if (head.size() < 8) return Status::ok();
  VOLTA_ASSIGN_OR_RETURN(const uint64_t n, header_length(head, size, source));
  const std::string_view text = head.substr(8, static_cast<size_t>(std::min<uint64_t>(n, head.size() - 8)));
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (n == 0 || (first != std::string_view::npos && text[first] != '{')) return not_an_object(source);
  return Status::ok();
}

// The header of a file of `size` bytes says what its data section holds: a file longer than its
// tensors is refused before the rest is read (a checkpoint grown to 3 GB was read whole first).
// A header that is not JSON is named here too; every other check is parse_checkpoint's.
Status check_extent(int fd, std::string_view head, uint64_t size, const std::string& source) {
  if (head.size() < 8) return Status::ok();
  VOLTA_ASSIGN_OR_RETURN(const uint64_t n, header_length(head, size, source));
  std::string text;
  if (8 + n <= head.size()) {
    text = head.substr(8, static_cast<size_t>(n));
  } else {
    text.resize(static_cast<size_t>(n));
    if (::pread(fd, text.data(), text.size(), 8) != static_cast<ssize_t>(n)) return Status::ok();  // the full read explains
  }
  const json header = json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return not_an_object(source);
  uint64_t end = 0;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    if (!e.is_object() || !e.contains("data_offsets")) return Status::ok();  // the full parse names what is wrong
    const json& o = e["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[1].is_number_unsigned()) return Status::ok();
    end = std::max(end, o[1].get<uint64_t>());
  }
  const uint64_t data = size - 8 - n;
  if (data > end) return parse_error(source + ": data section is " + std::to_string(data) + " bytes but the tensors cover " + std::to_string(end));
  return Status::ok();
}

}  // namespace

Result<Checkpoint> load_checkpoint(const std::string& path) {
  const ReadLimits limits{uint64_t{1} << 40, ""};
  std::string bytes;
  const auto reader = [&](int fd, uint64_t size) -> Status {
    // The first bytes are looked at before the rest is read: a file that is not a checkpoint
    // fails at once (3 GiB of zeros was read whole to learn that its header is not JSON).
    std::string head(static_cast<size_t>(std::min<uint64_t>(size, 4096)), '\0');
    const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
    if (got > 0) {
      head.resize(static_cast<size_t>(got));
      VOLTA_RETURN_IF_ERROR(expect_kind(head, FileKind::Checkpoint, path));
      VOLTA_RETURN_IF_ERROR(check_head(head, size, path));
      VOLTA_RETURN_IF_ERROR(check_extent(fd, head, size, path));
    }
    return read_all(fd, size, path, limits, &bytes);
  };
  VOLTA_RETURN_IF_ERROR(read_file_with(path, limits, reader));
  VOLTA_RETURN_IF_ERROR(expect_kind(bytes, FileKind::Checkpoint, path));
  return parse_checkpoint(bytes, path);
}

Result<std::map<std::string, std::string>> load_checkpoint_metadata(const std::string& path) {
  std::map<std::string, std::string> out;
  const auto reader = [&](int fd, uint64_t size) -> Status {
    char len[8];
    if (size < 8 || ::pread(fd, len, 8, 0) != 8) return parse_error(path + ": too short for a header length");
    VOLTA_ASSIGN_OR_RETURN(const uint64_t n, header_length(std::string_view(len, 8), size, path));
    std::string text(static_cast<size_t>(n), '\0');
    if (n > 0 && ::pread(fd, text.data(), text.size(), 8) != static_cast<ssize_t>(n)) return not_found(path + ": cannot read its header");
    const json header = json::parse(text, nullptr, false);
    if (header.is_discarded() || !header.is_object()) return not_an_object(path);
    const auto meta = header.find("__metadata__");
    if (meta == header.end() || !meta->is_object()) return parse_error(path + ": header has no __metadata__ object");
    for (auto it = meta->begin(); it != meta->end(); ++it)
      if (it->is_string()) out[it.key()] = it->get<std::string>();
    if (!known_version(out["format_version"])) return parse_error(path + ": unsupported format version '" + out["format_version"] + "'");
    return check_header(header, out["format_version"], path);
  };
  VOLTA_RETURN_IF_ERROR(read_file_with(path, {uint64_t{1} << 40, ""}, reader));
  return out;
}

}  // namespace volta::io
