// Tests for the golden-set reader (golden_set.hpp) and the checker (checker.hpp).
//
// Golden sets are written by the real writer (write_golden_set) into a temporary folder. Candidates
// are the golden tensors themselves, or computed by the framework recipes of
// tests/support/float_recipes.hpp (the Hugging Face fp32 recipe, bf16 inverse frequencies, ...)
// from the set's own inputs, so the expected verdicts follow from the error model's calibration
// (test_error_model): the fp32 recipe is fp32-angle and not exact, bf16 inverse frequencies break
// fp32-angle within the first positions.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "float_recipes.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;
using accuracy::AccuracyClass;

// A folder for this process's sets, removed at exit.
struct TempRoot {
  fs::path path;
  TempRoot() : path(fs::temp_directory_path() / ("ropecheck_checker_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
const fs::path& temp_root() {
  static const TempRoot root;
  return root.path;
}

// A golden set written once per process.
fs::path make_set(const std::string& name, const std::string& preset, const std::string& positions,
                  FileFormat format = FileFormat::safetensors, int heads = 2,
                  std::vector<DType> dtypes = {DType::f32, DType::f16, DType::bf16}) {
  const fs::path out = temp_root() / name;
  if (fs::exists(out / "manifest.json")) return out;
  GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions(positions);
  o.dtypes = std::move(dtypes);
  o.heads = o.spec.family == Family::rope ? heads : 1;
  o.seed = 7;
  o.format = format;
  o.out = out;
  o.threads = 2;
  write_golden_set(o);
  return out;
}

// llama-3.1-8b (llama3 scaling), 2 heads, short and long positions.
const fs::path& llama_set() {
  static const fs::path p = make_set("llama", "llama-3.1-8b", "0:300,300:70000:997,131071");
  return p;
}

Tensor copy_named(const Tensor& t, std::string name) {
  Tensor c = t;
  c.name = std::move(name);
  return c;
}

Tensor encode(std::string name, DType dt, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  switch (dt) {
    case DType::f64: return make_f64(std::move(name), std::move(shape), v);
    case DType::f32: {
      std::vector<float> f(v.begin(), v.end());
      return make_f32(std::move(name), std::move(shape), f);
    }
    case DType::f16:
    case DType::bf16: {
      std::vector<std::uint16_t> b;
      for (double x : v)
        b.push_back(dt == DType::f16 ? recipes::f16_bits(static_cast<float>(x))
                                     : recipes::f32_to_bf16_bits(static_cast<float>(x)));
      return make_bits16(std::move(name), dt == DType::f16 ? TensorDType::f16 : TensorDType::bf16, std::move(shape), b);
    }
  }
  return {};
}

// cos, sin, q_rot, k_rot of a RoPE golden set's inputs computed by a recipe; names are
// "<base><suffix>".
std::vector<Tensor> recipe_candidate(const GoldenSet& g, const recipes::Recipe& r, const std::string& suffix) {
  const RopeSpec& rope = g.spec().rope;
  const recipes::RecipeKernel k(rope, g.seq_len(), r);
  const auto& pos = g.positions();
  const std::int64_t T = g.tokens(), H = g.heads(), D = rope.head_dim, P = rope_pairs(rope);
  auto stream_pos = [&](std::int64_t t, int j) {
    const int s = rope.mrope == MropeMode::none ? 0 : mrope_stream(rope, j);
    const Position& p = pos[static_cast<std::size_t>(t)];
    return s == 0 ? p.t : (s == 1 ? p.h : p.w);
  };
  std::vector<double> c(static_cast<std::size_t>(T * P)), s(c.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (int j = 0; j < P; ++j) {
      const auto [cc, ss] = k.cos_sin_table(stream_pos(t, j), j);
      c[static_cast<std::size_t>(t * P + j)] = cc;
      s[static_cast<std::size_t>(t * P + j)] = ss;
    }
  std::vector<Tensor> out = {encode("cos" + suffix, r.out, {T, P}, c), encode("sin" + suffix, r.out, {T, P}, s)};
  for (const char* which : {"q", "k"}) {
    const Tensor& x = g.tensor(which);
    std::vector<double> y(static_cast<std::size_t>(x.numel()));
    for (std::int64_t row = 0; row < T * H; ++row) {
      const std::int64_t t = row / H, base = row * D;
      for (std::int64_t ch = 0; ch < D; ++ch) y[static_cast<std::size_t>(base + ch)] = recipes::round_float_to(static_cast<float>(x.value(base + ch)), r.out);
      for (int j = 0; j < P; ++j) {
        const auto [ia, ib] = pair_channels(rope, j);
        const auto [ya, yb] = k.rotate(static_cast<float>(x.value(base + ia)), static_cast<float>(x.value(base + ib)),
                                       stream_pos(t, j), j);
        y[static_cast<std::size_t>(base + ia)] = ya;
        y[static_cast<std::size_t>(base + ib)] = yb;
      }
    }
    out.push_back(encode(std::string(which) + "_rot" + suffix, r.out, x.shape, y));
  }
  return out;
}

const TensorReport& find_report(const CheckReport& r, const std::string& golden_name) {
  for (const TensorReport& t : r.tensors)
    if (t.golden_name == golden_name) return t;
  throw std::runtime_error("no report for " + golden_name);
}

const ClassResult& class_result(const TensorReport& t, AccuracyClass c) {
  for (const ClassResult& r : t.classes)
    if (r.accuracy_class == c) return r;
  throw std::runtime_error("no class");
}

// Options asking for exactly these golden outputs (--only).
CheckOptions asking(std::vector<std::string> only, CheckOptions o = {}) {
  o.only = std::move(only);
  return o;
}
const std::vector<std::string> kF32 = {"cos.f32", "sin.f32", "q_rot.f32", "k_rot.f32"};
const std::vector<std::string> kBf16 = {"cos.bf16", "sin.bf16", "q_rot.bf16", "k_rot.bf16"};

bool contains(const std::vector<AccuracyClass>& v, AccuracyClass c) { return std::find(v.begin(), v.end(), c) != v.end(); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// ---- reader ---------------------------------------------------------------------------------------

TEST(checker_golden_set, LoadsTheWritersSet) {
  const GoldenSet g = load_golden_set(llama_set());
  EXPECT_TRUE(g.is_rope());
  EXPECT_EQ(g.spec().name, "llama-3.1-8b");
  EXPECT_EQ(g.heads(), 2);
  EXPECT_EQ(g.tokens(), 300 + 70 + 1);
  EXPECT_EQ(g.seq_len(), 131072);
  EXPECT_EQ(g.attention_factor(), 1.0);
  EXPECT_EQ(g.positions().back(), Position::uniform(131071));
  EXPECT_EQ(g.tensor("q_rot.bf16").dtype, TensorDType::bf16);
  EXPECT_EQ(g.tensor("q_rot.bf16").shape, (std::vector<std::int64_t>{371, 2, 128}));
  EXPECT_EQ(g.output_names().size(), 16u);
  EXPECT_NE(error_of([&] { (void)g.tensor("nope"); }).find("no tensor 'nope'"), std::string::npos);
}

TEST(checker_sha256, KnownVectors) {
  const std::string abc = "abc";
  EXPECT_EQ(sha256_hex(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(abc.data()), abc.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const fs::path f = temp_root() / "abc.txt";
  std::ofstream(f) << abc;
  EXPECT_EQ(sha256_file(f), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(error_of([&] { sha256_file(temp_root() / "missing"); }).find("cannot read"), std::string::npos);
}

// The mapped path against the bytes' hash: empty, tiny, and a file that ends 3 bytes into its
// second 32 MiB piece; the read path agrees on each.
TEST(checker_sha256, OwnFileEqualsBytesHash) {
  std::vector<std::uint8_t> big((std::size_t{32} << 20) + 3);
  std::uint32_t x = 20261126;
  for (std::uint8_t& b : big) b = static_cast<std::uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  for (const std::size_t n : {std::size_t{0}, std::size_t{3}, big.size()}) {
    const fs::path f = temp_root() / ("own_" + std::to_string(n) + ".bin");
    std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(big.data()), static_cast<std::streamsize>(n));
    const std::string want = sha256_hex(std::span<const std::uint8_t>(big.data(), n));
    EXPECT_EQ(sha256_own_file(f), want) << n << " bytes";
    EXPECT_EQ(sha256_file(f), want) << n << " bytes";
  }
  EXPECT_NE(error_of([&] { sha256_own_file(temp_root() / "missing"); }).find("cannot read"), std::string::npos);
}

fs::path copy_set(const std::string& name) {
  const fs::path dst = temp_root() / name;
  fs::remove_all(dst);
  fs::copy(llama_set(), dst, fs::copy_options::recursive);
  return dst;
}

nlohmann::json read_manifest(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json");
  return nlohmann::json::parse(in);
}
void write_manifest(const fs::path& dir, const nlohmann::json& m) { std::ofstream(dir / "manifest.json") << m.dump(2); }

TEST(checker_golden_set, RejectsATamperedFile) {
  const fs::path dir = copy_set("tampered");
  {
    std::fstream f(dir / "outputs_f32.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x42');
  }
  const std::string e = error_of([&] { load_golden_set(dir); });
  EXPECT_NE(e.find("manifest hash mismatch for"), std::string::npos) << e;
  EXPECT_NE(e.find("outputs_f32.safetensors"), std::string::npos) << e;
}

TEST(checker_golden_set, RejectsATruncatedFile) {
  const fs::path dir = copy_set("truncated");
  fs::resize_file(dir / "inputs.safetensors", fs::file_size(dir / "inputs.safetensors") - 8);
  const std::string e = error_of([&] { load_golden_set(dir); });
  EXPECT_NE(e.find("manifest hash mismatch for"), std::string::npos) << e;
  EXPECT_NE(e.find("inputs.safetensors"), std::string::npos) << e;
}

TEST(checker_golden_set, RejectsMissingManifestMissingFileAndMalformedManifest) {
  const fs::path dir = copy_set("broken");
  fs::remove(dir / "outputs_bf16.safetensors");
  std::string e = error_of([&] { load_golden_set(dir); });
  EXPECT_NE(e.find("missing file 'outputs_bf16.safetensors'"), std::string::npos) << e;

  std::ofstream(dir / "manifest.json") << "{\"format\": \"ropecheck-golden\",";
  e = error_of([&] { load_golden_set(dir); });
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;

  fs::remove(dir / "manifest.json");
  e = error_of([&] { load_golden_set(dir); });
  EXPECT_NE(e.find("no manifest.json"), std::string::npos) << e;

  e = error_of([&] { load_golden_set(temp_root() / "does-not-exist"); });
  EXPECT_NE(e.find("not a folder"), std::string::npos) << e;
}

TEST(checker_golden_set, RejectsManifestsThatLie) {
  const nlohmann::json good = read_manifest(llama_set());
  const fs::path dir = copy_set("lies");
  auto expect_error = [&](nlohmann::json m, const std::string& needle) {
    write_manifest(dir, m);
    const std::string e = error_of([&] { load_golden_set(dir); });
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  };
  {
    nlohmann::json m = good;
    m["format_version"] = 2;
    expect_error(m, "format_version 2");
  }
  {
    nlohmann::json m = good;
    m["files"][0]["file"] = "../inputs.safetensors";
    expect_error(m, "not a plain name");
  }
  {
    nlohmann::json m = good;
    m["files"][1]["sha256"] = std::string(64, '0');
    expect_error(m, "manifest hash mismatch");
  }
  {
    nlohmann::json m = good;
    m["spec"]["rope"]["head_dim"] = 7;
    expect_error(m, "spec:");
  }
  {
    nlohmann::json m = good;
    for (auto& t : m["tensors"])
      if (t["name"] == "cos.f32") t["shape"] = {371, 63};
    expect_error(m, "tensor 'cos.f32' is f32 [371, 63]");
  }
  {
    nlohmann::json m = good;
    nlohmann::json kept = nlohmann::json::array();
    for (auto& t : m["tensors"])
      if (t["name"] != "k_rot.f16") kept.push_back(t);
    m["tensors"] = kept;
    expect_error(m, "missing tensor 'k_rot.f16'");
  }
  {
    nlohmann::json m = good;
    m.erase("dtypes");
    expect_error(m, "missing key 'dtypes'");
  }
}

// reliability-2 defect 16: the hashes do not cover manifest.json, so a valid but different spec
// (base 500000 -> 10000) must be caught by recomputing a sample of the stored values from it.
TEST(checker_golden_set, RejectsAManifestWhoseSpecDoesNotMatchItsData) {
  const nlohmann::json good = read_manifest(llama_set());
  const fs::path dir = copy_set("respecced");
  auto expect_error = [&](nlohmann::json m, const std::string& needle) {
    write_manifest(dir, m);
    const std::string e = error_of([&] { load_golden_set(dir); });
    EXPECT_NE(e.find(needle), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  {
    nlohmann::json m = good;
    m["spec"]["rope"]["base"] = 10000.0;
    expect_error(m, "the set's data does not match its spec");
  }
  {
    nlohmann::json m = good;
    m["spec"]["rope"]["scaling"]["factor"] = 16.0;  // only the low-frequency pairs change
    expect_error(m, "does not match its spec");
  }
  {
    nlohmann::json m = good;
    m["spec"]["rope"]["layout"] = "interleaved";  // same frequencies, other channel pairs
    expect_error(m, "q_rot.f64");
  }
  {
    nlohmann::json m = good;
    m["attention_factor"] = "1.5";
    expect_error(m, "'attention_factor' '1.5' does not match the spec's");
  }
  {
    nlohmann::json m = good;
    m["spec"]["notes"] = "an edit that does not change the mathematics";
    write_manifest(dir, m);
    EXPECT_NO_THROW((void)load_golden_set(dir));
  }
}

// A file whose tensors disagree with the manifest (dtype, shape) passes the hash check when the
// manifest's hash is updated, and is rejected when the tensor is first read.
TEST(checker_golden_set, RejectsTensorsThatDifferFromTheManifest) {
  const fs::path dir = copy_set("retyped");
  std::vector<Tensor> ts = read_safetensors(dir / "outputs_f32.safetensors");
  for (Tensor& t : ts)
    if (t.name == "sin.f32") {
      std::vector<double> v(static_cast<std::size_t>(t.numel()));
      for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.value(i);
      t = make_f64("sin.f32", t.shape, v);
    }
  const std::vector<std::uint8_t> bytes = serialize_safetensors(ts, {});
  std::ofstream(dir / "outputs_f32.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  nlohmann::json m = read_manifest(dir);
  for (auto& f : m["files"])
    if (f["file"] == "outputs_f32.safetensors") {
      f["sha256"] = sha256_hex(bytes);
      f["bytes"] = bytes.size();
    }
  write_manifest(dir, m);
  const GoldenSet g = load_golden_set(dir);
  const std::string e = error_of([&] { (void)g.tensor("cos.f32"); });
  EXPECT_NE(e.find("tensor 'sin.f32' is f64 [371, 64] but the manifest says f32 [371, 64]"), std::string::npos) << e;
}

// ---- checker --------------------------------------------------------------------------------------

TEST(checker, GoldenItselfIsExact) {
  const GoldenSet g = load_golden_set(llama_set());
  std::vector<Tensor> cand;
  for (const char* n : {"q_rot.bf16", "k_rot.bf16", "cos.bf16", "sin.bf16"}) cand.push_back(g.tensor(n));
  CheckOptions o;
  o.criterion = Criterion::of_class(AccuracyClass::exact);
  o.only = {"q_rot.bf16", "k_rot", "cos.bf16", "sin.bf16"};  // k_rot: every dtype of it but the unmatched f64 copy
  // The f32 and f16 dtypes of k_rot were asked for through its base name and have no candidate.
  CheckReport r = check_candidate(g, cand, o);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);
  EXPECT_EQ(r.not_tested, (std::vector<std::string>{"k_rot.f32", "k_rot.f16"}));
  o.only = {"q_rot.bf16", "k_rot.bf16", "cos", "sin.bf16"};
  r = check_candidate(g, cand, o);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);  // cos.f32, cos.f16
  o.only = {"q_rot.bf16", "k_rot.bf16", "cos.bf16", "sin.bf16"};
  r = check_candidate(g, cand, o);
  EXPECT_TRUE(r.pass);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::pass);
  EXPECT_TRUE(r.not_tested.empty());
  ASSERT_EQ(r.tensors.size(), 4u);
  EXPECT_EQ(r.satisfied_classes().size(), accuracy::kAccuracyClasses.size());
  for (const TensorReport& t : r.tensors) {
    EXPECT_EQ(t.identical, t.elements);
    EXPECT_LE(t.max_ulps, 0.5) << t.golden_name;
    EXPECT_LE(t.max_pair_relative, 1.0) << t.golden_name;
    EXPECT_EQ(t.best_class(), AccuracyClass::exact);
    EXPECT_TRUE(t.worst.empty());  // no element has a nonzero score
  }
  EXPECT_EQ(r.unchecked_golden.size(), 12u);
  EXPECT_NE(r.summary().find("PASS: class exact"), std::string::npos) << r.summary();
}

// a candidate that matches only some golden outputs used to pass. Without
// --only every output of the set is asked for (the f64 truth copies only when matched), so the
// unmatched ones are not tested: verdict not-tested, exit 3, never pass.
TEST(checker, PartialCandidateIsNotTested) {
  const GoldenSet g = load_golden_set(llama_set());
  std::vector<Tensor> cand;
  for (const char* n : {"cos.bf16", "sin.bf16"}) cand.push_back(g.tensor(n));
  const CheckReport r = check_candidate(g, cand, {});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);
  EXPECT_EQ(ropecheck::exit_code(r.verdict), 3);
  for (const TensorReport& t : r.tensors) EXPECT_EQ(t.verdict, ropecheck::Verdict::pass) << t.golden_name;
  // 12 outputs in f32 / f16 / bf16, 2 matched; the 4 f64 truth copies are not asked for.
  EXPECT_EQ(r.not_tested.size(), 10u);
  EXPECT_EQ(r.unchecked_golden.size(), 14u);
  EXPECT_NE(r.reason.find("no candidate tensor for 10 asked-for golden outputs"), std::string::npos) << r.reason;
  EXPECT_NE(r.summary().find("NOT TESTED: nothing failed"), std::string::npos) << r.summary();
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["verdict"], "not-tested");
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["not_tested"].size(), 10u);
  EXPECT_EQ(j["tensors"][0]["verdict"]["state"], "pass");
  // A failure anywhere still wins over not-tested.
  Tensor bad = g.tensor("cos.bf16");
  bad.data[0] ^= 0x40;
  EXPECT_EQ(check_candidate(g, {bad}, {}).verdict, ropecheck::Verdict::fail);
  // --only naming what the candidate has: pass; naming something unknown: unusable input.
  EXPECT_EQ(check_candidate(g, cand, asking({"cos.bf16", "sin.bf16"})).verdict, ropecheck::Verdict::pass);
  const std::string e = error_of([&] { check_candidate(g, cand, asking({"cos.bf16", "qrot"})); });
  EXPECT_NE(e.find("--only qrot: the golden set has no output or base 'qrot'"), std::string::npos) << e;
  // Outputs outside --only are not checked, even when the candidate has them.
  const CheckReport narrowed = check_candidate(g, cand, asking({"sin"}));
  ASSERT_EQ(narrowed.tensors.size(), 1u);
  EXPECT_EQ(narrowed.tensors[0].golden_name, "sin.bf16");
  EXPECT_EQ(narrowed.not_tested, (std::vector<std::string>{"sin.f32", "sin.f16"}));
}

// Llama-3.1-8B at position 2^24 - 1. Under fp32-angle 18 of the 64 pairs have a bound
// that reaches the pair's magnitude (an all-zero output passes there; 14 of them are at the cap 2,
// where any output of that magnitude passes). A candidate that is zero on exactly those pairs and
// correct elsewhere must not pass: it is not tested there, with the advice to use a stricter class;
// f32-reduced still discriminates and catches the zeros.
TEST(checker, SaturatedBoundsAreNotTested) {
  const GoldenSet g = load_golden_set(make_set("llama_2p24", "llama-3.1-8b", "16777215", FileFormat::safetensors, 1,
                                               {DType::f32}));
  const std::int64_t p = 16777215, P = 64, D = 128;
  const RopeFrequencies<double> f = rope_frequencies<double>(g.spec().rope, g.seq_len());
  const accuracy::ClassBound b = accuracy::class_bound(AccuracyClass::fp32_angle, DType::f32, accuracy::Quantity::rotated);
  std::vector<bool> sat(P);
  int saturated = 0, capped = 0;
  for (int j = 0; j < P; ++j) {
    const accuracy::PairAngle a = accuracy::pair_angle(static_cast<double>(p), f.inv_freq[static_cast<std::size_t>(j)]);
    sat[static_cast<std::size_t>(j)] = b.saturated(a);
    saturated += b.saturated(a);
    capped += (b.k_log * a.abs_log_freq + b.k_lin) * a.abs_theta >= accuracy::model::kAngleCap;
  }
  EXPECT_EQ(saturated, 18);
  EXPECT_EQ(capped, 14);
  // q_rot.f32 with the saturated pairs zeroed, the others the golden values.
  Tensor q = g.tensor("q_rot.f32");
  const float zero = 0.0f;
  for (int j = 0; j < P; ++j) {
    if (!sat[static_cast<std::size_t>(j)]) continue;
    const auto [ia, ib] = pair_channels(g.spec().rope, j);
    std::memcpy(q.data.data() + 4 * ia, &zero, 4);
    std::memcpy(q.data.data() + 4 * ib, &zero, 4);
  }
  ASSERT_EQ(q.numel(), D);
  CheckReport r = check_candidate(g, {q}, asking({"q_rot.f32"}));
  const TensorReport& t = r.tensors.at(0);
  EXPECT_EQ(t.violations, 0) << r.summary();
  EXPECT_EQ(t.saturated, 2 * 18);
  EXPECT_EQ(t.first_saturated_position, p);
  EXPECT_EQ(t.verdict, ropecheck::Verdict::not_tested);
  EXPECT_FALSE(t.pass);
  EXPECT_NE(t.reason.find("use a stricter class (f32-reduced, fp64-angle) here"), std::string::npos) << t.reason;
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(t.bins.back().saturated, 2 * 18);
  EXPECT_EQ(r.to_json()["tensors"][0]["position_bins"].back()["saturated"], 2 * 18);
  // An all-zero candidate fails (the pairs that still discriminate catch it) ...
  Tensor zeros = q;
  std::fill(zeros.data.begin(), zeros.data.end(), std::uint8_t{0});
  EXPECT_EQ(check_candidate(g, {zeros}, asking({"q_rot.f32"})).verdict, ropecheck::Verdict::fail);
  // ... and a stricter class catches the zeros in the saturated pairs too.
  CheckOptions strict = asking({"q_rot.f32"});
  strict.criterion = Criterion::of_class(AccuracyClass::f32_reduced);
  r = check_candidate(g, {q}, strict);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::fail);
  EXPECT_EQ(r.tensors.at(0).violations, 2 * 18);
  EXPECT_EQ(r.tensors.at(0).saturated, 0);
  // The golden values themselves: still not a pass under fp32-angle (not discriminated), a pass under f32-reduced.
  EXPECT_EQ(check_candidate(g, {g.tensor("q_rot.f32")}, asking({"q_rot.f32"})).verdict, ropecheck::Verdict::not_tested);
  EXPECT_EQ(check_candidate(g, {g.tensor("q_rot.f32")}, asking({"q_rot.f32"}, strict)).verdict, ropecheck::Verdict::pass);
}

// The class table on the same set: a class with saturated elements and no violation is "not tested"
// (text, JSON, best_class, satisfied_classes), named apart on the verdict line, and the saturated
// worst elements are marked, whatever the criterion and the run's verdict.
TEST(checker, SaturatedClassesAreNeverSatisfied) {
  const GoldenSet g = load_golden_set(make_set("llama_2p24", "llama-3.1-8b", "16777215", FileFormat::safetensors, 1,
                                               {DType::f32}));
  CheckOptions strict = asking({"q_rot.f32"});
  strict.criterion = Criterion::of_class(AccuracyClass::f32_reduced);
  const CheckReport r = check_candidate(g, {g.tensor("q_rot.f32")}, strict);  // the golden values: pass f32-reduced
  ASSERT_EQ(r.verdict, ropecheck::Verdict::pass);
  const TensorReport& t = r.tensors.at(0);
  for (const ClassResult& c : t.classes) {
    const bool loose = c.accuracy_class == AccuracyClass::fp32_angle || c.accuracy_class == AccuracyClass::f16_table ||
                       c.accuracy_class == AccuracyClass::bf16_table;
    EXPECT_EQ(c.state, loose ? ClassState::not_tested : ClassState::satisfied) << accuracy::to_string(c.accuracy_class);
    EXPECT_EQ(c.satisfied, !loose);
    EXPECT_EQ(c.violations, 0);
    if (loose) {
      EXPECT_EQ(c.saturated, 2 * 18);
      EXPECT_EQ(c.first_saturated_position, 16777215);
    }
  }
  EXPECT_EQ(t.best_class(), AccuracyClass::exact);
  EXPECT_EQ(r.satisfied_classes(), (std::vector<AccuracyClass>{AccuracyClass::exact, AccuracyClass::fp64_angle,
                                                                AccuracyClass::f32_reduced}));
  EXPECT_EQ(r.not_tested_classes(), (std::vector<AccuracyClass>{AccuracyClass::fp32_angle, AccuracyClass::f16_table,
                                                                 AccuracyClass::bf16_table}));
  const std::string text = r.summary();
  EXPECT_NE(text.find("classes satisfied: exact, fp64-angle, f32-reduced; classes not tested (saturated): fp32-angle, "
                      "f16-table, bf16-table\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  fp32-angle   n/t             0               -  "), std::string::npos) << text;
  const nlohmann::json j = r.to_json();
  for (const nlohmann::json& c : j["tensors"][0]["classes"])
    if (c["class"] == "fp32-angle") {
      EXPECT_EQ(c["state"], "not-tested");
      EXPECT_EQ(c["satisfied"], false);
      EXPECT_EQ(c["first_saturated_position"], 16777215);
    }
  EXPECT_EQ(j["not_tested_classes"], (nlohmann::json{"fp32-angle", "f16-table", "bf16-table"}));
  // Under fp32-angle, with the saturated pairs zeroed, the worst elements are saturated ones, marked as such.
  const RopeFrequencies<double> f = rope_frequencies<double>(g.spec().rope, g.seq_len());
  const accuracy::ClassBound b = accuracy::class_bound(AccuracyClass::fp32_angle, DType::f32, accuracy::Quantity::rotated);
  Tensor q = g.tensor("q_rot.f32");
  const float zero = 0.0f;
  for (int pair = 0; pair < 64; ++pair)
    if (b.saturated(accuracy::pair_angle(16777215.0, f.inv_freq[static_cast<std::size_t>(pair)]))) {
      const auto [ia, ib] = pair_channels(g.spec().rope, pair);
      std::memcpy(q.data.data() + 4 * ia, &zero, 4);
      std::memcpy(q.data.data() + 4 * ib, &zero, 4);
    }
  const CheckReport loose = check_candidate(g, {q}, asking({"q_rot.f32"}));
  ASSERT_EQ(loose.verdict, ropecheck::Verdict::not_tested);
  ASSERT_FALSE(loose.tensors.at(0).worst.empty());
  EXPECT_TRUE(loose.tensors.at(0).worst.front().saturated);
  EXPECT_TRUE(loose.to_json()["tensors"][0]["worst"][0]["saturated"].get<bool>());
  EXPECT_NE(loose.summary().find("SATURATED: not tested"), std::string::npos);
  EXPECT_TRUE(loose.satisfied_classes().size() <= 3u);  // never fp32-angle or looser
  for (AccuracyClass c : loose.satisfied_classes()) EXPECT_NE(c, AccuracyClass::fp32_angle);
}

TEST(checker, Fp32RecipeIsFp32AngleButNotExact) {
  const GoldenSet g = load_golden_set(llama_set());
  // Base names, resolved with the f32 dtype.
  const std::vector<Tensor> cand = recipe_candidate(g, {recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::f32, DType::f32}, "");
  const CheckReport r = check_candidate(g, cand, asking(kF32));  // default: class fp32-angle
  EXPECT_EQ(r.criterion.accuracy_class, AccuracyClass::fp32_angle);
  EXPECT_TRUE(r.pass) << r.summary();
  const std::vector<AccuracyClass> sat = r.satisfied_classes();
  EXPECT_FALSE(contains(sat, AccuracyClass::exact));
  EXPECT_FALSE(contains(sat, AccuracyClass::fp64_angle));
  EXPECT_FALSE(contains(sat, AccuracyClass::f32_reduced));  // its f32 angle, not a binary64 one
  EXPECT_TRUE(contains(sat, AccuracyClass::fp32_angle));
  EXPECT_TRUE(contains(sat, AccuracyClass::bf16_table));
  const TensorReport& q = find_report(r, "q_rot.f32");
  EXPECT_EQ(q.candidate_name, "q_rot");
  EXPECT_LT(q.identical, q.elements);
  EXPECT_GT(q.max_pair_relative, 1.0);  // beyond one rounding at long positions
  EXPECT_EQ(q.nan_count, 0);
  // The cos table near its zeros shows the ulp trap: huge ulps, small pair-relative error.
  const TensorReport& c = find_report(r, "cos.f32");
  EXPECT_GT(c.max_ulps, 100.0);
  EXPECT_LT(c.max_pair_relative, c.max_ulps);
  // The error grows with position: the last bin's max pair-relative error beats the first ones.
  ASSERT_GE(q.bins.size(), 10u);
  EXPECT_GT(q.bins.back().max_pair_relative, 10 * q.bins[2].max_pair_relative);
  EXPECT_EQ(q.bins.back().lo, 65536);
  std::printf("%s", r.summary().c_str());
}

TEST(checker, Bf16InverseFrequenciesFailFp32AngleAtTheRightPositions) {
  const GoldenSet g = load_golden_set(llama_set());
  const recipes::Recipe bad{recipes::InvFreqMode::bf16, recipes::TrigMode::libm, DType::f32, DType::f32};
  const std::vector<Tensor> cand = recipe_candidate(g, bad, ".f32");
  const CheckReport r = check_candidate(g, cand, {});
  EXPECT_FALSE(r.pass);
  const TensorReport& c = find_report(r, "cos.f32");
  EXPECT_FALSE(c.pass);
  ASSERT_TRUE(c.first_violating_position);
  EXPECT_GE(*c.first_violating_position, 1);
  EXPECT_LE(*c.first_violating_position, 4096);

  // Independently: the first position whose cos error exceeds the fp32-angle bound.
  const recipes::RecipeKernel k(g.spec().rope, g.seq_len(), bad);
  const RopeFrequencies<double> f = rope_frequencies<double>(g.spec().rope, g.seq_len());
  const Tensor& truth = g.tensor("cos.f64");
  const accuracy::ClassBound b = accuracy::class_bound(AccuracyClass::fp32_angle, DType::f32, accuracy::Quantity::table);
  std::int64_t first = -1, count = 0;
  const std::int64_t P = 64;
  for (std::int64_t t = 0; t < g.tokens(); ++t)
    for (int j = 0; j < P; ++j) {
      const std::int64_t p = g.positions()[static_cast<std::size_t>(t)].t;
      const double e = std::fabs(static_cast<double>(k.cos_sin_table(p, j).first) - truth.value(t * P + j));
      if (e > b.allowed(accuracy::pair_angle(static_cast<double>(p), f.inv_freq[static_cast<std::size_t>(j)]), 1.0)) {
        if (first < 0) first = p;
        ++count;
      }
    }
  EXPECT_EQ(*c.first_violating_position, first);
  EXPECT_EQ(c.violations, count);
  const ClassResult& cr = class_result(c, AccuracyClass::fp32_angle);
  EXPECT_EQ(cr.violations, count);
  EXPECT_EQ(cr.first_violating_position, first);
  // No violation in the bins below the first violating position; violations in the long bins.
  for (const PositionBin& bin : c.bins) {
    if (bin.hi <= first) {
      EXPECT_EQ(bin.violations, 0) << bin.lo;
    }
    if (bin.lo >= 4096) {
      EXPECT_GT(bin.violations, 0) << bin.lo;
    }
  }
  // The worst elements are listed highest score first, with coordinates.
  ASSERT_EQ(c.worst.size(), 10u);
  EXPECT_GT(c.worst.front().score, 1.0);
  EXPECT_GE(c.worst.front().score, c.worst.back().score);
  EXPECT_GE(c.worst.front().position.t, first);
  EXPECT_EQ(c.worst.front().index, c.worst.front().token * P + c.worst.front().pair);
  // Rotated outputs fail too, and the bf16-table class does not rescue them at long positions.
  EXPECT_FALSE(find_report(r, "q_rot.f32").pass);
  EXPECT_FALSE(class_result(find_report(r, "q_rot.f32"), AccuracyClass::bf16_table).satisfied);
  EXPECT_NE(r.summary().find("FAIL: class fp32-angle violated"), std::string::npos);
}

TEST(checker, HuggingFaceBf16RecipeIsBf16Table) {
  const GoldenSet g = load_golden_set(llama_set());
  const std::vector<Tensor> cand =
      recipe_candidate(g, {recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::bf16, DType::bf16}, "");
  CheckOptions o;
  o.criterion = Criterion::of_class(AccuracyClass::bf16_table);
  o.only = kBf16;
  const CheckReport r = check_candidate(g, cand, o);
  EXPECT_TRUE(r.pass) << r.summary();
  EXPECT_TRUE(contains(r.satisfied_classes(), AccuracyClass::bf16_table));
  EXPECT_FALSE(contains(r.satisfied_classes(), AccuracyClass::fp32_angle));
  // ... and fails the default class.
  EXPECT_EQ(check_candidate(g, cand, asking(kBf16)).verdict, ropecheck::Verdict::fail);
}

TEST(checker, NanFailsEveryClass) {
  const GoldenSet g = load_golden_set(llama_set());
  Tensor q = g.tensor("q_rot.f32");
  const float nan = std::nanf(""), inf = INFINITY;
  std::memcpy(q.data.data() + 4 * 1234, &nan, 4);
  std::memcpy(q.data.data() + 4 * 77, &inf, 4);
  CheckOptions o;
  o.criterion = Criterion::of_class(AccuracyClass::bf16_table);
  const CheckReport r = check_candidate(g, {q}, o);
  EXPECT_FALSE(r.pass);
  const TensorReport& t = r.tensors.at(0);
  EXPECT_EQ(t.nan_count, 1);
  EXPECT_EQ(t.inf_count, 1);
  EXPECT_EQ(t.nonfinite_mismatches, 2);
  EXPECT_EQ(t.violations, 2);
  for (const ClassResult& c : t.classes) {
    EXPECT_FALSE(c.satisfied);
    EXPECT_EQ(c.violations, 2);
  }
  ASSERT_GE(t.worst.size(), 2u);
  EXPECT_TRUE(std::isinf(t.worst[0].score));
  EXPECT_EQ(t.worst[0].index, 77);  // equal scores: lower index first
  EXPECT_EQ(t.worst[1].index, 1234);
  EXPECT_EQ(t.worst[1].token, 1234 / 256);
  EXPECT_EQ(t.worst[1].head, static_cast<int>((1234 / 128) % 2));
  EXPECT_EQ(t.worst[1].channel, 1234 % 128);
  const nlohmann::json j = r.to_json();
  EXPECT_TRUE(j["tensors"][0]["worst"][0]["candidate"].is_null());  // inf -> null
  EXPECT_EQ(j["tensors"][0]["metrics"]["nan"], 1);
  EXPECT_EQ(j["pass"], false);
}

TEST(checker, ShapeAndDtypeMismatchesNameBothSides) {
  const GoldenSet g = load_golden_set(llama_set());
  std::vector<float> v(static_cast<std::size_t>(371 * 2 * 64));
  std::string e = error_of([&] { check_candidate(g, {make_f32("q_rot.f32", {371, 2, 64}, v)}, {}); });
  EXPECT_NE(e.find("q_rot.f32"), std::string::npos) << e;
  EXPECT_NE(e.find("[371, 2, 64]"), std::string::npos) << e;
  EXPECT_NE(e.find("[371, 2, 128]"), std::string::npos) << e;
  Tensor wrong = copy_named(g.tensor("q_rot.f64"), "q_rot.f32");
  e = error_of([&] { check_candidate(g, {wrong}, {}); });
  EXPECT_NE(e.find("is f64 but the golden tensor is f32"), std::string::npos) << e;
}

TEST(checker, NameResolution) {
  const GoldenSet g = load_golden_set(llama_set());
  // --map
  CheckOptions o;
  o.name_map["q_rot.bf16"] = "my_q";
  CheckReport r = check_candidate(g, {copy_named(g.tensor("q_rot.bf16"), "my_q"), g.tensor("q")}, o);
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].golden_name, "q_rot.bf16");
  EXPECT_EQ(r.tensors[0].candidate_name, "my_q");
  EXPECT_EQ(r.ignored_candidate, std::vector<std::string>{"q"});
  // base names resolve with the candidate's dtype (f16 and f64 here)
  r = check_candidate(g, {copy_named(g.tensor("k_rot.f16"), "k_rot"), copy_named(g.tensor("sin.f64"), "sin")}, {});
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(find_report(r, "k_rot.f16").candidate_name, "k_rot");
  EXPECT_EQ(find_report(r, "sin.f64").candidate_name, "sin");
  EXPECT_TRUE(find_report(r, "k_rot.f16").pass);
  EXPECT_TRUE(find_report(r, "sin.f64").pass);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);  // the other outputs have no candidate
  EXPECT_FALSE(r.pass);
  // errors
  std::string e = error_of([&] { check_candidate(g, {g.tensor("q")}, {}); });
  EXPECT_NE(e.find("no candidate tensor matches a golden output"), std::string::npos) << e;
  EXPECT_NE(e.find("q_rot.bf16"), std::string::npos) << e;
  CheckOptions bad;
  bad.name_map["q_rot.bf16"] = "absent";
  e = error_of([&] { check_candidate(g, {g.tensor("q_rot.bf16")}, bad); });
  EXPECT_NE(e.find("the candidate has no tensor 'absent'"), std::string::npos) << e;
  bad.name_map = {{"q_rot.f8", "x"}};
  e = error_of([&] { check_candidate(g, {g.tensor("q_rot.bf16")}, bad); });
  EXPECT_NE(e.find("the golden set has no output 'q_rot.f8'"), std::string::npos) << e;
  CheckOptions clash;
  clash.name_map["q_rot.bf16"] = "my_q";
  e = error_of([&] { check_candidate(g, {copy_named(g.tensor("q_rot.bf16"), "my_q"), g.tensor("q_rot.bf16")}, clash); });
  EXPECT_NE(e.find("two candidate tensors resolve to golden output 'q_rot.bf16'"), std::string::npos) << e;
}

TEST(checker, BaseNameForAMissingDtype) {
  const GoldenSet g = load_golden_set(make_set("f32only", "llama-2-7b", "0:8", FileFormat::safetensors, 1, {DType::f32}));
  std::vector<std::uint16_t> bits(8 * 64, 0x3C00);
  std::string e = error_of([&] { check_candidate(g, {make_bits16("cos", TensorDType::f16, {8, 64}, bits)}, {}); });
  EXPECT_NE(e.find("resolves to 'cos.f16', which the golden set does not have (it has cos.f64, cos.f32)"), std::string::npos) << e;
  std::vector<std::int32_t> v(8 * 64);
  e = error_of([&] { check_candidate(g, {make_i32("cos", {8, 64}, v)}, {}); });
  EXPECT_NE(e.find("resolves to 'cos.i32'"), std::string::npos) << e;
  // a candidate of the right name but an integer dtype
  e = error_of([&] { check_candidate(g, {make_i32("cos.f32", {8, 64}, v)}, {}); });
  EXPECT_NE(e.find("is i32 but the golden tensor is f32"), std::string::npos) << e;
}

TEST(checker, UlpAndToleranceCriteria) {
  const GoldenSet g = load_golden_set(llama_set());
  const std::vector<Tensor> gold = {g.tensor("cos.f32")};
  CheckOptions o;
  o.only = {"cos.f32"};
  o.criterion = Criterion::of_max_ulp(0.5);
  EXPECT_TRUE(check_candidate(g, gold, o).pass);
  o.criterion = Criterion::of_tolerance(0, 0);
  EXPECT_FALSE(check_candidate(g, gold, o).pass);  // golden f32 differs from the f64 truth
  o.criterion = Criterion::of_tolerance(1e-7, 0);
  EXPECT_TRUE(check_candidate(g, gold, o).pass);
  const std::vector<Tensor> fp32 =
      recipe_candidate(g, {recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::f32, DType::f32}, ".f32");
  o.criterion = Criterion::of_max_ulp(4);
  const CheckReport r = check_candidate(g, {fp32[0]}, o);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::fail);  // ulps of cos near its zeros are huge for an honest f32 kernel
  EXPECT_NE(r.summary().find("max-ulp 4"), std::string::npos);
  EXPECT_EQ(r.to_json()["criterion"]["kind"], "max-ulp");
  CheckOptions negative;
  negative.criterion = Criterion::of_max_ulp(-1);
  EXPECT_THROW(check_candidate(g, gold, negative), InputError);
}

