// Position lists for golden sets: ranges, lists, a log-spaced sampler for long contexts, and
// per-token (t, h, w) triples for multimodal RoPE.
//
// Grammar: comma-separated items, each one of
//   P            one position                        4095
//   A:B          the range [A, B)                    0:4096
//   A:B:S        the range [A, B) with step S        0:131072:97
//   log:MAX:K    0, MAX, and K positions per octave in between:
//                floor(2^e * (K + m) / K) for e = 0, 1, ... and m = 0..K-1, plus 2^e - 1
//                (the last position before each power of two), all <= MAX -- integer arithmetic only
//   T/H/W        one multimodal triple               5/2/3
//   grid:S:H:W   an image block starting at S: t = S, h = S + row, w = S + col (Qwen2-VL rule)
// Positions must lie in [0, 2^53]. Triples and grids need a multimodal spec.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

struct PositionSet {
  std::string argument;             // as given
  std::vector<Position> positions;  // one per token
  bool has_triples = false;         // some token has unequal streams
};

// Throws SpecError (one line, naming the item) on bad syntax, out-of-range values, or more than
// `max_tokens` positions.
PositionSet parse_positions(const std::string& argument, std::int64_t max_tokens = std::int64_t{1} << 26);

// The pieces of this grammar that other position grammars reuse (attention's --pairs): `s`, part of
// `item`, as an integer in [0, 2^53], else SpecError "OPTION: 'ITEM': why"; and `s` split at every
// `sep` (a trailing separator gives an empty last piece, which the caller refuses).
std::int64_t parse_position_number(std::string_view option, const std::string& item, const std::string& s);
std::vector<std::string> split_items(const std::string& s, char sep);

}  // namespace ropecheck
