// HAL runtime: a hal::Graph compiled for one or several devices — the
// partition by capability across their plugins, the executables their
// graph-compile interfaces made, the nodes run op by op, the copies between
// devices — the compile cache (memory and disk), and running it (see
// hal/runtime/graph.hpp for building graphs, docs/graph.md for the design).
#ifndef HAL_RUNTIME_COMPILED_GRAPH_HPP_
#define HAL_RUNTIME_COMPILED_GRAPH_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/runtime/device.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/stream.hpp"

namespace hal {

// How to compile a graph (compile(const Graph&, const CompileOptions&)).
struct CompileOptions {
  // Devices in claim order (non-empty; no duplicates). DEVICES[0] is the
  // home device: run() takes the inputs and gives the outputs there; it
  // lost is DEVICE_LOST. Other lost devices (and a lost fallback) are left
  // out: the devices left claim their nodes.
  std::vector<std::shared_ptr<Device>> devices;
  // Runs the nodes every device declined (op by op). nullptr: DEVICES[0]'s
  // fallback_device() (hal.toml fallback_device); with use_fallback false,
  // or when there is none, such a node fails compile.
  std::shared_ptr<Device> fallback;
  bool use_fallback = true;
  // Disk cache folder: "" = $HAL_COMPILE_CACHE_DIR, else ~/.cache/hal/compile.
  std::string cache_dir;
  bool disk_cache = true;
  // Share the executables of an identical earlier compile for the same
  // Device objects. An entry keeps its devices (and so their plugins)
  // loaded until clear_compile_cache().
  bool memory_cache = true;
  // Compile options: part of the cache key (a changed option recompiles).
  std::map<std::string, std::string> options;
  // false: no device is asked to compile subgraphs (graph_partition), so
  // every node runs op by op: the unfused baseline, as onnxruntime's
  // ORT_DISABLE_ALL. Part of the cache key.
  bool graph_compilers = true;
  // Layout adjustment: values between op-by-op launches are laid out as the
  // plugins running them prefer (op_get_layouts, ABI 1.8; docs/graph.md,
  // "Layouts"). false: every such value is row-major (the A/B baseline).
  // Not part of the cache key: it changes no executable.
  bool layouts = true;
  // Outputs the caller may pass as an input's very tensor, (output index,
  // input index) pairs of one dtype and shape: a variable updated in place
  // (an optimizer step's parameters), as PJRT's input-output aliases. Each
  // pair goes to the executable that makes the output (ABI 1.14
  // hal_graph_output_aliases_t) where that executable runs on the home
  // device and is the input's only reader; CompiledGraph::output_aliases()
  // lists the pairs honoured. Part of the cache key. compile() throws
  // INVALID_ARGUMENT for an index out of range, an output or input listed
  // twice, or values of different dtypes or shapes.
  std::vector<std::pair<size_t, size_t>> output_aliases;
};

// What one device does in a compiled graph.
struct DevicePartStats {
  std::string device;           // "opencl:0"
  size_t groups = 0;            // compiled groups = executables
  uint64_t kernels = 0;         // device kernels one run launches for them
  size_t op_nodes = 0;          // nodes run one by one through the operator interface
  size_t fallback_nodes = 0;    // of those, nodes every listed device declined
  size_t constants = 0;         // constants uploaded to it (once, at compile)
};

// How the executables were obtained.
enum class CacheSource { kCompiled, kMemory, kDisk };

// What compile() made of a graph.
struct CompiledGraphStats {
  size_t groups = 0;          // groups claimed = executables, all devices
  uint64_t kernel_count = 0;  // device kernels one run launches for them (sum of executable_get_info)
  size_t op_nodes = 0;        // nodes run one by one through the operator interface, all devices
  // Reshapes run as metadata, not counted in op_nodes: the output aliases
  // the input's bytes (input contiguous at run time, else the reshape
  // launches) or, for a graph output on the home device whose input a node
  // there makes (not an output itself), the input is made in the caller's
  // output buffer (when that view is contiguous, else the reshape launches).
  size_t alias_nodes = 0;
  std::vector<std::string> descriptions;  // per executable, as the plugin describes it
  // Per executable, its whole plan (ABI 1.10 hal_executable_info_t.plan:
  // which of its nodes run in which kernel), or empty when the plugin gives
  // none (older than 1.10, or nothing beyond the description).
  std::vector<std::string> plans;
  std::vector<DevicePartStats> devices;   // per device used or listed, the fallback last
  size_t fallback_nodes = 0;              // nodes run on the fallback device
  // Copies between devices one run makes (a value produced or fed on one
  // device and read on another), and their bytes when every shape is
  // concrete (else the last run's: see CompiledGraph::last_copy_bytes()).
  size_t copies = 0;
  uint64_t copy_bytes = 0;
  CacheSource cache = CacheSource::kCompiled;
  size_t compiled = 0;      // executables compiled by graph_compile here
  size_t deserialized = 0;  // executables rebuilt from the disk cache
  // Values between op-by-op launches laid out otherwise than row-major, as
  // their plugins prefer (CompileOptions::layouts), when every shape is
  // concrete (else chosen at run time, per input shapes; see explain()).
  size_t relaid_values = 0;
};

// A tensor run() allocated: BUFFER owns the memory VIEW describes.
struct OwnedTensor {
  Buffer buffer;
  TensorView view;
};

// A compiled graph. Move-only; destroying it releases the executables no
// other compiled graph or cache entry shares (no run of it may still be
// queued: synchronize first). run() may be called from several threads.
class CompiledGraph {
 public:
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;
  ~CompiledGraph();

