// SPDX-License-Identifier: MIT
// For tests of <xthread/asio.hpp>'s use of the handler's associated allocator: an allocator that
// counts what goes through it, and a callback that has it as its associated allocator (Boost 1.74 has
// no boost::asio::bind_allocator: the handler names it itself, allocator_type + get_allocator()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace xthread_test {

/// What went through a CountingAllocator (and its rebound copies), on any thread.
struct AllocatorCounts {
  std::atomic<long> allocations{0};
  std::atomic<long> deallocations{0};
  std::atomic<long> live_bytes{0};  // allocated and not yet deallocated
};

/// Counts into an AllocatorCounts. Allocates with malloc, so a replaced global operator new (see
/// counting_operator_new.hpp) never sees its allocations.
template <class T>
struct CountingAllocator {
  using value_type = T;

  explicit CountingAllocator(AllocatorCounts& into) noexcept : counts(&into) {}
  template <class U>
  // NOLINTNEXTLINE(google-explicit-constructor): allocators rebind by implicit conversion
  CountingAllocator(const CountingAllocator<U>& other) noexcept : counts(other.counts) {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "malloc's alignment");
    void* p = std::malloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    counts->allocations.fetch_add(1);
    counts->live_bytes.fetch_add(static_cast<long>(n * sizeof(T)));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    counts->live_bytes.fetch_sub(static_cast<long>(n * sizeof(T)));
    counts->deallocations.fetch_add(1);
    std::free(p);
  }

  template <class U>
  friend bool operator==(const CountingAllocator& a, const CountingAllocator<U>& b) noexcept {
    return a.counts == b.counts;
  }

  AllocatorCounts* counts;
};

/// A callback whose associated allocator (boost::asio::get_associated_allocator) counts into `counts`.
template <class Body>
struct AllocatingHandler {
  using allocator_type = CountingAllocator<void>;

  AllocatingHandler(AllocatorCounts& counts, Body handler_body) : body(std::move(handler_body)), allocator(counts) {}
  allocator_type get_allocator() const noexcept { return allocator; }
  template <class... Arguments>
  void operator()(Arguments&&... arguments) {
    body(std::forward<Arguments>(arguments)...);
  }

  Body body;
  allocator_type allocator;
};

}  // namespace xthread_test
