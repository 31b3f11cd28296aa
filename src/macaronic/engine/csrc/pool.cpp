// macaronic::parallel_for over a persistent pool (see pool.h for why not OpenMP).
//
// A job is [begin, end) cut into `chunks` contiguous parts that the caller and the workers claim one
// at a time from one atomic word (job number, chunk count, next chunk), so a
// worker that wakes late, or never gets a core because another runtime's threads spin on it, only
// leaves more chunks to the caller: nobody waits for a thread that has not started. A stale worker's
// claim carries the old job number and fails.

#include "pool.h"

#include <ATen/Parallel.h>

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <pthread.h>
#include <system_error>
#include <thread>
#include <vector>

namespace {

constexpr auto kSpin = std::chrono::microseconds(200);  // a worker spins (yielding) this long, then sleeps
constexpr int kChunksPerThread = 2;                      // finer chunks balance a late or slow worker

struct Pool {
  std::atomic<bool> busy{false};     // one caller at a time
  std::vector<std::thread> workers;  // threads - 1 of them
  std::atomic<uint64_t> gen{0};      // bumped to wake workers for a job (or to stop them)
  std::atomic<uint64_t> claim{0};    // (job << 32) | (chunks << 16) | next unclaimed chunk
  std::atomic<int64_t> finished{0};  // chunks of the current job done
  std::atomic<bool> stop{false};
  const std::function<void(int64_t, int64_t)>* fn = nullptr;  // stable while a chunk of the job is unclaimed
  int64_t begin = 0, end = 0;
  uint64_t job = 0;
  std::exception_ptr err;
  std::atomic_flag err_set = ATOMIC_FLAG_INIT;

  // Claim and run chunks of job `j` until none is left; false once the job is another one.
  void drain(uint64_t j) {
    for (;;) {
      uint64_t c = claim.load(std::memory_order_acquire);
      if ((c >> 32) != j) return;
      const int64_t i = int64_t(c & 0xFFFF), n = int64_t((c >> 16) & 0xFFFF);
      if (i >= n) return;
      if (!claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
      const int64_t len = end - begin, lo = begin + len * i / n, hi = begin + len * (i + 1) / n;
      try {
        if (lo < hi) (*fn)(lo, hi);
      } catch (...) {
        if (!err_set.test_and_set()) err = std::current_exception();
      }
      finished.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void work(uint64_t seen) {  // seen: the generation before this worker's first job
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      uint64_t g;
      for (int n = 1; (g = gen.load(std::memory_order_acquire)) == seen; ++n) {
        if (n % 64) {
          _mm_pause();
        } else if (std::chrono::steady_clock::now() - t0 < kSpin) {
          sched_yield();  // let a thread that needs this core (another pool's, the GIL holder's) run
        } else {
          gen.wait(seen, std::memory_order_acquire);  // futex sleep until the next job
        }
      }
      seen = g;
      if (stop.load(std::memory_order_acquire)) return;
      drain(claim.load(std::memory_order_acquire) >> 32);
    }
  }

  void resize(int64_t threads) {  // the caller owns the pool
    if (int64_t(workers.size()) + 1 == threads) return;
    if (!workers.empty()) {
      stop.store(true, std::memory_order_release);
      gen.fetch_add(1, std::memory_order_acq_rel);
      gen.notify_all();
      for (auto& w : workers) w.join();
      workers.clear();
      stop.store(false);
    }
    const uint64_t g0 = gen.load(std::memory_order_acquire);
    for (int64_t i = 1; i < threads; ++i) workers.emplace_back([this, g0] { work(g0); });
  }
};

std::atomic<Pool*> g_pool{nullptr};

// Never destroyed: workers must not be joined during static teardown. A forked child has none of
// its parent's workers, so it drops the parent's pool (left as it is) and starts one of its own.
Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); }); });
  Pool* fresh = new Pool();  // no workers yet: deleting a loser is safe
  if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *p;
}

}  // namespace

namespace macaronic {

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (begin >= end) return;
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads()), g = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>({threads * kChunksPerThread, (end - begin + g - 1) / g, 0xFFFF});
  Pool& p = pool();
  bool expected = false;
  if (threads == 1 || chunks <= 1 || !p.busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    f(begin, end);  // one thread, one chunk, or the pool is taken (a nested or concurrent call)
    return;
  }
  struct Release {  // the pool is free again on every way out, an exception included
    Pool& p;
    ~Release() { p.busy.store(false, std::memory_order_release); }
  } release{p};
  try {
    p.resize(threads);
  } catch (const std::system_error&) {  // no thread could be started (a pids limit): this job alone
    f(begin, end);
    return;
  }
  p.fn = &f;
  p.begin = begin, p.end = end;
  p.err = nullptr;
  p.err_set.clear();
  p.finished.store(0, std::memory_order_relaxed);
  const uint64_t job = ++p.job & 0xFFFFFFFF;
  p.claim.store(job << 32 | uint64_t(chunks) << 16, std::memory_order_release);
  p.gen.fetch_add(1, std::memory_order_acq_rel);
  p.gen.notify_all();
  p.drain(job);
  // chunks workers claimed; yield now and then, in case one of them waits for this core
  for (int n = 1; p.finished.load(std::memory_order_acquire) < chunks; ++n) n % 256 ? _mm_pause() : (void)sched_yield();
  if (p.err) std::rethrow_exception(p.err);
}

}  // namespace macaronic
