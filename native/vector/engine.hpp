// The threads vector engine: worker threads step contiguous slices of a native env
// array (env.h ABI) in place, handed work through std::atomic words.
//
// Work is cut into `units`: contiguous env ranges of equal size. Worker w owns units
// w, w + W, w + 2W, ... (its thread-local pool) and runs those first, so an env is
// usually stepped by the same thread and its memory stays in that core's cache; and
// since every worker runs its lowest pending unit first, the first W units to finish
// are usually 0..W-1, one block of rows, which a staggered batch can return as a view.
// A worker with nothing of its own pending takes other workers' unclaimed units, and a
// send wakes up to one worker per unit, so a batch never waits on one busy owner. The caller dispatches
// units with send() and collects them with recv() in the order they finish, which is
// what staggered (EnvPool-style) batching needs; a synchronous step is send(all) +
// recv(all).
//
// Hand-off, no mutex on the step path: the caller marks units pending and bumps the
// owning worker's `signal` word; workers and the caller wait for a word to change by
// spinning a bounded number of iterations with a CPU pause, then blocking in
// std::atomic::wait (a futex), so idle or oversubscribed threads burn no CPU. A caller
// waiting in recv() first runs still-pending units itself, oldest first (claiming a
// unit is one atomic exchange, so nothing runs twice): on 2 cores with 2 workers that
// keeps both cores stepping envs instead of one spinning.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "puffercore/env.h"

namespace puffercore {

class Engine {
 public:
  // `envs` is an array of `num_envs` env structs laid out per `spec`, already bound
  // to their buffers; the engine never owns it. `num_units` must divide `num_envs`
  // and be a multiple of `num_workers`. `cpus`, if not empty, pins worker i to
  // cpus[i % cpus.size()]. When the OS refuses a worker thread it throws
  // std::runtime_error naming it, with the workers already started joined.
  // Not thread-safe: one caller at a time (the Python vector refuses a second caller).
  Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_units,
         int64_t spin_ns, std::vector<int> cpus);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Step every env once; blocks. The caller steps worker 0's share itself.
  void step_all();
  // Start stepping `count` units (ids in [0, num_units), none already in flight).
  void send(const int32_t* units, int count);
  // Block until `count` dispatched units have finished; write their ids, in the order
  // they finished, to `units_out`.
  void recv(int32_t* units_out, int count);
  // Add the episode-log sums (PC_LOG_SLOTS doubles, as pc_drain_logs) gathered for
  // `units` since they were last taken into `out`, and clear them. The worker that steps
  // a unit drains its envs' logs right after, while they sit in that core's cache.
  void take_logs(const int32_t* units, int count, double* out);
  // take_logs for every unit.
  void take_all_logs(double* out) { take_logs(all_units_.data(), num_units_, out); }
  // Join all workers; idempotent.
  void close();

  int num_units() const { return num_units_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  int in_flight() const { return in_flight_; }

 private:
  enum Command : uint32_t { kNone = 0, kStep = 1 };

  struct alignas(64) Unit {
    std::atomic<uint32_t> command{kNone};
    int64_t begin = 0, end = 0;
    double log_sums[PC_LOG_SLOTS] = {};
  };
  struct alignas(64) Worker {
    std::atomic<uint32_t> signal{0};
    int index = 0;
    std::thread thread;
  };

  void worker_loop(Worker* worker);
  void dispatch(const int32_t* units, int count, Command command, bool caller_is_worker0);
  void publish(int32_t unit);
  bool run_if_pending(int32_t unit);
  bool any_unclaimed() const;

  // How long the caller gives awake workers to claim the units it just sent.
  static constexpr int kClaimWaitPauses = 64;
  // The caller's spin before it sleeps while workers finish. In a synchronous step
  // the caller is one of the W stepping threads, so while it waits for the others'
  // last units it takes no core they need; 50 us covers their usual lag and saves a
  // futex wake-up (measured a few percent faster than 2 us on CartPole, 4096 envs).
  static constexpr int64_t kCallerSpinNs = 50000;

  const PcEnvSpec* spec_;
  void* envs_;
  int num_units_;
  int64_t spin_ns_;
  std::unique_ptr<Unit[]> units_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<int32_t> all_units_;
  std::vector<int32_t> finished_;  // scratch for the blocking calls
  std::vector<bool> wake_;           // scratch for dispatch
  std::vector<int32_t> dispatched_;  // units in flight, oldest send first (caller only)
  std::vector<bool> returned_;       // scratch for recv

  // Finished units in completion order: a worker claims a ticket, writes unit+1 into
  // ring slot ticket % num_units, then bumps `published_`. The caller consumes slots
  // in ticket order and zeroes them.
  std::unique_ptr<std::atomic<int32_t>[]> ring_;
  alignas(64) std::atomic<uint32_t> claimed_{0};
  alignas(64) std::atomic<uint32_t> published_{0};
  alignas(64) uint32_t consumed_ = 0;
  int in_flight_ = 0;

  std::atomic<bool> stopping_{false};
  bool closed_ = false;
};

}  // namespace puffercore
