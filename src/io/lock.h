// An exclusive advisory lock on a file (flock), held while the object lives: two runs writing
// into one folder would interleave their logs and overwrite each other's checkpoints. The kernel
// releases the lock when the process dies, so a killed run never leaves a folder locked.
#pragma once

#include <string>

#include "volta/status.h"

namespace volta::io {

class FileLock {
 public:
  // Creates `path` if needed and locks it; fails naming the path when another process (or
  // another FileLock in this one) holds it, or with `wait` waits until it is released.
  static Result<FileLock> acquire(const std::string& path, bool wait = false);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace volta::io
