// Position mistakes: every position off by one, positions held in bf16, multimodal sections h and w
// swapped, the k path one position ahead of the q path.
#include "mutation.hpp"


namespace ropecheck::props::mutation {

float mutant_position(Bug bug, std::int64_t p) {
  float f = static_cast<float>(bug == Bug::off_by_one_position ? p + 1 : p);
  if (bug == Bug::bf16_positions) f = k::round_to_dtype(f, DType::bf16);  // position_ids.to(bfloat16)
  return f;
}

std::int64_t mutant_stream_position(Bug bug, const RopeSpec& r, const Position& p, int j) {
  int stream = r.mrope == MropeMode::none ? 0 : mrope_stream(r, j);
  if (bug == Bug::mrope_sections_swapped && stream != 0) stream = 3 - stream;  // h <-> w
  return stream == 0 ? p.t : (stream == 1 ? p.h : p.w);
}

// k_position_slip: keys rotated at p + 1 while queries are rotated at p (decode appends the new key
// and rotates it with the cache length after the append).
std::int64_t mutant_position_slip(Bug bug, std::string_view input) {
  return bug == Bug::k_position_slip && input == "k" ? 1 : 0;
}

}  // namespace ropecheck::props::mutation
