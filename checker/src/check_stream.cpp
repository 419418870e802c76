// The streaming check (check_internal.hpp, stream_check_part): blocks of tokens read from the golden
// set's files and from the candidate source, checked by the workers, released, and the golden files'
// hashes computed meanwhile on other threads, so that each byte is read once and no whole tensor is held.
#include <algorithm>
#include <thread>

#include "check_internal.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/io/memory_budget.hpp"

namespace ropecheck::checker::check_detail {

namespace {

// What the budget keeps back from --max-memory besides the process: each hasher's window
// (sha256_mapped's 8 MiB pieces).
constexpr std::uint64_t kHashWindow = std::uint64_t{8} << 20;
// Larger blocks gain nothing measurable (fewer kernel calls, fewer thread starts) and cost memory.
constexpr std::uint64_t kBlockTarget = std::uint64_t{256} << 20;

int thread_count(int threads) {
  return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Tokens per task: chunks of about 2^16 elements, as many as the workers can share.
std::int64_t chunk_tokens(std::int64_t per_token) { return std::max<std::int64_t>(1, (std::int64_t{1} << 16) / std::max<std::int64_t>(1, per_token)); }

std::int64_t row_elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

// One checked output and the views of its current block.
struct Reading {
  std::size_t cand = 0;  // in source.tensors()
  TensorCheck check;
  GoldenSet::TensorRef truth, same;
  std::optional<GoldenSet::TensorRef> in;
  std::vector<std::uint8_t> b_cand, b_truth, b_same, b_in;  // buffers of what is not mapped
  BlockViews views;
};

// The blocks of tokens of `part`, read and checked in order (stream_check_part).
void read_blocks(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options, const CheckPart& part,
                 std::int64_t block, const std::vector<std::size_t>& needed, std::vector<Reading>& reads);

}  // namespace

std::string shape_slip_of(CandidateSource& source, std::size_t i, const std::string& base,
                          const std::vector<std::int64_t>& golden_shape, std::uint64_t max_bytes) {
  const CandidateTensor& c = source.tensors()[i];
  Tensor t{c.name, c.dtype, c.shape, {}};
  const std::uint64_t bytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype);
  if (base == "cos" || base == "sin") {  // the table slips compare columns
    if (bytes > max_bytes) return "";
    std::vector<std::uint8_t> buffer;
    const std::span<const std::uint8_t> b = source.elements(i, 0, c.numel(), buffer);
    t.data.assign(b.begin(), b.end());
    source.release(i, 0, c.numel());
  }
  return shape_slip(base, t, golden_shape);
}

std::int64_t block_tokens(const GoldenSet& golden, const CheckOptions& options) {
  if (options.block_tokens > 0) return options.block_tokens;
  std::uint64_t per_token = 0;
  for (const ManifestTensor& t : golden.tensors()) {
    if (t.role == "score" || t.role == "attention" || t.role == "kv_cache" || t.role == "store") continue;  // not read per token (scores.hpp reads the scores whole)
    const auto row = static_cast<std::uint64_t>(row_elements(t.shape));
    if (t.role == "output") per_token += row * (8 + 2 * dtype_size(t.dtype));  // truth, golden, candidate
    else if (t.name == "positions") per_token += 8 * static_cast<std::uint64_t>(t.shape.size() == 2 ? t.shape[0] : 1) + sizeof(Position);
    else per_token += row * dtype_size(t.dtype);  // q, k
  }
  const std::uint64_t limit = options.max_memory ? options.max_memory : kDefaultMaxMemory;
  const std::uint64_t hashers = std::min<std::uint64_t>(static_cast<std::uint64_t>(thread_count(options.threads)), golden.files().size());
  const std::uint64_t reserve = kProcessReserve + hashers * kHashWindow;
  io::require_memory(reserve + per_token, limit, "check (one token of every output, with the process and its hashers)");
  const std::uint64_t room = std::min(limit - reserve, kBlockTarget);
  return static_cast<std::int64_t>(std::max<std::uint64_t>(1, room / std::max<std::uint64_t>(1, per_token)));
}

std::vector<std::string> files_hashed_by(const GoldenSet& golden, const std::vector<std::string>& read, const Shard& shard) {
  std::vector<std::pair<std::uint64_t, std::size_t>> by_size;  // largest first, then manifest order
  for (std::size_t i = 0; i < read.size(); ++i) {
    const auto f = std::find_if(golden.files().begin(), golden.files().end(), [&](const golden::ManifestFile& m) { return m.file == read[i]; });
    by_size.emplace_back(f == golden.files().end() ? 0 : f->bytes, i);
  }
  std::stable_sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::uint64_t> load(static_cast<std::size_t>(std::max(1, shard.count)), 0);
  std::vector<bool> mine(read.size(), false);
  for (const auto& [bytes, i] : by_size) {
    const std::size_t s = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[s] += bytes;
    mine[i] = static_cast<int>(s) + 1 == shard.index;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < read.size(); ++i)
    if (mine[i]) out.push_back(read[i]);
  return out;
}

// Candidate tensor i read whole and decoded (a float dtype: match_candidate checked it against the manifest).
std::vector<double> whole_values(CandidateSource& source, std::size_t i) {
  const CandidateTensor& c = source.tensors()[i];
  std::vector<std::uint8_t> buffer;
  const std::span<const std::uint8_t> b = source.elements(i, 0, c.numel(), buffer);
  std::vector<double> values(static_cast<std::size_t>(c.numel()));
  decode(b.data(), *float_dtype(c.dtype), values);
  source.release(i, 0, c.numel());
  return values;
}

// The candidate's scores tensor read whole and judged (scores.hpp); parts of a sharded run hold no scores
// (they are not split by token), so a candidate that carries them is refused there.
ScoresReport judge_scores(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options,
                          const Shard& shard, const std::pair<std::string, std::size_t>& match) {
  const CandidateTensor& c = source.tensors()[match.second];
  if (shard.count > 1)
    throw InputError("--shard: the candidate's attention scores " + quote_name(c.name) + " (" + match.first +
                     ") are not split by token; check them in an unsharded run, or leave them out with --only");
  return check_scores(golden, match.first, c.name, c.dtype, whole_values(source, match.second), options.criterion,
                      options.worst_count, options.threads, options.diagnose_scores);
}

// The same for the attention outputs (attention_outputs.hpp): one block of the set, not split by token.
AttentionOutputsReport judge_attention(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options,
                                       const Shard& shard, const std::pair<std::string, std::size_t>& match) {
  const CandidateTensor& c = source.tensors()[match.second];
  if (shard.count > 1)
    throw InputError("--shard: the candidate's attention outputs " + quote_name(c.name) + " (" + match.first +
                     ") are one block, not split by token; check them in an unsharded run, or leave them out with --only");
  return check_attention_outputs(golden, match.first, c.name, c.dtype, whole_values(source, match.second), options.criterion,
                                 options.worst_count, options.threads, options.max_memory);
}

// The candidate's quantized stores read whole with their scales and biases (stores.hpp), as the scores:
// unsharded runs only. A missing companion, or one of the wrong dtype or shape, is an InputError.
StoresReport judge_stores(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options,
                          const Shard& shard, const std::vector<std::pair<std::string, std::size_t>>& matched) {
  const std::vector<CandidateTensor>& ts = source.tensors();
  const auto bytes_of = [&](std::size_t i) {
    std::vector<std::uint8_t> buffer;
    const std::span<const std::uint8_t> b = source.elements(i, 0, ts[i].numel(), buffer);
    std::vector<std::uint8_t> out(b.begin(), b.end());
    source.release(i, 0, ts[i].numel());
    return out;
  };
  std::vector<StoreCandidate> cands;
  for (const auto& [o, ci] : matched) {
    if (shard.count > 1)
      throw InputError("--shard: the candidate's quantized store " + quote_name(ts[ci].name) + " (" + o +
                       ") is not split by token; check it in an unsharded run, or leave it out with --only");
    StoreCandidate c{o, ts[ci].name, bytes_of(ci), {}, {}};
    for (const std::string& suffix : store_companions(golden, o)) {
      const ManifestTensor& m = *golden.find(o + suffix);
      const auto it = std::find_if(ts.begin(), ts.end(), [&](const CandidateTensor& t) { return t.name == c.name + suffix; });
      if (it == ts.end())
        throw InputError(o + ": candidate tensor " + quote_name(c.name) + " comes without " + quote_name(c.name + suffix) +
                         " (" + std::string(to_string(m.dtype)) + " " + io::shape_for_message(m.shape) + ")");
      if (it->dtype != m.dtype || it->shape != m.shape)
        throw InputError(o + suffix + ": candidate tensor " + quote_name(it->name) + " is " +
                         std::string(to_string(it->dtype)) + " " + io::shape_for_message(it->shape) +
                         " but the golden tensor is " + std::string(to_string(m.dtype)) + " " +
                         io::shape_for_message(m.shape));
      (suffix == ".biases" ? c.biases : c.scales) = bytes_of(static_cast<std::size_t>(it - ts.begin()));
    }
    cands.push_back(std::move(c));
  }
  return check_stores(golden, cands, options.criterion, options.worst_count);
}

CheckPart stream_check_part(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options, const Shard& shard) {
  validate(options.criterion);
  CheckPart part = part_header(golden, options, shard);
  const std::int64_t block = block_tokens(golden, options);
  source.prepare(golden, part.first_token, part.last_token, block);
  if (const std::string declined = source.declined(); !declined.empty())
    return declined_check_part(golden, options, shard, declined);
  const Matched m = match_candidate(golden, source, options);
  CheckReport& rep = part.header;
  rep.ignored_candidate = m.ignored;
  rep.unchecked_golden = m.unchecked;
  rep.not_tested = m.not_tested;

  // What is read, and of it what this part hashes (started now, collected before returning). Workers:
  // no more than a block has chunks (each keeps its own statistics per output).
  std::int64_t block_chunks = 0;
  for (const auto& [o, ci] : m.checked) {
    const std::int64_t pt = std::max<std::int64_t>(1, source.tensors()[ci].numel() / std::max<std::int64_t>(1, golden.tokens()));
    block_chunks += (block + chunk_tokens(pt) - 1) / chunk_tokens(pt);
  }
  const int workers = chunk_workers(block_chunks, options.threads);
  std::vector<Reading> reads;
  std::vector<std::string> names = {"positions"};
  for (const std::string& n : source.golden_inputs()) names.push_back(n);
  std::vector<std::size_t> needed;
  for (const auto& [o, ci] : m.checked) {
    Reading r{ci, TensorCheck(golden, o, source.tensors()[ci], options, workers), golden.locate(base_of(o) + ".f64"),
              golden.locate(o), std::nullopt, {}, {}, {}, {}, {}};
    names.push_back(base_of(o) + ".f64");
    names.push_back(o);
    if (r.check.rotated()) {
      const std::string x = input_of(base_of(o));
      r.in = golden.locate(x);
      names.push_back(x);
    }
    needed.push_back(ci);
    reads.push_back(std::move(r));
  }
  for (const golden::ManifestFile& f : golden.files())
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return golden.find(n)->file == f.file; }))
      part.files_read.push_back(f.file);
  part.files_hashed = files_hashed_by(golden, part.files_read, shard);
  golden::PendingHashes hashes = golden.verify_files(part.files_hashed, options.threads);

  try {
    read_blocks(golden, source, options, part, block, needed, reads);
  } catch (const InputError&) {
    hashes.wait();  // a changed golden file is named as such, not by what its reader saw
    throw;
  }
  hashes.wait();
  for (Reading& r : reads) part.tensors.push_back(r.check.finish());
  if (m.scores) part.scores = judge_scores(golden, source, options, shard, *m.scores);
  for (const auto& a : m.attention) part.attention.push_back(judge_attention(golden, source, options, shard, a));
  if (!m.stores.empty()) part.stores = judge_stores(golden, source, options, shard, m.stores);
  return part;
}

