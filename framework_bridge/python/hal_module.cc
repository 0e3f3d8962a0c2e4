// Python bindings of the HAL runtime (module hal._hal): load plugins, hold
// tensors in device memory, launch catalog ops. Host data crosses as raw
// bytes (any buffer-protocol object) plus a dtype name, so numpy and torch
// (through hal.torch_util) both work, including float16/bfloat16.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/op_stats.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/sdk/op_schema.hpp"

namespace py = pybind11;

namespace {

hal_dtype_e dtype_from_name(const std::string& name) {
  for (uint32_t d = 1; d < HAL_DTYPE_COUNT_; ++d)
    if (name == hal::sdk::dtype_name(d)) return static_cast<hal_dtype_e>(d);
  throw py::value_error("unknown dtype '" + name + "'");
}

// A device tensor: owns its Buffer (cached allocation) and a view of it.
// Views made by as_strided share the Buffer.
class PyTensor {
 public:
  PyTensor(std::shared_ptr<hal::Buffer> buffer, hal::TensorView view)
      : buffer_(std::move(buffer)), view_(std::move(view)) {}

  static std::shared_ptr<PyTensor> empty(const std::shared_ptr<hal::Device>& device, std::vector<int64_t> shape,
                                         const std::string& dtype) {
    hal_dtype_e dt = dtype_from_name(dtype);
    int64_t n = 1;
    for (int64_t s : shape) {
      if (s < 0) throw py::value_error("negative size in shape");
      n *= s;
    }
    uint64_t bytes = static_cast<uint64_t>(n) * hal::sdk::dtype_size(dt);
    auto buffer = std::make_shared<hal::Buffer>(device->allocate(bytes == 0 ? 1 : bytes));
    hal::TensorView view(*buffer, dt, std::move(shape));
    return std::make_shared<PyTensor>(std::move(buffer), std::move(view));
  }

  const hal::TensorView& view() const { return view_; }
  std::vector<int64_t> shape() const { return view_.shape; }
  std::string dtype() const { return hal::sdk::dtype_name(view_.dtype); }
  uint64_t nbytes() const { return static_cast<uint64_t>(view_.numel()) * hal::sdk::dtype_size(view_.dtype); }

  // Copies contiguous host bytes in (DATA must hold exactly nbytes()).
  void copy_from(py::buffer data) {
    py::buffer_info info = data.request();
    uint64_t size = static_cast<uint64_t>(info.size) * static_cast<uint64_t>(info.itemsize);
    if (size != nbytes())
      throw py::value_error("copy_from: got " + std::to_string(size) + " bytes for a tensor of " +
                            std::to_string(nbytes()));
    if (size == 0) return;
    py::gil_scoped_release release;
    buffer_->copy_from_host(info.ptr, size, view_.byte_offset);
  }
  // The contiguous tensor's bytes.
  py::bytes to_bytes() const {
    if (!view_.strides.empty()) throw py::value_error("to_bytes needs a contiguous tensor (copy it first)");
    std::string out(nbytes(), '\0');
    if (!out.empty()) {
      py::gil_scoped_release release;
      buffer_->copy_to_host(out.data(), out.size(), view_.byte_offset);
    }
    return py::bytes(out);
  }
  // A view of the same memory with other shape/strides/offset (elements).
  std::shared_ptr<PyTensor> as_strided(std::vector<int64_t> shape, std::vector<int64_t> strides,
                                       int64_t element_offset) const {
    hal::TensorView v = view_;
    v.shape = std::move(shape);
    v.strides = std::move(strides);
    v.byte_offset = view_.byte_offset + static_cast<uint64_t>(element_offset) * hal::sdk::dtype_size(view_.dtype);
    return std::make_shared<PyTensor>(buffer_, std::move(v));
  }

 private:
  std::shared_ptr<hal::Buffer> buffer_;
  hal::TensorView view_;
};

hal::Attr attr_from_python(const std::string& name, const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return hal::Attr::b(name, value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return hal::Attr::i(name, value.cast<int64_t>());
  if (py::isinstance<py::float_>(value)) return hal::Attr::f(name, value.cast<double>());
  if (py::isinstance<py::str>(value)) return hal::Attr::s(name, value.cast<std::string>());
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    py::sequence seq = value.cast<py::sequence>();
    bool all_int = true;
    for (py::handle item : seq) all_int = all_int && py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item);
    if (all_int) return hal::Attr::ints(name, value.cast<std::vector<int64_t>>());
    return hal::Attr::floats(name, value.cast<std::vector<double>>());
  }
  throw py::type_error("attribute '" + name + "': unsupported Python type " +
                       std::string(py::str(py::type::handle_of(value).attr("__name__"))));
}

struct DtypeAttr {
  std::string name;
};

std::vector<hal::Attr> attrs_from_dict(const py::dict& attrs) {
  std::vector<hal::Attr> out;
  for (auto item : attrs) {
    std::string name = item.first.cast<std::string>();
    if (py::isinstance<DtypeAttr>(item.second))
      out.push_back(hal::Attr::dtype(name, dtype_from_name(item.second.cast<DtypeAttr>().name)));
    else
      out.push_back(attr_from_python(name, item.second));
  }
  return out;
}

std::vector<const hal::TensorView*> views(const std::vector<std::shared_ptr<PyTensor>>& tensors) {
  std::vector<const hal::TensorView*> out;
  for (const auto& t : tensors) out.push_back(t ? &t->view() : nullptr);
  return out;
}

// Runs a C++ call with the GIL released, turning hal::Error into hal.Error.
template <class F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

}  // namespace

