// DistEnv.java — who this process is in a data-parallel run, read from the torchrun/SLURM
// environment convention (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK). No variable set
// means one process; a partial or malformed set is an error naming the variable and its value.
package dev.drmas.dist;

import java.util.Map;

/**
 * @param masterAddr host of rank 0, where the TCPStore listens
 * @param masterPort its port
 * @param rank       this process, 0..worldSize-1
 * @param worldSize  the number of processes
 * @param localRank  this process among those of its node (picks its GPU)
 */
public record DistEnv(String masterAddr, int masterPort, int rank, int worldSize, int localRank) {
    public static final DistEnv SINGLE = new DistEnv("127.0.0.1", 0, 0, 1, 0);

    public boolean distributed() {
        return worldSize > 1;
    }

    /**
     * The CUDA device of this process among the {@code deviceCount} it sees: its local rank when that
     * is one of them (one process per GPU, every GPU of the node visible to each), else 0 when it sees
     * exactly one (a scheduler that binds one GPU to each process: SLURM's --gpus-per-task=1 or
     * --gpu-bind, a per-rank CUDA_VISIBLE_DEVICES, where cuda:LOCAL_RANK would be an invalid ordinal).
     * Otherwise an error naming LOCAL_RANK, the count and {@code visibleDevices} (CUDA_VISIBLE_DEVICES,
     * null when unset).
     */
    public int cudaDevice(int deviceCount, String visibleDevices) {
        if (localRank < deviceCount) return localRank;
        if (deviceCount == 1) return 0;
        String visible = "CUDA_VISIBLE_DEVICES " + (visibleDevices == null ? "unset" : "'" + visibleDevices + "'");
        if (deviceCount <= 0) throw new IllegalArgumentException("this process sees no CUDA device (" + visible + ")");
        throw new IllegalArgumentException("LOCAL_RANK " + localRank + " (RANK " + rank + " when LOCAL_RANK is unset) has no "
                + "CUDA device of its own: this process sees " + deviceCount + " (" + visible + "); start at most one process "
                + "per visible GPU on each node, with LOCAL_RANK 0 to " + (deviceCount - 1) + ", or give each process one GPU of its own");
    }

    /** The process's own environment. */
    public static DistEnv fromEnvironment() {
        return from(System.getenv());
    }

    /**
     * Reads {@code env}. WORLD_SIZE unset (or 1, with RANK 0 or unset) is a single process; otherwise
     * every variable but LOCAL_RANK (default: RANK) must be set and valid.
     */
    public static DistEnv from(Map<String, String> env) {
        String ws = env.get("WORLD_SIZE");
        if (ws == null || ws.isBlank()) {
            if (env.containsKey("RANK") && parse(env, "RANK", 0, Integer.MAX_VALUE) != 0) {
                throw new IllegalArgumentException("RANK=" + env.get("RANK") + " is set but WORLD_SIZE is not: set both "
                        + "(and MASTER_ADDR, MASTER_PORT), or use `drmas launch --nproc N`");
            }
            return SINGLE;
        }
        int worldSize = parse(env, "WORLD_SIZE", 1, 1 << 20);
        if (worldSize == 1) {
            String r = env.get("RANK");
            if (r != null && !r.isBlank() && parse(env, "RANK", 0, Integer.MAX_VALUE) != 0) {
                throw new IllegalArgumentException("RANK=" + r + " with WORLD_SIZE=1: the one process is rank 0 "
                        + "(unset RANK or set it to 0, or set WORLD_SIZE to the number of processes)");
            }
            return SINGLE;
        }
        int rank = parse(env, "RANK", 0, worldSize - 1);
        String addr = env.get("MASTER_ADDR");
        if (addr == null || addr.isBlank()) {
            throw new IllegalArgumentException("MASTER_ADDR is not set (WORLD_SIZE=" + worldSize + "): the host of rank 0, "
                    + "e.g. MASTER_ADDR=127.0.0.1 on one machine");
        }
        int port = parse(env, "MASTER_PORT", 1, 65535);
        int localRank = env.containsKey("LOCAL_RANK") ? parse(env, "LOCAL_RANK", 0, 1 << 20) : rank;
        return new DistEnv(addr.trim(), port, rank, worldSize, localRank);
    }

    private static int parse(Map<String, String> env, String name, int lo, int hi) {
        String v = env.get(name);
        if (v == null || v.isBlank()) {
            throw new IllegalArgumentException(name + " is not set (WORLD_SIZE=" + env.get("WORLD_SIZE") + ")");
        }
        try {
            int x = Integer.parseInt(v.trim());
            if (x < lo || x > hi) throw new IllegalArgumentException(name + "=" + v + " is outside [" + lo + ", " + hi + "]");
            return x;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + "=" + v + " is not an integer");
        }
    }
}
