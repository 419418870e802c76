// The catalogue of known RoPE mistakes (checker/DIAGNOSIS.md lists each with its source) and how two
// mistakes compose.
#include "ropecheck/checker/diagnose.hpp"

namespace ropecheck::checker {

bool Mistake::is_identity() const {
  return !position_rounding && position_shift == 0 && !position_wrap_bits && !freq_rounding && !reciprocal_freq && !base &&
         !factor && !attention && !rotary_dim && !swap_longrope_factors && !flip_layout && !ignore_scaling &&
         !flip_truncate && !flip_mrope_mode && !swap_hw_streams && !swap_cos_sin && !negate_sin && att == Att::keep &&
         !judged_class && !rotary_offset && !whole_head && !passthrough_mscale && !first_position && norm == Norm::keep;
}

std::optional<Mistake> Mistake::compose(const Mistake& a, const Mistake& b) {
  Mistake m = a;
  bool clash = false;
  auto take = [&clash](auto& into, const auto& from, const auto& none) {
    if (from == none) return;
    if (into != none) clash = true;
    into = from;
  };
  take(m.position_rounding, b.position_rounding, std::optional<DType>{});
  take(m.position_shift, b.position_shift, std::int64_t{0});
  take(m.position_wrap_bits, b.position_wrap_bits, std::optional<int>{});
  take(m.freq_rounding, b.freq_rounding, std::optional<DType>{});
  take(m.reciprocal_freq, b.reciprocal_freq, false);
  take(m.base, b.base, std::optional<double>{});
  take(m.factor, b.factor, std::optional<double>{});
  take(m.attention, b.attention, std::optional<double>{});
  take(m.rotary_dim, b.rotary_dim, std::optional<int>{});
  take(m.swap_longrope_factors, b.swap_longrope_factors, false);
  take(m.flip_layout, b.flip_layout, false);
  take(m.ignore_scaling, b.ignore_scaling, false);
  take(m.flip_truncate, b.flip_truncate, false);
  take(m.flip_mrope_mode, b.flip_mrope_mode, false);
  take(m.swap_hw_streams, b.swap_hw_streams, false);
  take(m.swap_cos_sin, b.swap_cos_sin, false);
  take(m.negate_sin, b.negate_sin, false);
  take(m.att, b.att, Att::keep);
  take(m.judged_class, b.judged_class, std::optional<accuracy::AccuracyClass>{});
  take(m.rotary_offset, b.rotary_offset, std::optional<int>{});
  take(m.whole_head, b.whole_head, false);
  take(m.passthrough_mscale, b.passthrough_mscale, false);
  take(m.first_position, b.first_position, false);
  take(m.norm, b.norm, Norm::keep);
  // The attention factor replaced and dropped / squared / folded change the same thing.
  if (m.attention && m.att != Att::keep) clash = true;
  if (clash) return std::nullopt;
  return m;
}

namespace {

// MLA (DeepSeek V2 / V3: q = [q_nope | q_pe], one k_pe per token): evaluable on MLA sets only.
void add_mla_hypotheses(std::vector<Hypothesis>& v) {
  auto add = [&v](std::string id, std::string title, std::string source, const Mistake& mistake) {
    v.push_back({std::move(id), std::move(title), std::move(source), mistake, std::nullopt});
  };
  Mistake m;
  m.rotary_offset = 0;
  add("mla-slice-at-start", "the rotary slice at the start of the head instead of at rotary_offset (q_pe taken first)",
      "transformers DeepseekV3Attention split(q, [qk_nope_head_dim, qk_rope_head_dim]): q_pe is the last slice", m);
  m = {};
  m.whole_head = true;
  add("mla-whole-head-rotated", "the whole head rotated (qk_head_dim as the rotary width: q_nope rotated too)",
      "DeepSeek config: rotary width qk_rope_head_dim (64), not qk_head_dim (192)", m);
  m = {};
  m.att = Mistake::Att::yarn_mscale;
  add("mla-yarn-mscale-on-slice",
      "YaRN's get_mscale(factor, mscale) folded into the rotated slice without the division by "
      "get_mscale(factor, mscale_all_dim)",
      "vLLM DeepseekScalingRotaryEmbedding (mscale ratio); DeepSeek puts mscale_all_dim into the softmax scale", m);
  m = {};
  m.passthrough_mscale = true;
  add("mla-yarn-mscale-on-nope", "the pass-through channels (q_nope) multiplied by YaRN's get_mscale(factor, mscale)",
      "DeepSeek inference/model.py: the mscale belongs to the softmax scale, not to q_nope", m);
  m = {};
  m.first_position = true;
  add("mla-k-pe-one-position", "every token's k_pe rotated at the first token's position (k_pe broadcast along the "
      "sequence instead of the heads)",
      "transformers DeepseekV3Attention: k_rot.view(batch, 1, seq, qk_rope_head_dim) then expand over heads", m);
}

// The Q/K RMSNorm stage (kernels/qk_norm.hpp NormMistake, same names): evaluable on norm sets only.
void add_norm_hypotheses(std::vector<Hypothesis>& v) {
  using N = Mistake::Norm;
  auto add = [&v](std::string id, std::string title, std::string source, N n) {
    Mistake m;
    m.norm = n;
    v.push_back({std::move(id), std::move(title), std::move(source), m, std::nullopt});
  };
  add("norm-eps-omitted", "the RMSNorm without eps: x / sqrt(mean(x^2))",
      "a fused QK-norm kernel's eps argument dropped (vLLM / FlashInfer fused QK-norm-RoPE take eps); recipe mistake", N::eps_omitted);
  add("norm-weight-omitted", "the RMSNorm's weight not applied (x / rms only)",
      "Qwen3RMSNorm's self.weight * hidden_states left out; recipe mistake", N::weight_omitted);
  add("norm-weight-form-swapped", "w where the stage says 1 + w, or 1 + w where it says w",
      "Gemma3RMSNorm (1 + weight) vs Qwen3RMSNorm (weight); recipe mistake", N::weight_form_swapped);
  add("norm-whole-row", "the mean over the token's whole row (every head), not each head",
      "q_norm applied before the view to heads (head_dim vs hidden width); recipe mistake", N::whole_row);
  add("norm-mean-over-pairs", "the sum of squares divided by head_dim / 2 (the wrong width)",
      "a kernel that counts pairs, not channels; recipe mistake", N::mean_over_pairs);
}

}  // namespace

const std::vector<Hypothesis>& diagnosis_catalogue() {
  using A = Mistake::Att;
  static const std::vector<Hypothesis> c = [] {
    std::vector<Hypothesis> v;
    auto add = [&v](std::string id, std::string title, std::string source, Mistake m,
                    std::optional<Parameter> parameter = std::nullopt) {
      v.push_back({std::move(id), std::move(title), std::move(source), m, std::move(parameter)});
    };
    Mistake m;
    m = {};
    m.position_rounding = DType::bf16;
    add("bf16-positions", "positions rounded to bf16",
        "huggingface/candle PR #3520; diffusers PR #13922; NVIDIA/TransformerEngine #1245; recipe bf16-positions", m);
    m = {};
    m.position_rounding = DType::f16;
    add("f16-positions", "positions rounded to f16", "NVIDIA/Megatron-LM #535; recipe f16-positions", m);
    m = {};
    m.freq_rounding = DType::bf16;
    add("bf16-inv-freq", "inverse frequencies rounded to bf16",
        "sgl-project/sglang-jax #1472; transformers #29496; NeMo Automodel PR #2549; recipe bf16-inv-freq", m);
    m = {};
    m.freq_rounding = DType::f16;
    add("f16-inv-freq", "inverse frequencies rounded to f16", "transformers #25681; vLLM PR #1004; recipe f16-inv-freq", m);
    m = {};
    m.reciprocal_freq = true;
    add("inv-freq-reciprocal", "periods (1 / w) used where inverse frequencies are expected (the reciprocal)",
        "MLX mx.fast.rope takes freqs as periods and rotates by position / freqs (conformance/FINDINGS.md); "
        "a caller handing it inverse frequencies, or the reverse",
        m);
    m = {};
    m.base = 10000;
    add("base-default", "the default base 10000 instead of the spec's rope_theta",
        "sgl-project/SpecForge #265 (rope_theta not read: base 10000 for a 1e6 model); a cos / sin cache keyed "
        "without the base, shared by layers of another base (Lightning-AI/litgpt PR #1997, Gemma 3 local / global)",
        m, Parameter{"base", "10000", ""});
    m = {};
    m.swap_longrope_factors = true;
    add("longrope-factors-swapped",
        "LongRoPE factor lists swapped: the long factors at a short length, or the short ones past "
        "original_max_position_embeddings",
        "mlx-lm 0.32.2 SuScaledRoPE: long factors at every length (conformance/FINDINGS.md section 3; fixed once in "
        "mlx-lm PR #660); an inv_freq taken at init (seq_len None: the short factors) and never switched "
        "(variants.md section 1.5)",
        m);
    m = {};
    m.position_wrap_bits = 32;
    add("positions-int32", "positions wrapped to int32 by a cast",
        "ROCm/aiter PR #2566 (int32 positions); PaddlePaddle PR #63708 (int32 overflow in fused_rope)", m);
    m = {};
    m.position_wrap_bits = 16;
    add("positions-int16", "positions wrapped to int16 by a cast",
        "vllm-project/tpu-inference PR #2756 (int16 positions past 32767 tokens)", m);
    m = {};
    m.flip_layout = true;
    add("wrong-pairing", "the other channel pairing (half-split <-> interleaved)",
        "Dao-AILab/flash-attention #45; llama.cpp PR #6033 (Command-R pairs); variants.md section 0", m);
    m = {};
    m.position_shift = 1;
    add("position-plus-1", "positions off by +1", "off-by-one offsets (flash-attention seqlen_offsets; KV-cache start)", m);
    m = {};
    m.position_shift = -1;
    add("position-minus-1", "positions off by -1", "off-by-one offsets (flash-attention seqlen_offsets; KV-cache start)", m);
    m = {};
    m.swap_cos_sin = true;
    add("cos-sin-swapped", "cos and sin swapped", "a hand-written kernel's argument order", m);
    m = {};
    m.negate_sin = true;
    add("sin-negated", "sin with the wrong sign (rotation by -theta)",
        "ggml's backward pass (sin_sign = -1) used forward; peers.md section 1", m);
    m = {};
    m.att = A::missing;
    add("attention-factor-missing", "the attention factor not applied",
        "vllm PR #46280 / #48351 (attention_factor dropped: 1.4159 vs 1.0)", m);
    m = {};
    m.att = A::squared;
    add("attention-factor-twice", "the attention factor applied twice",
        "vllm #48621 (mscale 1.2773 vs 1.0); TensorRT-LLM PR #16379 (log applied twice)", m);
    m = {};
    m.att = A::folded_in_table;
    add("attention-factor-in-table", "cos / sin tables with the attention factor folded in",
        "HF YaRN / LongRoPE (cos * attention_scaling); ggml rope_yarn (cos * mscale)", m);
    m = {};
    m.ignore_scaling = true;
    add("scaling-ignored", "scaling ignored (plain base frequencies, no attention factor)",
        "transformers #38224 (YaRN factor not effective); variants.md section 1", m);
    m = {};
    m.flip_truncate = true;
    add("yarn-truncate-flipped", "YaRN correction range rounded when the spec says truncate:false, or the reverse",
        "llama.cpp's gpt-oss path (floor/ceil with truncate false); transformers _compute_yarn_parameters", m);
    m = {};
    m.flip_mrope_mode = true;
    add("mrope-mode-flipped", "mrope sections chunked instead of interleaved, or the reverse",
        "Qwen2-VL (chunked) vs Qwen3-VL (interleaved) sections; ggml MROPE vs IMROPE", m);
    m = {};
    m.swap_hw_streams = true;
    add("mrope-hw-swapped", "mrope height and width streams exchanged (wrong section order)",
        "Liger-Kernel test_qwen2vl_mrope sections; sglang PR #33117", m);
    add_mla_hypotheses(v);
    add_norm_hypotheses(v);
    m = {};
    m.judged_class = accuracy::AccuracyClass::fp32_angle;
    add("class-fp32-angle", "the angle formed in f32 (class fp32-angle)",
        "the HF / Meta fp32 recipe (accuracy/ERROR_MODEL.md)", m);
    m = {};
    m.judged_class = accuracy::AccuracyClass::f16_table;
    add("class-f16-table", "cos / sin cast to f16 (class f16-table)",
        "flashinfer PR #585; EleutherAI/gpt-neox #1003 (accuracy/ERROR_MODEL.md)", m);
    m = {};
    m.judged_class = accuracy::AccuracyClass::bf16_table;
    add("class-bf16-table", "cos / sin cast to bf16 (class bf16-table)",
        "Dao-AILab/flash-attention #823; vLLM rotary_embedding/base.py cache.to(dtype)", m);
    return v;
  }();
  return c;
}

}  // namespace ropecheck::checker
