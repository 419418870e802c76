// The .npz reading steps shared by parse_npz (whole archives in memory) and the tensor reader (members
// read in pieces, tensor_reader.hpp): private to io/.
#pragma once

#include <zip.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ropecheck::io::detail {

struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// The archive in `bytes` (which must outlive it), opened with libzip's consistency checks; InputError
// "WHAT: not a valid .npz ..." otherwise.
std::unique_ptr<zip_t, ZipDiscard> open_npz(std::span<const std::uint8_t> bytes, std::string_view what);

// One member, its declared sizes checked (npy.hpp: names, encryption, sizes against the archive and
// max_member_bytes, compression) before anything is read from it.
struct NpzMember {
  zip_uint64_t index = 0;
  std::string name;        // "q_rot.f32.npy"
  std::uint64_t size = 0;  // uncompressed bytes
  bool stored = false;     // not compressed: seekable
};
std::vector<NpzMember> npz_members(zip_t* za, std::string_view what, std::uint64_t archive_size,
                                   std::uint64_t max_member_bytes);

std::string zip_error_text(zip_error_t* e);  // one line

}  // namespace ropecheck::io::detail
