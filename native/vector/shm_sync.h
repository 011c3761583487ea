/* Spin-then-sleep waits on 32-bit words, for both vector engines: the threads engine
 * (engine.cpp: spin with pc_spin_until_change, then std::atomic::wait) and the
 * processes backend, whose per-worker command and state words live in memory shared
 * between PROCESSES (spin, then the shared futex operations below).
 *
 * std::atomic::wait cannot serve across processes: libstdc++ waits with private
 * futexes, which only wake threads of one process. */
#ifndef PUFFERCORE_SHM_SYNC_H
#define PUFFERCORE_SHM_SYNC_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define PC_CPU_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define PC_CPU_PAUSE() __asm__ volatile("yield")
#else
#define PC_CPU_PAUSE() ((void)0)
#endif

static inline uint32_t pc_shm_load(uint32_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

static inline void pc_shm_store(uint32_t* word, uint32_t value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/* Returns the new value. */
static inline uint32_t pc_shm_add(uint32_t* word, uint32_t value) {
    return __atomic_add_fetch(word, value, __ATOMIC_ACQ_REL);
}

static inline void pc_shm_wake_all(uint32_t* word) {
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline int64_t pc_shm_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Spin until *word != old or spin_ns have passed (timed: a pause lasts 10 to 140
 * cycles depending on the CPU, and a sleeping virtual CPU can take tens of
 * microseconds to wake); returns the current value, `old` if it never changed. No
 * sched_yield in the spin: on a machine with other work, a yield hands the core to
 * that work for a whole time slice. */
static inline uint32_t pc_spin_until_change(const uint32_t* word, uint32_t old, int64_t spin_ns) {
    int64_t deadline = pc_shm_now_ns() + spin_ns;
    for (int i = 0;; i++) {
        uint32_t value = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (value != old) return value;
        PC_CPU_PAUSE();
        if ((i & 63) == 63 && pc_shm_now_ns() >= deadline) return old;
    }
}

/* Wait until *word != old: spin (pc_spin_until_change), then sleep in the kernel for
 * at most timeout_ns. Returns the current value (equal to `old` on timeout), so callers
 * can check for dead peers between waits instead of hanging forever. */
static inline uint32_t pc_shm_wait_change(uint32_t* word, uint32_t old, int64_t spin_ns,
                                          int64_t timeout_ns) {
    uint32_t value = pc_spin_until_change(word, old, spin_ns);
    if (value != old) return value;
    struct timespec timeout = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    syscall(SYS_futex, word, FUTEX_WAIT, old, &timeout, NULL, 0);
    return pc_shm_load(word);
}

#endif
