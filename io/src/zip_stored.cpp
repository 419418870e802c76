// The STORED zip writer behind .npz (detail/tensor_io.hpp): fixed timestamps and attributes, so the
// same members give the same bytes; zip64 records only where a size or an offset needs them.
#include <zlib.h>

#include <algorithm>

#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io {

namespace detail {

namespace {
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;
constexpr std::uint16_t kDosTime = 0;       // 00:00:00
constexpr std::uint16_t kDosDate = 0x0021;  // 1980-01-01, the earliest DOS date
constexpr std::uint32_t kExternalAttr = 0100644u << 16;  // regular file, rw-r--r--
constexpr std::uint16_t kMadeByUnix = 3 << 8;

std::uint16_t name_flags(const std::string& name) {
  const bool ascii = std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? 0 : 0x0800;  // bit 11: the name is UTF-8
}
}  // namespace

bool zip_member_needs_zip64(std::uint64_t size, std::uint64_t offset, bool force_zip64) {
  return force_zip64 || size >= kMax32 || offset >= kMax32;
}

std::vector<std::uint8_t> zip_local_header(const ZipRecord& r, bool force_zip64) {
  if (r.name.size() > kMax16) throw InputError("cannot write .npz: member name longer than 65535 bytes");
  const bool zip64 = zip_member_needs_zip64(r.size, r.offset, force_zip64);
  std::vector<std::uint8_t> out;
  out.reserve(30 + r.name.size() + 20);
  put_u32(out, 0x04034b50);
  put_u16(out, zip64 ? 45 : 20);  // version needed to extract
  put_u16(out, name_flags(r.name));
  put_u16(out, 0);  // STORED
  put_u16(out, kDosTime);
  put_u16(out, kDosDate);
  put_u32(out, r.crc);
  put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));  // compressed size
  put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));  // uncompressed size
  put_u16(out, static_cast<std::uint16_t>(r.name.size()));
  put_u16(out, zip64 ? 20 : 0);  // extra field length
  out.insert(out.end(), r.name.begin(), r.name.end());
  if (zip64) {
    put_u16(out, 0x0001);
    put_u16(out, 16);
    put_u64(out, r.size);  // uncompressed
    put_u64(out, r.size);  // compressed
  }
  return out;
}

std::vector<std::uint8_t> zip_central_directory(const std::vector<ZipRecord>& records, std::uint64_t cd_offset,
                                                bool force_zip64) {
  std::vector<std::uint8_t> out;
  for (const ZipRecord& r : records) {
    const bool zip64 = zip_member_needs_zip64(r.size, r.offset, force_zip64);
    put_u32(out, 0x02014b50);
    put_u16(out, static_cast<std::uint16_t>(kMadeByUnix | (zip64 ? 45 : 20)));
    put_u16(out, zip64 ? 45 : 20);
    put_u16(out, name_flags(r.name));
    put_u16(out, 0);  // STORED
    put_u16(out, kDosTime);
    put_u16(out, kDosDate);
    put_u32(out, r.crc);
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));
    put_u16(out, static_cast<std::uint16_t>(r.name.size()));
    put_u16(out, zip64 ? 28 : 0);
    put_u16(out, 0);  // comment length
    put_u16(out, 0);  // disk number start
    put_u16(out, 0);  // internal attributes
    put_u32(out, kExternalAttr);
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.offset));
    out.insert(out.end(), r.name.begin(), r.name.end());
    if (zip64) {
      put_u16(out, 0x0001);
      put_u16(out, 24);
      put_u64(out, r.size);  // uncompressed
      put_u64(out, r.size);  // compressed
      put_u64(out, r.offset);
    }
  }
  const std::uint64_t cd_size = out.size();
  const std::uint64_t n = records.size();
  if (force_zip64 || n >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32) {
    const std::uint64_t eocd64_offset = cd_offset + out.size();
    put_u32(out, 0x06064b50);
    put_u64(out, 44);  // size of the rest of this record
    put_u16(out, kMadeByUnix | 45);
    put_u16(out, 45);
    put_u32(out, 0);  // this disk
    put_u32(out, 0);  // disk of the central directory
    put_u64(out, n);
    put_u64(out, n);
    put_u64(out, cd_size);
    put_u64(out, cd_offset);
    put_u32(out, 0x07064b50);  // zip64 end of central directory locator
    put_u32(out, 0);
    put_u64(out, eocd64_offset);
    put_u32(out, 1);  // total disks
  }
  put_u32(out, 0x06054b50);
  put_u16(out, 0);
  put_u16(out, 0);
  put_u16(out, static_cast<std::uint16_t>(std::min<std::uint64_t>(n, kMax16)));
  put_u16(out, static_cast<std::uint16_t>(std::min<std::uint64_t>(n, kMax16)));
  put_u32(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_size, kMax32)));
  put_u32(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_offset, kMax32)));
  put_u16(out, 0);  // comment length
  return out;
}

std::vector<std::uint8_t> write_zip_stored(const std::vector<ZipMember>& members, bool force_zip64) {
  std::uint64_t total = 22;
  for (const ZipMember& m : members) total += 2 * (46 + m.name.size() + 28) + m.data.size();
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(total));
  std::vector<ZipRecord> records;
  records.reserve(members.size());
  for (const ZipMember& m : members) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (std::size_t done = 0; done < m.data.size();) {
      const std::size_t chunk = std::min<std::size_t>(m.data.size() - done, std::size_t{1} << 30);
      crc = crc32(crc, m.data.data() + done, static_cast<uInt>(chunk));
      done += chunk;
    }
    records.push_back({m.name, m.data.size(), out.size(), static_cast<std::uint32_t>(crc)});
    const std::vector<std::uint8_t> h = zip_local_header(records.back(), force_zip64);
    out.insert(out.end(), h.begin(), h.end());
    out.insert(out.end(), m.data.begin(), m.data.end());
  }
  const std::vector<std::uint8_t> tail = zip_central_directory(records, out.size(), force_zip64);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace detail

}  // namespace ropecheck::io
