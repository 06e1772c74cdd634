// Device memory for the CUDA kernel tests: a cudaMalloc'd array filled from
// and read back into host vectors, and the skip for machines without a GPU.
#ifndef DOCSPARSE_TESTS_CUDA_DEVICE_BUFFER_H_
#define DOCSPARSE_TESTS_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace docsparse {
namespace test {

inline bool HaveCudaDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Every CUDA test starts with this: CI and most of our machines have no GPU.
#define DOCSPARSE_SKIP_WITHOUT_GPU()                                            \
  do {                                                                          \
    if (!::docsparse::test::HaveCudaDevice()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), Bytes() == 0 ? 1 : Bytes()),
              cudaSuccess);
    if (size_ > 0) {
      EXPECT_EQ(cudaMemcpy(data_, host.data(), Bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  T* get() const { return data_; }
  std::vector<T> Download() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (size_ > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), data_, Bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }

 private:
  size_t Bytes() const { return size_ * sizeof(T); }
  T* data_ = nullptr;
  size_t size_;
};

}  // namespace test
}  // namespace docsparse

#endif  // DOCSPARSE_TESTS_CUDA_DEVICE_BUFFER_H_
