#include "server/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>

namespace docsparse {

ProcessMemory ReadProcessMemory() {
  ProcessMemory memory;
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    memory.resident_bytes = resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  }
  // mallinfo2 walks every arena under its lock: a few microseconds with the
  // one arena the server uses, once per scrape.
  const struct mallinfo2 info = mallinfo2();
  memory.heap_in_use_bytes = static_cast<int64_t>(info.uordblks + info.hblkhd);
  memory.heap_free_bytes = static_cast<int64_t>(info.fordblks);
  return memory;
}

}  // namespace docsparse
