// hal-info: which plugins loaded, which were skipped and why, and every device
// with its capabilities. Exit status: 0 ok; 1 a plugin the user named (in the
// config, --plugin or HAL_PLUGIN_PATH) could not be used; 2 bad usage or
// configuration.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hal/runtime/names.hpp"
#include "hal/runtime/runtime.hpp"

namespace po = boost::program_options;
using nlohmann::ordered_json;

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "-" : out;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

ordered_json to_json(const hal::Runtime& rt, const std::string& config_path) {
  ordered_json j;
  j["hal_version"] = HAL_VERSION_STRING;
  j["abi"] = {{"major", HAL_ABI_VERSION_MAJOR}, {"minor", HAL_ABI_VERSION_MINOR}};
  j["config"] = config_path.empty() ? ordered_json(nullptr) : ordered_json(config_path);
  j["search_paths"] = rt.search_paths();
  j["layers"] = ordered_json::array();
  for (const auto& l : rt.layers())
    j["layers"].push_back({{"name", l.name}, {"path", l.path}, {"description", l.description}});
  j["plugins"] = ordered_json::array();
  for (const auto& p : rt.plugins()) {
    ordered_json devices = ordered_json::array();
    for (const auto& d : p->devices()) devices.push_back(d->id());
    j["plugins"].push_back({{"name", p->name()},
                            {"path", p->path()},
                            {"vendor", p->vendor()},
                            {"version", p->version()},
                            {"abi", {{"major", p->abi_major()}, {"minor", p->abi_minor()}}},
                            {"negotiated_minor", p->negotiated_minor()},
                            {"priority", p->priority()},
                            {"interfaces", hal::capability_names(p->interfaces())},
                            {"operators", {{"count", p->op_count()},
                                           {"catalog_version", p->op_catalog_version()},
                                           {"note", p->op_note()}}},
                            {"warnings", p->startup_warnings()},
                            {"graph", {{"implemented", p->has_graph()},
                                       {"serializable", p->serializes_executables()},
                                       {"note", p->graph_note()}}},
                            {"collectives", {{"implemented", p->has_collectives()}, {"note", p->collective_note()}}},
                            {"disabled_ops", p->disabled_ops()},
                            {"devices", devices}});
  }
  j["devices"] = ordered_json::array();
  for (const auto& d : rt.devices()) {
    const hal_device_properties_t& pr = d->properties();
    j["devices"].push_back({{"id", d->id()},
                            {"plugin", d->plugin_name()},
                            {"index", d->index()},
                            {"name", pr.name},
                            {"state", hal::device_state_name(d->state())},
                            {"lost_reason", d->lost_reason()},
                            {"failover", d->failover_device() ? d->failover_device()->id() : ""},
                            {"vendor", pr.vendor},
                            {"driver_version", pr.driver_version},
                            {"total_memory_bytes", pr.total_memory_bytes},
                            {"compute_units", pr.compute_units},
                            {"capabilities", hal::capability_names(pr.capabilities)},
                            {"dtypes", hal::dtype_names(pr.supported_dtypes)},
                            {"min_buffer_alignment", pr.min_buffer_alignment},
                            {"host_accessible_memory", (pr.flags & HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY) != 0}});
  }
  j["skipped"] = ordered_json::array();
  for (const auto& s : rt.skipped())
    j["skipped"].push_back({{"path", s.path},
                            {"name", s.name},
                            {"reason", hal::skip_reason_name(s.reason)},
                            {"message", s.message},
                            {"requested", s.requested}});
  return j;
}

