// cpu_loss_v2.cpp — the clipped loss's per-token loop, the decoding attention's per-head loop
// (cpu_decode_kernels.inc) and the decoding step's other per-row loops (cpu_step_kernels.inc) for the
// x86-64-v2 baseline, compiled with -ffp-contract=off (CMakeLists.txt), bit for bit what
// cpu_loss_v3.cpp computes.
#define DRMAS_ISA_NS loss_v2
#define DRMAS_ISA_TABLE kLossIsaV2
#define DRMAS_ISA_NAME "x86-64-v2"
#define DRMAS_DECODE_TABLE kDecodeIsaV2
#define DRMAS_STEP_TABLE kStepIsaV2
#include "cpu_loss_kernels.inc"
#include "cpu_decode_kernels.inc"
#include "cpu_step_kernels.inc"
