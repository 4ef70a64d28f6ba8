// cpu_loss_v4.cpp — the clipped loss's per-token loop for x86-64-v4 (AVX-512) CPUs: sixteen tokens a
// step in one zmm register, compiled with -march=x86-64-v4 -ffp-contract=off (CMakeLists.txt). Bit
// for bit what cpu_loss_v2.cpp and cpu_loss_v3.cpp compute (cpu_loss_kernels.inc says how). The
// decoding kernels stay v3's on such CPUs: only the loss has a sixteen-lane loop. Only called where
// the CPU has AVX-512 F/BW/DQ/VL (loss_isa in cpu.cpp).
#define DRMAS_ISA_NS loss_v4
#define DRMAS_ISA_TABLE kLossIsaV4
#define DRMAS_ISA_NAME "x86-64-v4"
#include "cpu_loss_kernels.inc"