namespace {

void read_blocks(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options, const CheckPart& part,
                 std::int64_t block, const std::vector<std::size_t>& needed, std::vector<Reading>& reads) {
  for (std::int64_t t0 = part.first_token; t0 < part.last_token; t0 += block) {
    const std::int64_t t1 = std::min(part.last_token, t0 + block);
    source.begin_block(t0, t1, needed);
    const std::vector<Position> pos = golden.positions(t0, t1);
    struct Task {
      std::size_t r;
      std::int64_t ta, tb;
    };
    std::vector<Task> tasks;
    for (std::size_t k = 0; k < reads.size(); ++k) {
      Reading& r = reads[k];
      const std::int64_t pt = r.check.per_token(), e0 = t0 * pt, e1 = t1 * pt;
      r.views = {t0, t1, source.elements(r.cand, e0, e1, r.b_cand).data(),
                 r.truth.reader->elements(r.truth.index, e0, e1, r.b_truth).data(),
                 r.same.reader->elements(r.same.index, e0, e1, r.b_same).data(), nullptr, pos.data()};
      if (r.in) {
        const std::int64_t row = row_elements(r.in->reader->tensors()[r.in->index].shape);
        r.views.in = r.in->reader->elements(r.in->index, t0 * row, t1 * row, r.b_in).data();
      }
      const std::int64_t chunk = chunk_tokens(pt);
      for (std::int64_t ta = t0; ta < t1; ta += chunk) tasks.push_back({k, ta, std::min(t1, ta + chunk)});
    }
    for_each_chunk_on(static_cast<std::int64_t>(tasks.size()), options.threads, [&](std::int64_t k, int w) {
      const Task& t = tasks[static_cast<std::size_t>(k)];
      reads[t.r].check.run(reads[t.r].views, t.ta, t.tb, w);
    });
    for (Reading& r : reads) {  // done with the block: its pages leave the process
      const std::int64_t pt = r.check.per_token();
      source.release(r.cand, t0 * pt, t1 * pt);
      r.truth.reader->release(r.truth.index, t0 * pt, t1 * pt);
      r.same.reader->release(r.same.index, t0 * pt, t1 * pt);
      if (r.in) {
        const std::int64_t row = row_elements(r.in->reader->tensors()[r.in->index].shape);
        r.in->reader->release(r.in->index, t0 * row, t1 * row);
      }
    }
  }
}

}  // namespace

}  // namespace ropecheck::checker::check_detail
