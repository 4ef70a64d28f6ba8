// cpu_loss_v3.cpp — the clipped loss's per-token loop, the decoding attention's per-head loop
// (cpu_decode_kernels.inc, which uses the loss's vector exp) and the decoding step's other per-row
// loops (cpu_step_kernels.inc) for x86-64-v3 (AVX2) CPUs, compiled with
// -march=x86-64-v3 -ffp-contract=off (CMakeLists.txt): no fused multiply-add, so that it rounds
// exactly as the v2 one does. Only called where the CPU has AVX2 (loss_isa in cpu.cpp).
#define DRMAS_ISA_NS loss_v3
#define DRMAS_ISA_TABLE kLossIsaV3
#define DRMAS_ISA_NAME "x86-64-v3"
#define DRMAS_DECODE_TABLE kDecodeIsaV3
#define DRMAS_STEP_TABLE kStepIsaV3
#include "cpu_loss_kernels.inc"
#include "cpu_decode_kernels.inc"
#include "cpu_step_kernels.inc"
