// Python bindings of the ONNX front end (module hal._onnx): hal::onnx::Model
// and hal::onnx::Session. hal/onnx.py builds the onnxruntime-shaped API on
// top. Host data crosses as flat uint8 numpy arrays plus a dtype name and a
// shape, so every dtype (bfloat16 included) crosses the same way; results
// are handed to numpy without a copy (the array owns the HostTensor's bytes).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/onnx/model.hpp"
#include "hal/onnx/operators.hpp"
#include "hal/onnx/session.hpp"
#include "hal/runtime/error.hpp"
#include "hal/sdk/op_schema.hpp"

namespace py = pybind11;

namespace {

hal_dtype_e dtype_from_name(const std::string& name) {
  for (uint32_t d = 1; d < HAL_DTYPE_COUNT_; ++d)
    if (name == hal::sdk::dtype_name(d)) return static_cast<hal_dtype_e>(d);
  throw hal::Error(HAL_STATUS_INVALID_ARGUMENT, "unknown dtype '" + name + "'");
}

// onnxruntime's exception names (onnxruntime.capi.onnxruntime_pybind11_state),
// all deriving from hal.Error so `except hal.Error` still catches them.
struct ErrorTypes {
  PyObject* fail = nullptr;              // every code not below
  PyObject* invalid_argument = nullptr;  // INVALID_ARGUMENT, UNSUPPORTED_DTYPE, MIXED_DTYPES, OUT_OF_RANGE
  PyObject* not_implemented = nullptr;   // UNIMPLEMENTED
  PyObject* no_such_file = nullptr;      // NOT_FOUND
  PyObject* runtime_exception = nullptr; // DEVICE_ERROR, OUT_OF_MEMORY, TIMEOUT, INTERNAL, DEVICE_LOST
};
ErrorTypes error_types;

PyObject* error_type_for(hal_status_code_e code) {
  switch (code) {
    case HAL_STATUS_INVALID_ARGUMENT: case HAL_STATUS_UNSUPPORTED_DTYPE: case HAL_STATUS_MIXED_DTYPES:
    case HAL_STATUS_OUT_OF_RANGE:
      return error_types.invalid_argument;
    case HAL_STATUS_UNIMPLEMENTED: return error_types.not_implemented;
    case HAL_STATUS_NOT_FOUND: return error_types.no_such_file;
    case HAL_STATUS_DEVICE_ERROR: case HAL_STATUS_OUT_OF_MEMORY: case HAL_STATUS_TIMEOUT: case HAL_STATUS_INTERNAL:
    case HAL_STATUS_DEVICE_LOST:
      return error_types.runtime_exception;
    default: return error_types.fail;
  }
}

py::dict tensor_info(const hal::onnx::TensorInfo& info) {
  py::dict d;
  d["name"] = info.name;
  d["dtype"] = hal::sdk::dtype_name(info.dtype);
  d["shape"] = info.shape;
  d["dim_names"] = info.dim_names;
  d["sequence"] = info.sequence;
  d["optional"] = info.optional;
  return d;
}

py::list tensor_infos(const std::vector<hal::onnx::TensorInfo>& infos) {
  py::list out;
  for (const auto& i : infos) out.append(tensor_info(i));
  return out;
}

// T's bytes as an array of DTYPE and SHAPE, C-contiguous, owning them
// (moved, not copied).
py::array owning_array(hal::onnx::HostTensor&& t, const py::dtype& dtype, std::vector<py::ssize_t> shape) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t step = dtype.itemsize();
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= std::max<py::ssize_t>(shape[d], 1);
  }
  auto* bytes = new std::vector<uint8_t>(std::move(t.data));
  py::capsule owner(bytes, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
  return py::array(dtype, std::move(shape), std::move(strides), bytes->data(), owner);
}

