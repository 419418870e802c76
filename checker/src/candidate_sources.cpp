// The candidate sources read in place (candidate_source.hpp): a tensor file, tensors in memory, and
// either seen through --layout.
#include <cstring>

#include "check_internal.hpp"
#include "ropecheck/checker/candidate_source.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/io/tensor_file.hpp"

namespace ropecheck::checker {

std::int64_t CandidateTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void CandidateSource::prepare(const golden::GoldenSet&, std::int64_t, std::int64_t, std::int64_t) {}
void CandidateSource::begin_block(std::int64_t, std::int64_t, const std::vector<std::size_t>&) {}
void CandidateSource::release(std::size_t, std::int64_t, std::int64_t) {}

namespace {

class FileCandidate final : public CandidateSource {
 public:
  FileCandidate(std::filesystem::path path, std::uint64_t max_member_bytes)
      : path_(std::move(path)), max_member_(max_member_bytes), reader_(io::open_tensor_file(path_, "--candidate", max_member_bytes)) {
    for (const io::TensorReader::Entry& e : reader_->tensors()) tensors_.push_back({e.name, e.dtype, e.shape});
  }
  const std::vector<CandidateTensor>& tensors() const override { return tensors_; }
  std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                         std::vector<std::uint8_t>& buffer) override {
    return reader_->elements(i, e0, e1, buffer);
  }
  void release(std::size_t i, std::int64_t e0, std::int64_t e1) override { reader_->release(i, e0, e1); }
  std::vector<io::Tensor> whole(const golden::GoldenSet&) override {
    return io::read_tensor_file(path_, "--candidate", max_member_);
  }
  std::shared_ptr<const io::MappedFile> file() const override {
    return io::MappedFile::open(path_, path_.string());
  }

 private:
  std::filesystem::path path_;
  std::uint64_t max_member_;
  std::unique_ptr<io::TensorReader> reader_;
  std::vector<CandidateTensor> tensors_;
};

class MemoryCandidate final : public CandidateSource {
 public:
  MemoryCandidate(std::vector<TensorView> views, std::vector<io::Tensor> kept) : views_(std::move(views)), kept_(std::move(kept)) {
    for (const TensorView& v : views_) {
      const std::optional<std::uint64_t> n = io::detail::checked_byte_size(v.tensor.shape, io::dtype_size(v.tensor.dtype));
      if (!n || *n != v.bytes.size())  // io::validate's message (the copy only on this way out)
        io::validate(io::Tensor{v.tensor.name, v.tensor.dtype, v.tensor.shape, {v.bytes.begin(), v.bytes.end()}});
      tensors_.push_back(v.tensor);
    }
  }
  const std::vector<CandidateTensor>& tensors() const override { return tensors_; }
  std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1, std::vector<std::uint8_t>&) override {
    const std::size_t es = io::dtype_size(tensors_[i].dtype);
    return views_[i].bytes.subspan(static_cast<std::size_t>(e0) * es, static_cast<std::size_t>(e1 - e0) * es);
  }
  std::vector<io::Tensor> whole(const golden::GoldenSet&) override {
    std::vector<io::Tensor> out;
    for (const TensorView& v : views_) out.push_back({v.tensor.name, v.tensor.dtype, v.tensor.shape, {v.bytes.begin(), v.bytes.end()}});
    return out;
  }

 private:
  std::vector<TensorView> views_;
  std::vector<io::Tensor> kept_;  // what views_ point into, when the source owns it
  std::vector<CandidateTensor> tensors_;
};

