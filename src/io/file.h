// The one way Volta reads an input file: it must be a regular file (a FIFO, a device such as
// /dev/zero or a directory is refused before any read, so nothing blocks or runs unbounded), no
// larger than its format allows nor than the memory available, and its kind is told from its
// first bytes, not its name, so a file of the wrong kind is named as what it is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "volta/status.h"

namespace volta::io {

enum class FileKind {
  Checkpoint,  // safetensors: u64 header length, then a JSON object
  Onnx,        // protobuf (an ONNX ModelProto or TensorProto)
  Npy,         // "\x93NUMPY"
  IrText,      // Volta's model DSL: "graph NAME {" after comments
  Text,        // anything else that is valid UTF-8
  Binary,      // anything else
};

const char* file_kind_name(FileKind k);  // "a Volta checkpoint (safetensors)", "an ONNX / protobuf file", ...
// The kind the first bytes of a file show.
FileKind detect_file_kind(std::string_view head);

struct ReadLimits {
  uint64_t max_bytes = uint64_t{1} << 40;  // the format's own cap
  std::string what;                        // how errors name the file ("--data", "checkpoint", ...)
  bool whole = true;                       // false: the reader takes a slice, so a file past memory is fine
};

// The whole file; errors (prefixed by limits.what) name the path and what is wrong with it.
Result<std::string> read_file(const std::string& path, const ReadLimits& limits);
// The same checks, then `reader` reads the open descriptor itself (a parser that streams, so
// a large file is never held whole); the descriptor is closed after it returns.
Status read_file_with(const std::string& path, const ReadLimits& limits, const std::function<Status(int fd, uint64_t size)>& reader);
// The rest of `fd`, up to `size` bytes, into *out (read_file's loop).
Status read_all(int fd, uint64_t size, const std::string& path, const ReadLimits& limits, std::string* out);
// What an output flag writes. An existing non-empty file is replaced only when it already holds
// that kind (a log over a log, an ONNX model over an ONNX model), so that a mistyped name never
// turns a checkpoint, a model or a corpus into a log; Any skips the check.
enum class Writes { Any, Json, Checkpoint, Onnx };

// A path a command is about to write: fails on a directory or a block device, and on a FIFO
// that nothing reads (opening it would block until a reader comes); a character device such as
// /dev/null is fine. Fails on an existing file of another kind than `writes`. Also fails when it
// is one of `reads`: the files the command reads, or writes under other names (compared by inode
// and by canonical path, so a file not yet written counts). `what` names the flag in errors.
Status check_output_path(const std::string& path, const std::string& what, const std::vector<std::string>& reads = {},
                         Writes writes = Writes::Any);
// An output at `path` can be created: its directory exists (or it does). Asked before the work
// whose result it holds, where no other step makes that directory.
Status check_parent_dir(const std::string& path, const std::string& what);

// Where a write to `path` lands: `path`, or the end of its chain of symlinks (whose target may
// not exist yet); a loop of links is an error.
Result<std::string> link_target(const std::string& path);
// Writes a command's output file whole: a regular file (or a new one) atomically, through
// write_file_atomic, so an interrupted write leaves the earlier file as it was; a character
// device or FIFO, and any path under /dev/ or /proc/ (/dev/stdout into a pipe or the shell's
// redirect file), in place, appended to.
Status write_output(const std::string& path, std::string_view bytes);
// A path under /dev/ or /proc/: a device or this process's own descriptor, written in place.
bool is_stream_path(const std::string& path);

// Gives `replacement` (a file about to be renamed over `replaced`) the replaced file's permission
// bits and, where this process may set them, its owner and group; nothing when nothing is
// replaced. False (errno set) when a change this process may make failed.
bool keep_mode(const std::string& replaced, const std::string& replacement);

// Removes `path`.tmp.<pid> files that a killed writer left behind (their process is gone); a
// temporary file of a live process is its write in progress and stays. (Defined with the
// checkpoint writer, io/checkpoint.cpp, whose temporaries these are; a hash trace's are
// FILE.trace.tmp.<pid>, removed by passing FILE.trace.)
void remove_stale_temporaries(const std::string& path);

// Fails naming what the bytes are when they are clearly another kind of file than `want`
// ("'m.onnx' is an ONNX / protobuf file, not a Volta checkpoint (safetensors)"); bytes too
// short or unrecognised pass, for the format's own parser to explain.
Status expect_kind(std::string_view bytes, FileKind want, const std::string& path);

}  // namespace volta::io
