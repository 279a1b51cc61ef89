// SPDX-License-Identifier: MIT
#include "xcall/plain.hpp"

#include <pthread.h>

namespace xthread_lab {

PlainThread::PlainThread(const std::string& name) : thread_([this] { run(); }) {
  pthread_setname_np(thread_.native_handle(), name.substr(0, 15).c_str());
}

PlainThread::~PlainThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void PlainThread::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push(std::move(task));
  }
  wake_.notify_one();
}

void PlainThread::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every queued task has run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop();
    lock.unlock();  // the task runs with the queue's lock released
    task();
    lock.lock();
  }
}

}  // namespace xthread_lab
