// --stores (golden_values.hpp): the quantized stores of q_rot and k_rot (GOLDEN_FORMAT.md, "Quantized
// stores"), computed per block of tokens by reference/quantized_stores.hpp from the block's f64
// values and written at the block's place in the stores file: golden/ only lays out and stores them.
#include <algorithm>
#include <string>
#include <vector>

#include "golden_values.hpp"

namespace ropecheck::golden::detail {
namespace {

using quant::StoreKind;
using quant::StoreSpec;

struct StoreTensor {
  std::string suffix;  // after "<output>.<store>"
  TensorDType dtype;
  std::vector<std::int64_t> per_token;  // the shape after the token axis
  std::string meaning;
  bool per_set = false;  // no token axis: per_token is the whole shape (a given scale), written once
};

// The tensors of one store of one output, in file order (write_store_block writes them in this order).
std::vector<StoreTensor> store_tensors(const StoreSpec& s, std::int64_t H, std::int64_t D) {
  const std::int64_t G = quant::scale_groups_per_token(s, H, D);
  std::vector<StoreTensor> t;
  const std::vector<std::int64_t> elems = {H, D};
  switch (s.kind) {
    case StoreKind::fp8: {
      if (s.given_scale()) {
        t.push_back({"", s.fp8 == quant::Fp8::e4m3fn ? TensorDType::e4m3fn : TensorDType::e5m2, elems,
                     "FP8 codes of the exact values over the given scale"});
        t.push_back({".scale", TensorDType::f32, {static_cast<std::int64_t>(s.given.size())},
                     "the given scale (a golden input the kernel is given, not an output)", true});
        break;
      }
      // per token: [T]; per (token, head): [T, H]; over every token (no token axis): per tensor [1], per head [H]
      const bool whole = s.whole_tensor_scale();
      const std::vector<std::int64_t> sc = s.scale == quant::ScaleGranularity::per_token ? std::vector<std::int64_t>{}
                                           : s.scale == quant::ScaleGranularity::per_tensor ? std::vector<std::int64_t>{1}
                                                                                            : std::vector<std::int64_t>{H};
      t.push_back({"", s.fp8 == quant::Fp8::e4m3fn ? TensorDType::e4m3fn : TensorDType::e5m2, elems,
                   "FP8 codes of the exact values over the data-derived scale (vLLM's dynamic quantization)"});
      t.push_back({".scale", TensorDType::f32, sc, "the data-derived scale RN_f32(s*), s* of the exact values", whole});
      t.push_back({".scale_margin", TensorDType::f32, sc, "the error on the exact values that cannot change the scale", whole});
      break;
    }
    case StoreKind::q8_0:
    case StoreKind::q4_0:
      t.push_back({"", TensorDType::u8, {H, D / quant::kGgmlBlock, s.kind == StoreKind::q8_0 ? 34 : 18},
                   "GGML blocks (f16 d, then the codes) of each head vector in channel order"});
      t.push_back({".scale_margin", TensorDType::f32, {H, D / quant::kGgmlBlock},
                   "the error on the exact values that cannot change the block's d"});
      break;
    case StoreKind::affine:
      t.push_back({"", TensorDType::u32, {H, D * s.affine.bits / 32}, "MLX affine codes packed from the low bits up"});
      t.push_back({".scales", tensor_dtype(s.affine.scale_dtype), {H, G / H}, "each group's stored scale"});
      t.push_back({".biases", tensor_dtype(s.affine.scale_dtype), {H, G / H}, "each group's stored bias"});
      t.push_back({".scale_margin", TensorDType::f32, {H, G / H},
                   "the error on the exact values that cannot change the scale and bias"});
      t.push_back({".decision_margin", TensorDType::f32, {H, G / H},
                   "the error that cannot change the group's decisions (edge, clamp, q0)"});
      break;
  }
  t.push_back({".margin", TensorDType::f32, elems, "per element: the error on the exact values that cannot change the code"});
  return t;
}

template <class T>
std::span<const std::uint8_t> bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(T)};
}