  // Runs the graph on STREAM (nullptr: synchronously; a stream of the home
  // device, devices[0]; other devices run synchronously). INPUTS[i] feeds
  // graph input i, OUTPUTS[j] receives output j (preallocated by the
  // caller, on the home device). Each view's dtype and rank must be its
  // value's, concrete dims equal and symbolic dims bound consistently;
  // otherwise INVALID_ARGUMENT naming the value ("input 1 (value 4): dim 0
  // is 5 but symbol -1 is 3 (bound by input 0 (value 0))") and nothing
  // runs. Intermediates come from each device's caching allocator (sizes
  // derived from symbols through infer_shapes); values
  // cross devices through host memory. Errors from a step name its device
  // and group or node. An output may be its input's very view (same
  // buffer, offset and shape; contiguous) for a pair output_aliases()
  // lists: the run reads the input's old contents and leaves the output's
  // there. For a pair compile() was given but does not honour, such a view
  // is INVALID_ARGUMENT (pass separate memory and copy).
  void run(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
           const Stream* stream = nullptr) const;
  // As above, allocating the outputs (contiguous, on the home device) with
  // the shapes infer_shapes gives from the inputs' (symbols bound, derived
  // sizes computed); its INVALID_ARGUMENT names a bad input or node, and an
  // output whose size nothing binds is INVALID_ARGUMENT naming it. The
  // caller owns the result.
  std::vector<OwnedTensor> run_allocating(const std::vector<const TensorView*>& inputs,
                                          const Stream* stream = nullptr) const;

  // Whether graph input I may be fed a strided view: only op-by-op nodes,
  // reshapes, copies between devices and executables that declare
  // HAL_EXECUTABLE_FLAG_STRIDED_INPUTS (ABI 1.7: the CPU plugin's) read it.
  // An input another compiled group reads must be contiguous. Throws
  // INVALID_ARGUMENT for I out of range.
  bool accepts_strided_input(size_t i) const;
  // The CompileOptions::output_aliases pairs run() honours: (output index,
  // input index), in the order given; empty when none was given or none
  // could be (the input has another reader, the output is made op by op or
  // on another device, the plugin is older than ABI 1.14).
  const std::vector<std::pair<size_t, size_t>>& output_aliases() const;
  const CompiledGraphStats& stats() const;
  // Bytes copied between devices by the last run (0 before any).
  uint64_t last_copy_bytes() const;
  // The partition, for people: per device its fused groups (nodes, kernel
  // counts, descriptions, and the plugin's plan of each where it gives one),
  // op-by-op nodes and fallback nodes with why the
  // other devices declined them; the copies; where the executables came
  // from (compiled, memory or disk cache); the values between op-by-op
  // launches laid out otherwise than row-major, with their dim orders (the
  // last run's plan when shapes are symbolic).
  std::string explain() const;
  Device& device() const;  // the home device
  // The devices this graph runs work on (the home device, and each other
  // one with a group, an op-by-op node or a constant) that are lost now
  // (Device::state()); empty while all of them work. A caller failing over
  // compiles the graph again: compile() leaves lost devices out.
  std::vector<std::shared_ptr<Device>> lost_devices() const;

 private:
  friend CompiledGraph compile(const Graph& graph, const CompileOptions& options);
  struct Impl;
  explicit CompiledGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compiles GRAPH for OPTIONS.devices. Each device in order claims the
// subgraphs its plugin compiles (graph_partition over the nodes not yet
// claimed, without the ops hal.toml disables for it), then the single
// nodes whose op it launches (the op is in its plugin and op_check accepts
// the node where its shapes are concrete); the fallback device runs the
// rest op by op. Each claimed group is compiled as a self-contained
// subgraph (or rebuilt from the compile cache: the key is the graph, each
// device's plugin name and version, device id and disabled ops, and
// OPTIONS.options). Constants are uploaded once to each device reading
// them. Throws hal::Error: UNIMPLEMENTED naming the first node no device
// runs, its op and per device why it declined ("opencl:0: disabled by
// hal.toml; cpu:0 (fallback): no kernel (...)"); a plugin's refusal of the
// graph or a group (the device and group named); FAILED_PRECONDITION for
// groups that cannot be ordered; INVALID_ARGUMENT for empty or duplicate
// devices; DEVICE_LOST when the home device is lost. A corrupt or stale
// disk entry is warned about on stderr (one line naming the file) and
// rebuilt. Thread-safe.
CompiledGraph compile(const Graph& graph, const CompileOptions& options);

// compile() for DEVICE alone: no fallback device and no cache (each call
// compiles). UNIMPLEMENTED names a node DEVICE runs neither way.
CompiledGraph compile(Device& device, const Graph& graph);

// Process-wide counts of how executables were obtained, for tests and
// tools ("a second process compiles nothing"). Thread-safe.
struct CompileCacheCounters {
  uint64_t graph_compiles = 0;    // graph_compile calls
  uint64_t deserializations = 0;  // executables rebuilt from disk bytes
  uint64_t memory_hits = 0;       // compile() answered from the memory cache
  uint64_t disk_hits = 0;         // compile() answered from a disk entry
  uint64_t rebuilt_entries = 0;   // corrupt or stale disk entries warned about
};
CompileCacheCounters compile_cache_counters();
// Drops the memory cache (as a new process would start). Compiled graphs
// keep their executables. Thread-safe.
void clear_compile_cache();

}  // namespace hal

#endif  // HAL_RUNTIME_COMPILED_GRAPH_HPP_
