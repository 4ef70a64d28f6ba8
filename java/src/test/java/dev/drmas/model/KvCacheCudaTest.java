// KvCacheCudaTest.java — a KV cache on a GPU is made there: zeros of the model's dtype on the
// device, with no host copy on the way (a cache first made in host memory and then copied held all
// its layers' bytes in host RAM at once: ~38.6 GB for Qwen3-4B at max_batch_tokens 262144). The CPU
// tests (KvCacheTest, GeneratorTest) run the same allocation line. Tagged "gpu"; skipped with a
// message where LibTorch has no CUDA device, failed instead when DRMAS_REQUIRE_GPU=1.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.metrics.PeakMemory;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("gpu")
class KvCacheCudaTest {
    @Test
    void aCacheOnTheGpuIsMadeThereWithoutHostMemory() {
        boolean cuda = torch.cuda_is_available();
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(cuda, "DRMAS_REQUIRE_GPU=1 but LibTorch sees no CUDA device");
        } else {
            Assumptions.assumeTrue(cuda, "no CUDA device (LibTorch sees none): skipping the KV cache's CUDA test");
        }
        ModelConfig c = ModelConfig.tiny(Family.QWEN3, 61);
        long rows = 64, capacity = 16384;
        long bytes = 2 * rows * c.numKvHeads() * capacity * c.headDim() * 2L * c.numLayers();  // bf16: 1 GiB
        try (CausalLm m = CausalLm.random(c, 1, ScalarType.BFloat16, new Device("cuda:0"))) {
            PeakMemory phase = PeakMemory.start();  // after the model: CUDA's context is already up
            try (KvCache cache = m.newCache(rows, capacity); PointerScope scope = new PointerScope()) {
                long added = phase.addedBytes();
                Assumptions.assumeTrue(added >= 0, "this system reports no peak memory");
                assertTrue(added < bytes / 4, "making a " + bytes + "-byte cache on the GPU took " + added + " bytes of host memory");
                for (int l = 0; l < c.numLayers(); l++) {
                    assertTrue(cache.keysAndValues(l).is_cuda(), "layer " + l + " on the GPU");
                    assertEquals(ScalarType.BFloat16, cache.keysAndValues(l).scalar_type().intern(), "layer " + l + " dtype");
                    assertEquals(0.0, cache.keysAndValues(l).abs().sum().item_double(), "layer " + l + " zeros");
                }
            }
        }
    }
}
