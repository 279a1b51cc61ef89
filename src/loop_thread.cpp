#include "xthread/loop_thread.hpp"

#include <pthread.h>

namespace xthread {

LoopThread::LoopThread(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] {
    std::string thread_name = name_.substr(0, 15);
    pthread_setname_np(pthread_self(), thread_name.c_str());
    loop_.run();
  });
}

LoopThread::~LoopThread() {
  loop_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace xthread
