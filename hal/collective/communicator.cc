#include "hal/runtime/communicator.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <thread>

#include "hal/common/collective_extent.hpp"
#include "hal/common/dtype.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {

// A status the plugin owns and frees through its destroy.
struct HostStatus {
  hal_status_t status;
  std::string message;
};
hal_status_t* host_status(hal_status_code_e code, std::string message) noexcept {
  try {
    auto* s = new HostStatus{{sizeof(hal_status_t), static_cast<uint32_t>(code), nullptr,
                              [](hal_status_t* p) { delete reinterpret_cast<HostStatus*>(p); }},
                             std::move(message)};
    s->status.message = s->message.c_str();
    return &s->status;
  } catch (...) {
    static hal_status_t oom{sizeof(hal_status_t), HAL_STATUS_OUT_OF_MEMORY, "out of memory in the host's bootstrap",
                            [](hal_status_t*) {}};
    return &oom;
  }
}

// hal_comm_bootstrap_t over a KeyValueStore; exceptions become statuses.
hal_status_t* store_set(void* context, const char* key, const void* value, size_t size) {
  try {
    const auto* bytes = static_cast<const uint8_t*>(value);
    static_cast<KeyValueStore*>(context)->set(key, std::vector<uint8_t>(bytes, bytes + size));
    return nullptr;
  } catch (const Error& e) {
    return host_status(e.code(), e.what());
  } catch (const std::exception& e) {
    return host_status(HAL_STATUS_INTERNAL, std::string("bootstrap store: ") + e.what());
  }
}
hal_status_t* store_get(void* context, const char* key, uint64_t timeout_ms, void* out, size_t capacity,
                        size_t* out_size) {
  try {
    auto value = static_cast<KeyValueStore*>(context)->get(key, std::chrono::milliseconds(timeout_ms));
    if (!value)
      return host_status(HAL_STATUS_TIMEOUT, std::string("key '") + key + "' did not appear within " +
                                                 std::to_string(timeout_ms) + " ms");
    std::memcpy(out, value->data(), std::min(capacity, value->size()));
    *out_size = value->size();
    return nullptr;
  } catch (const Error& e) {
    return host_status(e.code(), e.what());
  } catch (const std::exception& e) {
    return host_status(HAL_STATUS_INTERNAL, std::string("bootstrap store: ") + e.what());
  }
}

const hal_collective_api_t& collective_api_of(const Device& device) {
  const hal_collective_api_t& api = device.plugin().collective;
  if (api.comm_init == nullptr)
    throw Error(HAL_STATUS_UNIMPLEMENTED,
                device.plugin().name + ": collectives are not implemented by this plugin" +
                    (device.plugin().collective_note.empty() ? "" : " (" + device.plugin().collective_note + ")"));
  return api;
}

}  // namespace

// ---- FileStore ----

FileStore::FileStore(std::string directory) : dir_(std::move(directory)) {
  if (!std::filesystem::is_directory(dir_))
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "FileStore: '" + dir_ + "' is not a directory");
}

std::string FileStore::path_of(const std::string& key) const {
  std::string name;
  for (char c : key) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string path = path_of(key), tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
    if (!f) throw Error(HAL_STATUS_INTERNAL, "FileStore: cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(HAL_STATUS_INTERNAL, "FileStore: cannot rename '" + tmp + "': " + std::strerror(errno));
}

std::optional<std::vector<uint8_t>> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string path = path_of(key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// ---- Communicator ----

CommUniqueId Communicator::unique_id(Device& device) {
  const hal_collective_api_t& api = collective_api_of(device);
  hal_comm_get_unique_id_args_t args{};
  args.struct_size = sizeof(args);
  args.device = device.handle();
  CommUniqueId id{};
  args.out_id = &id;
  throw_if_error(api.comm_get_unique_id(&args));
  return id;
}

Communicator::Communicator(std::shared_ptr<Device> device, uint32_t world_size, uint32_t rank, const CommUniqueId& id,
                           KeyValueStore* store, std::chrono::milliseconds timeout)
    : device_(std::move(device)) {
  const hal_collective_api_t& api = collective_api_of(*device_);
  hal_comm_bootstrap_t bootstrap{sizeof(hal_comm_bootstrap_t), store, &store_set, &store_get};
  hal_comm_init_args_t args{};
  args.struct_size = sizeof(args);
  args.device = device_->handle();
  args.world_size = world_size;
  args.rank = rank;
  args.id = &id;
  args.bootstrap = store != nullptr ? &bootstrap : nullptr;
  args.timeout_ms = static_cast<uint64_t>(timeout.count());
  args.out_comm = &handle_;
  throw_if_error(api.comm_init(&args));
  world_size_ = world_size;
  rank_ = rank;
}

Communicator::Communicator(std::shared_ptr<Device> device, hal_comm_t* handle)
    : device_(std::move(device)), handle_(handle) {
  const hal_comm_info_t i = info();
  world_size_ = i.world_size;
  rank_ = i.rank;
}

hal_comm_info_t Communicator::info() const {
  hal_comm_info_t info{};
  info.struct_size = sizeof(info);
  hal_comm_get_info_args_t args{sizeof(args), nullptr, handle_, &info};
  throw_if_error(api().comm_get_info(&args));
  return info;
}

Communicator::Communicator(Communicator&& other) noexcept { *this = std::move(other); }

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::move(other.device_);
    handle_ = std::exchange(other.handle_, nullptr);
    world_size_ = other.world_size_;
    rank_ = other.rank_;
  }
  return *this;
}