std::vector<std::uint8_t> encode(const std::vector<double>& v, DType d) {
  std::vector<std::uint8_t> out(v.size() * dtype_size(tensor_dtype(d)));
  for (std::size_t i = 0; i < v.size(); ++i) store_element(out.data() + i * dtype_size(tensor_dtype(d)), v[i], d);
  return out;
}

}  // namespace

void plan_stores(const GoldenOptions& opt, RunPlan& plan) {
  if (opt.stores.empty()) return;
  if (!plan.rope) throw SpecError("--stores: needs a RoPE spec (the stores quantize q_rot and k_rot)");
  // Every store but a whole-tensor one groups within one token (a given scale is an input): a shard computes its own, merge joins them.
  if (opt.shared_out) throw SpecError("--stores: not with --shared-out (write shards with --shard and join them with merge)");
  // The stores lay out [tokens, heads, head_dim] q_rot / k_rot; MLA's k_pe has no head axis (not modelled yet).
  if (plan.KW != plan.H * plan.D) throw SpecError("--stores: not with an MLA spec yet (its key k_pe has no head axis)");
  for (std::size_t b = 0; b <= opt.stores.size();) {
    const std::size_t c = std::min(opt.stores.find(',', b), opt.stores.size());
    std::string why;
    const auto s = quant::parse_store(std::string_view(opt.stores).substr(b, c - b), why);
    if (!s) throw SpecError("--stores: " + why);
    const std::string hd = quant::store_head_dim_problem(*s, plan.D);
    if (!hd.empty()) throw SpecError("--stores: " + hd);
    const std::string hp = quant::store_heads_problem(*s, plan.H);
    if (!hp.empty()) throw SpecError("--stores: " + hp);
    if (s->whole_tensor_scale()) {  // its amax is over every token: one run holds the tensor (whole_tensor_values)
      if (opt.shard)
        throw SpecError("--stores: " + s->item() + " takes its scale over every token: not with --shard (write the set whole)");
      if (plan.tokens * plan.H * plan.D > kMaxWholeTensorValues)
        throw SpecError("--stores: " + s->item() + " holds q and k whole in memory: at most " +
                        std::to_string(kMaxWholeTensorValues) + " values a tensor, not " + std::to_string(plan.tokens * plan.H * plan.D));
    }
    for (const StoreSpec& o : plan.stores)
      if (o.name() == s->name()) throw SpecError("--stores: " + s->name() + " named twice");
    plan.stores.push_back(*s);
    b = c + 1;
  }
}

io::DescribedFile stores_layout(const RunPlan& plan) {
  io::DescribedFile f;
  f.stem = "stores";
  f.role = "store";
  f.record = {{"stores", nlohmann::json::array()}};
  const std::int64_t T = plan.tokens;
  for (const StoreSpec& s : plan.stores) {
    nlohmann::json r = {{"name", s.name()}};
    if (s.kind == StoreKind::fp8)
      r.update({{"format", "fp8"}, {"overflow", quant::to_string(s.overflow)}, {"scale", quant::to_string(s.scale)},
                {"ml_dtypes", quant::fp8_info(s.fp8).ml_dtypes}});
    else if (s.kind == StoreKind::affine)
      r.update({{"format", "mlx-affine"}, {"bits", s.affine.bits}, {"group_size", s.affine.group_size},
                {"scale_dtype", to_string(s.affine.scale_dtype)}});
    else
      r["format"] = "ggml";
    if (s.given_scale()) r.update({{"scale_source", "given"}, {"given_scales", s.given}, {"item", s.item()}});
    f.record["stores"].push_back(r);
    for (const char* out : {"q_rot", "k_rot"})
      for (StoreTensor& t : store_tensors(s, plan.H, plan.D)) {
        std::vector<std::int64_t> shape = {T};
        if (t.per_set) shape.clear();
        shape.insert(shape.end(), t.per_token.begin(), t.per_token.end());
        io::Tensor tensor;  // layout only: GoldenFiles reads name, dtype and shape
        tensor.name = std::string(out) + "." + s.name() + t.suffix;
        tensor.dtype = t.dtype;
        tensor.shape = std::move(shape);
        f.tensors.push_back({std::move(tensor), std::move(t.meaning)});
      }
  }
  return f;
}

