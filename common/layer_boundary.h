// A point between two layers of a forward pass, where the thread computing
// it may change how it computes. Model code calls AtLayerBoundary() before
// each layer; a thread that needs the point installs what it does there.
// The server's compute threads do: a batch that borrowed every core because
// it computed alone gives them back there once another batch waits
// (server/compute_threads.h). Model code cannot call the server itself.
#ifndef DOCSPARSE_COMMON_LAYER_BOUNDARY_H_
#define DOCSPARSE_COMMON_LAYER_BOUNDARY_H_

namespace docsparse {

// What this thread does at a layer boundary; none by default.
inline thread_local void (*layer_boundary_hook)() = nullptr;

inline void AtLayerBoundary() {
  if (layer_boundary_hook != nullptr) layer_boundary_hook();
}

}  // namespace docsparse

#endif  // DOCSPARSE_COMMON_LAYER_BOUNDARY_H_
