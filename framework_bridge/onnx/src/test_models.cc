#include "test_models.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace hal::onnx::testing {

ModelMaker::ModelMaker(int64_t opset) {
  m_.set_ir_version(8);
  m_.set_producer_name("hal_onnx_test");
  auto* o = m_.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m_.mutable_graph()->set_name("test");
}

void ModelMaker::input(const std::string& name, int32_t elem_type, const std::vector<DimSpec>& dims) {
  auto* vi = m_.mutable_graph()->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const DimSpec& d : dims) {
    auto* dim = shape->add_dim();
    if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
    else if (!std::get<std::string>(d).empty()) dim->set_dim_param(std::get<std::string>(d));
  }
}

void ModelMaker::output(const std::string& name, int32_t elem_type) {
  auto* vi = m_.mutable_graph()->add_output();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  tt->mutable_shape();  // libonnx 1.12's checker wants the field; HAL infers output shapes itself
}

::onnx::TensorProto& ModelMaker::init_f32(const std::string& name, const std::vector<int64_t>& shape,
                                          const std::vector<float>& v) {
  auto* t = m_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return *t;
}

::onnx::TensorProto& ModelMaker::init_i64(const std::string& name, const std::vector<int64_t>& shape,
                                          const std::vector<int64_t>& v) {
  auto* t = m_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  for (int64_t d : shape) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
  return *t;
}

::onnx::NodeProto& ModelMaker::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = m_.mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name.empty() ? op_type + std::to_string(m_.graph().node_size() - 1) : name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

std::string ModelMaker::bytes() const { return m_.SerializeAsString(); }

Model ModelMaker::load() const {
  std::string b = bytes();
  return Model::load_bytes(b.data(), b.size());
}

void attr_i(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr_f(::onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void attr_s(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}
void attr_ints(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::string temp_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  auto p = std::filesystem::temp_directory_path() / ("hal_onnx_" + tag + "_" + std::to_string(rng()));
  std::filesystem::create_directories(p);
  return p.string();
}

SessionOptions cpu_session() {
  static const std::string config = [] {
    std::string path = temp_dir("config") + "/hal.toml";
    std::ofstream(path) << "default_device = \"cpu:0\"\nfallback_device = \"cpu:0\"\ndiscover = false\n\n"
                        << "[[plugin]]\npath = \"" << HAL_TEST_CPU_PLUGIN << "\"\n";
    return path;
  }();
  SessionOptions o;
  o.config = config;
  return o;
}

HostTensorRef ref_f32(const std::vector<int64_t>& shape, const std::vector<float>& v) {
  return {HAL_DTYPE_FLOAT32, shape, v.data()};
}

std::vector<float> floats(const HostTensor& t) {
  std::vector<float> out(t.data.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

}  // namespace hal::onnx::testing