TEST(checker, JsonReportShape) {
  const GoldenSet g = load_golden_set(llama_set());
  const std::vector<Tensor> cand =
      recipe_candidate(g, {recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::bf16, DType::bf16}, ".bf16");
  const nlohmann::json j = check_candidate(g, cand, {}).to_json();
  EXPECT_EQ(j["format"], "ropecheck-check-report");
  EXPECT_EQ(j["format_version"], 2);
  EXPECT_EQ(j["criterion"]["class"], "fp32-angle");
  EXPECT_EQ(j["not_tested_classes"], nlohmann::json::array());
  EXPECT_TRUE(j["declined"].is_null());
  EXPECT_EQ(j["tensors"].size(), 4u);
  for (const auto& t : j["tensors"]) {
    for (const char* k : {"golden", "candidate", "dtype", "shape", "elements", "identical", "metrics", "classes",
                          "best_class", "verdict", "worst", "position_bins"})
      EXPECT_TRUE(t.contains(k)) << k;
    for (const char* k : {"pass", "state", "reason", "violations", "saturated", "first_saturated_position"})
      EXPECT_TRUE(t["verdict"].contains(k)) << k;
    EXPECT_EQ(t["verdict"]["state"], t["verdict"]["pass"].get<bool>() ? "pass" : "fail") << t["golden"];
    EXPECT_EQ(t["verdict"]["saturated"], 0);
    EXPECT_EQ(t["classes"].size(), accuracy::kAccuracyClasses.size());
    EXPECT_EQ(t["classes"].back()["class"], "bf16-table");
    EXPECT_TRUE(t["best_class"].is_string());
    EXPECT_EQ(t["position_bins"][0]["lo"], 0);
    EXPECT_EQ(t["worst"][0]["position"].size(), 3u);
    EXPECT_EQ(t["worst"][0]["saturated"], false);
    for (const auto& c : t["classes"]) {  // three-valued, with the saturation behind "not-tested"
      for (const char* k : {"satisfied", "state", "violations", "first_violating_position", "saturated",
                            "first_saturated_position", "worst_margin"})
        EXPECT_TRUE(c.contains(k)) << k;
      EXPECT_EQ(c["state"], c["satisfied"].get<bool>() ? "satisfied" : "violated") << c;
      EXPECT_EQ(c["saturated"], 0);
    }
  }
  EXPECT_EQ(j["satisfied_classes"].back(), "bf16-table");
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_TRUE(j["reason"].is_string());
}

