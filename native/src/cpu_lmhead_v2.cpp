// cpu_lmhead_v2.cpp — the fused LM head's per-logit loops for any x86-64-v2 CPU (the library's baseline).
#define DRMAS_ISA_NS lmhead_v2
#define DRMAS_ISA_TABLE kLmheadIsaV2
#define DRMAS_ISA_NAME "x86-64-v2"
#include "cpu_lmhead_kernels.inc"
