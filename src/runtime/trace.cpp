// Hash traces and their comparison (include/volta/trace.h).
#include "volta/trace.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/file.h"

#include <unistd.h>

namespace volta {

namespace {

// Whether the regular file at `path` may be replaced by a trace: it is empty or its first line is
// a trace record. Anything else (or a file it cannot read) is refused, named by its first bytes.
Status replaceable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("--trace-hashes: cannot read '" + path + "' (refusing to overwrite it)");
  std::string head;
  std::getline(in, head);  // a record is one line, however long
  if (head.empty() && in.eof()) return Status::ok();
  const nlohmann::json j = nlohmann::json::parse(head, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("hash") && j.contains("run")) return Status::ok();
  return invalid_argument("--trace-hashes: '" + path + "' is " + io::file_kind_name(io::detect_file_kind(head.substr(0, 4096))) +
                          ", not a hash trace (refusing to overwrite it)");
}

// The trace is written to STEM.tmp.<pid> and renamed to FILE at the end. Not FILE.tmp.<pid>,
// which a checkpoint save into the same path uses: a trace aimed at the checkpoint a command
// writes (caught by the command's checks, but not by every command's) would share its file.
std::string temporary_stem(const std::string& path) { return path + ".trace"; }

}  // namespace

Result<std::unique_ptr<HashTrace>> HashTrace::create(const std::string& given, bool values) {
  // A device, a FIFO, or a path under /dev or /proc (/dev/stdout, maybe a redirected file) is
  // written in place, opened now as before; a symlink elsewhere is written through to its target,
  // as checkpoints are.
  std::error_code ec;
  const auto st = std::filesystem::status(given, ec);
  const bool direct = io::is_stream_path(given) || (!ec && (std::filesystem::is_character_file(st) || std::filesystem::is_fifo(st)));
  std::string path = given;
  if (!direct) {
    auto target = io::link_target(given);  // a link to a file not written yet too
    if (!target.is_ok()) return Status(target.status().code(), "cannot write trace: " + target.status().message());
    path = std::move(*target);
  }
  if (!direct && std::filesystem::is_regular_file(path, ec)) VOLTA_RETURN_IF_ERROR(replaceable(path));
  if (values && direct)  // FILE.values/ would be made beside a device (/dev/null.values)
    return invalid_argument("--trace-values: '" + given + "' is a device or FIFO; the values go into FILE.values/ beside a regular FILE");
  if (values) {
    std::filesystem::create_directories(path + ".values", ec);
    if (ec) return not_found("cannot create '" + path + ".values': " + ec.message());
  }
  std::unique_ptr<HashTrace> t(new HashTrace(path, values, direct));
  if (direct) {
    t->written_ = path;
    t->out_.open(path, std::ios::app);  // /dev/stdout into the shell's redirect file: appended to
    if (!t->out_) return not_found("cannot write trace '" + path + "'");
  } else {
    io::remove_stale_temporaries(temporary_stem(path));  // left by killed runs
  }
  return t;
}

HashTrace::~HashTrace() { (void)finish(); }

Status HashTrace::finish() {
  if (finished_) return Status::ok();
  finished_ = true;
  if (written_.empty()) return Status::ok();  // no run wrote a record: FILE stays as it was
  out_.close();
  const bool complete = !failed_ && !out_.fail();
  if (direct_) return complete ? Status::ok() : not_found("cannot write trace '" + path_ + "'");
  // A trace whose writes failed (a full disk) would end mid-line: it stays beside FILE.
  Status ok = complete ? Status::ok() : not_found("cannot write trace '" + path_ + "' completely");
  std::error_code ec;
  if (ok.is_ok() && std::filesystem::is_regular_file(path_, ec)) ok = replaceable(path_);  // written meanwhile?
  if (ok.is_ok() && (!io::keep_mode(path_, written_) || std::rename(written_.c_str(), path_.c_str()) != 0))
    ok = not_found("cannot write trace '" + path_ + "': " + std::strerror(errno));
  if (!ok.is_ok()) return Status(ok.code(), ok.message() + "; the trace is in '" + written_ + "'");
  return Status::ok();
}

