"""ONNX models on HAL devices, shaped like onnxruntime's Python API: switch by changing one import.

    import hal.onnx as ort                       # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    [y] = sess.run(None, {"x": x})               # numpy in, numpy out
    sess.get_inputs()[0].name, .shape, .type     # "x", ["batch", 64], "tensor(float)"

As with onnxruntime, a sequence input takes a list of arrays and a sequence output comes back as one
("seq(tensor(float))"); an optional input takes an array or None ("optional(tensor(float))").

Providers name the HAL device the model is compiled for: "hal:N" (the runtime's device N), a plugin
name ("cpu", "opencl"), or onnxruntime's names (CPUExecutionProvider -> "cpu", OpenCLExecutionProvider
-> "opencl", HALExecutionProvider -> the config's default device). onnxruntime names HAL has no
plugin for (CUDAExecutionProvider, ...) are skipped with a warning, as onnxruntime skips providers
it was not built with; the first provider left is used (None or []: the default device). Which
plugins exist, their order and the fallback device come from the config: SessionOptions.hal_config
(a hal.toml path), else $HAL_CONFIG, else the default search (docs/config.md).

Errors raise hal.onnx.InvalidArgument (bad feed: names the input and what is wrong; bad model or
option), NotImplemented (operator, opset or dtype HAL cannot run: names the node), NoSuchFile,
RuntimeException (device failure, out of memory) — all subclasses of hal.onnx.Fail and hal.Error.
"""
import os
import warnings

import numpy as np

from . import _onnx
from ._onnx import Fail, InvalidArgument, NoSuchFile, NotImplemented, RuntimeException  # noqa: F401

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata", "Fail",
           "InvalidArgument", "NotImplemented", "NoSuchFile", "RuntimeException", "get_available_providers",
           "GraphOptimizationLevel", "ExecutionMode", "compile_counters"]

# HAL dtype name -> (numpy dtype, onnxruntime type string).
_DTYPES = {
    "float32": (np.dtype(np.float32), "tensor(float)"),
    "float16": (np.dtype(np.float16), "tensor(float16)"),
    "float64": (np.dtype(np.float64), "tensor(double)"),
    "int8": (np.dtype(np.int8), "tensor(int8)"),
    "int16": (np.dtype(np.int16), "tensor(int16)"),
    "int32": (np.dtype(np.int32), "tensor(int32)"),
    "int64": (np.dtype(np.int64), "tensor(int64)"),
    "uint8": (np.dtype(np.uint8), "tensor(uint8)"),
    "uint16": (np.dtype(np.uint16), "tensor(uint16)"),
    "uint32": (np.dtype(np.uint32), "tensor(uint32)"),
    "uint64": (np.dtype(np.uint64), "tensor(uint64)"),
    "bool": (np.dtype(np.bool_), "tensor(bool)"),
    "complex64": (np.dtype(np.complex64), "tensor(complex64)"),
    "complex128": (np.dtype(np.complex128), "tensor(complex128)"),
}
try:  # numpy has no bfloat16; ml_dtypes (a dependency of onnx and jax) provides it
    import ml_dtypes

    _DTYPES["bfloat16"] = (np.dtype(ml_dtypes.bfloat16), "tensor(bfloat16)")
except ImportError:  # pragma: no cover - bfloat16 models then refuse bfloat16 feeds by dtype
    pass
_BY_NUMPY = {np_dtype: name for name, (np_dtype, _) in _DTYPES.items()}
_AS_NUMPY = {name: np_dtype for name, (np_dtype, _) in _DTYPES.items()}

# onnxruntime execution provider -> HAL device ("" = the config's default device).
_PROVIDERS = {"CPUExecutionProvider": "cpu", "OpenCLExecutionProvider": "opencl", "HALExecutionProvider": ""}


class GraphOptimizationLevel:
    """onnxruntime's levels. ORT_DISABLE_ALL: no plugin compiles subgraphs (no fusion; every node runs op by
    op, hal::CompileOptions::graph_compilers = false). The other levels compile them; HAL's graph pipeline
    (hal/graph: decompositions, folding, CSE, DCE) runs at every level, as it decides what runs where."""
    ORT_DISABLE_ALL, ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED, ORT_ENABLE_ALL = 0, 1, 2, 99


class ExecutionMode:
    ORT_SEQUENTIAL, ORT_PARALLEL = 0, 1


