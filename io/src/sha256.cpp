#include "ropecheck/io/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "ropecheck/io/mapped_file.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {
namespace {

struct CtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_MD_CTX, CtxDeleter>;

Ctx new_ctx() {
  Ctx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: OpenSSL EVP initialisation failed");
  return ctx;
}

void update(EVP_MD_CTX* ctx, const void* data, std::size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx, data, n) != 1) throw std::runtime_error("sha256: EVP_DigestUpdate failed");
}

std::string finish(EVP_MD_CTX* ctx) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md.data(), &len) != 1) throw std::runtime_error("sha256: EVP_DigestFinal_ex failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xF]);
  }
  return out;
}

}  // namespace

struct Sha256::State {
  Ctx ctx = new_ctx();
};
Sha256::Sha256() : s_(std::make_unique<State>()) {}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
void Sha256::update(std::span<const std::uint8_t> bytes) { ropecheck::io::update(s_->ctx.get(), bytes.data(), bytes.size()); }
std::string Sha256::hex() { return finish(s_->ctx.get()); }

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  Ctx ctx = new_ctx();
  update(ctx.get(), bytes.data(), bytes.size());
  return finish(ctx.get());
}

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Fd open_for_hash(const std::filesystem::path& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw InputError("cannot read '" + path.string() + "'");
  return f;
}

// read() in 4 MiB pieces; the kernel is told that the file is read once from start to end, so
// that it reads further ahead.
std::string hash_by_reading(const Fd& f, const std::filesystem::path& path) {
  (void)::posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Ctx ctx = new_ctx();
  std::vector<char> buf(std::size_t{4} << 20);
  for (;;) {
    const ssize_t got = ::read(f.fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError("cannot read '" + path.string() + "'");
    if (got == 0) break;
    update(ctx.get(), buf.data(), static_cast<std::size_t>(got));
  }
  return finish(ctx.get());
}

}  // namespace

std::string sha256_file(const std::filesystem::path& path) { return hash_by_reading(open_for_hash(path), path); }

std::string sha256_own_file(const std::filesystem::path& path) {
  const Fd f = open_for_hash(path);
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) throw InputError("cannot read '" + path.string() + "'");
  const auto size = static_cast<std::size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size == 0) return hash_by_reading(f, path);
  struct Mapping {
    void* at;
    std::size_t size;
    ~Mapping() {
      if (at != MAP_FAILED) ::munmap(at, size);
    }
  } const map{::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd, 0), size};
  if (map.at == MAP_FAILED) return hash_by_reading(f, path);
  // Hashing from the mapping saves the copy out of the page cache, which read() pays in system
  // time: a 20.4 GB golden set, cached, hashed on 2 threads in 9.1 s mapped against 15.5 s read
  // (0.6 against 9.2 s of system time; 2026-11-26, the 2-core VM); from disk, 16.4 s against
  // 19.4 s for the 1 MiB ifstream reads used before. MADV_WILLNEED on the next piece, measured
  // too, was slower (28.9 s from disk).
  (void)::madvise(map.at, size, MADV_SEQUENTIAL);
  Ctx ctx = new_ctx();
  auto* const bytes = static_cast<unsigned char*>(map.at);
  constexpr std::size_t kPiece = std::size_t{32} << 20;
  for (std::size_t at = 0; at < size; at += kPiece) {
    const std::size_t n = std::min(kPiece, size - at);
    update(ctx.get(), bytes + at, n);
    // Unmap the hashed piece from this process (the pages stay in the page cache), so that its
    // resident set stays at one piece: a 12.9 GB file mapped whole showed 12.6 GB max RSS, which
    // a batch scheduler's memory limit counts.
    (void)::madvise(bytes + at, n, MADV_DONTNEED);
  }
  return finish(ctx.get());
}

std::string sha256_mapped(const MappedFile& file) {
  const std::span<const std::uint8_t> bytes = file.bytes();
  file.sequential(0, bytes.size());
  Ctx ctx = new_ctx();
  constexpr std::size_t kPiece = std::size_t{8} << 20;
  for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
    const std::size_t n = std::min(kPiece, bytes.size() - at);
    file.populate(at, n);
    update(ctx.get(), bytes.data() + at, n);
    file.release(at, n);
  }
  return finish(ctx.get());
}

struct BackgroundHashes::State {
  std::vector<std::shared_ptr<const MappedFile>> files;
  std::vector<std::size_t> order;  // largest first
  std::vector<std::string> hex;
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::exception_ptr error;
  std::vector<std::thread> pool;
  bool joined = false;

  void join() {
    if (joined) return;
    for (std::thread& t : pool) t.join();
    joined = true;
  }
};

BackgroundHashes::BackgroundHashes(std::vector<std::shared_ptr<const MappedFile>> files, int threads)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.files = std::move(files);
  s.hex.resize(s.files.size());
  s.order.resize(s.files.size());
  std::iota(s.order.begin(), s.order.end(), std::size_t{0});
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](std::size_t a, std::size_t b) { return s.files[a]->size() > s.files[b]->size(); });
  const std::size_t n = std::min<std::size_t>(
      s.files.size(), threads > 0 ? static_cast<std::size_t>(threads) : std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t w = 0; w < n; ++w)
    s.pool.emplace_back([&s] {
      for (std::size_t k; (k = s.next.fetch_add(1)) < s.order.size();) {
        const std::size_t i = s.order[k];
        try {
          s.hex[i] = sha256_mapped(*s.files[i]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(s.mutex);
          if (!s.error) s.error = std::current_exception();
        }
      }
    });
}

BackgroundHashes::~BackgroundHashes() { s_->join(); }

std::vector<std::string> BackgroundHashes::wait() {
  s_->join();
  if (s_->error) std::rethrow_exception(s_->error);
  return s_->hex;
}

}  // namespace ropecheck::io
