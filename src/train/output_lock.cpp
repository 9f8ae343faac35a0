#include "train/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "config/train_config.hpp"
#include "comm/collective_error.hpp"
#include "train/output_path.hpp"

namespace shardft {

namespace {

std::string this_host() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    at += n;
    if (out.size() > 4096) break;  // a name, not a file to read whole
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// "HOST PID START" as written by lock_output_dir; anything else is shown as it is.
struct Holder {
  std::string host, start, raw;
  long pid = -1;
};
Holder parse_holder(const std::string& text) {
  Holder h;
  h.raw = text;
  std::istringstream in(text);
  std::string pid;
  if (in >> h.host >> pid >> h.start) {
    char* end = nullptr;
    const long v = std::strtol(pid.c_str(), &end, 10);
    if (end && *end == '\0' && v > 0) h.pid = v;
  }
  return h;
}
std::string describe(const Holder& h) {
  if (h.pid < 0) return h.raw.empty() ? "a process that has not written its name yet" : "'" + h.raw + "'";
  return "host " + h.host + ", pid " + std::to_string(h.pid) + ", started " + h.start;
}

// No process by that pid on this host, or only its zombie (killed, not yet reaped by its parent or init).
bool process_gone(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const std::size_t name_end = line.rfind(')');  // "PID (COMM) STATE ...": COMM may hold spaces
  return name_end != std::string::npos && name_end + 2 < line.size() &&
         (line[name_end + 2] == 'Z' || line[name_end + 2] == 'X');
}

bool unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

}  // namespace

OutputLock& OutputLock::operator=(OutputLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void OutputLock::release() {
  if (fd_ < 0) return;
  // Empty while still held: a file that names someone was left by a run that did not end.
  if (::ftruncate(fd_, 0) != 0) { /* the lock goes with the descriptor either way */ }
  ::close(fd_);
  fd_ = -1;
}

OutputLock lock_output_dir(const std::string& output_dir, std::string* note) {
  const std::string path = output_dir + "/" + kOutputLockName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError("output_dir: cannot create the lock file '" + path + "': " + std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (unsupported(err)) {
      ::close(fd);
      if (note) {
        *note = "warning: output_dir: cannot lock '" + path + "' (" + std::strerror(err) +
                "): nothing stops a second run on this output_dir";
      }
      return OutputLock();
    }
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw ConfigError("output_dir: cannot lock '" + path + "': " + std::strerror(err));
    }
    // The holder writes its name right after it locks: give it a moment when the file is still empty.
    std::string text = read_all(fd);
    for (int i = 0; i < 20 && text.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      text = read_all(fd);
    }
    ::close(fd);
    throw ConfigError("output_dir '" + output_dir + "' is in use by another training run (" +
                      describe(parse_holder(text)) + "), which holds " + path +
                      ": one run per output_dir; wait for it to end, stop it, or choose another output_dir");
  }
  OutputLock lock(fd);
  const Holder before = parse_holder(read_all(fd));
  const std::string me = this_host();
  if (note) {
    note->clear();
    if (before.pid > 0 && before.host == me && process_gone(before.pid)) {
      *note = "output_dir: took over the lock of a dead run (" + describe(before) + ")";
    } else if (!before.raw.empty()) {
      *note = "output_dir: took over the lock left by " + describe(before) + ", which no longer held it";
    }
  }
  const std::string mine = me + " " + std::to_string(::getpid()) + " " + utc_now() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    throw ConfigError("output_dir: cannot write the lock file '" + path + "': " + std::strerror(errno));
  }
  return lock;
}

OutputLock OutputLock::acquire(const std::string& output_dir, Communicator& world, std::ostream& log) {
  OutputLock lock;
  std::string err, note;
  if (world.rank() == 0) {
    try {
      create_output_dir(output_dir, "output_dir");
      lock = lock_output_dir(output_dir, &note);
    } catch (const ConfigError& e) {
      err = e.what();
    }
  }
  err = broadcast_text(world, err, 0);
  if (!err.empty()) throw ConfigError(err);
  if (!note.empty()) log << note << std::endl;
  return lock;
}

}  // namespace shardft