void print_text(const hal::Runtime& rt, const std::string& config_path, bool verbose) {
  std::ostream& o = std::cout;
  o << "HAL " << HAL_VERSION_STRING << " (ABI " << HAL_ABI_VERSION_MAJOR << "." << HAL_ABI_VERSION_MINOR << ")\n";
  o << "config: " << (config_path.empty() ? "(none)" : config_path) << "\n";
  if (verbose) {
    o << "search paths:\n";
    for (const auto& s : rt.search_paths()) o << "  " << s << "\n";
  }
  if (!rt.layers().empty()) {
    o << "layers (outermost first):\n";
    for (const auto& l : rt.layers()) o << "  " << l.name << "  (" << l.path << ")  " << l.description << "\n";
  }
  o << "\nplugins: " << rt.plugins().size() << " loaded, " << rt.skipped().size() << " skipped\n";
  for (const auto& p : rt.plugins()) {
    o << "  " << p->name() << " " << p->version() << "  vendor: " << p->vendor() << "  ABI " << p->abi_major() << "."
      << p->abi_minor() << "  devices: " << p->devices().size() << "\n";
    o << "    path: " << p->path() << "\n";
    if (p->op_count() > 0) o << "    operators: " << p->op_count() << " (op catalog " << p->op_catalog_version() << ")\n";
    if (!p->op_note().empty()) o << "    " << p->op_note() << "\n";
    for (const auto& w : p->startup_warnings()) o << "    warning: " << w << "\n";
    o << "    graph compile: "
      << (!p->has_graph()                ? "not implemented"
          : p->serializes_executables() ? "implemented, executables serialisable (kept in the disk compile cache)"
                                        : "implemented, executables not serialisable (compiled in each process)")
      << "\n";
    if (!p->disabled_ops().empty()) o << "    disabled by hal.toml: " << join(p->disabled_ops()) << "\n";
    if (!p->graph_note().empty()) o << "    " << p->graph_note() << "\n";
    o << "    collectives: " << (p->has_collectives() ? "implemented" : "not implemented") << "\n";
    if (!p->collective_note().empty()) o << "    " << p->collective_note() << "\n";
    if (verbose)
      o << "    interfaces: " << join(hal::capability_names(p->interfaces()))
        << "  negotiated minor: " << p->negotiated_minor() << "  priority: " << p->priority() << "\n";
  }
  o << "\ndevices: " << rt.devices().size() << "\n";
  for (const auto& d : rt.devices()) {
    const hal_device_properties_t& pr = d->properties();
    o << "  " << d->id() << "  " << pr.name << "\n";
    if (d->state() == hal::DeviceState::kLost) o << "    state: LOST (" << d->lost_reason() << ")\n";
    if (d->failover_device()) o << "    failover: " << d->failover_device()->id() << "\n";
    o << "    vendor: " << pr.vendor << "  driver: " << pr.driver_version << "\n";
    o << "    memory: " << human_bytes(pr.total_memory_bytes) << "  compute units: " << pr.compute_units << "\n";
    o << "    capabilities: " << join(hal::capability_names(pr.capabilities)) << "\n";
    if (verbose) {
      o << "    dtypes: " << join(hal::dtype_names(pr.supported_dtypes)) << "\n";
      o << "    min buffer alignment: " << pr.min_buffer_alignment << "  host-accessible memory: "
        << ((pr.flags & HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY) ? "yes" : "no") << "\n";
    }
  }
  if (!rt.skipped().empty()) {
    o << "\nskipped:\n";
    // Explained once, and only when it appears.
    for (const auto& s : rt.skipped())
      if (s.requested) {
        o << "  (requested: named by --plugin, a [[plugin]] entry of hal.toml or a file in HAL_PLUGIN_PATH, not picked"
             " up by a directory scan; hal-info exits 1 when a requested plugin is skipped)\n";
        break;
      }
    for (const auto& s : rt.skipped()) {
      o << "  " << (s.path.empty() ? s.name : s.path) << "\n";
      o << "    reason: " << hal::skip_reason_name(s.reason) << (s.requested ? " (requested)" : "") << "\n";
      o << "    " << s.message << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description desc("hal-info: list HAL plugins, devices and capabilities\n\nOptions");
  std::vector<std::string> plugin_paths;
  std::string config_path;
  desc.add_options()("help,h", "show this help")("json", "print JSON instead of text")(
      "config", po::value<std::string>(&config_path), "hal.toml to use (overrides HAL_CONFIG)")(
      "plugin", po::value<std::vector<std::string>>(&plugin_paths),
      "probe this plugin .so only (repeatable)")("verbose,v", "show everything")(
      "version", "print the HAL and ABI version");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "hal-info: " << e.what() << "\n" << desc << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "hal-info " << HAL_VERSION_STRING << " (ABI " << HAL_ABI_VERSION_MAJOR << "."
              << HAL_ABI_VERSION_MINOR << ")\n";
    return 0;
  }

  hal::RuntimeOptions options;
  if (!config_path.empty()) options.config_path = config_path;
  options.plugin_paths = plugin_paths;
  std::shared_ptr<hal::Runtime> rt;
  try {
    rt = hal::Runtime::create(options);
  } catch (const hal::Error& e) {
    std::cerr << "hal-info: " << e.what() << "\n";
    return 2;
  }
  const std::string shown_config = rt->config().source;
  if (vm.count("json"))
    std::cout << to_json(*rt, shown_config).dump(2) << "\n";
  else
    print_text(*rt, shown_config, vm.count("verbose") > 0);

  for (const auto& s : rt->skipped())
    if (s.requested) return 1;
  return 0;
}
