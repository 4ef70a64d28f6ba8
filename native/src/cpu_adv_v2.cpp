// cpu_adv_v2.cpp — the advantage kernels for any x86-64-v2 CPU (the library's baseline).
#include <algorithm>
#define DRMAS_ISA_NS isa_v2
#define DRMAS_ISA_TABLE kAdvIsaV2
#define DRMAS_ISA_NAME "x86-64-v2"
#include "cpu_adv_kernels.inc"
