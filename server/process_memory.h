// The server's memory as /metrics shows it. RSS alone cannot tell a leak
// from the allocator's high-water mark: the server keeps freed memory for
// reuse and never trims its heap (common/cpu_runtime.h), so RSS steps up to
// the largest working set seen and stays there. The heap's bytes in use
// fall back when requests end; a leak makes them climb.
#ifndef DOCSPARSE_SERVER_PROCESS_MEMORY_H_
#define DOCSPARSE_SERVER_PROCESS_MEMORY_H_

#include <cstdint>

namespace docsparse {

struct ProcessMemory {
  int64_t resident_bytes = 0;  // RSS, from /proc/self/statm
  // glibc malloc (mallinfo2): allocated and not freed, less the tensor blocks
  // the CPU allocator keeps for reuse (huge_page_allocator.h) ...
  int64_t heap_in_use_bytes = 0;
  // ... which count here, with what malloc keeps freed.
  int64_t heap_free_bytes = 0;
};

// Now. Fields it cannot read stay 0.
ProcessMemory ReadProcessMemory();

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_PROCESS_MEMORY_H_
