// cpu_adv_v3.cpp — the advantage kernels for x86-64-v3 (AVX2) CPUs, compiled with
// -march=x86-64-v3 -ffp-contract=off (CMakeLists.txt): no fused multiply-add, so that they
// round exactly as the v2 ones do. Only called where the CPU has AVX2 (adv_isa in cpu.cpp).
#include <algorithm>
#define DRMAS_ISA_NS isa_v3
#define DRMAS_ISA_TABLE kAdvIsaV3
#define DRMAS_ISA_NAME "x86-64-v3"
#include "cpu_adv_kernels.inc"
