#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace dspark::model {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, size_t min_bytes,
                                                   const std::string& too_short) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ < min_bytes || file->size_ == 0) {
    ::close(fd);
    throw Error(path + ": file is " + std::to_string(file->size_) + " bytes, too short for " + too_short +
                " (needs at least " + std::to_string(min_bytes) + ")");
  }
  void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error(path + ": mmap failed (" + std::strerror(err) + ")");
  file->bytes_ = static_cast<const uint8_t*>(p);
  return file;
}

MappedFile::~MappedFile() {
  if (bytes_) munmap(const_cast<uint8_t*>(bytes_), size_);
}

}  // namespace dspark::model
