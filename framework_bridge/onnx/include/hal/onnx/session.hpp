// HAL ONNX front end: a Model compiled for a HAL device and run with host
// tensors, shaped like onnxruntime's InferenceSession.
//
//   hal::onnx::Session s(hal::onnx::Model::load("mlp.onnx"), {.device = "cpu"});
//   float x[2 * 4] = {...};
//   auto out = s.run({}, {{"x", {HAL_DTYPE_FLOAT32, {2, 4}, x}}});   // all outputs
//   out[0].shape; out[0].data;                                       // row-major bytes
//
// Feeds are copied to the device through hal::Buffer::copy_from_host and
// results back through copy_to_host; nothing assumes host-addressable device
// memory. A Session owns its compiled graph and device handle.
#ifndef HAL_ONNX_SESSION_HPP_
#define HAL_ONNX_SESSION_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/onnx/host_tensor.hpp"  // IWYU pragma: export
#include "hal/onnx/model.hpp"
#include "hal/runtime/compiled_graph.hpp"

namespace hal::onnx {

struct SessionOptions {
  std::string config;  // hal.toml path; "" = HAL_CONFIG, else the default search
  std::string device;  // "hal:1" (runtime device index), a plugin name ("cpu", "opencl"); "" = default device
  // Compile options: hal::CompileOptions::options (part of the compile
  // cache key; a changed option recompiles).
  std::map<std::string, std::string> options;
  // false: plugins compile no subgraphs, every node runs op by op (no
  // fusion): hal::CompileOptions::graph_compilers, onnxruntime's
  // ORT_DISABLE_ALL in hal.onnx.
  bool graph_compilers = true;
  // false: values between op-by-op launches stay row-major instead of the
  // layouts their plugins prefer (hal::CompileOptions::layouts).
  bool layouts = true;
};

// A compiled model. Construction runs the graph pipeline (hal::run_pipeline:
// decompose what no device runs, fold constants on the chosen device, CSE,
// DCE; HAL_GRAPH_DUMP_DIR dumps each stage) and compiles the result with
// hal::compile across the runtime's devices: the chosen one first (home:
// feeds and results live there), then the others in config order; the
// runtime's fallback device runs the nodes all of them decline.
// run() may be called from several
// threads at once (each call uses its own device buffers). Move-only.
class Session {
 public:
  // Compiles MODEL for the device SESSION_OPTIONS names (the runtime is
  // initialised from CONFIG on first use). Throws hal::Error: NOT_FOUND for
  // an unknown device name, INVALID_ARGUMENT for a bad config (file:line),
  // UNIMPLEMENTED naming the node no device runs (op, and why each declined).
  explicit Session(Model model, const SessionOptions& options = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Runs the model. FEEDS gives every model input by name (order free).
  // Returns the outputs named in OUTPUT_NAMES, in that order (empty = all,
  // in model order). Throws hal::Error INVALID_ARGUMENT naming the input and
  // what is wrong: an unknown feed or output name, a missing or repeated
  // input, a wrong dtype, a wrong rank or dim (a concrete dim differs, or a
  // symbolic dim bound to two sizes: names the symbol and both inputs);
  // device errors as the runtime reports them (OUT_OF_MEMORY naming sizes).
  // On error no result is returned and the caller's feeds are untouched.
  // A model that needs input values (Model::needs_input_values) is
  // translated and compiled at the first run with each distinct set of
  // values of its value inputs (then reused); that translation's errors
  // (UNIMPLEMENTED / INVALID_ARGUMENT naming the node) come from run().
  // A sequence input s is fed as its elements "s[0]", "s[1]", ... (an empty
  // one as "s[]", whose tensor is ignored); the translation is kept per
  // element count, dtypes and shapes. A sequence output is returned as its
  // elements, consecutively (run_named says which are whose).
  std::vector<HostTensor> run(const std::vector<std::string>& output_names,
                              const std::vector<std::pair<std::string, HostTensorRef>>& feeds);
  // As run(), each result with its name: an output's, or "y[i]" for element
  // i of sequence output y ("y[]": y is empty; its tensor is a placeholder).
  std::vector<std::pair<std::string, HostTensor>> run_named(
      const std::vector<std::string>& output_names, const std::vector<std::pair<std::string, HostTensorRef>>& feeds);

  const Model& model() const;
  // What compiling made of the model: executables compiled vs taken from
  // the memory or disk cache, per-device groups and op-by-op nodes,
  // fallback nodes, copies between devices. Valid while the Session lives;
  // fixed after construction until a failover (thread-safe to read; a
  // failover's new figures are stats() called again). For a model that needs
  // input values: the latest run's compilation (all zero before the first).
  const CompiledGraphStats& stats() const;
  // The home device now ("opencl:0"): the one SESSION_OPTIONS chose, or the
  // failover device after it was lost.
  std::string device() const;
  // Each failover, in order ("device opencl:0 lost (...): re-partitioned
  // onto the failover device cpu:0"). When a run fails because a device it
  // uses was lost (HAL_STATUS_DEVICE_LOST), the session compiles the model
  // again on the devices left (the home device's failover device, hal.toml
  // failover, when the home device is the one lost) and runs it again from
  // the same feeds; without a usable failover device the run throws that
  // DEVICE_LOST error. Thread-safe.
  std::vector<std::string> failovers() const;
  // The device, the partition (groups the plugin compiled, op-by-op nodes,
  // per-executable descriptions) and run counters, as text for people.
  std::string explain() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct SessionAccess;  // session.cc
};

}  // namespace hal::onnx

#endif  // HAL_ONNX_SESSION_HPP_
