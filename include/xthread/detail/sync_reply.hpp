// SPDX-License-Identifier: MIT
// xthread/detail/sync_reply.hpp — where a synchronous call's answer waits (call_sync, invoke_sync): its
// outcome and the event that announces it, on cache lines of their own.
#pragma once

#include <type_traits>

#include "xthread/detail/outcome.hpp"
#include "xthread/detail/parking.hpp"

namespace xthread::detail {

/// SyncReply's default Notes: nothing.
struct NoNotes {};

/// A synchronous call's answer: the event that announces it, `Notes` (anything else the loop writes
/// for the caller: ThreadSafeFunction's call times) and the outcome, starting a cache line of their
/// own. The loop writes them and the waiting caller polls `done`; the rest of the call's node (what
/// the caller writes and the loop reads or relinks) lies on the lines before, which the caller never
/// polls, so a round trip moves each line between the two CPUs as few times as it can (docs/waiting.md,
/// "A synchronous call's node, line by line"). Thread rule: made and read by the waiting caller,
/// written by the loop before `done.set()` (OneShotEvent's ordering). Destruction: the caller's, once
/// `done.wait()` returned (OneShotEvent's rule).
template <class R, class Notes = NoNotes>
struct alignas(64) SyncReply {
  OneShotEvent done;
  [[no_unique_address]] Notes notes;
  Outcome<R> outcome;
};

/// How a synchronous call's node holds one argument `U` (a reference type, as forwarded to call_sync)
/// for a callee parameter of type `Param`: a reference into the waiting caller's frame, or a copy in the
/// node itself for an argument of exactly the parameter's by-value type that is trivially copyable, is
/// built from `U` by a trivial constructor, and is no bigger than the reference. The loop then reads it
/// on the node's line instead of fetching a line of the caller's frame from the caller's CPU
/// (docs/waiting.md, "Small arguments in the node"). Such an argument is read by the caller as it calls,
/// as a direct call reads it; the parameter is then built from the copy, with U's value category, by the
/// same trivial constructor.
template <class Param, class U>
using SyncArgument =
    std::conditional_t<!std::is_reference_v<Param> && std::is_same_v<std::remove_cvref_t<U>, Param> &&
                           std::is_trivially_copyable_v<Param> && std::is_trivially_constructible_v<Param, U> &&
                           sizeof(Param) <= sizeof(void*) && alignof(Param) <= alignof(void*),
                       Param, U>;

}  // namespace xthread::detail
