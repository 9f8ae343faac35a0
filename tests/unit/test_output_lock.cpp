// One run per output_dir: the flock on output_dir/.shardft.lock (train/output_lock.hpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "config/train_config.hpp"
#include "train/output_lock.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/shardft-lock-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string host() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST(OutputLock, SecondLockFailsNamingTheHolderAndIsFreeAgainAfterRelease) {
  TempDir dir;
  std::string note = "x";
  OutputLock first = lock_output_dir(dir.path.string(), &note);
  EXPECT_TRUE(first.held());
  EXPECT_EQ(note, "");
  const std::string content = read_file(dir.path / kOutputLockName);
  EXPECT_EQ(content.rfind(host() + " " + std::to_string(::getpid()) + " ", 0), 0u) << content;
  try {
    lock_output_dir(dir.path.string(), &note);  // another open file description: refused like another process
    FAIL() << "a held lock was taken twice";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("output_dir '" + dir.path.string() + "' is in use"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host " + host() + ", pid " + std::to_string(::getpid())), std::string::npos) << msg;
  }
  first.release();
  EXPECT_EQ(read_file(dir.path / kOutputLockName), "");  // a run that ended leaves no name behind
  OutputLock again = lock_output_dir(dir.path.string(), &note);
  EXPECT_TRUE(again.held());
  EXPECT_EQ(note, "");  // nothing to take over
}

TEST(OutputLock, TheLockOfADeadProcessIsTakenOverAndSaidSo) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);  // now a pid with no process
  {
    std::ofstream out(dir.path / kOutputLockName);
    out << host() << " " << child << " 2024-01-01T00:00:00Z\n";
  }
  std::string note;
  OutputLock lock = lock_output_dir(dir.path.string(), &note);
  EXPECT_TRUE(lock.held());
  EXPECT_EQ(note, "output_dir: took over the lock of a dead run (host " + host() + ", pid " + std::to_string(child) +
                      ", started 2024-01-01T00:00:00Z)");
  EXPECT_EQ(read_file(dir.path / kOutputLockName).rfind(host() + " " + std::to_string(::getpid()) + " ", 0), 0u);
}

TEST(OutputLock, AKilledRunNotYetReapedCountsAsDead) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not waited for yet: a zombie, as a rank SIGKILLed by mpirun stays until init reaps it.
  for (int i = 0; i < 200; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.find(") Z") != std::string::npos) break;
    ::usleep(10000);
  }
  {
    std::ofstream out(dir.path / kOutputLockName);
    out << host() << " " << child << " 2024-01-01T00:00:00Z\n";
  }
  std::string note;
  OutputLock lock = lock_output_dir(dir.path.string(), &note);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_NE(note.find("took over the lock of a dead run (host " + host() + ", pid " + std::to_string(child)),
            std::string::npos)
      << note;
}

TEST(OutputLock, AnUnwritableDirectoryIsAConfigErrorNamingTheFile) {
  TempDir dir;
  const std::string missing = (dir.path / "not-there").string();
  try {
    lock_output_dir(missing, nullptr);
    FAIL() << "locked in a missing directory";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(missing + "/" + kOutputLockName), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardft
