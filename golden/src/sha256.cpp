#include "ropecheck/golden/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>
#include <vector>

#include "ropecheck/golden/tensor.hpp"

namespace ropecheck::golden {
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
void Sha256::update(std::span<const std::uint8_t> bytes) { ropecheck::golden::update(s_->ctx.get(), bytes.data(), bytes.size()); }
std::string Sha256::hex() { return finish(s_->ctx.get()); }

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  Ctx ctx = new_ctx();
  update(ctx.get(), bytes.data(), bytes.size());
  return finish(ctx.get());
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TensorError("cannot read '" + path.string() + "'");
  Ctx ctx = new_ctx();
  std::vector<char> buf(std::size_t{1} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (got > 0) update(ctx.get(), buf.data(), static_cast<std::size_t>(got));
  }
  if (in.bad()) throw TensorError("cannot read '" + path.string() + "'");
  return finish(ctx.get());
}

}  // namespace ropecheck::golden
