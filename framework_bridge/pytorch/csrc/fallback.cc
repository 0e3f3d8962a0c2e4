// torch_hal: what runs an aten op the plugin cannot (no table row, a
// declined call, HAL_FORCE_FALLBACK_OPS): first PyTorch's decomposition of
// the op (torch._decomp, through a Python callable torch_hal registers),
// which keeps the work on the device; then the counted boxed CPU fallback.
// Also explain()'s per-op records and the Python bindings of this area.
#include <ATen/native/CPUFallback.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/library.h>

#include <unistd.h>  // environ

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <set>
#include <unordered_map>

#include "backend.hpp"
#include "hal/runtime/op_stats.hpp"
#include "mapping.hpp"

namespace py = pybind11;

namespace torch_hal {

const std::vector<std::string>& unregistered_mappings();  // mapped_kernel.cc

namespace {

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

std::string short_name(const std::string& op) { return op.rfind("aten::", 0) == 0 ? op.substr(6) : op; }

// ---- explain() records ----

struct Record {
  std::string op, how;
  int depth;
};
std::atomic<bool> g_explaining{false};
std::mutex g_records_mu;
std::vector<Record>& records() {
  static auto* r = new std::vector<Record>();
  return *r;
}
thread_local int tls_depth = 0;  // decompositions in progress on this thread

size_t record(const std::string& op, const std::string& how) {
  std::lock_guard<std::mutex> lock(g_records_mu);
  records().push_back({short_name(op), how, tls_depth});
  return records().size() - 1;
}

// ---- decompositions ----

std::mutex g_decomp_mu;
std::map<std::string, uint64_t>& decomposition_counts() {
  static auto* c = new std::map<std::string, uint64_t>();
  return *c;
}
PyObject* g_decomposer = nullptr;  // owned reference; never released (process lifetime)
// Ops PyTorch has no decomposition for: asked once, then straight to the CPU.
std::mutex g_none_mu;
std::set<std::string>& without_decomposition() {
  static auto* s = new std::set<std::string>();
  return *s;
}
thread_local std::set<std::string>* tls_decomposing = nullptr;

// Ops whose decomposition would change meaning: views (a decomposition
// need not alias its input). Random ops decompose onto the device's own
// generator (the Python side refuses a generator of another device).
bool decomposable(const c10::OperatorHandle& op) {
  for (const auto& r : op.schema().returns())
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) return false;
  return true;
}

// V as the Python object a decomposition expects for ARG: IValue holds
// dtypes, layouts and memory formats as ints, which torch._refs refuse.
py::object python_argument(const c10::Argument& arg, const c10::IValue& v) {
  if (v.isInt()) {
    c10::TypePtr type = arg.real_type();  // type() is the int IValue carries; real_type() says ScalarType
    if (auto opt = type->castRaw<c10::OptionalType>()) type = opt->getElementType();
    const auto as = [](PyObject* o) { return py::reinterpret_borrow<py::object>(o); };
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return as(reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<at::ScalarType>(v.toInt()))));
      case c10::TypeKind::LayoutType:
        return as(reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<at::Layout>(v.toInt()))));
      case c10::TypeKind::MemoryFormatType:
        return as(torch::utils::getTHPMemoryFormat(static_cast<at::MemoryFormat>(v.toInt())));
      default:
        break;
    }
  }
  return torch::jit::toPyObject(v);
}

