#include "server/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtime's allocator statistics (sanitizer/allocator_interface.h,
// which Debian's GCC does not install).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
extern "C" size_t __sanitizer_get_free_bytes();
#endif

#include <fstream>

#include "model/checkpoint/huge_page_allocator.h"

namespace docsparse {

ProcessMemory ReadProcessMemory() {
  ProcessMemory memory;
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    memory.resident_bytes = resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers replace malloc with their own allocator (mallinfo2 reads
  // glibc's, now empty): ask theirs (scripts/test --sanitize).
  memory.heap_in_use_bytes = static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
  memory.heap_free_bytes = static_cast<int64_t>(__sanitizer_get_free_bytes());
#else
  // mallinfo2 walks every arena under its lock: a few microseconds with the
  // one arena the server uses, once per scrape.
  const struct mallinfo2 info = mallinfo2();
  memory.heap_in_use_bytes = static_cast<int64_t>(info.uordblks + info.hblkhd);
  memory.heap_free_bytes = static_cast<int64_t>(info.fordblks);
#endif
  // Tensors' freed blocks the CPU allocator keeps for reuse are in use to
  // malloc but free to the server: counted as freed, so that the heap in use
  // still falls back when requests end.
  const auto kept = static_cast<int64_t>(KeptFreedBlockBytesNow());
  memory.heap_in_use_bytes -= kept;
  memory.heap_free_bytes += kept;
  return memory;
}

}  // namespace docsparse
