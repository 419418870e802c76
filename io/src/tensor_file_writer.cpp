#include "ropecheck/io/tensor_file_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <future>
#include <thread>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/io/sha256.hpp"

namespace ropecheck::io::detail {

namespace {
std::string errno_text(int e) { return std::strerror(e); }
constexpr std::size_t kChunk = std::size_t{8} << 20;  // read-back buffer
}  // namespace

std::optional<std::uint32_t> combine_crc_ranges(std::vector<CrcRange> ranges, std::uint64_t data_bytes) {
  std::sort(ranges.begin(), ranges.end(), [](const CrcRange& a, const CrcRange& b) { return a.offset < b.offset; });
  uLong crc = crc32(0L, Z_NULL, 0);
  std::uint64_t next = 0;
  for (const CrcRange& r : ranges) {
    if (r.offset != next || r.bytes > data_bytes - next) return std::nullopt;
    crc = crc32_combine(crc, r.crc, static_cast<z_off_t>(r.bytes));
    next += r.bytes;
  }
  if (next != data_bytes) return std::nullopt;
  return static_cast<std::uint32_t>(crc);
}

TensorFileWriter::TensorFileWriter(std::filesystem::path path, std::vector<TensorInfo> tensors, FileFormat format,
                                   const std::map<std::string, std::string>& metadata, std::string error_context,
                                   Mode mode)
    : path_(std::move(path)), tensors_(std::move(tensors)), format_(format), context_(std::move(error_context)), mode_(mode) {
  const std::size_t n = tensors_.size();
  data_offset_.assign(n, 0);
  written_.assign(n, 0);
  crcs_.resize(n);
  data_crc_.resize(n);
  std::vector<std::uint8_t> head;  // bytes known now, written at 0 (safetensors)
  if (format_ == FileFormat::safetensors) {
    const SafetensorsHeader h = safetensors_header(tensors_, metadata);
    std::uint64_t at = h.bytes.size();
    for (std::size_t i : h.order) {
      data_offset_[i] = at;
      at += tensors_[i].data_bytes();
    }
    end_ = at;
    head = h.bytes;
  } else {
    // serialize_npz: members "<name>.npy" sorted by tensor name, each a local header, the .npy
    // header and the data; the local headers carry CRCs and are written by finish().
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tensors_[a].name < tensors_[b].name; });
    for (std::size_t i = 1; i < n; ++i)
      if (tensors_[order[i]].name == tensors_[order[i - 1]].name)
        throw InputError("cannot write .npz: duplicate tensor name " + quote_name(tensors_[order[i]].name));
    npy_header_bytes_.assign(n, 0);
    std::uint64_t at = 0;
    for (std::size_t i : order) {
      const std::vector<std::uint8_t> npy = npy_header(tensors_[i]);
      ZipRecord r{tensors_[i].name + ".npy", npy.size() + tensors_[i].data_bytes(), at, 0};
      const std::uint64_t local = zip_local_header(r, false).size();
      npy_header_bytes_[i] = npy.size();
      data_offset_[i] = at + local + npy.size();
      zip_.push_back(r);
      zip_tensor_.push_back(i);
      at += local + r.size;
    }
    end_ = at;
  }
  int flags = O_RDWR | O_CLOEXEC;
  if (mode_ == Mode::create) flags |= O_CREAT | O_TRUNC;
  if (mode_ == Mode::shared_write) flags |= O_CREAT;
  fd_ = ::open(path_.c_str(), flags, 0666);
  if (fd_ < 0) throw SpecError(context_ + ": cannot write '" + path_.string() + "' (" + errno_text(errno) + ")");
  if (mode_ != Mode::create) {
    // The whole file's size is known now (the central directory's size does not depend on the CRCs).
    const std::uint64_t full = end_ + (format_ == FileFormat::npz ? zip_central_directory(zip_, end_, false).size() : 0);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw SpecError(context_ + ": cannot read '" + path_.string() + "' (" + errno_text(errno) + ")");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    // Shards starting together may both find it empty; both set the same size, which keeps any data written.
    if (size == 0 && mode_ == Mode::shared_write) {
      if (::ftruncate(fd_, static_cast<off_t>(full)) != 0)
        throw SpecError(context_ + ": cannot write '" + path_.string() + "' (" + errno_text(errno) + ")");
    } else if (size != full) {
      throw SpecError(context_ + ": '" + path_.string() + "' holds " + std::to_string(size) + " bytes, not the " +
                      std::to_string(full) + " of this run's file (not written by this run?)");
    }
    if (mode_ == Mode::shared_finish) return;  // headers and data are in place
  }
  if (!head.empty()) pwrite_all(0, head);
  for (std::size_t m = 0; m < zip_.size(); ++m) {
    const std::size_t i = zip_tensor_[m];
    pwrite_all(data_offset_[i] - npy_header_bytes_[i], npy_header(tensors_[i]));
  }
}

TensorFileWriter::~TensorFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorFileWriter::pwrite_all(std::uint64_t offset, std::span<const std::uint8_t> bytes) const {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::pwrite(fd_, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30),
                               static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw SpecError(context_ + ": cannot write '" + path_.string() + "' (" + errno_text(w < 0 ? errno : ENOSPC) + ")");
    done += static_cast<std::size_t>(w);
  }
}

