// CudaDeviceTest.java — which GPU a rank takes (DistEnv.cudaDevice: LOCAL_RANK, or the one device a
// scheduler left visible, or a clear error) and the device NCCL's barrier is told to use
// (ProcessGroup.barrierOptions). Both are plain functions of their arguments, so they run here
// without a GPU; a Device("cuda:3") is only a name until something is allocated on it.
package dev.drmas.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.BarrierOptions;
import org.bytedeco.pytorch.Device;
import org.junit.jupiter.api.Test;

class CudaDeviceTest {
    private static DistEnv rank(int rank, int localRank) {
        return new DistEnv("127.0.0.1", 29500, rank, 16, localRank);
    }

    @Test
    void everyGpuVisibleToEachProcessIsPickedByLocalRank() {
        assertEquals(0, DistEnv.SINGLE.cudaDevice(8, null));
        assertEquals(3, rank(11, 3).cudaDevice(8, null));
        assertEquals(7, rank(15, 7).cudaDevice(8, "0,1,2,3,4,5,6,7"));
    }

    @Test
    void oneVisibleGpuIsDeviceZeroWhateverTheLocalRank() {
        // SLURM --gpus-per-task=1 / a per-rank CUDA_VISIBLE_DEVICES: cuda:3 would be an invalid ordinal
        assertEquals(0, rank(11, 3).cudaDevice(1, "3"));
        // no LOCAL_RANK on node 2 of 2: DistEnv takes RANK (9), and the one device is still it
        assertEquals(0, rank(9, 9).cudaDevice(1, "GPU-5e1c"));
    }

    @Test
    void aLocalRankBeyondSeveralVisibleGpusNamesWhatItSaw() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rank(9, 9).cudaDevice(8, null));
        assertEquals("LOCAL_RANK 9 (RANK 9 when LOCAL_RANK is unset) has no CUDA device of its own: this process sees 8 "
                + "(CUDA_VISIBLE_DEVICES unset); start at most one process per visible GPU on each node, with LOCAL_RANK 0 to 7, "
                + "or give each process one GPU of its own", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> rank(6, 2).cudaDevice(2, "4,5"));
        assertEquals("LOCAL_RANK 2 (RANK 6 when LOCAL_RANK is unset) has no CUDA device of its own: this process sees 2 "
                + "(CUDA_VISIBLE_DEVICES '4,5'); start at most one process per visible GPU on each node, with LOCAL_RANK 0 to 1, "
                + "or give each process one GPU of its own", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> DistEnv.SINGLE.cudaDevice(0, ""));
        assertEquals("this process sees no CUDA device (CUDA_VISIBLE_DEVICES '')", e.getMessage());
    }

    @Test
    void ncclsBarrierIsGivenTheRanksGpuAndGloosNone() {
        try (PointerScope scope = new PointerScope()) {
            BarrierOptions o = ProcessGroup.barrierOptions(1234, new Device("cuda:3"));
            assertEquals(1, o.device_ids().size(), "one device id");
            assertEquals(3, o.device_ids().get(0));
            assertEquals(1234, o.timeout().count());
            BarrierOptions cpu = ProcessGroup.barrierOptions(50, new Device("cpu"));
            assertEquals(0, cpu.device_ids().size());
            assertEquals(50, cpu.timeout().count());
        }
    }
}
