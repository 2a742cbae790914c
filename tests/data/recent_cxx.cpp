// Needs recent libstdc++ symbol versions: std::to_chars for floating point (GLIBCXX_3.4.29,
// GCC 11) and std::condition_variable::wait (GLIBCXX_3.4.30, GCC 12), beside the C++11 string
// ABI and std::filesystem.
#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>

int main(int argc, char** argv) {
    std::string name = argc > 1 ? argv[1] : "kit";
    char text[32] = {};
    std::to_chars(text, text + sizeof text, 2.5 * argc);
    std::mutex mutex;
    std::condition_variable ready;
    std::unique_lock<std::mutex> lock(mutex);
    if (argc > 99) ready.wait(lock);
    std::cout << std::filesystem::path(name).filename() << text << std::endl;
    return 0;
}