// --layout: bshd is the same bytes under another shape; bhsd gathers each token's heads.
class LayoutCandidate final : public CandidateSource {
 public:
  LayoutCandidate(std::shared_ptr<CandidateSource> inner, CandidateLayout layout) : inner_(std::move(inner)), layout_(layout) {}
  void prepare(const golden::GoldenSet& g, std::int64_t first, std::int64_t last, std::int64_t block_tokens) override {
    inner_->prepare(g, first, last, block_tokens);
    const char* name = layout_ == CandidateLayout::bshd ? "bshd" : "bhsd";
    for (const CandidateTensor& t : inner_->tensors()) {
      CandidateTensor o = t;
      bool gather = false;
      if (t.shape.size() == 4) {
        if (t.shape[0] != 1)
          throw InputError(fmt::format("--layout {}: candidate tensor {} has batch {}; ropecheck checks one sequence (batch 1)",
                                       name, quote_name(t.name), t.shape[0]));
        gather = layout_ == CandidateLayout::bhsd;
        o.shape = gather ? std::vector<std::int64_t>{t.shape[2], t.shape[1], t.shape[3]}
                         : std::vector<std::int64_t>{t.shape[1], t.shape[2], t.shape[3]};
      }
      tensors_.push_back(std::move(o));
      gather_.push_back(gather);
    }
  }
  const std::vector<CandidateTensor>& tensors() const override { return tensors_; }
  std::vector<std::string> golden_inputs() const override { return inner_->golden_inputs(); }
  void begin_block(std::int64_t t0, std::int64_t t1, const std::vector<std::size_t>& needed) override {
    inner_->begin_block(t0, t1, needed);
  }
  std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                         std::vector<std::uint8_t>& buffer) override {
    if (!gather_[i]) return inner_->elements(i, e0, e1, buffer);
    // [1, H, T, D] read as [T, H, D]: whole tokens (the check asks for blocks of tokens).
    const std::int64_t T = tensors_[i].shape[0], H = tensors_[i].shape[1], D = tensors_[i].shape[2];
    const std::int64_t t0 = e0 / (H * D), t1 = e1 / (H * D);
    const std::size_t row = static_cast<std::size_t>(D) * io::dtype_size(tensors_[i].dtype);
    buffer.resize(static_cast<std::size_t>(t1 - t0) * static_cast<std::size_t>(H) * row);
    std::vector<std::uint8_t> piece;
    for (std::int64_t h = 0; h < H; ++h) {
      const std::span<const std::uint8_t> src = inner_->elements(i, (h * T + t0) * D, (h * T + t1) * D, piece);
      for (std::int64_t t = t0; t < t1; ++t)
        std::memcpy(buffer.data() + static_cast<std::size_t>((t - t0) * H + h) * row,
                    src.data() + static_cast<std::size_t>(t - t0) * row, row);
      inner_->release(i, (h * T + t0) * D, (h * T + t1) * D);
    }
    return {buffer.data(), buffer.size()};
  }
  void release(std::size_t i, std::int64_t e0, std::int64_t e1) override {
    if (!gather_[i]) inner_->release(i, e0, e1);
  }
  std::vector<io::Tensor> whole(const golden::GoldenSet& g) override {
    std::vector<io::Tensor> t = inner_->whole(g);
    apply_candidate_layout(t, layout_);
    return t;
  }
  std::shared_ptr<const io::MappedFile> file() const override { return inner_->file(); }

 private:
  std::shared_ptr<CandidateSource> inner_;
  CandidateLayout layout_;
  std::vector<CandidateTensor> tensors_;
  std::vector<bool> gather_;
};

}  // namespace

std::shared_ptr<CandidateSource> file_candidate(const std::filesystem::path& path, std::uint64_t max_member_bytes) {
  return std::make_shared<FileCandidate>(path, max_member_bytes);
}

std::shared_ptr<CandidateSource> memory_candidate(std::vector<TensorView> views) {
  return std::make_shared<MemoryCandidate>(std::move(views), std::vector<io::Tensor>{});
}

std::shared_ptr<CandidateSource> memory_candidate(std::vector<io::Tensor> tensors) {
  std::vector<TensorView> views;
  for (const io::Tensor& t : tensors) views.push_back({{t.name, t.dtype, t.shape}, {t.data.data(), t.data.size()}});
  return std::make_shared<MemoryCandidate>(std::move(views), std::move(tensors));
}

std::shared_ptr<CandidateSource> with_layout(std::shared_ptr<CandidateSource> source, CandidateLayout layout) {
  if (layout == CandidateLayout::thd) return source;
  return std::make_shared<LayoutCandidate>(std::move(source), layout);
}

}  // namespace ropecheck::checker
