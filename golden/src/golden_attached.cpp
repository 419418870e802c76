// --scores and --attention (golden_values.hpp): the files a set carries about attention, computed by
// attention/set_files.hpp from this module's generated inputs (GOLDEN_FORMAT.md, "Attention scores",
// "Attention blocks"). One head group: the set's heads are the group's query heads and its head 0 the
// group's key (and value) head.
#include <cstring>
#include <string>
#include <vector>

#include "golden_values.hpp"
#include "ropecheck/attention/set_files.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/memory_budget.hpp"

namespace ropecheck::golden::detail {
namespace {

// "--pairs: ..." (the grammar's own option name) as "--scores: ...".
SpecError as_scores_error(const SpecError& e, std::int64_t group) {
  std::string m = e.what();
  if (m.rfind("--pairs: ", 0) == 0) m = "--scores: " + m.substr(9);
  if (m.find("more than") != std::string::npos)
    m += " (a set holds at most " + std::to_string(kMaxScores) + " scores per dtype: pairs x --heads " +
         std::to_string(group) + ")";
  return SpecError(m);
}

attention::SetFileContext context(const GoldenOptions& opt, const RunPlan& plan) {
  attention::SetFileContext c{&opt.spec.rope, plan.seq_len, {}, plan.dtypes, plan.threads};
  c.attention.group = static_cast<int>(plan.H);
  c.attention.softcap = opt.softcap;
  if (opt.sinks) {  // one sink logit per query head, from the generator's stream of sinks
    const std::vector<float> s = generate_inputs(opt.seed, InputStream::sinks, static_cast<std::uint64_t>(plan.H));
    c.attention.sinks.assign(s.begin(), s.end());
  }
  return c;
}

// The kv_cache file: the batch's metadata as a kernel takes it, and the values it appends.
io::DescribedFile kv_cache_file(const GoldenOptions& opt, const RunPlan& plan) {
  const kv::CacheSpec& c = *opt.kv_cache;
  const auto ints = [](std::string name, const std::vector<std::int64_t>& v, io::TensorDType dt) {
    io::Tensor t{std::move(name), dt, {static_cast<std::int64_t>(v.size())}, {}};
    for (std::int64_t x : v) {
      const auto x32 = static_cast<std::int32_t>(x);
      const auto* b = dt == io::TensorDType::i32 ? reinterpret_cast<const std::uint8_t*>(&x32) : reinterpret_cast<const std::uint8_t*>(&x);
      t.data.insert(t.data.end(), b, b + io::dtype_size(dt));
    }
    return t;
  };
  io::DescribedFile f{"kv_cache", "kv_cache", {}, kv::to_json(c)};
  const auto T = static_cast<std::uint64_t>(plan.tokens), G = static_cast<std::uint64_t>(plan.H * plan.D);
  const std::vector<float> v = generate_inputs(opt.seed, InputStream::v, T * G);
  io::Tensor vt{"v", io::TensorDType::f32, {plan.tokens, plan.H, plan.D}, {}};
  vt.data.resize(v.size() * 4);
  std::memcpy(vt.data.data(), v.data(), vt.data.size());
  f.tensors.push_back({std::move(vt), "the values appended with k, token by token: every one a bf16 value (stream v)"});
  f.tensors.push_back({ints("batch_indices", kv::batch_indices(c), io::TensorDType::i32), "the sequence of each token"});
  f.tensors.push_back({ints("append_indptr", kv::append_indptr(c), io::TensorDType::i32),
                       "sequence s appends tokens append_indptr[s] .. append_indptr[s+1]-1 (cu_seqlens)"});
  f.tensors.push_back({ints("seq_lens", kv::seq_lens(c), io::TensorDType::i32), "each sequence's length after the append"});
  if (c.kind == kv::CacheKind::paged) {
    const kv::PagedMetadata m = kv::paged_metadata(c);
    f.tensors.push_back({ints("kv_indptr", m.indptr, io::TensorDType::i32), "sequence s holds pages kv_indices[kv_indptr[s]:kv_indptr[s+1]]"});
    f.tensors.push_back({ints("kv_indices", m.indices, io::TensorDType::i32), "the pool pages of the sequences, in order"});
    f.tensors.push_back({ints("kv_last_page_len", m.last_page_len, io::TensorDType::i32), "tokens in each sequence's last page, after the append"});
  } else {
    f.tensors.push_back({ints("slot_mapping", kv::token_slots(c), io::TensorDType::i64), "the cache slot (block * block_size + offset) of each token"});
  }
  return f;
}

}  // namespace

void plan_kv_cache(const GoldenOptions& opt, const RunPlan& plan) {
  if (!opt.kv_cache) return;
  if (!plan.rope || plan.streams != 1) throw SpecError("--kv-cache: needs a one-stream RoPE spec (the cache holds rotated k)");
  if (opt.shard) throw SpecError("--kv-cache: not with --shard (write it in an unsharded run)");
  if (plan.scores || plan.attention) throw SpecError("--kv-cache: not with --scores or --attention (a set of its own)");
  const std::vector<std::int64_t> want = kv::positions(*opt.kv_cache);
  bool same = static_cast<std::int64_t>(want.size()) == plan.tokens;
  for (std::size_t t = 0; same && t < want.size(); ++t) same = plan.positions[t].t == want[t];
  if (!same) throw SpecError("--kv-cache: the set's positions must be the batch's (cached + i for each sequence)");
}

void plan_attached(const GoldenOptions& opt, RunPlan& plan) {
  const bool any = !opt.scores.empty() || !opt.attention.empty();
  if (!any) {
    if (opt.softcap || opt.sinks) throw SpecError(std::string(opt.softcap ? "--softcap" : "--sinks") +
                                                  ": only with --scores or --attention");
    return;
  }
  const std::string option = !opt.scores.empty() ? "--scores" : "--attention";
  if (!plan.rope) throw SpecError(option + ": needs a RoPE spec (a sinusoidal encoding has no q and k to score)");
  if (opt.shard) throw SpecError(option + ": not with --shard (not split by token; write it in an unsharded run)");
  if (is_mla_layout(opt.spec.rope))  // the attention engine takes per-head keys with a prefix rotary block
    throw SpecError(option + ": not offered for the MLA layout (rope.rotary_offset / rope.key_layout) yet");
  if (has_qk_norm(opt.spec.rope))  // the attention engine rotates q and k as given, with no norm stage
    throw SpecError(option + ": not offered for specs with the Q/K norm stage (rope.q_norm / rope.k_norm) yet");
  const attention::SetFileContext c = context(opt, plan);
  attention::validate(c.attention, opt.spec.rope);  // SpecError naming the field (--softcap)
  const std::size_t nd = plan.dtypes.size();
  if (!opt.scores.empty()) {
    try {
      plan.scores = attention::parse_pairs(opt.scores, kMaxScores / plan.H);
    } catch (const SpecError& e) {
      throw as_scores_error(e, plan.H);
    }
    const double bytes = attention::score_file_memory(static_cast<std::int64_t>(plan.scores->pairs.size()),
                                                      static_cast<int>(plan.H), nd);
    io::require_memory(static_cast<std::uint64_t>(bytes), opt.max_memory, "--scores " + opt.scores);
  }
  if (!opt.attention.empty()) {
    plan.attention = attention::parse_block("--attention", opt.attention, kMaxBlockTokens);
    const double bytes = attention::attention_file_memory(*plan.attention, static_cast<int>(plan.H),
                                                          static_cast<int>(plan.D), static_cast<int>(plan.D), nd);
    io::require_memory(static_cast<std::uint64_t>(bytes), opt.max_memory, "--attention " + opt.attention);
  }
}

std::vector<io::DescribedFile> compute_attached(const GoldenOptions& opt, const RunPlan& plan) {
  std::vector<io::DescribedFile> files;
  if (opt.kv_cache) files.push_back(kv_cache_file(opt, plan));  // alone: --scores / --attention may not join it
  if (!plan.scores && !plan.attention) return files;
  const attention::SetFileContext c = context(opt, plan);
  const auto G = static_cast<std::uint64_t>(plan.H), D = static_cast<std::uint64_t>(plan.D);
  // The generator is indexed by element: its first G * D q values are q[0] of the set, its first D k values k[0, 0].
  const std::vector<float> q0 = generate_inputs(opt.seed, InputStream::q, G * D);
  if (plan.scores) files.push_back(attention::score_file(c, *plan.scores, q0, generate_inputs(opt.seed, InputStream::k, D)));
  if (plan.attention) {
    const auto T = static_cast<std::uint64_t>(plan.attention->tokens);
    std::vector<float> k;  // head 0 of each token's k: element t * G * D + j of the stream
    for (std::uint64_t t = 0; t < T; ++t)
      for (std::uint64_t j = 0; j < D; ++j) k.push_back(generate_input(opt.seed, InputStream::k, t * G * D + j));
    files.push_back(attention::attention_file(c, *plan.attention, generate_inputs(opt.seed, InputStream::q, T * G * D), k,
                                              generate_inputs(opt.seed, InputStream::v, T * D)));
  }
  return files;
}

}  // namespace ropecheck::golden::detail
