// torch_hal._C: the Python entry points of the backend (the device module
// torch.hal and torch_hal's own functions are thin Python over these).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/dlpack.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstring>
#include <mutex>

#include "backend.hpp"
#include "distributed.hpp"
#include "graph_lowering.hpp"
#include "mapping.hpp"

namespace py = pybind11;

namespace {
// Interpreter exit (torch_hal/__init__.py registers it with atexit): the
// autograd engine runs "hal" nodes on one worker thread per device, and the
// worker may drop the last reference to a finished backward's GraphTask
// after the caller has returned. That GraphTask's thread-local state holds
// Python objects (torch 2.15 stashes a contextvars.Context for every
// backward); released once the interpreter has finalized, the decref ends
// the thread and the process aborts ("terminate called without an active
// exception"). A tiny backward per device, run with no Python object in the
// thread-local state, is queued behind whatever the worker still holds, so
// when it returns the worker has let go of every earlier GraphTask.
void drain_autograd_device_threads() {
  if (!torch_hal::is_initialized()) return;
  const c10::DeviceIndex n = torch_hal::device_count();
  py::gil_scoped_release no_gil;  // the worker may need the GIL for the decref; the engine refuses callers holding it
  at::AutoGradMode grad(true);
  for (c10::DeviceIndex d = 0; d < n; ++d) {
    // A lost device takes no work (its worker has none of ours to drop either).
    if (torch_hal::device(d)->state() == hal::DeviceState::kLost) continue;
    at::Tensor x = at::zeros({1}, at::TensorOptions().device(c10::DeviceType::PrivateUse1, d)).requires_grad_();
    torch::autograd::backward({x.sum()});
  }
}

// DLPack import of a capsule naming kDLExtDev (PyTorch's DLPack device type
// for PrivateUse1, i.e. "hal"): a hal tensor sharing the exporting hal
// tensor's storage. PyTorch's own import (at::fromDLPack) would wrap the
// address in a storage torch_hal cannot map to its Buffer; torch_hal/_dlpack.py
// routes capsules here first. Returns None for any other capsule (PyTorch
// imports it). Consumes the capsule (renames it "used_...") only on success;
// on error the capsule keeps its owner and nothing was made.
template <class Managed>
py::object import_hal_capsule(PyObject* capsule, const char* used, Managed* m) {
  DLTensor& dl = m->dl_tensor;
  if (dl.device.device_type != kDLExtDev) return py::none();
  TORCH_CHECK(dl.device.device_id >= 0 && dl.device.device_id < 128, "torch_hal: the DLPack capsule names hal:",
              dl.device.device_id, ", which is no device index");
  const auto index = static_cast<c10::DeviceIndex>(dl.device.device_id);
  torch_hal::device(index);  // checks the index (naming how many exist)
  const c10::ScalarType dtype = at::toScalarType(dl.dtype);
  TORCH_CHECK(dl.ndim >= 0 && (dl.ndim == 0 || dl.shape != nullptr), "torch_hal: the DLPack capsule has ndim ",
              dl.ndim, (dl.shape == nullptr ? " and no shape" : ""));
  const c10::IntArrayRef sizes(dl.shape, static_cast<size_t>(dl.ndim));
  std::optional<c10::IntArrayRef> strides;
  if (dl.strides != nullptr && dl.ndim > 0) strides = c10::IntArrayRef(dl.strides, static_cast<size_t>(dl.ndim));
  const auto release = [m] {
    if (m->deleter == nullptr) return;
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;  // the producer's deleter may need it (as PyTorch's import assumes)
      m->deleter(m);
    } else {
      m->deleter(m);
    }
  };
  at::Tensor t;
  if (c10::multiply_integers(sizes) == 0) {
    // No elements: nothing to share (an empty hal tensor exports a null pointer).
    for (int64_t s : sizes)
      TORCH_CHECK(s >= 0, "torch_hal: the DLPack capsule has a negative size (sizes ", sizes, ")");
    t = at::empty(sizes, at::TensorOptions().dtype(dtype).device(c10::DeviceType::PrivateUse1, index));
    release();
  } else {
    t = torch_hal::tensor_sharing(dl.data, dl.byte_offset, index, sizes, strides, dtype, release);
  }
  PyCapsule_SetName(capsule, used);
  return py::cast(t);
}