PYBIND11_MODULE(_hal, m) {
  m.doc() = "HAL runtime: plugins, devices, device tensors and catalog ops";
  // hal.Error (a RuntimeError): "CODE: message naming the plugin, op, argument and values".
  static PyObject* error_type = PyErr_NewException("hal._hal.Error", PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::reinterpret_borrow<py::object>(error_type);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hal::Error& e) {
      PyErr_SetString(error_type, (std::string(hal::status_code_name(e.code())) + ": " + e.what()).c_str());
    }
  });

  py::class_<DtypeAttr>(m, "DtypeAttr", "Wraps a dtype name to pass it as a DTYPE attribute")
      .def(py::init<std::string>());

  py::class_<hal::Device, std::shared_ptr<hal::Device>>(m, "Device")
      .def_property_readonly("id", &hal::Device::id)
      .def_property_readonly("name", [](const hal::Device& d) { return std::string(d.properties().name); })
      .def_property_readonly("state", [](const hal::Device& d) { return std::string(hal::device_state_name(d.state())); },
                             "'ok', or 'lost' once its plugin reported DEVICE_LOST (new work is then refused)")
      .def_property_readonly("lost_reason", &hal::Device::lost_reason, "why it was lost ('' while ok)")
      .def_property_readonly("failover", &hal::Device::failover_device,
                             "the device work moves to when this one is lost (hal.toml failover), or None")
      .def("synchronize_all", [](hal::Device&) {}, "No-op: launches through this module are synchronous")
      .def("__repr__", [](const hal::Device& d) { return "<hal.Device " + d.id() + ">"; });

  py::class_<hal::Runtime, std::shared_ptr<hal::Runtime>>(m, "Runtime")
      .def(py::init([](std::vector<std::string> plugins, std::optional<std::string> config) {
             hal::RuntimeOptions o;
             o.plugin_paths = std::move(plugins);
             o.config_path = std::move(config);
             if (!o.plugin_paths.empty()) o.use_install_dir = false;
             return hal::Runtime::create(o);
           }),
           py::arg("plugins") = std::vector<std::string>{}, py::arg("config") = std::nullopt,
           "Loads the plugins at PLUGINS (only those), or discovers them (config file, HAL_CONFIG, "
           "HAL_PLUGIN_PATH, the install's plugin dir)")
      .def("devices", &hal::Runtime::devices)
      .def("device", &hal::Runtime::device, py::arg("spec"))
      .def("skipped", [](const hal::Runtime& r) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& s : r.skipped()) out.emplace_back(s.path, s.message);
        return out;
      });

  py::class_<PyTensor, std::shared_ptr<PyTensor>>(m, "Tensor")
      .def_static("empty", &PyTensor::empty, py::arg("device"), py::arg("shape"), py::arg("dtype"))
      .def_property_readonly("shape", &PyTensor::shape)
      .def_property_readonly("dtype", &PyTensor::dtype)
      .def_property_readonly("nbytes", &PyTensor::nbytes)
      .def("copy_from", &PyTensor::copy_from, py::arg("data"))
      .def("to_bytes", &PyTensor::to_bytes)
      .def("as_strided", &PyTensor::as_strided, py::arg("shape"), py::arg("strides"), py::arg("offset") = 0);

  // Resolves once; launch is then cheap.
  py::class_<hal::OpRunner>(m, "Op")
      .def(py::init([](std::shared_ptr<hal::Device> device, const std::string& name, bool promote) {
             return without_gil([&] {
               return hal::OpRunner(std::move(device), name, promote ? hal::Promotion::kCore : hal::Promotion::kNone);
             });
           }),
           py::arg("device"), py::arg("name"), py::arg("promote") = true,
           "PROMOTE (default): inputs of a uniform op that are not in the call's compute dtype are cast "
           "first (counted in hal.op_stats()); False hands every call to the plugin as given")
      .def_property_readonly("name", &hal::OpRunner::name)
      .def_property_readonly(
          "input_mode",
          [](const hal::OpRunner& op) { return op.input_mode() == hal::InputMode::kUniform ? "uniform" : "mixed"; },
          "'uniform' (the plugin's kernel takes every promoted input in the compute dtype) or 'mixed'")
      .def(
          "__call__",
          [](const hal::OpRunner& op, const std::vector<std::shared_ptr<PyTensor>>& inputs,
             const std::vector<std::shared_ptr<PyTensor>>& outputs, const py::dict& attrs) {
            std::vector<hal::Attr> a = attrs_from_dict(attrs);
            auto in = views(inputs), out = views(outputs);
            without_gil([&] { op.launch(in, out, a); });
          },
          py::arg("inputs"), py::arg("outputs"), py::arg("attrs") = py::dict(),
          "Runs the op synchronously; an absent optional input is None. Raises hal.Error naming the op, "
          "the argument and the values.");

  m.def("op_names", [](const hal::Device& d) { return hal::op_names(d); }, py::arg("device"));
  m.def(
      "op_stats",
      [] {
        py::list out;
        for (const hal::OpStat& s : hal::op_stats()) {
          py::dict d;
          d["device"] = s.device;
          d["op"] = s.op;
          d["casts"] = s.casts;
          d["fallback_casts"] = s.fallback_casts;
          d["cast_bytes"] = s.cast_bytes;
          d["fallbacks"] = s.fallbacks;
          d["fallback_bytes"] = s.fallback_bytes;
          out.append(d);
        }
        return out;
      },
      "What the runtime did around launches, per (device, op): input casts for uniform kernels (on the device, "
      "or through the fallback device) and ops run on the fallback device; only pairs with a count");
  m.def("reset_op_stats", &hal::reset_op_stats, "Sets every op_stats count to zero");
}