class SessionOptions:
    """onnxruntime.SessionOptions' attributes, and HAL's.

    hal_config: path of the hal.toml that picks the plugins (None: $HAL_CONFIG, else the default search).
    add_session_config_entry(key, value): an option for HAL's graph compiler (hal::onnx::SessionOptions::options).
    intra_op_num_threads etc. are accepted so onnxruntime code runs unchanged; HAL's CPU plugin takes its
    thread count from OMP_NUM_THREADS (process-wide), so a value here that differs from it is refused.
    """

    def __init__(self):
        self.hal_config = None
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.optimized_model_filepath = ""
        self._entries = {}

    def add_session_config_entry(self, key, value):
        self._entries[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._entries[key]


class RunOptions:
    """onnxruntime.RunOptions' attributes (recorded; a HAL run has no per-run options yet)."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False


class NodeArg:
    """A model input or output as onnxruntime describes it: name, shape (ints; dim names for symbolic
    dims, None for an unnamed one) and type ("tensor(float)")."""

    def __init__(self, name, shape, type):  # noqa: A002 - onnxruntime's attribute name
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class ModelMetadata:
    """What the model says about itself, with onnxruntime's attribute names (plus HAL's opset)."""

    def __init__(self, metadata, opset):
        self.producer_name = metadata["producer_name"]
        self.producer_version = metadata["producer_version"]
        self.graph_name = metadata["graph_name"]
        self.domain = metadata["domain"]
        self.description = metadata["description"]
        self.graph_description = metadata["graph_description"]
        self.version = metadata["version"]
        self.custom_metadata_map = dict(metadata["custom_metadata_map"])
        self.opset = opset  # HAL: the default domain's opset the model imports


def compile_counters():
    """HAL: the process-wide compile cache counters {graph_compiles, deserializations, memory_hits, disk_hits,
    rebuilt_entries} (hal::compile_cache_counters), e.g. to check that runs at new shapes compile nothing."""
    return _onnx.compile_counters()


def get_available_providers():
    """The onnxruntime provider names this module maps (which HAL devices exist depends on the config)."""
    return list(_PROVIDERS)


def _node_arg(info):
    shape = [d if d >= 0 else (n or None) for d, n in zip(info["shape"], info["dim_names"])]
    dtype = _DTYPES.get(info["dtype"])
    type_name = dtype[1] if dtype else f"tensor({info['dtype']})"
    if info.get("optional"):
        type_name = f"optional({type_name})"
    return NodeArg(info["name"], shape, f"seq({type_name})" if info.get("sequence") else type_name)


def _device_for(providers):
    """(HAL device name, provider as given, its options) for onnxruntime's PROVIDERS argument."""
    for p in providers or []:
        name, options = (p if isinstance(p, (tuple, list)) else (p, {}))
        if not isinstance(name, str):
            raise InvalidArgument(f"INVALID_ARGUMENT: provider {p!r}: expected a name or (name, options dict)")
        if name in _PROVIDERS:
            return _PROVIDERS[name], name, dict(options or {})
        if name.endswith("ExecutionProvider"):
            warnings.warn(f"hal.onnx: no HAL device for provider '{name}'; skipped (HAL devices are named "
                          f"'hal:N' or by plugin, or one of {sorted(_PROVIDERS)})", stacklevel=3)
            continue
        return name, name, dict(options or {})
    if providers:
        raise InvalidArgument(f"INVALID_ARGUMENT: none of the providers {providers} names a HAL device "
                              f"('hal:N', a plugin name such as 'cpu', or one of {sorted(_PROVIDERS)})")
    return "", "HALExecutionProvider", {}


def _check_threads(sess_options):
    want = sess_options.intra_op_num_threads
    have = os.environ.get("OMP_NUM_THREADS")
    if want and have and int(have) != want:
        raise InvalidArgument(f"INVALID_ARGUMENT: intra_op_num_threads = {want}, but OMP_NUM_THREADS = {have}: "
                              "HAL's CPU plugin threads are process-wide; set OMP_NUM_THREADS before import")