py::object import_dlpack(const py::object& obj) {
  HANDLE_TH_ERRORS
  PyObject* capsule = obj.ptr();
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (m->version.major != DLPACK_MAJOR_VERSION) return py::none();  // PyTorch reports the version
    return import_hal_capsule(capsule, "used_dltensor_versioned", m);
  }
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    return import_hal_capsule(capsule, "used_dltensor", m);
  }
  return py::none();
  END_HANDLE_TH_ERRORS_PYBIND
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_hal native backend (PrivateUse1 over the HAL runtime)";
  m.def("_init", &torch_hal::set_init_options, py::arg("config"), py::arg("plugins"),
        "Sets the runtime's config/plugins; raises once the runtime has started.");
  m.def("_start", [] { torch_hal::runtime(); }, "Starts the runtime now; raises naming every skipped plugin.");
  m.def("is_initialized", &torch_hal::is_initialized);
  // torch.distributed's "hal" backend (registered by torch_hal/distributed.py).
  m.def("_create_distributed_backend",
        [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s) {
          return torch_hal::create_distributed_backend(store, rank, size,
                                                       std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
        },
        py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
        py::call_guard<py::gil_scoped_release>(),
        "The c10d backend of one process group (blocks until every rank joined).");
  m.def("_shutdown_distributed_backends", &torch_hal::shutdown_distributed_backends,
        "At interpreter exit: ends the hal process groups' completion threads once their queued operations completed.");
  m.def("_drain_autograd_device_threads", &drain_autograd_device_threads,
        "At interpreter exit: waits until the autograd engine's hal worker threads hold no earlier backward's state.");
  m.def("device_count", [] { return static_cast<int>(torch_hal::device_count()); });
  m.def("current_device", [] { return static_cast<int>(torch_hal::current_device()); });
  m.def("set_device", [](int i) {
    HANDLE_TH_ERRORS  // torch.AcceleratorError for a missing device, as torch.cuda.set_device raises
    torch_hal::set_current_device(static_cast<c10::DeviceIndex>(i));
    END_HANDLE_TH_ERRORS_PYBIND
  });
  m.def("_from_dlpack", &import_dlpack, py::arg("capsule"),
        "Imports a DLPack capsule of a hal tensor (kDLExtDev) sharing its storage; None for other capsules.");
  m.def("synchronize", [](int i) { torch_hal::synchronize_device(static_cast<c10::DeviceIndex>(i)); },
        "Waits for the work queued on every stream of hal:I.");
  // Streams cross as (stream_id, device_index, device_type), torch.Stream's fields.
  const auto stream_tuple = [](c10::Stream s) {
    return py::make_tuple(s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.device_type()));
  };
  m.def("current_stream", [=](int i) { return stream_tuple(torch_hal::current_stream(static_cast<c10::DeviceIndex>(i))); });
  m.def("default_stream", [=](int i) { return stream_tuple(torch_hal::default_stream(static_cast<c10::DeviceIndex>(i))); });
  m.def("set_stream", [=](int64_t id, int i) {
    const auto index = static_cast<c10::DeviceIndex>(i);
    return stream_tuple(torch_hal::exchange_stream(
        c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), id)));
  }, "Makes stream ID of hal:I current for this thread; returns the previous one.");
  // Random numbers: the default generator of hal:I (I = -1: all, for manual_seed).
  m.def("manual_seed", [](int i, uint64_t seed) { torch_hal::manual_seed(static_cast<c10::DeviceIndex>(i), seed); });
  m.def("seed", [](int i) {
    at::Generator g = torch_hal::default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.seed();
  });
  m.def("initial_seed", [](int i) {
    at::Generator g = torch_hal::default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.current_seed();
  });
  // The state as a uint8 CPU tensor, both ways: one builtin call, which
  // torch.compile runs eagerly (a graph break) instead of tracing Python
  // that builds or reads bytes.
  m.def("get_rng_state", [](int i) {
    at::Generator g = torch_hal::default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.get_state().clone();
  });
  m.def("set_rng_state", [](int i, const at::Tensor& new_state) {
    TORCH_CHECK(new_state.numel() * new_state.element_size() > 0, "torch.hal.set_rng_state: the state is empty");
    const at::Tensor state = new_state.detach().cpu().contiguous().view(at::kByte).flatten().clone();
    at::Generator g = torch_hal::default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  });
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
  torch_hal::bind_lowering(m);
}
