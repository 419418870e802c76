// .npz: a zip archive of .npy members, read through libzip (every declared size checked before
// anything is allocated from it) and written as a STORED zip (zip_stored.cpp) that NumPy reads.
#include <zip.h>

#include <algorithm>
#include <memory>
#include <set>

#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/io/npy.hpp"
#include "npz_detail.hpp"

namespace ropecheck::io {

namespace {

using detail::fail;

// ---- ZIP (.npz) reading through libzip ------------------------------------------------------

using detail::ZipDiscard;
using detail::ZipFileClose;

std::string zip_error_text(zip_error_t* e) {
  const char* s = zip_error_strerror(e);
  return sanitize(s ? s : "unknown libzip error", 200);
}

}  // namespace

// ---- .npz ------------------------------------------------------------------------------------

std::unique_ptr<zip_t, detail::ZipDiscard> detail::open_npz(std::span<const std::uint8_t> bytes, std::string_view what) {
  // libzip opens a 0-byte buffer as an empty archive; a real one has at least its 22-byte end record.
  if (bytes.size() < 22) {
    fail(what, "not a valid .npz (zip) archive: " + std::to_string(bytes.size()) +
                   " bytes, shorter than a zip end-of-central-directory record");
  }
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  if (!src) {
    const std::string m = zip_error_text(&ze);
    zip_error_fini(&ze);
    fail(what, "cannot read the archive: " + m);
  }
  std::unique_ptr<zip_t, ZipDiscard> za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze));
  if (!za) {
    zip_source_free(src);
    const int code = zip_error_code_zip(&ze);
    const std::string m = zip_error_text(&ze);
    zip_error_fini(&ze);
    if (code == ZIP_ER_EXISTS) fail(what, "not a valid .npz: two members have the same name");
    fail(what, "not a valid .npz (zip) archive: " + m);
  }
  zip_error_fini(&ze);
  return za;
}

std::vector<detail::NpzMember> detail::npz_members(zip_t* za, std::string_view what, std::uint64_t archive_size,
                                                   std::uint64_t max_member_bytes) {
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0) fail(what, "cannot read the archive's entries");
  std::uint64_t total_comp = 0;
  std::set<std::string> names;
  std::vector<NpzMember> out;
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(count); ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, i, 0, &st) != 0) {
      fail(what, "cannot read member " + std::to_string(i) + ": " + zip_error_text(zip_get_error(za)));
    }
    constexpr zip_uint64_t kNeed = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & kNeed) != kNeed || !st.name) fail(what, "member " + std::to_string(i) + " has no name or size");
    const std::string member = st.name;
    const std::string mq = "member " + quote_name(member);
    if (member.size() < 4 || member.compare(member.size() - 4, 4, ".npy") != 0) {
      fail(what, mq + " does not end in .npy");
    }
    if (!names.insert(member).second) fail(what, "two members are named " + quote_name(member));
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
      fail(what, mq + " is encrypted");
    }
    // Declared sizes are checked against the archive before anything is allocated from them.
    if (st.comp_size > archive_size - std::min(archive_size, total_comp)) {
      fail(what, mq + " declares " + std::to_string(st.comp_size) + " compressed bytes; the members together exceed the " +
                     std::to_string(archive_size) + "-byte archive");
    }
    total_comp += st.comp_size;
    if (st.size > max_member_bytes) {
      fail(what, mq + " declares " + std::to_string(st.size) + " bytes, more than the " +
                     std::to_string(max_member_bytes) + " the largest tensor it could be compared with needs");
    }
    if (st.comp_method == ZIP_CM_STORE) {
      if (st.size != st.comp_size) {
        fail(what, mq + " is stored but declares " + std::to_string(st.size) + " bytes and " +
                       std::to_string(st.comp_size) + " compressed bytes");
      }
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
      const std::optional<std::uint64_t> max = detail::checked_mul(st.comp_size, 1032);  // deflate's max ratio
      if (max && st.size > *max + 64) {
        fail(what, mq + " declares " + std::to_string(st.size) + " bytes from " + std::to_string(st.comp_size) +
                       " deflated bytes, more than deflate can produce");
      }
    } else {
      fail(what, mq + " uses unsupported compression method " + std::to_string(st.comp_method) +
                     " (supported: stored, deflate)");
    }
    out.push_back({i, member, st.size, st.comp_method == ZIP_CM_STORE});
  }
  return out;
}

std::string detail::zip_error_text(zip_error_t* e) { return ropecheck::io::zip_error_text(e); }

std::vector<Tensor> parse_npz(std::span<const std::uint8_t> bytes, std::string_view what, bool u2_is_bf16,
                              std::uint64_t max_member_bytes) {
  const std::unique_ptr<zip_t, detail::ZipDiscard> za = detail::open_npz(bytes, what);
  std::vector<Tensor> out;
  for (const detail::NpzMember& m : detail::npz_members(za.get(), what, bytes.size(), max_member_bytes)) {
    const std::string mq = "member " + quote_name(m.name);
    std::unique_ptr<zip_file_t, ZipFileClose> f(zip_fopen_index(za.get(), m.index, 0));
    if (!f) fail(what, "cannot open " + mq + ": " + zip_error_text(zip_get_error(za.get())));
    std::vector<std::uint8_t> data;
    data.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(m.size, std::uint64_t{1} << 26)));
    std::vector<std::uint8_t> buf(std::size_t{1} << 16);
    for (;;) {
      const zip_int64_t got = zip_fread(f.get(), buf.data(), buf.size());
      if (got < 0) fail(what, "cannot read " + mq + ": " + zip_error_text(zip_file_get_error(f.get())));
      if (got == 0) break;
      if (static_cast<std::uint64_t>(got) > m.size - data.size()) {
        fail(what, mq + " holds more than its declared " + std::to_string(m.size) + " bytes");
      }
      data.insert(data.end(), buf.begin(), buf.begin() + got);
    }
    if (data.size() != m.size) {
      fail(what, mq + " holds " + std::to_string(data.size()) + " bytes, not its declared " + std::to_string(m.size));
    }
    f.reset();
    const std::string member_what = std::string(what) + " " + mq;
    out.push_back(parse_npy(data, m.name.substr(0, m.name.size() - 4), member_what, u2_is_bf16));
  }
  return out;
}

std::vector<Tensor> read_npz(const std::filesystem::path& path, bool u2_is_bf16, std::uint64_t max_member_bytes) {
  const std::vector<std::uint8_t> bytes = detail::read_file(path);
  return parse_npz(bytes, path.string(), u2_is_bf16, max_member_bytes);
}

std::vector<std::uint8_t> serialize_npz(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> order;
  order.reserve(tensors.size());
  std::set<std::string_view> names;
  for (const Tensor& t : tensors) {
    if (!names.insert(t.name).second) throw InputError("cannot write .npz: duplicate tensor name " + quote_name(t.name));
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });
  std::vector<std::vector<std::uint8_t>> files;
  files.reserve(order.size());
  std::vector<detail::ZipMember> members;
  members.reserve(order.size());
  for (const Tensor* t : order) {
    files.push_back(serialize_npy(*t));
    members.push_back({t->name + ".npy", files.back()});
  }
  return detail::write_zip_stored(members);
}

}  // namespace ropecheck::io