bool has_whole_tensor_store(const RunPlan& plan) {
  return std::any_of(plan.stores.begin(), plan.stores.end(), [](const StoreSpec& s) { return s.whole_tensor_scale(); });
}

void write_store_block(const RunPlan& plan, GoldenFiles& files, std::size_t g, std::int64_t first_token,
                       const io::Tensor& q_rot_f64, const io::Tensor& k_rot_f64, bool whole) {
  const std::int64_t bt = q_rot_f64.shape.at(0), H = plan.H, D = plan.D;
  std::size_t j = 0;  // tensor index in the group, in stores_layout's order
  const auto at = [&](std::size_t n) { return static_cast<std::uint64_t>(first_token) * n / static_cast<std::uint64_t>(bt); };
  for (const StoreSpec& s : plan.stores) {
    if (s.whole_tensor_scale() != whole) {  // written by the other call: its tensors skipped
      j += 2 * store_tensors(s, H, D).size();
      continue;
    }
    for (const io::Tensor* y : {&q_rot_f64, &k_rot_f64}) {
      const std::span<const double> v(reinterpret_cast<const double*>(y->data.data()), y->data.size() / 8);
      const quant::StoreBlock b = quant::store_block(s, v, bt, H, D);
      const std::vector<std::uint8_t> scales = encode(b.scales, s.kind == StoreKind::affine ? s.affine.scale_dtype : DType::f32);
      std::vector<std::span<const std::uint8_t>> parts;
      switch (s.kind) {
        case StoreKind::fp8:
          parts = {bytes(b.bytes), scales, bytes(b.scale_margin)};
          if (s.given_scale()) parts = {bytes(b.bytes), {}};  // the given scale: written once, below
          break;
        case StoreKind::q8_0:
        case StoreKind::q4_0: parts = {bytes(b.bytes), bytes(b.scale_margin)}; break;
        case StoreKind::affine: {
          parts = {bytes(b.words), scales, {}, bytes(b.scale_margin), bytes(b.decision_margin)};
          break;
        }
      }
      const std::vector<std::uint8_t> biases = encode(b.biases, s.affine.scale_dtype);
      if (s.kind == StoreKind::affine) parts[2] = biases;
      parts.push_back(bytes(b.margin));
      for (std::span<const std::uint8_t> p : parts) {
        if (p.empty() && s.given_scale()) {  // the given scale: by the block at the file's token 0 (a shard's too)
          if (first_token == 0) files.group(g).write(j, 0, bytes(s.given));
          ++j;
          continue;
        }
        files.group(g).write(j++, at(p.size()), p);
      }
    }
  }
}

std::optional<MergedStores> merged_stores(const nlohmann::json& manifest, std::int64_t tokens, std::int64_t H,
                                          std::int64_t D) {
  if (!manifest.contains("stores")) return std::nullopt;
  RunPlan plan;
  plan.tokens = tokens, plan.H = H, plan.D = D;
  MergedStores m;
  for (const nlohmann::json& r : manifest["stores"].at("stores")) {
    // The --stores item the record was written from (StoreSpec::item()'s form).
    std::string item = r.value("item", "");
    const std::string name = r.at("name").get<std::string>(), format = r.value("format", "");
    if (item.empty())
      item = format == "fp8"          ? name + ":" + r.value("overflow", "") + ":" + r.value("scale", "")
             : format == "mlx-affine" ? name + ":" + r.value("scale_dtype", "")
                                      : name;
    std::string why;
    const auto s = quant::parse_store(item, why);
    if (!s) throw InputError("merge: the shards' store record '" + item + "': " + why);
    plan.stores.push_back(*s);
    if (s->given_scale())
      for (const char* out : {"q_rot", "k_rot"}) m.per_set.push_back(std::string(out) + "." + name + ".scale");
  }
  m.layout = stores_layout(plan);
  return m;
}

}  // namespace ropecheck::golden::detail
