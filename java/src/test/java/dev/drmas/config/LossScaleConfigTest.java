// LossScaleConfigTest.java — models.<id>.loss_scale, loss_scale_init and loss_scale_growth_interval:
// what auto means for each dtype, fixed and dynamic scales, and the errors (with their whole
// message) of a value that is not one, of scaling asked for where it does not apply, and of a
// dynamic scaler's setting given where the scaling is not dynamic.
package dev.drmas.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LossScaleConfigTest {
    @TempDir
    Path dir;

    private ModelSpec policy(String keys) throws IOException {
        Path f = dir.resolve("ok.yaml");
        Files.writeString(f, "models:\n  policy: {" + keys + "}\n");
        return RunConfig.load(f).models().get("policy");
    }

    private String fails(String keys) throws IOException {
        Path f = dir.resolve("run.yaml");
        Files.writeString(f, "models:\n  policy: {" + keys + "}\n");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(f));
        return e.getMessage().replace(f.toString(), "run.yaml");
    }

    private static ModelSpec.LossScaling dynamic() {
        return new ModelSpec.LossScaling(ModelSpec.LossScaling.Mode.DYNAMIC, 1);
    }

    private static ModelSpec.LossScaling none() {
        return new ModelSpec.LossScaling(ModelSpec.LossScaling.Mode.NONE, 1);
    }

    @Test
    void autoScalesFloat16WithFp32MastersOnly() throws IOException {
        assertEquals(dynamic(), policy("dtype: float16").lossScaling());
        assertEquals(none(), policy("dtype: float16, master_dtype: float16").lossScaling());
        assertEquals(none(), policy("dtype: bfloat16").lossScaling());
        assertEquals(none(), policy("").lossScaling());
        assertEquals("auto", policy("").lossScale());
    }

    @Test
    void fixedDynamicAndNone() throws IOException {
        assertEquals(new ModelSpec.LossScaling(ModelSpec.LossScaling.Mode.FIXED, 1024), policy("dtype: float16, loss_scale: 1024")
                .lossScaling());
        assertEquals(new ModelSpec.LossScaling(ModelSpec.LossScaling.Mode.FIXED, 128), policy("dtype: float16, loss_scale: 128.0")
                .lossScaling());
        assertEquals(none(), policy("dtype: float16, loss_scale: none").lossScaling());
        assertEquals(none(), policy("dtype: bfloat16, loss_scale: none").lossScaling());
        ModelSpec d = policy("dtype: float16, loss_scale: dynamic, loss_scale_init: 256, loss_scale_growth_interval: 10");
        assertEquals(dynamic(), d.lossScaling());
        assertEquals(256, d.lossScaleInit());
        assertEquals(10, d.lossScaleGrowthInterval());
    }

    @Test
    void badValues() throws IOException {
        assertEquals("run.yaml:2: models.policy.loss_scale: must be auto, dynamic, none or a number > 0, got 'dynamc'",
                fails("dtype: float16, loss_scale: dynamc"));
        assertEquals("run.yaml:2: models.policy.loss_scale: must be a finite number > 0, got 0", fails("dtype: float16, loss_scale: 0"));
        assertEquals("run.yaml:2: models.policy.loss_scale: must be <= 3.4028235E38 (LibTorch takes it as a float32), got 1.0E39",
                fails("dtype: float16, loss_scale: 1e39"));
        assertEquals("run.yaml:2: models.policy.loss_scale_init: must be a finite number > 0, got -2",
                fails("dtype: float16, loss_scale_init: -2"));
        assertEquals("run.yaml:2: models.policy.loss_scale_growth_interval: must be > 0, got 0",
                fails("dtype: float16, loss_scale_growth_interval: 0"));
    }

    @Test
    void scalingWhereItDoesNotApply() throws IOException {
        assertEquals("run.yaml:2: models.policy.loss_scale: is 'dynamic', but dtype is bfloat16: loss scaling is for float16 weights"
                + " (bfloat16 has float32's range and does not underflow where float16 does); remove it, or set none",
                fails("dtype: bfloat16, loss_scale: dynamic"));
        assertEquals("run.yaml:2: models.policy.loss_scale: is '1024', but dtype is float32: loss scaling is for float16 weights"
                + " (float32 does not underflow where float16 does); remove it, or set none", fails("loss_scale: 1024"));
        assertEquals("run.yaml:2: models.policy.loss_scale: is 'dynamic', but master_dtype is float16: scaling needs float32 master"
                + " weights, whose float32 gradient it divides by the scale (as torch's GradScaler, which refuses to unscale float16"
                + " gradients); set master_dtype: float32, or loss_scale: none",
                fails("dtype: float16, master_dtype: float16, loss_scale: dynamic"));
        assertEquals("run.yaml:2: models.policy.loss_scale_init: is read by dynamic loss scaling only, and loss_scale is 'auto'"
                + " (dynamic for float16 weights with float32 masters; this model has dtype bfloat16, master_dtype float32); remove it",
                fails("dtype: bfloat16, loss_scale_init: 1024"));
        assertEquals("run.yaml:2: models.policy.loss_scale_growth_interval: is read by dynamic loss scaling only, and loss_scale is"
                + " '512'; remove it", fails("dtype: float16, loss_scale: 512, loss_scale_growth_interval: 100"));
    }
}
