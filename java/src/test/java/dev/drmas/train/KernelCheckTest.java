// KernelCheckTest.java — a run that picks a GPU is refused at start, naming run.device and what to
// do, when libdrmas cannot run its CUDA kernels there (Policies.requireKernels): built without nvcc,
// a CUDA runtime that sees no device, or no kernel image for the GPU. Before, such a run trained
// until its first update and stopped there. The decision is a function of what libdrmas reports, so
// the failing combinations run here (no GPU) as arguments.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunSettings;
import org.junit.jupiter.api.Test;

class KernelCheckTest {
    @Test
    void aLibraryWithoutCudaKernelsIsRefusedByName() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> Policies.requireKernels(RunSettings.Device.CUDA, 0, false, false, null));
        assertEquals("run.device: is cuda (cuda:0), but libdrmas was built without its CUDA kernels (nvcc was not found when "
                + "it was built), and training on a GPU needs them (the PPO loss and the fused LM head run in libdrmas): install "
                + "the CUDA toolkit's nvcc and rebuild (./drmas --cuda build; README, \"Installing on a GPU server\"); or train "
                + "on the CPU with run.device=cpu", e.getMessage());
        assertEquals("run.device", e.key());
        // auto picked the GPU: the message says so
        e = assertThrows(ConfigException.class, () -> Policies.requireKernels(RunSettings.Device.AUTO, 2, false, false, null));
        assertTrue(e.getMessage().startsWith("run.device: is auto and LibTorch sees a GPU (cuda:2), but libdrmas was built "
                + "without its CUDA kernels"), e.getMessage());
    }

    @Test
    void aCudaRuntimeThatSeesNoDeviceIsRefused() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> Policies.requireKernels(RunSettings.Device.CUDA, 1, true, false, null));
        assertEquals("run.device: is cuda (cuda:1), but libdrmas's CUDA runtime sees no usable device although LibTorch does "
                + "(an NVIDIA driver older than the CUDA toolkit libdrmas was compiled with?): update the driver, or rebuild "
                + "libdrmas with the machine's toolkit; or train on the CPU with run.device=cpu", e.getMessage());
    }

    @Test
    void aCudaRuntimeThatSeesNoDeviceIsRefusedWithCudasReason() {
        // drmas_cuda_check_device's message where the driver is older than libdrmas's toolkit (test_cuda checks it on the
        // emulator: ctest cuda_emu_old_driver)
        String lib = "drmas_cuda_check_device: no usable CUDA device (no GPU or no driver; CUDA says: CUDA driver version is "
                + "insufficient for CUDA runtime version)";
        ConfigException e = assertThrows(ConfigException.class,
                () -> Policies.requireKernels(RunSettings.Device.CUDA, 0, true, false, lib));
        assertEquals("run.device: is cuda (cuda:0), but libdrmas's CUDA runtime sees no usable device although LibTorch does "
                + "(an NVIDIA driver older than the CUDA toolkit libdrmas was compiled with? " + lib + "): update the driver, or "
                + "rebuild libdrmas with the machine's toolkit; or train on the CPU with run.device=cpu", e.getMessage());
    }

    @Test
    void aGpuWithoutAKernelImageIsRefusedWithTheLibrarysWords() {
        // drmas_cuda_check_device's message for a Turing card (native/test/test_cuda.cpp checks it on the emulator)
        String lib = "drmas_cuda_check_device: libdrmas has no CUDA kernel image for device 0 (compute capability 7.5: no kernel "
                + "image is available for execution on the device); it was compiled for the architectures "
                + "80-real,90-real,90-virtual: rebuild it with 75-real added to CMake's DRMAS_CUDA_ARCHITECTURES (README, "
                + "\"Installing on a GPU server\")";
        ConfigException e = assertThrows(ConfigException.class,
                () -> Policies.requireKernels(RunSettings.Device.CUDA, 0, true, true, lib));
        assertEquals("run.device: is cuda (cuda:0), but " + lib + "; or train on the CPU with run.device=cpu", e.getMessage());
    }

    @Test
    void usableKernelsPass() {
        Policies.requireKernels(RunSettings.Device.CUDA, 0, true, true, null);
        Policies.requireKernels(RunSettings.Device.AUTO, 7, true, true, null);
    }
}
