// A small, strict .npy reader and writer (NumPy format 1.0 - 3.0, C order,
// little-endian or byte-order-free dtypes) for hal-run-onnx.
#ifndef HAL_ONNX_TOOLS_NPY_HPP_
#define HAL_ONNX_TOOLS_NPY_HPP_

#include <string>

#include "hal/onnx/host_tensor.hpp"

namespace hal::onnx::npy {

// Reads the .npy file at PATH. Throws hal::Error: NOT_FOUND when it cannot
// be opened; INVALID_ARGUMENT naming PATH for a bad magic or version, a
// header that is not exactly {'descr': ..., 'fortran_order': False,
// 'shape': (...)}, Fortran order, a big-endian or unsupported descr, or a
// data size that does not match the shape.
HostTensor read(const std::string& path);
// The same for the bytes of a .npy file; NAME is used in messages.
HostTensor parse(const std::string& bytes, const std::string& name);
// Writes T to PATH (format 1.0; descr from its dtype). Throws hal::Error
// INVALID_ARGUMENT for a dtype NumPy has no descr for, or when PATH cannot
// be written (naming it).
void write(const std::string& path, const HostTensor& t);
// The bytes write() would store.
std::string serialize(const HostTensor& t);

}  // namespace hal::onnx::npy

#endif  // HAL_ONNX_TOOLS_NPY_HPP_
