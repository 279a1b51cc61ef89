// SPDX-License-Identifier: MIT
// xthread/detail/phase_word.hpp — the one-word state machine behind every "exactly one party wins"
// protocol: a timer's start against cancel(), a cancellable task's, a cancellable hop's target against
// its stop callback. Each phase change out of a contested phase is one compare-and-swap, so of parties
// racing to move the word out of the same phase exactly one wins, and every later party sees the
// winner's move.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace xthread::detail {

/// A phase (an enumeration) in one atomic word. Thread rule: any thread.
///
/// Memory ordering: every successful move is acq_rel and every load acquire, so the party that wins a
/// move sees everything the previous mover did before its move, and publishes what it did before its
/// own move to the next one (the winner of "queued → running" sees what the poster did; the loser of
/// a race sees the winner's move and what preceded it).
template <class Phase>
class PhaseWord {
  static_assert(std::is_enum_v<Phase>, "PhaseWord holds an enumeration");

 public:
  constexpr explicit PhaseWord(Phase initial) noexcept : word_(static_cast<Word>(initial)) {}
  PhaseWord(const PhaseWord&) = delete;
  PhaseWord& operator=(const PhaseWord&) = delete;

  /// Moves the word from `from` to `to` if it holds `from`. True when this call made the move.
  bool move(Phase from, Phase to) noexcept {
    Word expected = static_cast<Word>(from);
    return word_.compare_exchange_strong(expected, static_cast<Word>(to), std::memory_order_acq_rel,
                                         std::memory_order_acquire);
  }

  /// Moves the word to `to` if it holds one of `from...`. Returns the phase it held when this call
  /// decided: one of `from...` when this call made the move, any other phase when it made none.
  template <class... From>
  Phase move_from_any(Phase to, From... from) noexcept {
    static_assert((std::is_same_v<From, Phase> && ...), "move_from_any takes phases");
    Word current = word_.load(std::memory_order_acquire);
    while ((holds(current, from) || ...)) {
      // On success `current` keeps the phase we moved out of.
      if (word_.compare_exchange_weak(current, static_cast<Word>(to), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        break;
      }
    }
    return static_cast<Phase>(current);
  }

  /// Sets the word to `to` unconditionally: only for a party that alone may leave the current phase
  /// (nobody races it), e.g. "running → finished" by the runner.
  void set(Phase to) noexcept { word_.store(static_cast<Word>(to), std::memory_order_release); }

  [[nodiscard]] Phase load() const noexcept { return static_cast<Phase>(word_.load(std::memory_order_acquire)); }

 private:
  using Word = std::uint32_t;
  static constexpr bool holds(Word word, Phase phase) noexcept { return word == static_cast<Word>(phase); }
  std::atomic<Word> word_;
};

}  // namespace xthread::detail
