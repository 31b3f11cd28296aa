// The native kernels' thread pool: macaronic::parallel_for splits [begin, end) into one contiguous
// chunk per thread (at most one per `grain` items), runs chunk 0 on the caller and the others on
// persistent workers that spin briefly between jobs, then sleep.
//
// Why not at::parallel_for (OpenMP): libgomp keeps one worker team per thread that opens parallel
// regions, and once it manages more threads than there are cores it cuts its spin-wait to almost
// nothing. The engine decodes on its own thread beside a main thread that also ran torch ops, so
// every region there paid a futex wake-up: ~150 us per call against 25 us of work (docs/LOG.md).
// Thread count: torch's for the calling thread (torch.set_num_threads). One caller at a time: a
// second caller, or a nested call, runs its range serially on its own thread.
#pragma once

#include <cstdint>
#include <functional>

namespace macaronic {
void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
}  // namespace macaronic
