// Test helpers: hand-built ONNX ModelProtos and a CPU-plugin session config
// (for hal_onnx_test only).
#ifndef HAL_ONNX_SRC_TEST_MODELS_HPP_
#define HAL_ONNX_SRC_TEST_MODELS_HPP_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "hal/onnx/session.hpp"
#include "onnx/onnx_pb.h"

namespace hal::onnx::testing {

using DimSpec = std::variant<int64_t, std::string>;  // a size, or a dim_param ("" = neither)

// Builds a ModelProto: graph "test", IR version 8, one default-domain opset.
class ModelMaker {
 public:
  explicit ModelMaker(int64_t opset = 17);
  void input(const std::string& name, int32_t elem_type, const std::vector<DimSpec>& dims);
  void output(const std::string& name, int32_t elem_type = ::onnx::TensorProto::FLOAT);
  // Initializers in raw_data.
  ::onnx::TensorProto& init_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v);
  ::onnx::TensorProto& init_i64(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& v);
  ::onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "");
  ::onnx::ModelProto& proto() { return m_; }
  std::string bytes() const;
  Model load() const;

 private:
  ::onnx::ModelProto m_;
};

void attr_i(::onnx::NodeProto& n, const std::string& name, int64_t v);
void attr_f(::onnx::NodeProto& n, const std::string& name, float v);
void attr_s(::onnx::NodeProto& n, const std::string& name, const std::string& v);
void attr_ints(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);

// A fresh directory under the system temp dir (not removed).
std::string temp_dir(const std::string& tag);
// Session options for the CPU plugin only (a hal.toml written once).
SessionOptions cpu_session();

HostTensorRef ref_f32(const std::vector<int64_t>& shape, const std::vector<float>& v);
std::vector<float> floats(const HostTensor& t);

}  // namespace hal::onnx::testing

#endif  // HAL_ONNX_SRC_TEST_MODELS_HPP_
