// Fake CUDA runtime pieces for a CPU-only PyTorch build, used by tools.measure
// to run training steps under FakeTensorMode on device "cuda".
//  * a DeviceGuardImplInterface for CUDA (c10 FakeGuardImpl): device/stream
//    guards in .to(), the autograd engine, etc. become no-ops;
//  * CUDAHooks that report CUDA as built/available, so that
//    at::accelerator::getAccelerator() (used by the autograd engine to pick
//    streams) finds an accelerator;
//  * a host-clock c10d reducer Timer for CUDA (a CPU build registers only the
//    CPU one), which DistributedDataParallel's logger asserts on in forward.
// CUDAHooks are looked up once, while torch._C initialises, so this library
// must be loaded (ctypes, RTLD_GLOBAL) BEFORE `import torch`.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);
namespace vramplan_fake {
struct CUDAHooks : public at::CUDAHooksInterface {
  CUDAHooks(at::CUDAHooksArgs) {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex current_device() const override { return 0; }
  int getNumGPUs() const override { return 1; }
};
}
namespace at {
using ::vramplan_fake::CUDAHooks;
REGISTER_CUDA_HOOKS(CUDAHooks);
}
namespace vramplan_fake {
// Host timestamps only, like c10d's CpuTimer (the CUDA one records CUDA events).
struct HostTimer : public c10d::Timer {
  explicit HostTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    auto s = getTimestamp(start);
    auto e = getTimestamp(end);
    if (!s || !e || *e < *s) return std::nullopt;
    return *e - *s;
  }
};
}
namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kCUDA, ::vramplan_fake::HostTimer);
}
extern "C" int vramplan_fake_cuda_loaded() { return 1; }
