#include "serve/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace dspark::serve {

namespace {

thread_local Connection* current_connection = nullptr;

int millis(std::chrono::milliseconds d) { return static_cast<int>(std::max<int64_t>(0, d.count())); }

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

}  // namespace

Connection::Connection(int fd, std::chrono::milliseconds io_timeout) : fd_(fd), io_timeout_(io_timeout) {
  current_connection = this;
  // A stream is many small writes: without this, Nagle's algorithm holds a chunk back until the
  // previous one is acknowledged (up to 40 ms with delayed ACKs), and that lands in TTFT and ITL.
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

Connection::~Connection() { current_connection = nullptr; }

Connection* Connection::current() { return current_connection; }

bool Connection::poll_readable(std::chrono::milliseconds timeout) const {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, millis(timeout)) > 0;
}

bool Connection::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

std::chrono::milliseconds Connection::read_wait() const {
  if (!read_deadline_) return io_timeout_;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*read_deadline_ - Clock::now());
  return std::min(io_timeout_, left);
}

bool Connection::is_readable() const {
  if (consumed_ < buffered_) return true;
  const auto wait = read_wait();
  return wait.count() > 0 && poll_readable(wait);
}

bool Connection::is_writable() const {
  pollfd p{fd_, POLLOUT, 0};
  return ::poll(&p, 1, millis(io_timeout_)) > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

ssize_t Connection::read(char* ptr, size_t size) {
  if (consumed_ == buffered_) {
    if (!is_readable()) return -1;  // the time ran out
    const ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, 0);
    if (n <= 0) return n;
    buffered_ = static_cast<size_t>(n);
    consumed_ = 0;
  }
  const size_t n = std::min(size, buffered_ - consumed_);
  std::memcpy(ptr, buffer_ + consumed_, n);
  consumed_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  return ::send(fd_, ptr, size, MSG_NOSIGNAL);
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

void Connection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

}  // namespace dspark::serve