Communicator::~Communicator() { release(); }

void Communicator::release() noexcept {
  if (handle_ == nullptr) return;
  hal_comm_args_t args{sizeof(args), nullptr, handle_, nullptr};
  if (hal_status_t* st = api().comm_destroy(&args)) st->destroy(st);  // nowhere to report from a destructor
  handle_ = nullptr;
}

const hal_collective_api_t& Communicator::api() const {
  if (handle_ == nullptr) throw Error(HAL_STATUS_INVALID_ARGUMENT, "the communicator was moved from or destroyed");
  return device_->plugin().collective;
}

std::chrono::milliseconds Communicator::timeout() const { return std::chrono::milliseconds(info().timeout_ms); }

std::string Communicator::transport() const {
  const hal_comm_info_t i = info();
  return i.transport != nullptr ? i.transport : "";
}

std::vector<std::string> Communicator::peer_transports() const {
  const hal_comm_info_t i = info();
  std::vector<std::string> peers;
  if (i.peer_transports == nullptr) return peers;
  std::string all = i.peer_transports;
  for (size_t at = 0;;) {
    const size_t comma = all.find(',', at);
    peers.push_back(all.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return peers;
}

void Communicator::run(const CollectiveCall& call, const Stream* stream) {
  const hal_collective_api_t& table = api();
  const size_t world = world_size_;
  // Bitwise reductions are ABI 1.11: an older plugin would read them as
  // unknown ops (or, if it does not check, as something else).
  const bool reduces = call.kind == HAL_COLLECTIVE_ALLREDUCE || call.kind == HAL_COLLECTIVE_REDUCE ||
                       call.kind == HAL_COLLECTIVE_REDUCE_SCATTER;
  if (reduces && (call.op == HAL_REDUCE_BAND || call.op == HAL_REDUCE_BOR || call.op == HAL_REDUCE_BXOR) &&
      device_->plugin().negotiated_minor < 11) {
    static const char* const names[] = {"band", "bor", "bxor"};
    throw Error(HAL_STATUS_UNIMPLEMENTED, device_->plugin().name + ": reduce op " + names[call.op - HAL_REDUCE_BAND] +
                                              " needs ABI 1.11 and the plugin speaks 1." +
                                              std::to_string(device_->plugin().negotiated_minor));
  }
  // Tags are ABI 1.13: an older plugin would not read the field and would
  // match a tagged receive to whatever its peer sent first.
  if ((call.kind == HAL_COLLECTIVE_SEND || call.kind == HAL_COLLECTIVE_RECV) && call.tag != 0 &&
      device_->plugin().negotiated_minor < 13)
    throw Error(HAL_STATUS_UNIMPLEMENTED, device_->plugin().name + ": " +
                                              (call.kind == HAL_COLLECTIVE_SEND ? "send" : "recv") + " with tag " +
                                              std::to_string(call.tag) + " needs ABI 1.13 and the plugin speaks 1." +
                                              std::to_string(device_->plugin().negotiated_minor));
  const bool unequal = !call.send_counts.empty() || !call.send_displs.empty() || !call.recv_counts.empty() ||
                       !call.recv_displs.empty();
  if (unequal && (call.send_counts.size() != world || call.send_displs.size() != world ||
                  call.recv_counts.size() != world || call.recv_displs.size() != world))
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "alltoall: send_counts, send_displs, recv_counts and recv_displs need " +
                                                 std::to_string(world) + " entries each (the world size)");
  // The plugin checks ranges against its allocation, which the caching
  // allocator may have rounded up: check against what was asked for.
  const uint64_t es = common::dtype_size(call.dtype);
  const common::CollectiveExtent extent = common::collective_extent(
      call.kind, call.count, static_cast<uint32_t>(world), unequal ? call.send_counts.data() : nullptr,
      unequal ? call.send_displs.data() : nullptr, unequal ? call.recv_counts.data() : nullptr,
      unequal ? call.recv_displs.data() : nullptr);
  const uint64_t send_elems = extent.send, recv_elems = extent.recv;
  for (auto [buffer, offset, elems, name] : {std::tuple{call.send, call.send_offset, send_elems, "send"},
                                             std::tuple{call.recv, call.recv_offset, recv_elems, "recv"}}) {
    if (buffer == nullptr || es == 0 || elems > UINT64_MAX / 64) continue;  // the plugin refuses these
    if (offset > buffer->size() || elems * es > buffer->size() - offset)
      throw Error(HAL_STATUS_OUT_OF_RANGE, std::string(name) + " range [offset " + std::to_string(offset) + ", +" +
                                               std::to_string(elems * es) + ") exceeds the buffer's size " +
                                               std::to_string(buffer->size()));
  }
  hal_collective_args_t args{};
  args.struct_size = sizeof(args);
  args.comm = handle_;
  args.stream = stream != nullptr ? stream->handle() : nullptr;
  args.kind = call.kind;
  args.dtype = call.dtype;
  args.op = call.op;
  args.root = call.root;
  args.count = call.count;
  args.send = call.send != nullptr ? call.send->handle() : nullptr;
  args.send_offset = call.send_offset;
  args.recv = call.recv != nullptr ? call.recv->handle() : nullptr;
  args.recv_offset = call.recv_offset;
  args.tag = call.tag;
  if (unequal) {
    args.send_counts = call.send_counts.data();
    args.send_displs = call.send_displs.data();
    args.recv_counts = call.recv_counts.data();
    args.recv_displs = call.recv_displs.data();
  }
  throw_if_error(table.collective(&args));
}

void Communicator::allreduce(const Buffer& send, const Buffer& recv, uint64_t count, hal_dtype_e dtype,
                             hal_reduce_op_e op, const Stream* stream) {
  CollectiveCall c;
  c.kind = HAL_COLLECTIVE_ALLREDUCE;
  c.dtype = dtype;
  c.op = op;
  c.count = count;
  c.send = &send;
  c.recv = &recv;
  run(c, stream);
}

void Communicator::broadcast(const Buffer& buffer, uint64_t count, hal_dtype_e dtype, uint32_t root,
                             const Stream* stream) {
  CollectiveCall c;
  c.kind = HAL_COLLECTIVE_BROADCAST;
  c.dtype = dtype;
  c.root = root;
  c.count = count;
  c.send = &buffer;
  c.recv = &buffer;
  run(c, stream);
}

void Communicator::allgather(const Buffer& send, const Buffer& recv, uint64_t count, hal_dtype_e dtype,
                             const Stream* stream) {
  CollectiveCall c;
  c.kind = HAL_COLLECTIVE_ALLGATHER;
  c.dtype = dtype;
  c.count = count;
  c.send = &send;
  c.recv = &recv;
  run(c, stream);
}

void Communicator::barrier(const Stream* stream) {
  hal_comm_args_t args{sizeof(args), nullptr, handle_, stream != nullptr ? stream->handle() : nullptr};
  throw_if_error(api().barrier(&args));
}

void Communicator::group_start() {
  hal_comm_args_t args{sizeof(args), nullptr, handle_, nullptr};
  throw_if_error(api().group_start(&args));
}

void Communicator::group_end() {
  hal_comm_args_t args{sizeof(args), nullptr, handle_, nullptr};
  throw_if_error(api().group_end(&args));
}

std::unique_ptr<Communicator> Communicator::split(int32_t color, int32_t key) {
  const hal_collective_api_t& table = api();
  if (table.comm_split == nullptr)
    throw Error(HAL_STATUS_UNIMPLEMENTED, device_->plugin().name + ": comm_split is not implemented by this plugin");
  hal_comm_t* child = nullptr;
  hal_comm_split_args_t args{sizeof(args), nullptr, handle_, color, key, &child};
  throw_if_error(table.comm_split(&args));
  if (child == nullptr) return nullptr;
  return std::unique_ptr<Communicator>(new Communicator(device_, child));
}

void Communicator::abort() {
  hal_comm_args_t args{sizeof(args), nullptr, handle_, nullptr};
  throw_if_error(api().comm_abort(&args));
}

std::optional<Error> Communicator::async_error() const {
  hal_status_t* error = nullptr;
  hal_comm_get_async_error_args_t args{sizeof(args), nullptr, handle_, &error};
  throw_if_error(api().comm_get_async_error(&args));
  if (error == nullptr) return std::nullopt;
  try {
    throw_if_error(error);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace hal
