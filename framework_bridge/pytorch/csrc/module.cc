// torch_hal._C: the Python entry points of the backend (the device module
// torch.hal and torch_hal's own functions are thin Python over these).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend.hpp"
#include "mapping.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_hal native backend (PrivateUse1 over the HAL runtime)";
  m.def("_init", &torch_hal::set_init_options, py::arg("config"), py::arg("plugins"),
        "Sets the runtime's config/plugins; raises once the runtime has started.");
  m.def("_start", [] { torch_hal::runtime(); }, "Starts the runtime now; raises naming every skipped plugin.");
  m.def("is_initialized", &torch_hal::is_initialized);
  m.def("device_count", [] { return static_cast<int>(torch_hal::device_count()); });
  m.def("current_device", [] { return static_cast<int>(torch_hal::current_device()); });
  m.def("set_device", [](int i) { torch_hal::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("synchronize", [](int i) { torch_hal::device(static_cast<c10::DeviceIndex>(i)); },
        "Launches and copies are synchronous for now: checks the index only.");
  m.def("get_device_properties", [](int i) {
    const auto& d = torch_hal::device(static_cast<c10::DeviceIndex>(i));
    py::dict out;
    out["plugin"] = d->plugin_name();
    out["id"] = d->id();
    out["name"] = std::string(d->properties().name);
    out["vendor"] = std::string(d->properties().vendor);
    out["total_memory"] = d->properties().total_memory_bytes;
    out["compute_units"] = d->properties().compute_units;
    return out;
  });
  m.def("skipped_plugins", [] {
    py::list out;
    for (const auto& s : torch_hal::runtime().skipped())
      out.append(py::make_tuple(s.name, s.path, hal::skip_reason_name(s.reason), s.message));
    return out;
  });
  m.def("fallback_stats", &torch_hal::fallback_stats);
  m.def("reset_fallback_stats", &torch_hal::reset_fallback_stats);
  torch_hal::bind_kernels(m);
}
