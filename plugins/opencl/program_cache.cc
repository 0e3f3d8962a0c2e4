#include "program_cache.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace hal::opencl {
namespace {

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static const char* const hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size > 0) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The first line of SOURCE that names a kernel, for error messages.
std::string first_kernel_name(const std::string& source) {
  size_t at = source.find("__kernel");
  if (at == std::string::npos) return "(no kernel)";
  size_t open = source.find('(', at);
  size_t start = source.rfind(' ', open) + 1;
  return source.substr(start, open - start);
}

}  // namespace

std::string ProgramCache::device_key(cl_platform_id platform, cl_device_id device) {
  return platform_info_string(platform, CL_PLATFORM_NAME) + "|" +
         platform_info_string(platform, CL_PLATFORM_VERSION) + "|" + device_info_string(device, CL_DEVICE_NAME) + "|" +
         device_info_string(device, CL_DEVICE_VERSION) + "|" + device_info_string(device, CL_DRIVER_VERSION);
}

ProgramCache::ProgramCache(cl_context context, cl_device_id device, std::string device_key, std::string directory)
    : context_(context), device_(device), device_key_(std::move(device_key)), directory_(std::move(directory)) {
  clRetainContext(context_);
  if (!directory_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(directory_, ec);
    if (ec) directory_.clear();  // an unwritable cache only costs compile time
  }
}

ProgramCache::~ProgramCache() {
  kernels_.clear();
  for (auto& [key, program] : programs_) clReleaseProgram(program);
  clReleaseContext(context_);
}

KernelEntry& ProgramCache::kernel(const std::string& source, const std::string& name, const std::string& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key = sha256_hex(source + '\0' + options) + ":" + name;
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return *it->second;
  cl_program prog = program(source, options);
  cl_int err = CL_SUCCESS;
  auto entry = std::make_unique<KernelEntry>();
  entry->kernel = clCreateKernel(prog, name.c_str(), &err);
  cl_check(err, "clCreateKernel", " for kernel '", name, "'");
  return *kernels_.emplace(key, std::move(entry)).first->second;
}

cl_program ProgramCache::program(const std::string& source, const std::string& options) {
  std::string key = sha256_hex(source + '\0' + options);
  auto it = programs_.find(key);
  if (it != programs_.end()) return it->second;

  std::string path;
  if (!directory_.empty()) {
    path = directory_ + "/" + sha256_hex(source + '\0' + options + '\0' + device_key_) + ".bin";
    if (cl_program p = load_binary(path, options)) {
      ++loaded_;
      return programs_[key] = p;
    }
  }
  const char* text = source.c_str();
  size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(context_, 1, &text, &length, &err);
  cl_check(err, "clCreateProgramWithSource");
  err = clBuildProgram(p, 1, &device_, options.c_str(), nullptr, nullptr);
  ++built_;
  if (err != CL_SUCCESS) {
    std::string log = build_log(p, device_);
    clReleaseProgram(p);
    sdk::fail(HAL_STATUS_DEVICE_ERROR, "clBuildProgram failed with ", cl_error_name(err), " (", err,
              ") for the program of kernel '", first_kernel_name(source), "' (options '", options,
              "'); build log:\n", log);
  }
  if (!path.empty()) store_binary(p, path);
  return programs_[key] = p;
}

cl_program ProgramCache::load_binary(const std::string& path, const std::string& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return nullptr;
  const unsigned char* data = bytes.data();
  size_t size = bytes.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = clCreateProgramWithBinary(context_, 1, &device_, &size, &data, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (p != nullptr) clReleaseProgram(p);
    return nullptr;  // a corrupt or foreign file: rebuild from source
  }
  if (clBuildProgram(p, 1, &device_, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(p);
    return nullptr;
  }
  return p;
}

void ProgramCache::store_binary(cl_program program, const std::string& path) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0)
    return;
  std::vector<unsigned char> bytes(size);
  unsigned char* data = bytes.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr) != CL_SUCCESS) return;
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
    if (!out) {
      std::remove(tmp.c_str());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
}

}  // namespace hal::opencl
