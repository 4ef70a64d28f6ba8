// Nccl.java — the NCCL backend, in a class of its own so that CPU-only runs never load the NCCL
// classes of the presets (their native library is absent from CPU builds).
package dev.drmas.dist;

import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.nccl.ProcessGroupNCCL;

final class Nccl {
    private Nccl() {
    }

    static Backend create(Store store, int rank, int worldSize, long timeoutMs) {
        ProcessGroupNCCL.Options o = ProcessGroupNCCL.Options.create();
        o.timeout(new Milliseconds(timeoutMs));
        return new ProcessGroupNCCL(store, rank, worldSize, o);
    }

    static void shutdown(Backend b) {
        if (b instanceof ProcessGroupNCCL n) n.shutdown();
    }
}
