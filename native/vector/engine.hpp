// The threads vector engine: worker threads step contiguous slices of a native env
// array (env.h ABI) in place, handed work through std::atomic words.
//
// The envs are cut into `num_batches` fixed batches of consecutive envs, and each batch
// into one unit per worker: unit u = b * W + w covers the w-th slice of batch b, so
// batch b is units [b * W, (b + 1) * W), one block of envs and of buffer rows. A batch's
// results are therefore always where the caller reads them: recv hands back a batch id
// and the caller views that block, with no gather or scatter (PufferLib's fixed buffers;
// EnvPool reaches the same by copying finished envs into a batch). Batches come back in
// the order they were sent, so staggered stepping is deterministic whatever the threads
// do.
//
// Worker w owns unit w of every batch and runs its own pending units first, oldest
// send first (the same envs each time, warm in that core's cache), then any other
// worker's unclaimed ones, so a batch never waits on one busy owner. Worker 0 is the
// caller: W workers are the caller and W - 1 threads, never W + 1 threads competing for
// W cores. The caller steps its unit of a batch when it waits for that batch (recv;
// a synchronous step is one batch of all envs); while it is away, computing actions,
// the threads step its units of the batches in flight once their own are done. So
// stepping overlaps the caller's work from two workers up. A caller whose batch is
// left only to units running elsewhere steps later batches' pending units, not sleeps.
//
// Hand-off, no mutex on the step path: the caller writes a unit's send ticket into its
// command word and bumps each worker's `signal` word once per send; a unit is claimed by
// exchanging its command with zero (so nothing runs twice), and the worker that finishes
// a batch's last unit wakes the caller through the batch's `remaining` count. Workers and
// the caller wait for a word to change by spinning a bounded time with a CPU pause, then
// blocking in std::atomic::wait (a futex), so idle or oversubscribed threads burn no
// CPU.
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
  // to their buffers; the engine never owns it. `num_batches * num_workers` must divide
  // `num_envs`. `cpus`, if not empty, pins worker i to cpus[i % cpus.size()]. When the
  // OS refuses a worker thread it throws std::runtime_error naming it, with the workers
  // already started joined.
  // Not thread-safe: one caller at a time (the Python vector refuses a second caller).
  Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_batches,
         int64_t spin_ns, std::vector<int> cpus);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Step every env once; blocks. Needs nothing in flight.
  void step_all();
  // Start stepping batch `batch` (in [0, num_batches), not already in flight).
  void send(int batch);
  // Block until the oldest batch in flight has finished; return its id.
  int recv();
  // Add the episode-log sums (PC_LOG_SLOTS doubles, as pc_drain_logs) gathered for
  // `batch` since they were last taken into `out`, and clear them. The worker that steps
  // a unit drains its envs' logs right after, while they sit in that core's cache.
  void take_logs(int batch, double* out);
  // take_logs for every batch.
  void take_all_logs(double* out);
  // Join all workers; idempotent.
  void close();

  int num_batches() const { return num_batches_; }
  int num_workers() const { return num_workers_; }
  int in_flight() const { return in_flight_; }

 private:
  struct alignas(64) Unit {
    std::atomic<uint64_t> ticket{0};  // the send that made it pending; 0: nothing to do
    int64_t begin = 0, end = 0;
    double log_sums[PC_LOG_SLOTS] = {};
  };
  struct alignas(64) Batch {
    std::atomic<uint32_t> remaining{0};  // units of the last send not yet finished
  };
  struct alignas(64) Worker {
    std::atomic<uint32_t> signal{0};
    int index = 0;
    std::thread thread;
  };

  void worker_loop(Worker* worker);
  void dispatch(int batch);
  bool run_oldest(int first, int stride);
  bool run_if_pending(int unit);
  bool run_later_unit();
  void finish(int batch);
  void check_batch(int batch) const;

  // How long the caller gives awake workers to claim the units it just sent.
  static constexpr int kClaimWaitPauses = 64;
  // The caller's spin before it sleeps while workers finish. In a synchronous step
  // the caller is one of the W stepping threads, so while it waits for the others'
  // last units it takes no core they need; 50 us covers their usual lag and saves a
  // futex wake-up.
  static constexpr int64_t kCallerSpinNs = 50000;

  const PcEnvSpec* spec_;
  void* envs_;
  int num_workers_;
  int num_batches_;
  int num_units_;
  int64_t spin_ns_;
  std::unique_ptr<Unit[]> units_;
  std::unique_ptr<Batch[]> batches_;
  std::vector<std::unique_ptr<Worker>> workers_;

  // Caller-only state: batches in flight, oldest first, as a ring of num_batches slots.
  std::vector<int32_t> fifo_;
  std::vector<bool> sent_;
  int head_ = 0;
  int in_flight_ = 0;
  uint64_t next_ticket_ = 0;

  std::atomic<bool> stopping_{false};
  bool closed_ = false;
};

}  // namespace puffercore
