// A single-threaded HTTP/1.1 server on plain POSIX sockets: one connection at a time,
// one request per connection ("Connection: close"), bodies are ignored.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "ninfer/ninfer.hpp"
#include "tinyjson.hpp"

namespace ninfer {

namespace {

constexpr std::size_t kMaxHeader = 16 * 1024;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
  }
}

Response error_response(int status, std::string_view message, std::string_view type) {
  tinyjson::Writer json;
  json.begin_object().key("error").begin_object();
  json.field("message", message).field("type", type).field("code", status);
  json.end_object().end_object();
  return Response{status, "application/json", json.str()};
}

std::string serialize(const Response& response) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status);
  out += "\r\nContent-Type: " + response.content_type;
  out += "\r\nContent-Length: " + std::to_string(response.body.size());
  out += "\r\nConnection: close\r\nServer: ninfer-serve/";
  out += version();
  out += "\r\n\r\n";
  out += response.body;
  return out;
}

bool send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads up to the end of the header block; returns the response to send.
Response handle(int fd) {
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxHeader) return error_response(431, "request too large", "invalid");
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed early or timed out: parse what came
    request.append(buffer, static_cast<std::size_t>(n));
  }
  const std::size_t line_end = request.find("\r\n");
  const std::string_view line = std::string_view(request).substr(0, line_end);
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (line_end == std::string::npos || second == std::string_view::npos ||
      line.substr(second + 1).rfind("HTTP/", 0) != 0) {
    return error_response(400, "malformed request line", "invalid");
  }
  return route(line.substr(0, first), line.substr(first + 1, second - first - 1));
}

}  // namespace

std::string models_json() {
  tinyjson::Writer json;
  json.begin_object().field("object", "list").key("data").begin_array();
  json.begin_object()
      .field("id", "example")
      .field("object", "model")
      .field("owned_by", "ninfer-example")
      .end_object();
  json.end_array().end_object();
  return json.str();
}

Response route(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (path == "/v1/models") {
    if (method != "GET") return error_response(405, "use GET for /v1/models", "invalid");
    return Response{200, "application/json", models_json()};
  }
  return error_response(404, "no route for " + std::string(path), "not_found");
}

int serve(const ServeOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(options.port));
  const std::string host = options.host == "localhost" ? "127.0.0.1" : options.host;
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    std::fprintf(stderr, "ninfer-serve: --host must be an IPv4 address, not '%s'\n",
                 options.host.c_str());
    return 2;
  }
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) {
    std::fprintf(stderr, "ninfer-serve: socket: %s\n", std::strerror(errno));
    return 1;
  }
  const int yes = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 16) != 0) {
    std::fprintf(stderr, "ninfer-serve: cannot listen on %s:%d: %s\n", host.c_str(),
                 options.port, std::strerror(errno));
    ::close(listener);
    return 1;
  }
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::printf("ninfer-serve listening on http://%s:%d\n", host.c_str(), ntohs(address.sin_port));
  std::fflush(stdout);

  for (;;) {
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::fprintf(stderr, "ninfer-serve: accept: %s\n", std::strerror(errno));
      ::close(listener);
      return 1;
    }
    timeval timeout{5, 0};  // a silent client must not hold the only thread forever
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const Response response = handle(client);
    send_all(client, serialize(response));
    ::shutdown(client, SHUT_WR);
    ::close(client);
    if (options.once) break;
  }
  ::close(listener);
  return 0;
}

}  // namespace ninfer
