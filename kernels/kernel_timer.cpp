#include "kernels/kernel_timer.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "kernels/device_backend.hpp"
#include "kernels/types.hpp"

namespace shardft {

namespace {

using Clock = std::chrono::steady_clock;

struct Totals {
  double seconds = 0;
  std::int64_t count = 0;
};

// One timed launch in marks mode, read back when the marks are folded into the totals.
struct MarkedLaunch {
  Totals* kernel = nullptr;
  std::size_t begin = 0, end = 0;
};

// Device marks time the launches where the kernels run on a device queue that takes marks
// (kernels/device_backend.hpp: a CUDA stream's events): nothing waits.
const bool kDeviceMarks = kComputeOnDevice && device_backend::has_queue_marks();
// Marks pending before they are read back (one wait on the device per this many launches).
constexpr std::size_t kMaxMarkedLaunches = 2048;

struct Timer {
  bool installed = false;         // timing
  bool callbacks = false;         // the Kokkos Tools callbacks are set (timing or counting)
  bool counting = false;          // install_kernel_launch_counter was called
  std::int64_t launches = 0;
  int uncounted = 0;              // UncountedLaunches scopes open
  std::map<std::string, Totals> kernels;
  Totals outside;  // between the end of one Kokkos kernel and the start of the next
  Clock::time_point last_end{}, started{};
  bool have_last = false;
  bool paused = false;  // pause_kernel_timer: counting goes on, timing stops
  int depth = 0;
  std::map<std::string, Totals> host_phases;  // HostPhase scopes
  std::vector<MarkedLaunch> marked;  // marks mode: launches not yet read back
  std::map<const Totals*, Totals> idle_before;  // the time between kernels, by the kernel after it
  std::size_t open_mark = 0;         // the begin mark of the launch in flight  // a kernel launched from inside another's callback is not timed twice
};

Timer& timer() {
  static Timer t;
  return t;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::size_t mark_now() { return device_backend::record_queue_mark(); }

// Reads the pending marks into the totals (waits for the last one) and frees them for reuse. The gap
// before the first launch of a batch is not known (its previous end mark is gone): a fold loses one gap.
void fold_marks(Timer& t) {
  for (std::size_t i = 0; i < t.marked.size(); ++i) {
    const MarkedLaunch& l = t.marked[i];
    l.kernel->seconds += 1e-3 * device_backend::queue_marks_elapsed_ms(l.begin, l.end);
    ++l.kernel->count;
    if (i > 0) {
      const double gap = 1e-3 * device_backend::queue_marks_elapsed_ms(t.marked[i - 1].end, l.begin);
      t.outside.seconds += gap;
      ++t.outside.count;
      Totals& before = t.idle_before[l.kernel];
      before.seconds += gap;
      ++before.count;
    }
  }
  t.marked.clear();
  device_backend::clear_queue_marks();
}

// A lambda's type name is its enclosing function's mangled name plus the closure: demangled, it names
// the kernel's function. Long template arguments are cut; the function name is what is wanted.
std::string readable(const char* name) {
  std::string raw = name ? name : "(unnamed)";
  for (const std::string& candidate : {raw, "_" + raw, "_Z" + raw}) {
    int status = 1;
    std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(candidate.c_str(), nullptr, nullptr, &status),
                                                std::free);
    if (status == 0 && out) {
      raw = out.get();
      break;
    }
  }
  const std::size_t ours = raw.find("shardft::");
  if (ours != std::string::npos) raw = raw.substr(ours);
  if (raw.size() > 150) raw = raw.substr(0, 147) + "...";
  return raw;
}

void begin_kernel(const char* name, std::uint32_t, std::uint64_t* id) {
  Timer& t = timer();
  *id = 0;
  if (t.uncounted == 0) ++t.launches;
  if (!t.installed || t.paused) return;
  if (t.depth++ > 0) return;
  if (kDeviceMarks) {
    if (t.marked.size() >= kMaxMarkedLaunches) fold_marks(t);
    t.open_mark = mark_now();
    *id = reinterpret_cast<std::uint64_t>(&t.kernels[readable(name)]);
    return;
  }
  Kokkos::fence();
  const Clock::time_point now = Clock::now();
  // The id carries the name's slot: std::map nodes do not move.
  Totals* kernel = &t.kernels[readable(name)];
  if (t.have_last) {
    const double gap = std::chrono::duration<double>(now - t.last_end).count();
    t.outside.seconds += gap;
    ++t.outside.count;
    Totals& before = t.idle_before[kernel];
    before.seconds += gap;
    ++before.count;
  }
  t.started = Clock::now();
  *id = reinterpret_cast<std::uint64_t>(kernel);
}

void end_kernel(std::uint64_t id) {
  Timer& t = timer();
  if (!t.installed || t.paused) return;
  if (--t.depth > 0 || id == 0) return;
  if (kDeviceMarks) {
    t.marked.push_back({reinterpret_cast<Totals*>(id), t.open_mark, mark_now()});
    return;
  }
  Kokkos::fence();
  Totals& k = *reinterpret_cast<Totals*>(id);
  k.seconds += since(t.started);
  ++k.count;
  t.last_end = Clock::now();
  t.have_last = true;
}

void set_callbacks() {
  Timer& t = timer();
  if (t.callbacks) return;
  namespace tools = Kokkos::Tools::Experimental;
  tools::set_begin_parallel_for_callback(&begin_kernel);
  tools::set_begin_parallel_reduce_callback(&begin_kernel);
  tools::set_begin_parallel_scan_callback(&begin_kernel);
  tools::set_end_parallel_for_callback(&end_kernel);
  tools::set_end_parallel_reduce_callback(&end_kernel);
  tools::set_end_parallel_scan_callback(&end_kernel);
  t.callbacks = true;
}

}  // namespace

#if KOKKOS_VERSION >= 40000
namespace {
void no_global_fence(const std::uint32_t, Kokkos::Tools::Experimental::ToolSettings* settings) {
  settings->requires_global_fencing = false;
}
}  // namespace

void declare_unfenced_kernel_callbacks() {
  Kokkos::Tools::Experimental::set_request_tool_settings_callback(&no_global_fence);
}
#else
void declare_unfenced_kernel_callbacks() {}
#endif

void install_kernel_timer() {
  set_callbacks();
  timer().installed = true;
}

void install_kernel_launch_counter() {
  set_callbacks();
  timer().counting = true;
}

std::int64_t kernel_launches() { return timer().launches; }

VendorKernel::VendorKernel(const char* name) {
  Timer& t = timer();
  if (!t.callbacks) return;
  begin_kernel(name, 0, &id_);
}

VendorKernel::~VendorKernel() {
  if (timer().callbacks) end_kernel(id_);
}

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

HostPhase::HostPhase(const char* name) {
  const Timer& t = timer();
  if (!t.installed || t.paused) return;
  name_ = name;
  start_ns_ = steady_ns();
}

HostPhase::~HostPhase() {
  if (name_ == nullptr) return;
  Timer& t = timer();
  if (!t.installed) return;
  Totals& phase = t.host_phases[name_];
  phase.seconds += 1e-9 * static_cast<double>(steady_ns() - start_ns_);
  ++phase.count;
}

UncountedLaunches::UncountedLaunches() { ++timer().uncounted; }
UncountedLaunches::~UncountedLaunches() { --timer().uncounted; }

bool kernel_timer_installed() { return timer().installed; }

void uninstall_kernel_timer() {
  Timer& t = timer();
  fold_marks(t);
  const bool counting = t.counting;
  const std::int64_t launches = t.launches;
  if (!counting) {  // the launch counter, once installed, stays
    namespace tools = Kokkos::Tools::Experimental;
    tools::set_begin_parallel_for_callback(nullptr);
    tools::set_begin_parallel_reduce_callback(nullptr);
    tools::set_begin_parallel_scan_callback(nullptr);
    tools::set_end_parallel_for_callback(nullptr);
    tools::set_end_parallel_reduce_callback(nullptr);
    tools::set_end_parallel_scan_callback(nullptr);
  }
  t = Timer{};
  t.callbacks = t.counting = counting;
  t.launches = launches;
}

void restart_kernel_timer() {
  Timer& t = timer();
  fold_marks(t);
  t.kernels.clear();
  t.outside = Totals{};
  t.idle_before.clear();
  t.host_phases.clear();
  t.have_last = false;
  t.paused = false;
}

void pause_kernel_timer() {
  Timer& t = timer();
  fold_marks(t);
  t.paused = true;
}

std::string kernel_timer_report(std::size_t top) {
  Timer& t = timer();
  if (t.depth == 0) fold_marks(t);
  std::vector<std::pair<std::string, Totals>> rows(t.kernels.begin(), t.kernels.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = t.outside.seconds;
  std::int64_t launches = 0;
  for (const auto& [name, k] : rows) {
    total += k.seconds;
    launches += k.count;
  }
  std::ostringstream s;
  char line[96];
  s << "kernel times (SHARDFT_KERNEL_TIMES, " << (kDeviceMarks ? "device time between stream marks, unfenced" : "every kernel fenced")
    << "): " << launches << " Kokkos kernel launches\n";
  std::snprintf(line, sizeof line, "%10s %6s %8s %10s  ", "seconds", "%", "count", "mean us");
  s << line << "kernel\n";
  auto row = [&](const std::string& name, const Totals& k) {
    std::snprintf(line, sizeof line, "%10.4f %6.2f %8lld %10.1f  ", k.seconds, total > 0 ? 100 * k.seconds / total : 0.0,
                  static_cast<long long>(k.count), k.count ? 1e6 * k.seconds / k.count : 0.0);
    s << line << name << "\n";
  };
  row(kDeviceMarks ? "(between timed kernels: device idle, untimed work)" : "(between Kokkos kernels: cuBLAS, NCCL, host)",
      t.outside);
  for (std::size_t i = 0; i < rows.size() && i < top; ++i) row(rows[i].first, rows[i].second);
  if (rows.size() > top) s << "... and " << rows.size() - top << " more kernels\n";
  if (!t.idle_before.empty()) {
    std::vector<std::pair<std::string, Totals>> idle;
    for (const auto& [name, k] : rows) {
      const auto at = t.idle_before.find(&t.kernels.at(name));
      if (at != t.idle_before.end()) idle.emplace_back(name, at->second);
    }
    std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    s << (kDeviceMarks ? "device idle before (the largest shares of the line above):\n"
                       : "host time before (the largest shares of the line above):\n");
    for (std::size_t i = 0; i < idle.size() && i < 8; ++i) row(idle[i].first, idle[i].second);
  }
  if (!t.host_phases.empty()) {
    s << "host phases (wall time on the host, in the same run):\n";
    for (const auto& [name, k] : t.host_phases) row(name, k);
  }
  return s.str();
}

}  // namespace shardft
