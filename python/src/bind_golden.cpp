// Golden sets from Python: written by the function `ropecheck golden` calls, loaded with every hash
// verified, their tensors' bytes viewed without a copy, and saved byte for byte.
#include "bindings.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/core/positions.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::python {
using namespace nb::literals;
namespace {

using Bytes = nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Writes a golden set with golden::write_golden_set, the function `ropecheck golden` calls; returns
// the manifest as JSON text.
std::string write_golden(const Spec& spec, const std::string& positions, const std::string& out,
                         const std::vector<std::string>& dtypes, int heads, std::uint64_t seed, const std::string& format,
                         std::optional<std::int64_t> seq_len, int threads, bool overwrite, std::uint64_t max_memory,
                         const std::string& scores, const std::string& attention, std::optional<double> softcap,
                         bool sinks, const std::string& stores, const std::string& kv_cache) {
  if (heads < 1 || heads > 4096) throw SpecError("heads: must be in [1, 4096], got " + std::to_string(heads));
  if (format != "safetensors" && format != "npy")
    throw SpecError("format: must be safetensors or npy, got '" + format + "'");
  if (seq_len && (*seq_len < 1 || *seq_len > kMaxPosition))
    throw SpecError("seq_len: must be in [1, 2^53], got " + std::to_string(*seq_len));
  if (threads < 0 || threads > 1024) throw SpecError("threads: must be in [0, 1024], got " + std::to_string(threads));
  golden::GoldenOptions g;
  g.spec = spec.spec;
  if (positions.empty() == kv_cache.empty())
    throw SpecError(positions.empty() ? "golden: give positions or kv_cache"
                                      : "kv_cache: not with positions (the batch gives the positions)");
  if (!kv_cache.empty()) {  // as `golden --kv-cache FILE`, the description given as JSON text
    g.kv_cache = kv::parse_cache_spec(parse_json_text(kv_cache, "kv_cache"), seed);
    g.positions.argument = "kv-cache";
    for (std::int64_t p : kv::positions(*g.kv_cache)) g.positions.positions.push_back(Position::uniform(p));
  } else {
    g.positions = parse_positions(positions);
  }
  g.stores = stores;
  g.out = out;
  g.dtypes = dtypes_of(dtypes);
  g.heads = heads;
  g.seed = seed;
  g.format = format == "npy" ? io::FileFormat::npz : io::FileFormat::safetensors;
  g.seq_len = seq_len;
  g.threads = threads;
  g.overwrite = overwrite;
  g.max_memory = max_memory;
  g.scores = scores;
  g.attention = attention;
  g.softcap = softcap;
  g.sinks = sinks;
  nb::gil_scoped_release release;
  return golden::write_golden_set(g).manifest.dump();
}

// Copies a loaded set's files (manifest first) to `out`, through the same atomic folder output the
// writer uses: the copy is the set's bytes, so byte-identical to what `ropecheck golden` wrote.
void save_golden(const Golden& g, const std::string& out, bool overwrite) {
  nb::gil_scoped_release release;
  io::OutputFolder::Options o;
  o.overwrite = overwrite;
  o.create_parents = true;
  o.option = "save";
  o.command = "save";
  io::OutputFolder folder(out, o);
  std::vector<std::string> names = {"manifest.json"};
  for (const golden::ManifestFile& f : g.set.files()) names.push_back(f.file);
  for (const std::string& name : names) {
    const std::filesystem::path p = g.set.dir() / name;
    std::ifstream in(p, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in.good() && !in.eof()) throw InputError("save: cannot read " + p.string());
    folder.write(name, bytes.str());
  }
  folder.commit();
}

}  // namespace

void bind_golden(nb::module_& m) {
  m.def("write_golden", &write_golden, "spec"_a, "positions"_a, "out"_a, "dtypes"_a, "heads"_a = 1, "seed"_a = 0,
        "format"_a = "safetensors", "seq_len"_a = nb::none(), "threads"_a = 0, "overwrite"_a = false,
        "max_memory"_a = 0, "scores"_a = "", "attention"_a = "", "softcap"_a = nb::none(), "sinks"_a = false,
        "stores"_a = "", "kv_cache"_a = "");

  nb::class_<Golden>(m, "GoldenSet")
      .def_prop_ro("dir", [](const Golden& g) { return g.set.dir().string(); })
      .def_prop_ro("manifest", [](const Golden& g) { return g.set.manifest().dump(); })
      .def_prop_ro("spec", [](const Golden& g) { return Spec{g.set.spec()}; })
      .def_prop_ro("dtypes", [](const Golden& g) { return g.set.dtypes(); })
      .def_prop_ro("tokens", [](const Golden& g) { return g.set.tokens(); })
      .def_prop_ro("heads", [](const Golden& g) { return g.set.heads(); })
      .def_prop_ro("attention_factor", [](const Golden& g) { return g.set.attention_factor(); })
      .def("tensors",
           [](const Golden& g) {
             std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, std::string>> out;
             for (const golden::ManifestTensor& t : g.set.tensors())
               out.emplace_back(t.name, std::string(io::to_string(t.dtype)), t.shape, t.role);
             return out;
           })
      // The tensor's bytes, without a copy: a read-only view (of the mapped file, for safetensors) that
      // keeps the set alive.
      .def("tensor_bytes",
           [](nb::handle self, const std::string& name) {
             const Golden& g = nb::cast<const Golden&>(self);
             std::span<const std::uint8_t> b;
             {
               nb::gil_scoped_release release;  // the first use of a file hashes it
               b = g.set.tensor_bytes(name);
             }
             return Bytes(b.data(), {b.size()}, self);
           },
           "name"_a);
  m.def("load_golden", [](const std::string& dir) {
    nb::gil_scoped_release release;
    return Golden{golden::load_golden_set(dir)};
  }, "dir"_a);

  m.def("save_golden", &save_golden, "golden"_a, "out"_a, "overwrite"_a = false);
}

}  // namespace ropecheck::python
