#include "engine.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "shm_sync.h"

namespace puffercore {

// Wait until `word` no longer holds `old`; return the new value: spin for up to
// `spin_ns` (pc_spin_until_change, shared with the processes backend), then sleep in the
// futex of std::atomic::wait.
static uint32_t wait_for_change(const std::atomic<uint32_t>& word, uint32_t old, int64_t spin_ns) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the spin reads the atomic's word");
  uint32_t value = pc_spin_until_change(reinterpret_cast<const uint32_t*>(&word), old, spin_ns);
  if (value != old) return value;
  while ((value = word.load(std::memory_order_acquire)) == old) word.wait(old, std::memory_order_acquire);
  return value;
}

Engine::Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_batches,
               int64_t spin_ns, std::vector<int> cpus)
    : spec_(spec), envs_(envs), num_workers_(num_workers), num_batches_(num_batches), spin_ns_(spin_ns) {
  if (num_workers <= 0 || num_batches <= 0 || num_envs % (int64_t(num_batches) * num_workers) != 0)
    throw std::invalid_argument("engine: num_batches * num_workers must divide num_envs");
  num_units_ = num_batches * num_workers;
  units_.reset(new Unit[num_units_]);
  batches_.reset(new Batch[num_batches]);
  int64_t envs_per_unit = num_envs / num_units_;
  for (int u = 0; u < num_units_; u++) {
    units_[u].begin = u * envs_per_unit;
    units_[u].end = (u + 1) * envs_per_unit;
  }
  fifo_.assign(num_batches, 0);
  sent_.assign(num_batches, false);
  for (int w = 0; w < num_workers; w++) {
    auto worker = std::make_unique<Worker>();
    worker->index = w;
    workers_.push_back(std::move(worker));
  }
  for (int w = 1; w < num_workers; w++) {  // worker 0 is the caller
    Worker* worker = workers_[w].get();
    try {
      worker->thread = std::thread([this, worker] { worker_loop(worker); });
    } catch (const std::exception& error) {
      // The OS refused a thread (limits on threads or memory). No destructor runs for a
      // constructor that throws, and a joinable std::thread destroyed unjoined calls
      // std::terminate: stop and join the started workers here.
      close();
      throw std::runtime_error("engine: could not start worker thread " + std::to_string(w) +
                               " of num_workers=" + std::to_string(num_workers) + " (" + error.what() +
                               "); the " + std::to_string(w - 1) + " already started were stopped");
    }
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[w % cpus.size()], &set);
      pthread_setaffinity_np(worker->thread.native_handle(), sizeof(set), &set);
    }
  }
}

Engine::~Engine() { close(); }

void Engine::close() {
  if (closed_) return;
  closed_ = true;
  stopping_.store(true, std::memory_order_release);
  for (auto& worker : workers_) {
    worker->signal.fetch_add(1, std::memory_order_release);
    worker->signal.notify_one();
  }
  for (auto& worker : workers_)
    if (worker->thread.joinable()) worker->thread.join();  // not, if its start failed
}

void Engine::worker_loop(Worker* worker) {
  uint32_t seen = 0;
  while (true) {
    seen = wait_for_change(worker->signal, seen, spin_ns_);
    if (stopping_.load(std::memory_order_acquire)) return;
    // Several sends may have landed since the last wake-up: run every pending unit, its
    // own first, then any other worker's still unclaimed, so a batch whose owner is
    // busy (or has no core) is not left waiting on it.
    while (run_oldest(worker->index, num_workers_)) {
    }
    while (run_oldest(0, 1)) {
    }
  }
}

bool Engine::run_oldest(int first, int stride) {
  // The pending unit of the earliest send among first, first + stride, ...: the caller
  // waits for batches in the order it sent them.
  int oldest = -1;
  uint64_t oldest_ticket = 0;
  for (int u = first; u < num_units_; u += stride) {
    uint64_t ticket = units_[u].ticket.load(std::memory_order_relaxed);
    if (ticket != 0 && (oldest < 0 || ticket < oldest_ticket)) oldest = u, oldest_ticket = ticket;
  }
  if (oldest < 0) return false;
  run_if_pending(oldest);  // another thread may claim it first: the caller's loop looks again
  return true;
}

bool Engine::run_if_pending(int u) {
  // Exchanging the ticket claims the unit, so a worker and the caller never both run it.
  if (units_[u].ticket.exchange(0, std::memory_order_acq_rel) == 0) return false;
  pc_step_range(spec_, envs_, units_[u].begin, units_[u].end);
  pc_drain_logs(spec_, envs_, units_[u].begin, units_[u].end, units_[u].log_sums);
  finish(u / num_workers_);
  return true;
}