void HashTrace::begin_run(const std::string& graph) {
  ++run_;
  graph_ = graph;
}

Status HashTrace::record(const ir::Node& n, int64_t step, const std::byte* data, size_t bytes) {
  if (finished_) return internal_error("trace '" + path_ + "' is finished");
  if (failed_) return not_found("cannot write trace '" + path_ + "'");
  if (written_.empty()) {
    const std::string tmp = temporary_stem(path_) + ".tmp." + std::to_string(::getpid());
    out_.open(tmp, std::ios::trunc);
    if (!out_) {
      failed_ = true;
      return not_found("cannot write trace '" + path_ + "' (its temporary file '" + tmp + "': " + std::strerror(errno) + ")");
    }
    written_ = tmp;
  }
  nlohmann::ordered_json line = {{"run", run_},          {"graph", graph_},
                                 {"step", step},         {"node", n.name},
                                 {"op", ir::op_name(n.op)}, {"type", n.type.to_string()},
                                 {"hash", "fnv1a64:" + hash_to_hex(fnv1a64(data, bytes))}};
  out_ << line.dump() << "\n";
  if (!out_.flush()) {
    failed_ = true;
    return not_found("cannot write trace '" + path_ + "' (disk full?)");
  }
  if (values_) {
    const std::string file = path_ + ".values/" + std::to_string(run_) + "." + std::to_string(step) + ".bin";
    std::ofstream v(file, std::ios::binary | std::ios::trunc);
    if (!v || !v.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes)) || !v.flush())
      return not_found("cannot write trace values '" + file + "'");
  }
  return Status::ok();
}

namespace {

Result<std::vector<nlohmann::json>> parse_trace(std::string_view text, const std::string& path) {
  std::vector<nlohmann::json> records;
  size_t start = 0, line_no = 1;
  for (size_t end; start < text.size(); start = end + 1, ++line_no) {
    end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end == start) continue;
    nlohmann::json j = nlohmann::json::parse(text.substr(start, end - start), nullptr, false);
    if (!j.is_discarded() && j.is_object())  // the fields describe() and the comparison read
      for (const char* key : {"graph", "node", "op", "type"})
        if (j.contains(key) && !j[key].is_string()) j.erase(key);
    if (j.is_discarded() || !j.is_object() || !j.contains("hash") || !j["hash"].is_string() || !j.contains("run") ||
        !j["run"].is_number_integer() || !j.contains("step") || !j["step"].is_number_integer())
      return parse_error(path + ":" + std::to_string(line_no) + ": not a trace record");
    records.push_back(std::move(j));
  }
  return records;
}

std::string describe(const nlohmann::json& r) {
  auto str = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : std::string("?"); };
  return "run " + std::to_string(r["run"].get<int64_t>()) + " (graph " + str("graph") + "), step " +
         std::to_string(r["step"].get<int64_t>()) + ", node '" + str("node") + "' (" + str("op") + "), " + str("type");
}

