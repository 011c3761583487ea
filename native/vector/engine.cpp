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

Engine::Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_units,
               int64_t spin_ns, std::vector<int> cpus)
    : spec_(spec), envs_(envs), num_units_(num_units), spin_ns_(spin_ns) {
  if (num_workers <= 0 || num_units <= 0 || num_envs % num_units != 0 || num_units % num_workers != 0)
    throw std::invalid_argument("engine: num_units must divide num_envs and be a multiple of num_workers");
  units_.reset(new Unit[num_units]);
  ring_.reset(new std::atomic<int32_t>[num_units]);
  int64_t envs_per_unit = num_envs / num_units;
  for (int u = 0; u < num_units; u++) {
    units_[u].begin = u * envs_per_unit;
    units_[u].end = (u + 1) * envs_per_unit;
    ring_[u].store(0, std::memory_order_relaxed);
    all_units_.push_back(u);
    finished_.push_back(0);
  }
  for (int w = 0; w < num_workers; w++) {
    auto worker = std::make_unique<Worker>();
    worker->index = w;
    workers_.push_back(std::move(worker));
  }
  wake_.assign(num_workers, false);
  returned_.assign(num_units, false);
  dispatched_.reserve(num_units);
  for (int w = 0; w < num_workers; w++) {
    Worker* worker = workers_[w].get();
    try {
      worker->thread = std::thread([this, worker] { worker_loop(worker); });
    } catch (const std::exception& error) {
      // The OS refused a thread (limits on threads or memory). No destructor runs for a
      // constructor that throws, and a joinable std::thread destroyed unjoined calls
      // std::terminate: stop and join the started workers here.
      close();
      throw std::runtime_error("engine: could not start worker thread " + std::to_string(w + 1) +
                               " of num_workers=" + std::to_string(num_workers) + " (" + error.what() +
                               "); the " + std::to_string(w) + " already started were stopped");
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
  const int num_workers = static_cast<int>(workers_.size());
  uint32_t seen = 0;
  while (true) {
    seen = wait_for_change(worker->signal, seen, spin_ns_);
    if (stopping_.load(std::memory_order_acquire)) return;
    // Several sends may have landed since the last wake-up: run every pending unit, its
    // own first (the same envs each time, warm in this core's cache), then any other
    // worker's still unclaimed. Without the second pass a staggered batch whose units
    // all belong to one worker (recv returns whichever finish first) is stepped by
    // that worker alone while the others sleep, and it stays that way batch after batch.
    for (int u = worker->index; u < num_units_; u += num_workers) run_if_pending(u);
    for (int u = 0; u < num_units_; u++)
      if (u % num_workers != worker->index) run_if_pending(u);
  }
}

bool Engine::any_unclaimed() const {
  for (int32_t u : dispatched_)
    if (units_[u].command.load(std::memory_order_relaxed) != kNone) return true;
  return false;
}

bool Engine::run_if_pending(int32_t u) {
  // Exchanging the command claims the unit, so a worker and the caller never both run it.
  if (units_[u].command.exchange(kNone, std::memory_order_acq_rel) != kStep) return false;
  pc_step_range(spec_, envs_, units_[u].begin, units_[u].end);
  pc_drain_logs(spec_, envs_, units_[u].begin, units_[u].end, units_[u].log_sums);
  publish(u);
  return true;
}

void Engine::publish(int32_t unit) {
  uint32_t ticket = claimed_.fetch_add(1, std::memory_order_relaxed);
  ring_[ticket % num_units_].store(unit + 1, std::memory_order_release);
  published_.fetch_add(1, std::memory_order_release);
  published_.notify_one();
}

void Engine::dispatch(const int32_t* units, int count, Command command, bool caller_is_worker0) {
  if (closed_) throw std::logic_error("engine is closed");
  if (in_flight_ + count > num_units_) throw std::logic_error("engine: more units sent than exist");
  int num_workers = static_cast<int>(workers_.size());
  std::fill(wake_.begin(), wake_.end(), false);
  for (int i = 0; i < count; i++) {
    units_[units[i]].command.store(command, std::memory_order_release);
    wake_[units[i] % num_workers] = true;
    dispatched_.push_back(units[i]);
  }
  // Every unit may run on a worker of its own: wake the owners, then idle workers up
  // to one per unit, which take the units their busy owners have not claimed yet.
  int woken = static_cast<int>(std::count(wake_.begin(), wake_.end(), true));
  for (int w = caller_is_worker0 ? 1 : 0; w < num_workers && woken < count; w++) {
    if (!wake_[w]) wake_[w] = true, woken++;
  }
  // Wake each worker once, after all its units are marked.
  for (int w = caller_is_worker0 ? 1 : 0; w < num_workers; w++) {
    if (!wake_[w]) continue;
    workers_[w]->signal.fetch_add(1, std::memory_order_release);
    workers_[w]->signal.notify_one();
  }
  in_flight_ += count;
}

void Engine::send(const int32_t* units, int count) { dispatch(units, count, kStep, false); }

void Engine::recv(int32_t* units_out, int count) {
  if (count > in_flight_) throw std::logic_error("engine: recv of more units than in flight");
  uint32_t target = consumed_ + static_cast<uint32_t>(count);
  uint32_t published = published_.load(std::memory_order_acquire);
  // Workers that are awake claim their units within a few hundred nanoseconds; give
  // them that long. Units still unclaimed after it belong to workers that are asleep
  // or have no core: the caller runs those itself, oldest sends first, so no unit waits
  // behind newer ones. When workers + 1 outnumber cores this keeps every core stepping.
  for (int i = 0; i < kClaimWaitPauses && any_unclaimed(); i++) PC_CPU_PAUSE();
  for (size_t i = 0; i < dispatched_.size() && static_cast<int32_t>(published - target) < 0; i++) {
    if (run_if_pending(dispatched_[i])) published = published_.load(std::memory_order_acquire);
  }
  while (static_cast<int32_t>(published - target) < 0) published = wait_for_change(published_, published, kCallerSpinNs);
  for (int i = 0; i < count; i++) {
    std::atomic<int32_t>& slot = ring_[(consumed_ + i) % num_units_];
    int32_t value;
    // A later ticket may be published before an earlier one's slot is written.
    while ((value = slot.load(std::memory_order_acquire)) == 0) PC_CPU_PAUSE();
    slot.store(0, std::memory_order_relaxed);
    units_out[i] = value - 1;
    returned_[value - 1] = true;
  }
  dispatched_.erase(std::remove_if(dispatched_.begin(), dispatched_.end(), [this](int32_t u) { return returned_[u]; }),
                    dispatched_.end());
  for (int i = 0; i < count; i++) returned_[units_out[i]] = false;
  consumed_ = target;
  in_flight_ -= count;
}

void Engine::take_logs(const int32_t* units, int count, double* out) {
  for (int i = 0; i < count; i++) {
    if (units[i] < 0 || units[i] >= num_units_) throw std::out_of_range("engine: unit id out of range");
    double* sums = units_[units[i]].log_sums;
    for (int k = 0; k < PC_LOG_SLOTS; k++) out[k] += sums[k];
    std::fill(sums, sums + PC_LOG_SLOTS, 0.0);
  }
}

void Engine::step_all() {
  if (in_flight_ != 0) throw std::logic_error("engine: step while units are in flight; recv them first");
  // A synchronous caller has nothing else to do: it takes worker 0's place (worker 0
  // stays asleep) and steps worker 0's units, so W workers mean W stepping threads,
  // not W + 1 competing for the cores; recv() then helps with whatever is unclaimed.
  dispatch(all_units_.data(), num_units_, kStep, true);
  const int num_workers = static_cast<int>(workers_.size());
  for (int u = 0; u < num_units_; u += num_workers) run_if_pending(u);
  recv(finished_.data(), num_units_);
}

}  // namespace puffercore
