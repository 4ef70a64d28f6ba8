// cuda_backend_emu.cpp — the CUDA backend (native/src/cuda_backend.cu, unchanged) compiled as host
// C++ against the SIMT emulator's cuda_runtime.h (native/emu), for libdrmas_emu. A separate file
// because CMake gives a source one language for every target.
#include "cuda_backend.cu"
