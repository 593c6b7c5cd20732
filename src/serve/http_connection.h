// One client connection, as httplib reads and writes it, with two things httplib 0.11 (Debian's)
// cannot do on its own sockets: a deadline for reading a whole request (a client that sends its
// headers byte by byte is cut off instead of holding a thread for ever), and a check whether the
// client has gone away while its request is still running (so the engine can drop it).
//
// Listener (http_server.cpp) runs httplib's request processing over a Connection; the handlers of
// a connection run on its thread and find it with Connection::current().
#pragma once
#include <chrono>
#include <optional>

#include <httplib.h>

namespace dspark::serve {

class Connection : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  Connection(int fd, std::chrono::milliseconds io_timeout);
  ~Connection() override;

  // Waits up to `timeout` for the next request's first bytes; false when the client closed, the
  // time ran out or `stopped()` became true.
  template <typename Stopped>
  bool wait_for_request(std::chrono::milliseconds timeout, Stopped stopped);

  // The whole request (head and body) must arrive by `deadline`; nullopt: no deadline.
  void set_read_deadline(std::optional<Clock::time_point> deadline) { read_deadline_ = deadline; }
  // True once the client closed its end or the connection broke.
  bool peer_closed() const;
  // The request's body was not read to its end (refused before or while reading it): what is left
  // of it on the wire would be taken for the next request, so the connection ends after this
  // response.
  void close_after_response() { close_after_response_ = true; }
  bool closing() const { return close_after_response_; }

  // The connection whose request this thread is handling (null outside a request).
  static Connection* current();

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  bool poll_readable(std::chrono::milliseconds timeout) const;
  std::chrono::milliseconds read_wait() const;  // io_timeout, shortened by the read deadline

  int fd_;
  std::chrono::milliseconds io_timeout_;
  std::optional<Clock::time_point> read_deadline_;
  bool close_after_response_ = false;
  char buffer_[4096];
  size_t buffered_ = 0, consumed_ = 0;  // buffer_[consumed_, buffered_) is read but not yet taken
};

template <typename Stopped>
bool Connection::wait_for_request(std::chrono::milliseconds timeout, Stopped stopped) {
  if (consumed_ < buffered_) return true;  // a pipelined request is already here
  const auto end = Clock::now() + timeout;
  while (!stopped() && Clock::now() < end) {
    if (poll_readable(std::chrono::milliseconds(10))) return !peer_closed();
  }
  return false;
}

}  // namespace dspark::serve