// Runs the decomposition of OP on STACK; false (stack untouched) when there
// is none, OP is already decomposing on this thread, or it raised (WHY).
bool try_decompose(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::string* why) {
  if (g_decomposer == nullptr || !decomposable(op)) return false;
  const std::string name = op_name(op);
  {
    std::lock_guard<std::mutex> lock(g_none_mu);
    if (without_decomposition().count(name) != 0) return false;
  }
  std::set<std::string> local;
  if (tls_decomposing == nullptr) tls_decomposing = &local;
  struct Reset {
    std::set<std::string>* local;
    ~Reset() {
      if (tls_decomposing == local) tls_decomposing = nullptr;
    }
  } reset{&local};
  if (!tls_decomposing->insert(op_name(op)).second) return false;  // never into itself
  struct Leave {
    std::string name;
    ~Leave() { tls_decomposing->erase(name); }
  } leave{op_name(op)};

  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  py::gil_scoped_acquire gil;
  py::list args;
  size_t i = 0;
  for (const c10::IValue& v : torch::jit::last(*stack, n)) args.append(python_argument(schema.arguments()[i++], v));
  const size_t at = g_explaining.load() ? record(name, "decomposed") : SIZE_MAX;
  ++tls_depth;
  py::object result;
  try {
    result = py::reinterpret_borrow<py::object>(g_decomposer)(
        schema.operator_name().name.substr(6), schema.overload_name(), args);
  } catch (py::error_already_set& e) {
    --tls_depth;
    *why = std::string("its decomposition raised: ") + e.what();
    if (at != SIZE_MAX) {
      std::lock_guard<std::mutex> lock(g_records_mu);
      records()[at].how = "decomposition failed";
    }
    return false;
  }
  --tls_depth;
  const bool none = result.is(py::reinterpret_borrow<py::object>(Py_NotImplemented));
  // Ellipsis: the decomposition exists but declined these arguments (e.g. uneven pooling
  // windows); unlike NotImplemented (no decomposition at all) it is not remembered.
  const bool declined = result.is(py::reinterpret_borrow<py::object>(Py_Ellipsis));
  if (none || declined) {
    if (none) {
      std::lock_guard<std::mutex> lock(g_none_mu);
      without_decomposition().insert(name);
    } else {
      *why = "its decomposition declined these arguments";
    }
    if (at != SIZE_MAX) {
      std::lock_guard<std::mutex> lock(g_records_mu);
      records().erase(records().begin() + static_cast<std::ptrdiff_t>(at), records().end());
    }
    return false;
  }
  std::vector<c10::IValue> outs;
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    outs.push_back(torch::jit::toIValue(result, returns[0].type()));
  } else {
    py::sequence seq = result.cast<py::sequence>();
    TORCH_CHECK(seq.size() == returns.size(), "torch_hal: the decomposition of ", name, " returned ", seq.size(),
                " values for ", returns.size(), " returns");
    for (size_t i = 0; i < returns.size(); ++i) outs.push_back(torch::jit::toIValue(seq[i], returns[i].type()));
  }
  torch::jit::drop(*stack, n);
  for (auto& o : outs) stack->push_back(std::move(o));
  std::lock_guard<std::mutex> lock(g_decomp_mu);
  ++decomposition_counts()["aten::" + short_name(name)];
  return true;
}

// ---- HAL_FORCE_FALLBACK_OPS ----

struct ForcedOps {
  std::string spec;  // the variable's value (and the scoped patterns) these were built from
  std::vector<std::regex> patterns;
  std::unordered_map<std::string, bool> verdicts;
};

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_without_catalog(op, stack, "no catalog mapping");
}

c10::DeviceIndex hal_device_of(c10::ArrayRef<c10::IValue> args, uint64_t* bytes) {
  c10::DeviceIndex dev = -1;
  auto see = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return;
    if (dev < 0) dev = t.device().index();
    *bytes += t.is_sparse() ? t._indices().nbytes() + t._values().nbytes() : t.nbytes();
  };
  for (const auto& a : args) {
    if (a.isTensor()) see(a.toTensor());
    if (a.isTensorList())
      for (const at::Tensor& t : a.toTensorList()) see(t);
  }
  return dev;
}

// torch_hal.tools.OpFallback's patterns, consulted with the variable's.
std::mutex g_scoped_mu;
std::string g_scoped;  // comma-separated regexes; guarded by g_scoped_mu
std::atomic<bool> g_has_scoped{false};

// getenv("HAL_FORCE_FALLBACK_OPS"), scanning the environment again only
// when its array changed since this thread last looked (an O(1) check):
// a getenv scan on every op was ~3% of a 1-element add. setenv, putenv and
// unsetenv always change the array: adding a variable grows it (the entry
// past the last seen one is no longer NULL, or the array moves), removing
// one shifts the tail down (the last seen entry moves), and a new value is
// a new entry pointer.
const char* force_fallback_env() {
  static constexpr char kName[] = "HAL_FORCE_FALLBACK_OPS=";
  struct Seen {
    char** base = nullptr;
    size_t count = 0;
    const char* last = nullptr;   // base[count - 1]
    char** slot = nullptr;        // where the variable's entry is, or nullptr
    const char* entry = nullptr;  // *slot when seen
  };
  thread_local Seen seen;
  char** env = environ;
  if (env != nullptr && env == seen.base && env[seen.count] == nullptr &&
      (seen.count == 0 || env[seen.count - 1] == seen.last) && (seen.slot == nullptr || *seen.slot == seen.entry))
    return seen.slot == nullptr ? nullptr : seen.entry + sizeof kName - 1;
  seen = Seen{};
  if (env == nullptr) return nullptr;
  seen.base = env;
  for (char** p = env; *p != nullptr; ++p, ++seen.count)
    if (seen.slot == nullptr && std::strncmp(*p, kName, sizeof kName - 1) == 0) seen.slot = p, seen.entry = *p;
  if (seen.count > 0) seen.last = env[seen.count - 1];
  return seen.slot == nullptr ? nullptr : seen.entry + sizeof kName - 1;
}

}  // namespace

bool forced_to_cpu(const std::string& op) {
  const char* var = force_fallback_env();
  const bool scoped = g_has_scoped.load(std::memory_order_relaxed);
  if ((var == nullptr || *var == '\0') && !scoped) return false;
  std::string spec = var == nullptr ? "" : var;
  if (scoped) {
    std::lock_guard<std::mutex> lock(g_scoped_mu);
    spec += "," + g_scoped;
  }
  const char* env = spec.c_str();
  static std::mutex mu;
  static auto* forced = new ForcedOps();
  std::lock_guard<std::mutex> lock(mu);
  if (forced->spec != env) {
    forced->spec = env;
    forced->patterns.clear();
    forced->verdicts.clear();
    std::string item;
    for (const char* p = env;; ++p) {
      if (*p == ',' || *p == '\0') {
        const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
        if (b != std::string::npos) {
          const std::string pattern = short_name(item.substr(b, e - b + 1));
          try {
            forced->patterns.emplace_back(pattern);
          } catch (const std::regex_error& err) {
            TORCH_CHECK(false, "torch_hal: HAL_FORCE_FALLBACK_OPS: \"", pattern, "\" is not a valid regex: ",
                        err.what());
          }
        }
        item.clear();
        if (*p == '\0') break;
      } else {
        item += *p;
      }
    }
  }
  auto [it, fresh] = forced->verdicts.emplace(op, false);
  if (fresh) {
    const std::string name = short_name(op);
    for (const auto& re : forced->patterns) it->second = it->second || std::regex_match(name, re);
  }
  return it->second;
}

bool explaining() noexcept { return g_explaining.load(std::memory_order_relaxed); }

void record_catalog_run(const std::string& op, const std::string& catalog, c10::DeviceIndex dev) {
  record(op, "catalog op " + catalog + " on plugin " + device(dev)->plugin_name() + " (hal:" +
                 std::to_string(dev) + ")");
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason) {
  const std::string name = op_name(op);
  count_fallback(name, reason);
  uint64_t bytes = 0;
  const c10::DeviceIndex dev = hal_device_of(torch::jit::last(*stack, op.schema().arguments().size()), &bytes);
  if (dev >= 0) hal::record_fallback(*device(dev), short_name(name), bytes);
  if (explaining()) record(name, "CPU fallback: " + reason);
  at::native::cpu_fallback(op, stack);
}

void run_without_catalog(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason) {
  if (forced_to_cpu(op_name(op))) return run_on_cpu(op, stack, "forced by HAL_FORCE_FALLBACK_OPS");
  std::string why;
  if (try_decompose(op, stack, &why)) return;
  run_on_cpu(op, stack, why.empty() ? reason : reason + "; " + why);
}

void bind_kernels(py::module_& m) {
  m.def("_set_decomposer", [](py::object fn) {
    TORCH_CHECK(g_decomposer == nullptr, "torch_hal: the decomposer is already set");
    g_decomposer = fn.release().ptr();
  });
  m.def("decomposition_stats", [] {
    std::lock_guard<std::mutex> lock(g_decomp_mu);
    return decomposition_counts();
  });
  m.def("_reset_decomposition_stats", [] {
    {
      std::lock_guard<std::mutex> lock(g_decomp_mu);
      decomposition_counts().clear();
    }
    // Ops found without a decomposition are asked again (a test may install one).
    std::lock_guard<std::mutex> lock(g_none_mu);
    without_decomposition().clear();
  });
  m.def("_explain_begin", [] {
    std::lock_guard<std::mutex> lock(g_records_mu);
    records().clear();
    g_explaining.store(true);
  });
  m.def("_explain_end", [] {
    g_explaining.store(false);
    std::lock_guard<std::mutex> lock(g_records_mu);
    py::list out;
    for (const auto& r : records()) out.append(py::make_tuple(r.op, r.how, r.depth));
    records().clear();
    return out;
  });
  m.def("_unregistered_mappings", [] { return unregistered_mappings(); });
  m.def("_set_forced_fallback_ops", [](const std::string& spec) {  // OpFallback; "" ends it
    for (size_t b = 0, e = 0; b <= spec.size(); b = e + 1) {
      e = std::min(spec.find(',', b), spec.size());
      try {
        std::regex(spec.substr(b, e - b));
      } catch (const std::regex_error& err) {
        throw py::value_error("torch_hal: forced fallback pattern \"" + spec.substr(b, e - b) +
                              "\" is not a valid regex: " + err.what());
      }
    }
    std::lock_guard<std::mutex> lock(g_scoped_mu);
    g_scoped = spec;
    g_has_scoped.store(!spec.empty());
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
}

}  // namespace torch_hal