// A flat uint8 array owning T's bytes (moved, not copied).
py::array owned_bytes(hal::onnx::HostTensor&& t) {
  const auto n = static_cast<py::ssize_t>(t.data.size());
  return owning_array(std::move(t), py::dtype::of<uint8_t>(), {n});
}

// feeds: (name, dtype name, shape, flat C-contiguous uint8 array of the bytes) per input (a
// sequence input's elements as "s[0]", ...; "s[]" when empty). Returns (name, dtype, shape,
// bytes) per result, a sequence output's elements as "y[0]", ... ("y[]": empty).
using Feed = std::tuple<std::string, std::string, std::vector<int64_t>, py::array_t<uint8_t, py::array::c_style>>;

py::list run(hal::onnx::Session& session, const std::vector<std::string>& output_names,
             const std::vector<Feed>& feeds) {
  std::vector<std::pair<std::string, hal::onnx::HostTensorRef>> refs;
  refs.reserve(feeds.size());
  for (const auto& [name, dtype, shape, bytes] : feeds)
    refs.emplace_back(name, hal::onnx::HostTensorRef{dtype_from_name(dtype), shape, bytes.data()});
  std::vector<std::pair<std::string, hal::onnx::HostTensor>> results;
  {
    py::gil_scoped_release release;  // the feeds' arrays stay alive: FEEDS holds them
    results = session.run_named(output_names, refs);
  }
  py::list out;
  for (auto& [name, r] : results) {
    std::string dtype = hal::sdk::dtype_name(r.dtype);
    std::vector<int64_t> shape = r.shape;
    out.append(py::make_tuple(name, dtype, shape, owned_bytes(std::move(r))));
  }
  return out;
}

// run() for the common call: FEEDS a dict {input name: numpy array}, every
// one a C-contiguous array of native byte order whose dtype BY_NUMPY maps
// to a HAL dtype name ({np.dtype: name}). Returns [(name, array)] with each
// result as an array of AS_NUMPY[its dtype] ({name: np.dtype}) owning the
// result's bytes, or None without running when a feed is not such an array
// (the caller converts it and calls run()).
py::object run_arrays(hal::onnx::Session& session, const std::vector<std::string>& output_names, const py::dict& feeds,
                      const py::dict& by_numpy, const py::dict& as_numpy) {
  std::vector<std::pair<std::string, hal::onnx::HostTensorRef>> refs;
  refs.reserve(feeds.size());
  std::vector<py::array> held;  // FEEDS holds them too; kept for the GIL-free run below
  held.reserve(feeds.size());
  for (const auto& [key, value] : feeds) {
    if (!py::isinstance<py::str>(key) || !py::isinstance<py::array>(value)) return py::none();
    py::array a = py::reinterpret_borrow<py::array>(value);
    if (!(a.flags() & py::array::c_style) || !by_numpy.contains(a.dtype())) return py::none();
    const char order = a.dtype().byteorder();
    if (order == '>' ) return py::none();  // not native on this (little-endian) machine
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    refs.emplace_back(key.cast<std::string>(),
                      hal::onnx::HostTensorRef{dtype_from_name(by_numpy[a.dtype()].cast<std::string>()), std::move(shape),
                                               a.data()});
    held.push_back(std::move(a));
  }
  std::vector<std::pair<std::string, hal::onnx::HostTensor>> results;
  {
    py::gil_scoped_release release;
    results = session.run_named(output_names, refs);
  }
  py::list out;
  for (auto& [name, r] : results) {
    const std::string dtype = hal::sdk::dtype_name(r.dtype);
    if (!as_numpy.contains(dtype)) {  // no numpy dtype here: the bytes, as run() returns them
      std::vector<int64_t> shape = r.shape;
      out.append(py::make_tuple(name, py::make_tuple(dtype, shape, owned_bytes(std::move(r)))));
      continue;
    }
    const py::dtype dt = py::reinterpret_borrow<py::dtype>(as_numpy[dtype.c_str()]);
    out.append(py::make_tuple(name, owning_array(std::move(r), dt, {r.shape.begin(), r.shape.end()})));
  }
  return std::move(out);
}

