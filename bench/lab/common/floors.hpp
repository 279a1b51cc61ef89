// SPDX-License-Identifier: MIT
// Floors: the cheapest possible cross-thread round trips on this machine, to put the lab's numbers in
// scale. Measured with plain std::thread and std::atomic, so they describe the machine, not the library under
// test.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "common/statistics.hpp"

namespace xthread_lab {

// Two plain std::threads ping-pong `round_trips` times (after a short warm-up), three ways:
//  - spin:  each side busy-waits on a std::atomic (never sleeps) -> cache-line transfer cost;
//  - futex: each side blocks as std::atomic<int>::wait does and wakes the other as notify_one does
//           (libstdc++ 12's algorithm, written out in floors.cpp: its own pair once lost a wake-up
//           here). This is the best a blocking hand-off does with the standard library: the wait
//           spins and yields briefly before it sleeps in the futex, so when the partner answers
//           quickly no thread ever sleeps. This is "the futex floor" every ratio_to_futex_floor refers to;
//  - sleep: each side sleeps in the futex at once (raw FUTEX_WAIT / FUTEX_WAKE, no spinning) -> what
//           waking a thread that is really asleep costs, the situation of calls spaced by gaps.
// Each summary is in nanoseconds per round trip (A -> B -> A). When this process may run on fewer
// than 2 CPUs (spin_needs_yield) the spin floor is meaningless (one side spins while the other is
// descheduled); it is still measured with a yield in the spin loop and will be large.
struct Floors {
  Summary spin_roundtrip_ns;
  Summary futex_roundtrip_ns;
  Summary sleep_roundtrip_ns;
};
Floors measure_floors(std::size_t round_trips);
// Whether the calling thread may run on one CPU only (its affinity mask, e.g. under `taskset -c 0`; the
// machine's CPU count where the mask cannot be read): two threads it starts that spin for each other must
// then yield, or each waits out a scheduler slice per round trip.
bool spin_needs_yield();
void to_json(nlohmann::json& out, const Floors& floors);

}  // namespace xthread_lab
