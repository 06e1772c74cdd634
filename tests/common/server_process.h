// Starts the real docsparse-server binary on loopback (free ports chosen by
// the server) for integration tests, and stops it with a signal.
#ifndef DOCSPARSE_TESTS_COMMON_SERVER_PROCESS_H_
#define DOCSPARSE_TESTS_COMMON_SERVER_PROCESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace docsparse::testing {

class ServerProcess {
 public:
  // Runs `binary` with `args`; returns once it printed "ready" (true), or it
  // exited or `timeout` passed (false, with what it printed in output()).
  // `on_listening` (may be empty) is called once the server printed its
  // addresses, before it is ready (it must return quickly).
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             std::chrono::seconds timeout = std::chrono::seconds(120),
             const std::function<void(const std::string& grpc_address,
                                      const std::string& http_address)>& on_listening = nullptr) {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!ReadSome(200)) return false;
      const size_t listening = output_.find("listening grpc=");
      if (listening != std::string::npos && grpc_address_.empty()) {
        const size_t begin = listening + 15;
        grpc_address_ = output_.substr(begin, output_.find(' ', begin) - begin);
        const size_t http = output_.find("http=", begin) + 5;
        http_address_ = output_.substr(http, output_.find('\n', http) - http);
        if (on_listening) on_listening(grpc_address_, http_address_);
      }
      if (output_.find("docsparse-server: ready") != std::string::npos) {
        // Keep draining the pipe: a server blocked on a full pipe (64 KiB of
        // log lines) would look like a hung server.
        drainer_ = std::thread([this] {
          while (ReadSome(200)) {
          }
        });
        return true;
      }
    }
    return false;
  }

  // Sends `signal` and waits up to `timeout` for the exit status.
  std::optional<int> Stop(int signal = SIGTERM,
                          std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (pid_ <= 0) return std::nullopt;
    kill(pid_, signal);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::optional<int> code;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!drainer_.joinable()) ReadSome(50);
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!code.has_value()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    if (drainer_.joinable()) drainer_.join();  // the pipe closed with the process
    return code;
  }

  ~ServerProcess() {
    if (pid_ > 0) Stop(SIGKILL, std::chrono::seconds(5));
    if (fd_ >= 0) close(fd_);
  }

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }
  std::string output() const {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }

 private:
  // Reads what is available within `ms`; false once the pipe closed.
  bool ReadSome(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return true;
    char buffer[4096];
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n <= 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread drainer_;  // reads the pipe once the server is ready
  mutable std::mutex mu_;
  std::string output_;  // guarded by mu_ once drainer_ runs
  std::string grpc_address_;
  std::string http_address_;
};

// Flags for a server on loopback with free ports, plus `extra`.
inline std::vector<std::string> LoopbackFlags(const std::string& model_repository,
                                              std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--host=127.0.0.1", "--port=0", "--metrics_port=0",
                                    "--model_repository=" + model_repository};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

inline std::string ServerBinary() {
  return std::string(DOCSPARSE_BINARY_DIR) + "/server/docsparse-server";
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_SERVER_PROCESS_H_