TEST(checker, SinusoidalSet) {
  const fs::path dir = make_set("fairseq", "fairseq-transformer", "0:64,1000,65535,1000000");
  const GoldenSet g = load_golden_set(dir);
  EXPECT_FALSE(g.is_rope());
  const SinusoidalSpec& s = g.spec().sinusoidal;
  const int n = sinusoidal_frequency_count(s);
  const float step = static_cast<float>(-std::log(s.base) / std::max(s.d_model / 2 - 1, 1));
  std::vector<float> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = std::exp(static_cast<float>(i) * step);
  std::vector<float> pe;
  for (const Position& p : g.positions())
    for (int c = 0; c < s.d_model; ++c) {
      const SinusoidalColumn col = sinusoidal_column(s, c);
      const float a = static_cast<float>(p.t + s.position_offset) * w[static_cast<std::size_t>(col.frequency)];
      pe.push_back(col.kind == SinusoidalKind::zero ? 0.0f : (col.kind == SinusoidalKind::sine ? std::sin(a) : std::cos(a)));
    }
  const CheckReport r = check_candidate(g, {make_f32("pe", {g.tokens(), s.d_model}, pe)}, asking({"pe.f32"}));
  EXPECT_TRUE(r.pass) << r.summary();
  EXPECT_FALSE(contains(r.satisfied_classes(), AccuracyClass::exact));
  EXPECT_EQ(r.tensors.at(0).golden_name, "pe.f32");
  EXPECT_EQ(r.tensors.at(0).bins.back().lo, 524288);
}

TEST(checker, NpzSetAndMultimodalPositions) {
  const fs::path dir = make_set("qwen2vl_npz", "qwen2-vl-7b", "0:16,5/2/3,20/9/40,grid:30:4:4", FileFormat::npz, 1);
  const GoldenSet g = load_golden_set(dir);
  EXPECT_EQ(g.tensor("positions").shape.size(), 2u);
  EXPECT_EQ(g.positions()[16], (Position{5, 2, 3}));
  const std::vector<Tensor> cand =
      recipe_candidate(g, {recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::f32, DType::bf16}, "");
  CheckOptions o;
  o.worst_count = 3;
  o.only = kBf16;
  const CheckReport r = check_candidate(g, cand, o);
  EXPECT_TRUE(r.pass) << r.summary();
  const TensorReport& c = find_report(r, "cos.bf16");
  ASSERT_EQ(c.worst.size(), 3u);
  for (const ElementReport& e : c.worst) {
    // the stream that drives the pair is the one the spec assigns to it
    EXPECT_EQ(e.stream, mrope_stream(g.spec().rope, e.pair));
  }
  // a recipe that ignores the h / w streams (uses t everywhere) is caught
  std::vector<Tensor> wrong;
  {
    const recipes::RecipeKernel k(g.spec().rope, g.seq_len(), {});
    const std::int64_t T = g.tokens(), P = 64;
    std::vector<float> cv(static_cast<std::size_t>(T * P));
    for (std::int64_t t = 0; t < T; ++t)
      for (int j = 0; j < P; ++j) cv[static_cast<std::size_t>(t * P + j)] = k.cos_sin_table(g.positions()[static_cast<std::size_t>(t)].t, j).first;
    wrong.push_back(make_f32("cos", {T, P}, cv));
  }
  const CheckReport rw = check_candidate(g, wrong, {});
  EXPECT_EQ(rw.verdict, ropecheck::Verdict::fail);
  EXPECT_EQ(rw.tensors.at(0).first_violating_position, 2);  // 5/2/3: the h stream at 2 differs from t = 5
}

}  // namespace
}  // namespace ropecheck::golden
