// Helpers for kernel unit tests that launch catalog ops through the runtime
// (plugins/<name>/ops/*_test.cc). hal-conformance is the full check; these
// keep a kernel's own tests short.
//
//   OpTester t(HAL_TEST_CPU_PLUGIN);
//   auto a = t.tensor<float>({2, 2}, {1, 2, 3, 4});
//   auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
//   t.run("add", {&a.view, &a.view}, {&out.view});
//   CHECK(t.read<float>(out) == std::vector<float>{2, 4, 6, 8});
#ifndef HAL_TESTING_OP_TEST_UTIL_HPP_
#define HAL_TESTING_OP_TEST_UTIL_HPP_

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/sdk/op_schema.hpp"  // plugin tests name dtypes hal::sdk::dtype_name

namespace hal::testing {

// A device buffer with a view of it. Move-only (owns the Buffer).
struct DeviceTensor {
  Buffer buffer;
  TensorView view;
};

class OpTester {
 public:
  // Loads exactly the plugin at PATH and uses its device 0.
  explicit OpTester(const std::string& plugin_path) {
    RuntimeOptions o;
    o.plugin_paths = {plugin_path};
    o.use_environment = false;
    o.use_install_dir = false;
    runtime_ = Runtime::create(o);
    device_ = runtime_->devices().at(0);
  }
  const std::shared_ptr<Device>& device() const { return device_; }

  // A contiguous tensor holding VALUES (storage type T, e.g. float, int64_t,
  // uint16_t bits for float16).
  template <class T>
  DeviceTensor tensor(std::vector<int64_t> shape, const std::vector<T>& values, hal_dtype_e dtype) {
    DeviceTensor t = empty(dtype, std::move(shape), values.size() * sizeof(T));
    if (!values.empty()) t.buffer.copy_from_host(values.data(), values.size() * sizeof(T));
    return t;
  }
  DeviceTensor tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
    return tensor<float>(std::move(shape), values, HAL_DTYPE_FLOAT32);
  }
  // An uninitialised contiguous tensor (BYTES overrides the size).
  DeviceTensor empty(hal_dtype_e dtype, std::vector<int64_t> shape, size_t bytes = 0) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    if (bytes == 0) bytes = static_cast<size_t>(n) * common::dtype_size(dtype);
    DeviceTensor t{device_->allocate(bytes == 0 ? 1 : bytes), {}};
    t.view = TensorView(t.buffer, dtype, std::move(shape));
    return t;
  }
  template <class T>
  std::vector<T> read(const DeviceTensor& t) {
    std::vector<T> out(static_cast<size_t>(t.view.numel()));
    if (!out.empty()) t.buffer.copy_to_host(out.data(), out.size() * sizeof(T), t.view.byte_offset);
    return out;
  }
  // Launches OP synchronously; throws hal::Error on refusal.
  void run(const std::string& op, const std::vector<const TensorView*>& inputs,
           const std::vector<const TensorView*>& outputs, const std::vector<Attr>& attrs = {}) {
    OpRunner(device_, op).launch(inputs, outputs, attrs);
  }
  // The bytes of T's elements (T contiguous).
  std::vector<unsigned char> bytes(const DeviceTensor& t) {
    std::vector<unsigned char> out(static_cast<size_t>(t.view.numel()) * common::dtype_size(t.view.dtype));
    if (!out.empty()) t.buffer.copy_to_host(out.data(), out.size(), t.view.byte_offset);
    return out;
  }
  // Launches OP expecting a refusal whose message names OP and contains
  // every string of MENTIONS (and whose code is CODE, when given); every
  // tensor of UNTOUCHED must keep its bytes. Records doctest failures.
  void expect_refused(const std::string& op, const std::vector<const TensorView*>& inputs,
                      const std::vector<const TensorView*>& outputs, const std::vector<Attr>& attrs,
                      const std::vector<std::string>& mentions, std::optional<hal_status_code_e> code = std::nullopt,
                      const std::vector<const DeviceTensor*>& untouched = {}) {
    std::vector<std::vector<unsigned char>> before;
    for (const DeviceTensor* t : untouched) before.push_back(bytes(*t));
    try {
      run(op, inputs, outputs, attrs);
      FAIL("launch of ", op, " was accepted", mentions.empty() ? "" : "; expected: " + mentions[0]);
    } catch (const Error& e) {
      std::string what = e.what();
      CHECK_MESSAGE(what.find(op) != std::string::npos, what);
      for (const std::string& m : mentions) CHECK_MESSAGE(what.find(m) != std::string::npos, what, " lacks ", m);
      if (code) CHECK_MESSAGE(e.code() == *code, what);
    }
    for (size_t i = 0; i < untouched.size(); ++i) CHECK_MESSAGE(bytes(*untouched[i]) == before[i], op, ": output written");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<Device> device_;
};

// Compiling for DEVICE alone with no compile cache (every call compiles),
// with or without its graph compiler (false: every node op by op, the
// reference a compiled graph is checked against).
inline CompileOptions uncached_compile_options(const std::shared_ptr<Device>& device, bool graph_compilers) {
  CompileOptions o;
  o.devices = {device};
  o.disk_cache = false;
  o.memory_cache = false;
  o.graph_compilers = graph_compilers;
  return o;
}

}  // namespace hal::testing

#endif  // HAL_TESTING_OP_TEST_UTIL_HPP_
