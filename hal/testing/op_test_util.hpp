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

#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "hal/sdk/op_schema.hpp"

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
    if (bytes == 0) bytes = static_cast<size_t>(n) * sdk::dtype_size(dtype);
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

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<Device> device_;
};

}  // namespace hal::testing

#endif  // HAL_TESTING_OP_TEST_UTIL_HPP_
