#include "external_data.hpp"

#include <filesystem>
#include <fstream>

#include "hal/runtime/error.hpp"

namespace hal::onnx::detail {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(hal_status_code_e code, const std::string& tensor, const std::string& location,
                         const std::string& why) {
  throw Error(code, "initializer '" + tensor + "': external data '" + location + "' " + why);
}

// Whether PATH is ROOT or below it (both canonical).
bool is_within(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (p == path.end() || *r != *p) return false;
  }
  return true;
}

}  // namespace

std::vector<uint8_t> read_external_data(const std::string& root, const std::string& location, uint64_t offset,
                                        std::optional<uint64_t> length, const std::string& tensor) {
  if (root.empty())
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location,
           "refused: the model was given as bytes without LoadOptions::model_dir");
  if (location.empty()) refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "has an empty location");
  fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "is an absolute path (must be relative to the model's folder)");
  for (const fs::path& part : rel) {
    if (part == "..") refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "has a '..' component (escapes the model's folder)");
  }
  std::error_code ec;
  fs::path canon_root = fs::canonical(root, ec);
  if (ec) refuse(HAL_STATUS_NOT_FOUND, tensor, location, "cannot be read: model folder '" + root + "': " + ec.message());
  fs::path joined = canon_root / rel;
  if (!fs::exists(joined, ec))
    refuse(HAL_STATUS_NOT_FOUND, tensor, location, "does not exist (looked for '" + joined.string() + "')");
  fs::path file = fs::canonical(joined, ec);
  if (ec) refuse(HAL_STATUS_NOT_FOUND, tensor, location, "cannot be resolved: " + ec.message());
  if (!is_within(canon_root, file))
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location,
           "resolves to '" + file.string() + "', outside the model's folder '" + canon_root.string() + "' (symlink)");
  if (!fs::is_regular_file(file, ec)) refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "is not a regular file");
  uint64_t size = fs::file_size(file, ec);
  if (ec) refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "cannot be sized: " + ec.message());
  if (offset > size)
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location,
           "is " + std::to_string(size) + " bytes, shorter than offset " + std::to_string(offset));
  uint64_t n = length ? *length : size - offset;
  if (n > size - offset)
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location,
           "is " + std::to_string(size) + " bytes, shorter than offset " + std::to_string(offset) + " + length " +
               std::to_string(n));
  std::vector<uint8_t> bytes(n);
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  if (n > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n)))
    refuse(HAL_STATUS_INVALID_ARGUMENT, tensor, location, "could not be read");
  return bytes;
}

}  // namespace hal::onnx::detail