py::dict stats_dict(const hal::CompiledGraphStats& s) {
  static const char* const kSources[] = {"compiled", "memory", "disk"};
  py::list devices;
  for (const hal::DevicePartStats& d : s.devices) {
    py::dict e;
    e["device"] = d.device;
    e["groups"] = d.groups;
    e["kernels"] = d.kernels;
    e["op_nodes"] = d.op_nodes;
    e["fallback_nodes"] = d.fallback_nodes;
    e["constants"] = d.constants;
    devices.append(e);
  }
  py::dict r;
  r["compiles"] = s.compiled;  // executables graph_compile made for this session
  r["deserialized"] = s.deserialized;
  r["cache"] = kSources[static_cast<int>(s.cache)];
  r["groups"] = s.groups;
  r["kernels"] = s.kernel_count;
  r["op_nodes"] = s.op_nodes;
  r["fallback_nodes"] = s.fallback_nodes;
  r["copies"] = s.copies;
  r["copy_bytes"] = s.copy_bytes;
  r["descriptions"] = s.descriptions;
  r["devices"] = devices;
  return r;
}

py::dict metadata_dict(const hal::onnx::ModelMetadata& m) {
  py::dict r;
  r["producer_name"] = m.producer_name;
  r["producer_version"] = m.producer_version;
  r["domain"] = m.domain;
  r["version"] = m.model_version;
  r["description"] = m.doc_string;
  r["graph_name"] = m.graph_name;
  r["graph_description"] = m.graph_doc_string;
  r["custom_metadata_map"] = m.metadata_props;
  return r;
}

}  // namespace

