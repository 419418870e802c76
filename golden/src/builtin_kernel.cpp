#include "ropecheck/golden/builtin_kernel.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ropecheck/core/spec.hpp"

namespace ropecheck::golden {
namespace {

namespace k = ropecheck::kernels;

TensorDType tensor_dtype_of(DType d) {
  switch (d) {
    case DType::f64: return TensorDType::f64;
    case DType::f32: return TensorDType::f32;
    case DType::f16: return TensorDType::f16;
    case DType::bf16: return TensorDType::bf16;
  }
  return TensorDType::f32;
}

// A zeroed output tensor shaped like the golden output `name`.
Tensor output_like(const GoldenSet& g, const std::string& name, DType d) {
  const ManifestTensor* m = g.find(name);
  if (!m) throw TensorError("golden set " + g.dir().string() + ": no tensor '" + name + "'");
  Tensor t;
  t.name = name;
  t.dtype = tensor_dtype_of(d);
  t.shape = m->shape;
  t.data.assign(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype), 0);
  return t;
}

std::vector<float> f32_values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(t.value(i));
  return v;
}

}  // namespace

std::optional<k::Recipe> parse_builtin_kernel(std::string_view kernel) {
  constexpr std::string_view prefix = "builtin:";
  if (kernel.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view name = kernel.substr(prefix.size());
  if (const std::optional<k::Recipe> r = k::parse_recipe(name)) return r;
  std::string known;
  for (const k::RecipeInfo& r : k::recipes()) known += (known.empty() ? "" : ", ") + std::string(r.name);
  throw TensorError("--kernel " + std::string(kernel) + ": unknown built-in recipe '" + std::string(name) +
                    "' (known: " + known + ")");
}

std::string builtin_kernel_name(k::Recipe recipe, const k::KernelOptions& options) {
  return "builtin:" + std::string(k::to_string(recipe)) + " (" +
         std::string(options.portable ? std::string_view("portable") : k::cpu_path()) + ")";
}

KernelRun run_builtin_kernel(k::Recipe recipe, const GoldenSet& golden, const k::KernelOptions& options) {
  KernelRun run;
  std::vector<DType> dtypes;
  for (const std::string& d : golden.dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) dtypes.push_back(*t);

  // Positions as [3, tokens] (t row, h row, w row); one stream unless the spec is multimodal.
  const std::vector<Position>& pos = golden.positions();
  const std::int64_t T = golden.tokens();
  std::vector<std::int64_t> thw(static_cast<std::size_t>(3 * T));
  for (std::int64_t t = 0; t < T; ++t) {
    const Position& p = pos[static_cast<std::size_t>(t)];
    thw[static_cast<std::size_t>(t)] = p.t;
    thw[static_cast<std::size_t>(T + t)] = p.h;
    thw[static_cast<std::size_t>(2 * T + t)] = p.w;
  }

  const EncodingSpec& spec = golden.spec();
  try {
    if (golden.is_rope()) {
      const RopeSpec& r = spec.rope;
      const k::RopePlan plan = k::make_rope_plan(r, recipe, golden.seq_len());
      const k::PositionsView pv =
          r.mrope != MropeMode::none
              ? k::PositionsView::three_streams(thw, T)
              : k::PositionsView::of(std::span<const std::int64_t>(thw.data(), static_cast<std::size_t>(T)));
      std::vector<float> q = f32_values(golden.tensor("q")), kx = f32_values(golden.tensor("k"));
      const std::int64_t H = golden.heads(), D = r.head_dim;
      for (DType d : dtypes) {
        const std::string dt(to_string(d));
        Tensor qo = output_like(golden, "q_rot." + dt, d), ko = output_like(golden, "k_rot." + dt, d);
        k::rope_apply(plan, pv, k::TensorView::contiguous(q.data(), DType::f32, T, H, D),
                      k::TensorView::contiguous(qo.data.data(), d, T, H, D),
                      k::TensorView::contiguous(kx.data(), DType::f32, T, H, D),
                      k::TensorView::contiguous(ko.data.data(), d, T, H, D), options);
        Tensor co = output_like(golden, "cos." + dt, d), so = output_like(golden, "sin." + dt, d);
        k::rope_cos_sin_table(plan, pv, co.data.data(), so.data.data(), d, options);
        for (Tensor* t : {&qo, &ko, &co, &so}) run.tensors.push_back(std::move(*t));
      }
    } else {
      const std::vector<std::int64_t> p(thw.begin(), thw.begin() + T);
      for (DType d : dtypes) {
        Tensor pe = output_like(golden, "pe." + std::string(to_string(d)), d);
        k::sinusoidal_table(spec.sinusoidal, recipe, p, pe.data.data(), d, options);
        run.tensors.push_back(std::move(pe));
      }
    }
  } catch (const SpecError& e) {
    throw TensorError(builtin_kernel_name(recipe, options) + " cannot run golden set " + golden.dir().string() + ": " +
                      e.what());
  } catch (const std::invalid_argument& e) {
    throw TensorError(builtin_kernel_name(recipe, options) + " on golden set " + golden.dir().string() + ": " + e.what());
  }
  return run;
}

}  // namespace ropecheck::golden
