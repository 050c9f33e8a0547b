// Fake CUDA runtime pieces for a CPU-only PyTorch build, used by tools.measure
// to run training steps under FakeTensorMode on device "cuda".
//  * a DeviceGuardImplInterface for CUDA (c10 FakeGuardImpl): device/stream
//    guards in .to(), the autograd engine, etc. become no-ops;
//  * CUDAHooks that report CUDA as built/available, so that
//    at::accelerator::getAccelerator() (used by the autograd engine to pick
//    streams) finds an accelerator.
// CUDAHooks are looked up once, while torch._C initialises, so this library
// must be loaded (ctypes, RTLD_GLOBAL) BEFORE `import torch`.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
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
extern "C" int vramplan_fake_cuda_loaded() { return 1; }