PYBIND11_MODULE(_onnx, m) {
  m.doc() = "HAL ONNX front end: hal::onnx::Model and hal::onnx::Session (use hal.onnx)";
  py::object hal_error = py::module_::import("hal._hal").attr("Error");
  auto make = [&](const char* name, PyObject* base, const char* doc) {
    PyObject* type = PyErr_NewExceptionWithDoc((std::string("hal.onnx.") + name).c_str(), doc, base, nullptr);
    if (!type) throw py::error_already_set();
    m.attr(name) = py::reinterpret_borrow<py::object>(type);
    return type;
  };
  error_types.fail = make("Fail", hal_error.ptr(), "A HAL ONNX error (the hal.Error of a model or session)");
  error_types.invalid_argument = make("InvalidArgument", error_types.fail, "Bad model, feed, option or name");
  error_types.not_implemented = make("NotImplemented", error_types.fail, "Operator, opset or dtype not supported");
  error_types.no_such_file = make("NoSuchFile", error_types.fail, "A file or named thing does not exist");
  error_types.runtime_exception = make("RuntimeException", error_types.fail, "The device or runtime failed");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hal::Error& e) {
      PyErr_SetString(error_type_for(e.code()),
                      (std::string(hal::status_code_name(e.code())) + ": " + e.what()).c_str());
    }
  });

  m.def(
      "supported_operators",
      [] {
        py::list rows;
        for (const hal::onnx::OperatorSupport& o : hal::onnx::supported_operators())
          rows.append(py::make_tuple(o.op_type, o.min_opset, o.max_opset, o.catalog_ops, o.limits));
        return rows;
      },
      "The ONNX -> catalog table's rows: (op_type, first opset, last opset, catalog ops, limits)");

  py::class_<hal::onnx::Model, std::shared_ptr<hal::onnx::Model>>(m, "Model",
                                                                   "An ONNX model translated to a HAL graph")
      .def_static(
          "load",
          [](const std::string& path, const std::string& model_dir) {
            py::gil_scoped_release release;
            return std::make_shared<hal::onnx::Model>(hal::onnx::Model::load(path, {model_dir}));
          },
          py::arg("path"), py::arg("model_dir") = "",
          "Reads the model at PATH; external data relative to MODEL_DIR (default: the file's folder)")
      .def_static(
          "load_bytes",
          [](const py::bytes& data, const std::string& model_dir) {
            std::string_view view = data;  // DATA is kept alive by the caller for the call
            py::gil_scoped_release release;
            return std::make_shared<hal::onnx::Model>(
                hal::onnx::Model::load_bytes(view.data(), view.size(), {model_dir}));
          },
          py::arg("data"), py::arg("model_dir") = "",
          "Translates a serialised ModelProto; external data only with MODEL_DIR")
      .def_property_readonly("inputs", [](const hal::onnx::Model& m) { return tensor_infos(m.inputs()); },
                             "[{name, dtype, shape (< 0: symbolic), dim_names}] in model order")
      .def_property_readonly("outputs", [](const hal::onnx::Model& m) { return tensor_infos(m.outputs()); })
      .def_property_readonly("opset", &hal::onnx::Model::opset)
      .def_property_readonly("producer", &hal::onnx::Model::producer)
      .def_property_readonly(
          "metadata", [](const hal::onnx::Model& m) { return metadata_dict(m.metadata()); },
          "{producer_name, producer_version, domain, version, description, graph_name, graph_description, "
          "custom_metadata_map} as onnxruntime's ModelMetadata names them");

  py::class_<hal::onnx::Session>(m, "Session", "A model compiled for a HAL device")
      .def(py::init([](const hal::onnx::Model& model, const std::string& config, const std::string& device,
                       const std::map<std::string, std::string>& options, bool graph_compilers) {
             hal::onnx::SessionOptions o{config, device, options, graph_compilers};
             py::gil_scoped_release release;
             return std::make_unique<hal::onnx::Session>(model, o);
           }),
           py::arg("model"), py::arg("config") = "", py::arg("device") = "",
           py::arg("options") = std::map<std::string, std::string>{}, py::arg("graph_compilers") = true,
           "Compiles MODEL for DEVICE ('hal:N', a plugin name, '' = default) of the runtime CONFIG names; "
           "GRAPH_COMPILERS false runs every node op by op (no plugin compiles a subgraph)")
      .def("run", &run, py::arg("output_names"), py::arg("feeds"),
           "feeds: [(name, dtype, shape, flat uint8 array)] -> [(dtype, shape, flat uint8 array)]")
      .def("run_arrays", &run_arrays, py::arg("output_names"), py::arg("feeds"), py::arg("by_numpy"),
           py::arg("as_numpy"),
           "feeds: {name: C-contiguous numpy array} -> [(name, array or (dtype, shape, bytes))]; None (nothing "
           "run) when a feed is not such an array")
      .def("explain", &hal::onnx::Session::explain, py::call_guard<py::gil_scoped_release>())
      .def("device", &hal::onnx::Session::device, "the home device now ('cpu:0'); changes at a failover")
      .def("failovers", &hal::onnx::Session::failovers,
           "each failover in order: the device lost and where the model was re-partitioned")
      .def("stats", [](const hal::onnx::Session& s) { return stats_dict(s.stats()); },
           "hal::CompiledGraphStats as a dict: compiles, deserialized, cache ('compiled', 'memory', 'disk'), "
           "groups, kernels, op_nodes, fallback_nodes, copies, copy_bytes, descriptions, devices [{device, "
           "groups, kernels, op_nodes, fallback_nodes, constants}]");

  m.def(
      "compile_counters",
      [] {
        hal::CompileCacheCounters c = hal::compile_cache_counters();
        py::dict r;
        r["graph_compiles"] = c.graph_compiles;
        r["deserializations"] = c.deserializations;
        r["memory_hits"] = c.memory_hits;
        r["disk_hits"] = c.disk_hits;
        r["rebuilt_entries"] = c.rebuilt_entries;
        return r;
      },
      "The process-wide compile cache counters (hal::compile_cache_counters)");
}
