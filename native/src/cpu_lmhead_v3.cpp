// cpu_lmhead_v3.cpp — the fused LM head's per-logit loops for x86-64-v3 (AVX2) CPUs, compiled with
// -march=x86-64-v3 -ffp-contract=off (CMakeLists.txt): no fused multiply-add, so that they round
// exactly as the v2 ones do. Only called where the CPU has AVX2 (lmhead_isa in cpu.cpp).
#define DRMAS_ISA_NS lmhead_v3
#define DRMAS_ISA_TABLE kLmheadIsaV3
#define DRMAS_ISA_NAME "x86-64-v3"
#include "cpu_lmhead_kernels.inc"
