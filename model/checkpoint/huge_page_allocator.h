// LibTorch's CPU tensors of 2 MiB and more on transparent huge pages: the
// allocator every at::empty on the CPU goes through, replaced once at start-up
// by one that aligns such blocks to 2 MiB and asks the kernel for huge pages
// (madvise MADV_HUGEPAGE, which works where
// /sys/kernel/mm/transparent_hugepage/enabled says "madvise" or "always").
// Smaller tensors go to LibTorch's own allocator, as before. PyTorch 2.1
// added the same behind THP_MEM_ALLOC_ENABLE; Debian's LibTorch 1.13 has not.
// Large blocks are whole huge pages, and a freed one is kept (up to 1 GiB of
// them, freed_block_cache.h) for the next tensor of about its size, instead
// of going back to the kernel and being faulted in and zeroed again.
//
// Why: the kernels read the attention's keys and values from the QKV
// projection's output, a row every 2,304 bytes (bf16) or 4,608 (fp32), each
// in another 4 KiB page. At 16k tokens that output is 38 MB, ten thousand
// pages, and under a VM each TLB miss walks two page tables. A strided read
// over 64 MB on the AMX machine: 11.4 ns per access on 4 KiB pages, 6.2 on
// huge pages.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_HUGE_PAGE_ALLOCATOR_H_
#define DOCSPARSE_MODEL_CHECKPOINT_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>

namespace docsparse {

// Tensors of at least this many bytes get huge pages.
inline constexpr size_t kHugePageTensorBytes = size_t{2} << 20;

// How many bytes of freed large blocks are kept for reuse: more than the
// transient tensors of 16,384-token requests on two instances (minilm-lsg in
// int8: RSS 871 MB at the peak against 469 MB once ready; docs/BENCHMARKS.md
// "Model instances"), so a long request's blocks all serve the next one. None
// under AddressSanitizer, which could then no longer see a tensor's block
// used after it was freed.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr size_t kKeptFreedBlockBytes = 0;
#else
inline constexpr size_t kKeptFreedBlockBytes = size_t{1} << 30;
#endif

// Installs the allocator for the rest of the process (idempotent). Tensors
// allocated before keep their own deleter, so it may come at any time;
// earliest is best.
void UseHugePagesForLargeCpuTensors();

// Bytes of freed large blocks kept for reuse now: freed memory to the
// process, in use to glibc (server/process_memory.cc counts them as freed).
// 0 before UseHugePagesForLargeCpuTensors.
size_t KeptFreedBlockBytesNow();

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_HUGE_PAGE_ALLOCATOR_H_