// The largest |a - b| over two value files of the same dtype, and where; none when a file is
// missing or the dtype is not a number type Volta writes. Both are read a slice at a time, so
// values larger than memory compare too.
std::optional<std::pair<double, int64_t>> max_abs_diff(const std::string& fa, const std::string& fb, const std::string& type) {
  double worst = -1.0;
  int64_t at = 0;
  auto scan = [&]<typename T>() -> Status {
    return io::read_file_with(fa, {uint64_t{1} << 40, "trace values", false}, [&](int da, uint64_t na) {
      return io::read_file_with(fb, {uint64_t{1} << 40, "trace values", false}, [&](int db, uint64_t nb) -> Status {
        if (na != nb) return not_found("sizes differ");
        constexpr size_t kSlice = size_t{1} << 20;  // a multiple of every element size
        std::string sa, sb;
        for (uint64_t off = 0; off < na; off += kSlice) {
          const uint64_t len = std::min<uint64_t>(kSlice, na - off);
          VOLTA_RETURN_IF_ERROR(io::read_all(da, len, fa, {}, &sa));  // the next slice of each
          VOLTA_RETURN_IF_ERROR(io::read_all(db, len, fb, {}, &sb));
          if (sa.size() != len || sb.size() != len) return not_found("a file shrank");
          for (size_t i = 0; i + sizeof(T) <= len; i += sizeof(T)) {
            T x, y;
            std::memcpy(&x, sa.data() + i, sizeof(T));
            std::memcpy(&y, sb.data() + i, sizeof(T));
            const double d = std::fabs(static_cast<double>(x) - static_cast<double>(y));
            const double dd = std::isnan(d) ? INFINITY : d;  // a nan on one side only counts as infinite
            if (dd > worst) worst = dd, at = static_cast<int64_t>((off + i) / sizeof(T));
          }
        }
        return Status::ok();
      });
    });
  };
  Status ok = not_found("type");
  if (type.starts_with("f32")) ok = scan.template operator()<float>();
  if (type.starts_with("f64")) ok = scan.template operator()<double>();
  if (type.starts_with("i32")) ok = scan.template operator()<int32_t>();
  if (type.starts_with("i64")) ok = scan.template operator()<int64_t>();
  if (!ok.is_ok() || worst < 0) return std::nullopt;
  return std::make_pair(worst, at);
}

}  // namespace

Result<TraceDiff> diff_traces(const std::string& a, const std::string& b) {
  VOLTA_ASSIGN_OR_RETURN(const std::string ta, io::read_file(a, io::ReadLimits{uint64_t{1} << 34, "trace"}));
  VOLTA_ASSIGN_OR_RETURN(const std::string tb, io::read_file(b, io::ReadLimits{uint64_t{1} << 34, "trace"}));
  return diff_trace_texts(ta, tb, a, b);
}

Result<TraceDiff> diff_trace_texts(std::string_view text_a, std::string_view text_b, const std::string& a, const std::string& b) {
  VOLTA_ASSIGN_OR_RETURN(const std::vector<nlohmann::json> ra, parse_trace(text_a, a));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<nlohmann::json> rb, parse_trace(text_b, b));
  TraceDiff d;
  const size_t n = std::min(ra.size(), rb.size());
  for (size_t i = 0; i < n; ++i, ++d.records) {
    const nlohmann::json &x = ra[i], &y = rb[i];
    for (const char* key : {"run", "graph", "step", "node", "op", "type"}) {
      if (x.value(key, nlohmann::json()) == y.value(key, nlohmann::json())) continue;
      d.same = false;
      d.where = describe(x);
      d.what = std::string("the traces ran different work: ") + key + " " + x.value(key, nlohmann::json()).dump() +
               " in " + a + ", " + y.value(key, nlohmann::json()).dump() + " in " + b;
      return d;
    }
    if (x["hash"] == y["hash"]) continue;
    d.same = false;
    d.where = describe(x);
    d.what = "hash " + x["hash"].get<std::string>() + " != " + y["hash"].get<std::string>();
    const std::string file = "/" + std::to_string(x["run"].get<int64_t>()) + "." + std::to_string(x["step"].get<int64_t>()) + ".bin";
    if (auto m = max_abs_diff(a + ".values" + file, b + ".values" + file, x.value("type", std::string()))) {
      d.max_abs_diff = m->first;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", m->first);
      d.what += std::string("; max |a - b| = ") + buf + " at element " + std::to_string(m->second);
    }
    return d;
  }
  if (ra.size() != rb.size()) {
    d.same = false;
    d.where = "record " + std::to_string(n + 1) + " (one trace ends before it)";
    d.what = a + " has " + std::to_string(ra.size()) + " records, " + b + " has " + std::to_string(rb.size());
  }
  return d;
}

}  // namespace volta