class InferenceSession:
    """A model compiled for one HAL device (see the module doc). Constructing it loads, translates and
    compiles the model; run() may be called from several threads at once."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if kwargs:
            raise TypeError(f"InferenceSession: unexpected arguments {sorted(kwargs)}")
        self._sess_options = sess_options or SessionOptions()
        _check_threads(self._sess_options)
        if provider_options is not None:
            if not providers or len(provider_options) != len(providers):
                raise ValueError("provider_options must give one dict per provider")
            providers = list(zip(providers, provider_options))
        device, self._provider, options = _device_for(providers)
        options = {**self._sess_options._entries, **{str(k): str(v) for k, v in options.items()}}
        self._provider_options = options
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path = None
            self._model = _onnx.Model.load_bytes(bytes(path_or_bytes))
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path = os.fspath(path_or_bytes)
            self._model = _onnx.Model.load(self._model_path)
        else:
            raise TypeError(f"InferenceSession: expected a path or the model's bytes, got "
                            f"{type(path_or_bytes).__name__}")
        self._inputs = [_node_arg(i) for i in self._model.inputs]
        self._outputs = [_node_arg(o) for o in self._model.outputs]
        self._input_dtypes = {i["name"]: i["dtype"] for i in self._model.inputs}
        self._sequences = {i["name"]: i["dtype"] for i in self._model.inputs if i.get("sequence")}
        self._optionals = {i["name"] for i in self._model.inputs if i.get("optional")}
        self._plain = not self._sequences and not self._optionals
        config = self._sess_options.hal_config
        level = self._sess_options.graph_optimization_level
        self._session = _onnx.Session(self._model, config=os.fspath(config) if config else "", device=device,
                                      options=options,
                                      graph_compilers=int(level) != GraphOptimizationLevel.ORT_DISABLE_ALL)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []  # initializers are graph constants

    def get_modelmeta(self):
        return ModelMetadata(self._model.metadata, self._model.opset)

    def get_providers(self):
        return [self._provider]

    def get_provider_options(self):
        return {self._provider: dict(self._provider_options)}

    def get_session_options(self):
        return self._sess_options

    def compile_stats(self):
        """HAL: what compiling made of the model (hal::onnx::Session::stats): {"compiles": executables
        graph_compile made, "deserialized", "cache": "compiled" | "memory" | "disk", "groups", "kernels",
        "op_nodes", "fallback_nodes", "copies", "copy_bytes", "descriptions", "devices": [per device]}."""
        return self._session.stats()

    def explain(self):
        """HAL: the device, the partition (groups compiled, op-by-op nodes) and run counters, as text."""
        return self._session.explain()

    def device(self):
        """HAL: the device the session runs on now ("opencl:0"); after a failover, the failover device."""
        return self._session.device()

    def failovers(self):
        """HAL: each failover, in order: which device was lost and where the model was re-partitioned
        (hal.toml ``failover = "cpu"``). A run that hits a lost device is run again there."""
        return self._session.failovers()

    def run(self, output_names, input_feed, run_options=None):
        """OUTPUT_NAMES (None or []: all, in model order) computed from INPUT_FEED {input name: array; a
        sequence input: a list of arrays; an optional one: an array or None}. Returns a list of numpy arrays
        (a sequence output: a list of them). Raises InvalidArgument naming the input or output that is wrong."""
        if not isinstance(input_feed, dict):
            raise InvalidArgument(f"INVALID_ARGUMENT: input_feed must be a dict {{input name: array}}, got "
                                  f"{type(input_feed).__name__}")
        names = [] if output_names is None else list(output_names)
        if self._plain:  # every input a tensor: arrays cross as they are (None: a feed needs converting)
            results = self._session.run_arrays(names, input_feed, _BY_NUMPY, _AS_NUMPY)
            if results is not None:
                if not any(n.endswith("]") for n, _ in results):  # no sequence elements "y[0]", ... to gather
                    return [r if isinstance(r, np.ndarray) else self._array(*r) for _, r in results]
                return self._outputs_of([(n, *r) if not isinstance(r, np.ndarray) else (n, None, None, r)
                                         for n, r in results])
        feeds = []
        for name, value in input_feed.items():
            if name in self._sequences:  # a list of tensors: fed as its elements
                if not isinstance(value, (list, tuple)):
                    raise InvalidArgument(f"INVALID_ARGUMENT: input '{name}' is a sequence: feed a list of arrays, "
                                          f"got {type(value).__name__}")
                feeds += [self._feed(f"{name}[{i}]", v, name) for i, v in enumerate(value)]
                if not value:
                    feeds.append((f"{name}[]", self._sequences[name], [0], np.zeros(0, np.uint8)))
            elif name in self._optionals and value is None:  # an empty optional
                feeds.append((f"{name}[]", "float32", [0], np.zeros(0, np.uint8)))
            else:
                feeds.append(self._feed(name, value))
        return self._outputs_of(self._session.run(names, feeds))

    def _outputs_of(self, results):
        """[(name, dtype, shape, bytes)] (dtype None: bytes is the array already) as run() returns them: a
        sequence output's elements "y[0]", ... gathered into a list."""
        out, where = [], {}
        for name, dtype, shape, data in results:
            array = data if dtype is None else self._array(dtype, shape, data)
            base = name[:name.rindex("[")] if name.endswith("]") and "[" in name else None
            if base is None:
                out.append(array)
                continue
            if base not in where:  # a sequence output: a list of its elements
                where[base] = len(out)
                out.append([])
            if not name.endswith("[]"):
                out[where[base]].append(array)
        return out

    def _feed(self, name, value, input_name=None):
        if not isinstance(name, str):
            raise InvalidArgument(f"INVALID_ARGUMENT: input name {name!r} is not a string")
        want = _DTYPES.get(self._input_dtypes.get(input_name or name))
        try:  # as onnxruntime: a list or scalar takes the input's dtype; an array keeps its own (checked)
            array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=want[0] if want else None)
        except Exception as e:  # ragged lists etc.
            raise InvalidArgument(f"INVALID_ARGUMENT: input '{name}': not convertible to an array ({e})") from None
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        dtype = _BY_NUMPY.get(array.dtype)
        if dtype is None:
            raise InvalidArgument(f"INVALID_ARGUMENT: input '{name}': numpy dtype {array.dtype} has no HAL dtype"
                                  + (f" (the model expects {want[1]})" if want else ""))
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return name, dtype, list(array.shape), flat

    @staticmethod
    def _array(dtype, shape, data):
        return data.view(_DTYPES[dtype][0]).reshape(shape)
