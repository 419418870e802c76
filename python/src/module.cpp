// ropecheck._core: the C++ libraries as a Python extension module (nanobind). Thin: every decision
// (spec import, golden values, the checker's verdicts) is the library's; the pure-Python layer in
// python/ropecheck/ turns arrays into tensors and reports into objects. One bind_* per topic
// (bindings.hpp); the order they register in is the module's, and its stub's (_core.pyi).
#include <exception>
#include <new>

#include "bindings.hpp"
#include "ropecheck/core/one_line.hpp"

namespace ropecheck::python {
namespace {

void register_errors(nb::module_& m) {
  static nb::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  static nb::exception<SpecError> spec_error(m, "SpecError", input_error);
  // Registered last, so tried first: every library error becomes one of the two, with the CLI's
  // one-line message; Python exceptions raised inside callbacks pass through unchanged.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const nb::python_error&) {
      throw;
    } catch (const nb::builtin_exception&) {
      throw;
    } catch (const SpecError& e) {
      PyErr_SetString(spec_error.ptr(), one_line(e.what()).c_str());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(input_error.ptr(), "out of memory: the request needs more memory than this process can get");
    } catch (const std::exception& e) {
      PyErr_SetString(input_error.ptr(), one_line(e.what()).c_str());
    }
  });
}

}  // namespace
}  // namespace ropecheck::python

NB_MODULE(_core, m) {
  using namespace ropecheck::python;
  m.doc() = "ropecheck's C++ libraries (spec, golden sets, checker, property suite, drift)";
  register_errors(m);
  bind_spec(m);
  bind_golden(m);
  bind_props(m);
  bind_drift(m);
  bind_check(m);
}