void TensorFileWriter::write(std::size_t tensor, std::uint64_t at, std::span<const std::uint8_t> bytes) const {
  const TensorInfo& t = tensors_.at(tensor);
  if (at + bytes.size() > t.data_bytes())
    throw std::logic_error("TensorFileWriter: write past the end of tensor " + t.name);
  pwrite_all(data_offset_[tensor] + at, bytes);
  std::atomic_ref<std::uint64_t>(written_[tensor]).fetch_add(bytes.size());
  if (mode_ == Mode::shared_write && format_ == FileFormat::npz) {
    const auto crc = static_cast<std::uint32_t>(crc32_z(crc32(0L, Z_NULL, 0), bytes.data(), bytes.size()));
    const std::lock_guard<std::mutex> lock(crc_mutex_);
    std::vector<CrcRange>& r = crcs_[tensor];
    if (!r.empty() && r.back().offset + r.back().bytes == at) {  // the next piece of the same range
      r.back().crc = static_cast<std::uint32_t>(crc32_combine(r.back().crc, crc, static_cast<z_off_t>(bytes.size())));
      r.back().bytes += bytes.size();
    } else {
      r.push_back({at, bytes.size(), crc});
    }
  }
}

std::vector<std::vector<CrcRange>> TensorFileWriter::written_crcs() const {
  const std::lock_guard<std::mutex> lock(crc_mutex_);
  return crcs_;
}

void TensorFileWriter::sync() const {
  if (::fdatasync(fd_) != 0) throw SpecError(context_ + ": cannot write '" + path_.string() + "' (" + errno_text(errno) + ")");
}

TensorFileWriter::Finished TensorFileWriter::finish() {
  for (std::size_t i = 0; i < tensors_.size() && mode_ != Mode::shared_finish; ++i)
    if (written_[i] != tensors_[i].data_bytes())
      throw std::logic_error("TensorFileWriter: tensor " + tensors_[i].name + " written " + std::to_string(written_[i]) +
                             " of " + std::to_string(tensors_[i].data_bytes()) + " bytes");
  std::vector<std::uint8_t> buf(kChunk);
  auto read_at = [&](std::uint64_t offset, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, buf.data() + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw SpecError(context_ + ": cannot read back '" + path_.string() + "' (" + errno_text(r < 0 ? errno : EIO) + ")");
      done += static_cast<std::size_t>(r);
    }
  };
  if (format_ == FileFormat::npz) {
    for (std::size_t m = 0; m < zip_.size(); ++m) {
      ZipRecord& r = zip_[m];
      const std::uint64_t local = zip_local_header(r, false).size();
      uLong crc = crc32(0L, Z_NULL, 0);
      if (const std::optional<std::uint32_t> data = data_crc_[zip_tensor_[m]]) {  // the shards' CRCs, combined
        const std::vector<std::uint8_t> npy = npy_header(tensors_[zip_tensor_[m]]);
        crc = crc32_combine(crc32(crc, npy.data(), static_cast<uInt>(npy.size())), *data,
                            static_cast<z_off_t>(r.size - npy.size()));
      }
      for (std::uint64_t done = data_crc_[zip_tensor_[m]] ? r.size : 0; done < r.size;) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(r.size - done, kChunk));
        read_at(r.offset + local + done, n);
        crc = crc32(crc, buf.data(), static_cast<uInt>(n));
        done += n;
      }
      r.crc = static_cast<std::uint32_t>(crc);
      pwrite_all(r.offset, zip_local_header(r, false));
    }
    pwrite_all(end_, zip_central_directory(zip_, end_, false));
  }
  Finished f;
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw SpecError(context_ + ": cannot write '" + path_.string() + "' (" + errno_text(errno) + ")");
  }
  fd_ = -1;
  f.bytes = std::filesystem::file_size(path_);
  f.sha256 = sha256_own_file(path_);
  return f;
}

std::vector<TensorFileWriter::Finished> finish_in_parallel(const std::vector<TensorFileWriter*>& writers) {
  // The files are read back and hashed in parallel: SHA-256 of one file is sequential, so the
  // largest file sets the time when there are cores enough.
  // Largest first, so that the last file started is a small one.
  std::vector<std::size_t> order(writers.size());
  std::vector<std::uint64_t> bytes(writers.size(), 0);
  for (std::size_t g = 0; g < order.size(); ++g) {
    order[g] = g;
    for (const TensorInfo& t : writers[g]->tensors()) bytes[g] += t.data_bytes();
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes[a] > bytes[b]; });
  std::vector<TensorFileWriter::Finished> finished(writers.size());
  const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, writers.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::future<void>> pool;
  for (std::size_t w = 0; w < workers; ++w)
    pool.push_back(std::async(std::launch::async, [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < order.size();) finished[order[i]] = writers[order[i]]->finish();
    }));
  std::exception_ptr error;
  for (auto& f : pool) {
    try {
      f.get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return finished;
}

}  // namespace ropecheck::io::detail
