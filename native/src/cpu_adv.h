// cpu_adv.h — what the CPU advantage code shares between cpu.cpp (validation, the general
// path, the scalar pieces) and the per-run kernels of cpu_adv_kernels.inc, which are compiled
// twice (cpu_adv_v2.cpp for x86-64-v2, cpu_adv_v3.cpp for AVX2 machines) and picked at run time.
// defines: AdvArgs, RunMode, run_mode, RunScratch, RunFn, AdvIsa, group_of_run, write_run_scalar,
//          write_diag, adv_isa
#pragma once

#include <stdint.h>

#include <vector>

#include "drmas.h"
#include "drmas_math.h"

namespace drmas {

struct AdvArgs {
    const drmas_norm_config* c;
    int64_t n;
    const float* scores;
    const int32_t* uid;
    const int32_t* traj;  // NULL with row pooling
    const int32_t* agent;
    int64_t U, T, K;
    float* adv;
    double* diag;
};

// What the mode decides for every run alike, worked out once per call from the config's
// descriptor: at ~30 rows a run, a few compares per run show in the kernel's instruction count
// (bench/README.md).
struct RunMode {
    bool need_group;  // the group statistics are read whatever the segment sizes (or for diagnostics)
    bool agent_only;  // mean and std from the agent segment (Dr. MAS): resolved without branches
    bool traj_x;      // the numerator is the trajectory's mean score
    bool group_only;  // mean (and std, where it divides) from the group (GRPO): no agent statistic is read
};

inline RunMode run_mode(const AdvArgs& a) {
    const drmas_norm_config& c = *a.c;
    return RunMode{reads_group(c, a.traj != nullptr) || a.diag != nullptr, mean_from_agent(c) && std_from_agent(c),
                   a.traj != nullptr && trajectory_numerator(c), !mean_from_agent(c) && (!std_from_agent(c) || !c.scale_by_std)};
}

// Scratch of one thread for the per-run path, sized once per thread and reused across runs
// (a run is ~30 rows: per-run allocation or vector bookkeeping would cost more than the rows).
struct RunScratch {
    explicit RunScratch(const AdvArgs& a) : mode(run_mode(a)), acc(3 * a.K), acnt(a.K), res(a.K) {}
    RunMode mode;                    // the call's, for every run
    std::vector<double> acc;         // per agent of the current uid: sum, m2, mean
    std::vector<int64_t> acnt;       // per agent: rows
    std::vector<Resolved> res;       // per agent: resolved mean / divisor / zero
    std::vector<int32_t> slot;       // row -> local trajectory slot (trajectory pooling only)
    std::vector<double> tcnt, tsum;  // per local trajectory
    std::vector<float> tadv;         // per local trajectory: its advantage (group-only modes, trajectory numerator)
};

// Normalises the rows [b, e), which are all the rows of uid u. `tslot` is the trajectory ->
// uid map of the validation (see group_of_run), or NULL when the rows of every trajectory are
// known to be contiguous.
typedef void (*RunFn)(const AdvArgs& a, int64_t b, int64_t e, int32_t u, RunScratch& w, int32_t* tslot);

// Group statistics of the run [b, e) (count and mean; M2 in gm2) under the configured pooling;
// with trajectory pooling it also leaves each row's trajectory slot and the trajectories' mean
// scores in `w`, for GRPO's numerator. With `tslot` (each trajectory's uid, >= 0, on entry) the
// run claims its trajectories by overwriting their entries with -(slot + 2); trajectories never
// span runs (validated), so threads on different runs never touch the same entries. Without
// it, a trajectory's rows are contiguous and a new trajectory starts where the id changes.
SegStat group_of_run(const AdvArgs& a, int64_t b, int64_t e, RunScratch& w, int32_t* tslot, double& gm2);

// The advantages of rows [b, e) from their agents' resolved segments, one row at a time with
// apply_advantage (every mode and option). kTrajX: the numerator is the trajectory's mean
// score (a trajectory numerator with trajectory pooling; group_of_run must have filled w.slot
// and w.tsum).
void write_run_scalar(const AdvArgs& a, int64_t b, int64_t e, const Resolved* res, const RunScratch& w, bool kTrajX);

// Writes the diagnostics of segment (u, k).
void write_diag(const AdvArgs& a, int64_t u, int64_t k, double acount, double amean, double am2,
                double gcount, double gmean, double gm2);

// The kernels of one instruction set (cpu_adv_kernels.inc).
struct AdvIsa {
    const char* name;
    // True when rows [b, e) are all valid (ids in range, finite scores) and, with row b - 1
    // before them, in sorted order: uid never decreases and, with trajectories, traj never
    // decreases and changes wherever uid changes. Sorted rows are grouped (each uid and each
    // trajectory is one contiguous run), so no trajectory can lie in two uids. It also writes
    // the run-start map of rows [b, e): bit i % 8 of starts[i / 8] is set where row i begins a
    // uid run (i = 0 or uid[i] != uid[i - 1]); b must be a multiple of 8, and what it writes
    // is meaningful only where it returns true.
    bool (*sorted_and_valid)(const AdvArgs& a, int64_t b, int64_t e, uint8_t* starts);
    // The per-run kernel for K = num_agents agents, or NULL when there is none for K (the
    // caller then uses the generic scalar one).
    RunFn (*run_fn)(int64_t K);
    // Normalises the runs that begin in [lo, hi) of rows that are sorted_and_valid: finds the
    // runs in their run-start map (all n rows' of it) and, with diagnostics, writes the empty
    // ones of uids without rows that come before its runs (and after them, for the chunk that
    // ends at n). `tslot`: the trajectory -> uid map that group_of_run claims, where a run's
    // trajectories are not contiguous (unsorted rows partitioned by uid; then a.uid may be NULL
    // and a.diag must be), else NULL.
    void (*sorted_runs)(const AdvArgs& a, int64_t lo, int64_t hi, const uint8_t* starts, RunScratch& w,
                        RunFn scalar_fn, int32_t* tslot);
};
extern const AdvIsa kAdvIsaV2, kAdvIsaV3;

// The kernels for this CPU: v3 (AVX2) where the CPU has it, unless the environment variable
// DRMAS_CPU_ISA=v2 asks for the baseline ones (so that the tests can run both). Both compute
// bit-identical results: the same operations in the same order, no fused multiply-add.
const AdvIsa& adv_isa();

}  // namespace drmas
