// SPDX-License-Identifier: MIT
// xthread/detail/unique_function.hpp — a move-only std::function with a small inline buffer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace xthread::detail {

template <class Signature, std::size_t InlineBytes = 48>
class UniqueFunction;

/// Holds any callable, including move-only ones (a lambda owning a std::promise, say). Callables of
/// up to InlineBytes that move without throwing live inline: constructing, moving and destroying
/// them never allocates. Larger callables are allocated once, on construction.
/// Thread rule: like any value — one thread at a time.
template <class R, class... Args, std::size_t InlineBytes>
class UniqueFunction<R(Args...), InlineBytes> {
 public:
  UniqueFunction() noexcept = default;

  template <
      class F, class Stored = std::decay_t<F>,
      class = std::enable_if_t<!std::is_same_v<Stored, UniqueFunction> && std::is_invocable_r_v<R, Stored&, Args...>>>
  UniqueFunction(F&& callable) {  // NOLINT(google-explicit-constructor): a function wrapper converts.
    if constexpr (stores_inline<Stored>) {
      ::new (static_cast<void*>(storage_)) Stored(std::forward<F>(callable));
      operations_ = &inline_operations<Stored>;
    } else {
      ::new (static_cast<void*>(storage_)) Stored*(new Stored(std::forward<F>(callable)));
      operations_ = &heap_operations<Stored>;
    }
  }

  /// As above, with a tag (see tag()).
  template <
      class F, class Stored = std::decay_t<F>,
      class = std::enable_if_t<!std::is_same_v<Stored, UniqueFunction> && std::is_invocable_r_v<R, Stored&, Args...>>>
  UniqueFunction(const void* tag, F&& callable) : UniqueFunction(std::forward<F>(callable)) {
    tag_ = tag;
  }

  UniqueFunction(UniqueFunction&& other) noexcept { take(other); }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { reset(); }

  explicit operator bool() const noexcept { return operations_ != nullptr; }

  R operator()(Args... args) { return operations_->invoke(storage_, std::forward<Args>(args)...); }

  void reset() noexcept {
    if (operations_ != nullptr) {
      operations_->destroy(storage_);
      operations_ = nullptr;
    }
    tag_ = nullptr;
  }

  /// True when a callable of type Stored lives inline (no allocation; see the class comment).
  template <class Stored>
  static constexpr bool stores_inline = sizeof(Stored) <= InlineBytes && alignof(Stored) <= alignof(std::max_align_t) &&
                                        std::is_nothrow_move_constructible_v<Stored>;

  /// The word given to the constructor (null if none), moved with the callable and cleared by reset():
  /// lets the code that made a function find it again among others (TaskGroup::cancel finds its
  /// tasks in a ThreadPool's queues). With the default 48 inline bytes it sits in what would be
  /// padding: the object stays 64 bytes.
  [[nodiscard]] const void* tag() const noexcept { return tag_; }
  /// Forgets the tag (the callable stays).
  void clear_tag() noexcept { tag_ = nullptr; }

  /// The first member of the callable, when the callable is stored inline and is a standard-layout
  /// type whose first member is a T. Only the code that made the function knows that (by its tag).
  template <class T>
  [[nodiscard]] T& inline_prefix() noexcept {
    // A standard-layout object is pointer-interconvertible with its first member.
    return *std::launder(reinterpret_cast<T*>(storage_));
  }

 private:
  struct Operations {
    R (*invoke)(void* storage, Args&&... args);
    void (*relocate)(void* from, void* to) noexcept;  // move-construct into `to`, destroy `from`
    void (*destroy)(void* storage) noexcept;
  };

  template <class Stored>
  static constexpr Operations inline_operations{[](void* storage, Args&&... args) -> R {
    return std::invoke(*std::launder(static_cast<Stored*>(storage)), std::forward<Args>(args)...);
  }, [](void* from, void* to) noexcept {
    Stored* source = std::launder(static_cast<Stored*>(from));
    ::new (to) Stored(std::move(*source));
    source->~Stored();
  }, [](void* storage) noexcept { std::launder(static_cast<Stored*>(storage))->~Stored(); }};

  template <class Stored>
  static constexpr Operations heap_operations{[](void* storage, Args&&... args) -> R {
    return std::invoke(**std::launder(static_cast<Stored**>(storage)), std::forward<Args>(args)...);
  }, [](void* from, void* to) noexcept {
    ::new (to) Stored*(*std::launder(static_cast<Stored**>(from)));
  }, [](void* storage) noexcept { delete *std::launder(static_cast<Stored**>(storage)); }};

  void take(UniqueFunction& other) noexcept {
    if (other.operations_ != nullptr) {
      other.operations_->relocate(other.storage_, storage_);
      operations_ = other.operations_;
      other.operations_ = nullptr;
    }
    tag_ = std::exchange(other.tag_, nullptr);
  }

  alignas(std::max_align_t) unsigned char storage_[InlineBytes];
  const Operations* operations_ = nullptr;
  const void* tag_ = nullptr;
};

}  // namespace xthread::detail
