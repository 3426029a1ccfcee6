#include "io/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace volta::io {

Result<FileLock> FileLock::acquire(const std::string& path, bool wait) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return not_found("cannot create lock file '" + path + "': " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return unavailable("another run is writing here: '" + path + "' is locked");
    return not_found("cannot lock '" + path + "': " + std::strerror(err));
  }
  return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace volta::io