void Engine::finish(int batch) {
  // Only the batch's last unit wakes the caller: it waits for the count to reach zero.
  if (batches_[batch].remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) batches_[batch].remaining.notify_one();
}

void Engine::check_batch(int batch) const {
  if (batch < 0 || batch >= num_batches_) throw std::out_of_range("engine: batch id out of range");
}

void Engine::dispatch(int batch) {
  if (closed_) throw std::logic_error("engine is closed");
  check_batch(batch);
  if (sent_[batch]) throw std::logic_error("engine: batch sent while already in flight");
  uint64_t ticket = ++next_ticket_;
  batches_[batch].remaining.store(num_workers_, std::memory_order_relaxed);
  for (int w = 0; w < num_workers_; w++)  // the release publishes `remaining` to whoever claims
    units_[batch * num_workers_ + w].ticket.store(ticket, std::memory_order_release);
  // Every worker owns a unit of every batch: wake each once (worker 0, the caller, is awake).
  for (int w = 1; w < num_workers_; w++) {
    workers_[w]->signal.fetch_add(1, std::memory_order_release);
    workers_[w]->signal.notify_one();
  }
  fifo_[(head_ + in_flight_) % num_batches_] = batch;
  sent_[batch] = true;
  in_flight_++;
}

void Engine::send(int batch) { dispatch(batch); }

int Engine::recv() {
  if (in_flight_ == 0) throw std::logic_error("engine: recv with no batch in flight");
  int batch = fifo_[head_];
  Unit* units = &units_[batch * num_workers_];
  auto unclaimed = [&] {
    for (int w = 0; w < num_workers_; w++)
      if (units[w].ticket.load(std::memory_order_relaxed) != 0) return true;
    return false;
  };
  // The caller is worker 0: it steps its own unit of the batch unless a worker took it
  // while the caller was away. Workers that are awake claim theirs within a few hundred
  // nanoseconds; after that long, the caller runs whatever of the batch is still
  // unclaimed (its owner busy, asleep, or without a core), then waits for the rest.
  run_if_pending(batch * num_workers_);
  for (int i = 0; i < kClaimWaitPauses && unclaimed(); i++) PC_CPU_PAUSE();
  for (int w = 1; w < num_workers_; w++) run_if_pending(batch * num_workers_ + w);
  // What is left of the batch is running on other workers. Rather than sleep, step the
  // later batches' pending units: a worker that has nothing else takes the caller's
  // unit of the batch the caller will wait for, and the caller, back from its own work
  // a moment later, would idle for a whole unit. This returns at most one unit's time
  // after the batch is done, and the units run are work the next recv no longer waits for.
  std::atomic<uint32_t>& remaining = batches_[batch].remaining;
  while (remaining.load(std::memory_order_acquire) != 0 && run_later_unit()) {
  }
  for (uint32_t left; (left = remaining.load(std::memory_order_acquire)) != 0;)
    wait_for_change(remaining, left, kCallerSpinNs);
  head_ = (head_ + 1) % num_batches_;
  sent_[batch] = false;
  in_flight_--;
  return batch;
}

bool Engine::run_later_unit() {
  for (int i = 1; i < in_flight_; i++) {
    int batch = fifo_[(head_ + i) % num_batches_];
    for (int w = 0; w < num_workers_; w++)  // the caller's own unit first: its envs are warm here
      if (run_if_pending(batch * num_workers_ + w)) return true;
  }
  return false;
}

void Engine::take_logs(int batch, double* out) {
  check_batch(batch);
  for (int u = batch * num_workers_; u < (batch + 1) * num_workers_; u++) {
    double* sums = units_[u].log_sums;
    for (int k = 0; k < PC_LOG_SLOTS; k++) out[k] += sums[k];
    std::fill(sums, sums + PC_LOG_SLOTS, 0.0);
  }
}

void Engine::take_all_logs(double* out) {
  for (int b = 0; b < num_batches_; b++) take_logs(b, out);
}

void Engine::step_all() {
  if (in_flight_ != 0) throw std::logic_error("engine: step while batches are in flight; recv them first");
  for (int b = 0; b < num_batches_; b++) dispatch(b);
  while (run_oldest(0, num_workers_)) {  // worker 0's units: the caller's
  }
  while (in_flight_) recv();
}

}  // namespace puffercore
