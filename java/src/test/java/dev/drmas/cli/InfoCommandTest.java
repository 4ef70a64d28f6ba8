// InfoCommandTest.java — `drmas info` on the LibTorch this suite runs with (the CPU build by default,
// the CUDA one under ./drmas --cuda test): the probe's answers checked against LibTorch's own calls
// and the classpath, their lines, and the lines of the cases this machine cannot show (devices, an
// old driver, CUDA libraries that did not load), formatted from hand-written answers.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.cli.InfoCommand.Build;
import dev.drmas.cli.InfoCommand.Gpu;
import dev.drmas.cli.InfoCommand.Report;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Test;

class InfoCommandTest {
    /** The build the classpath holds, read independently of the probe: the -gpu jar's file name. */
    static Build classpathBuild() {
        return System.getProperty("java.class.path").contains("linux-x86_64-gpu.jar") ? Build.CUDA : Build.CPU;
    }

    @Test
    void helpAndVersionAreOptionsAsForEveryOtherCommand() {
        Cli.Run r = Cli.run("info", "--help");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.out().contains("Usage: drmas info") && r.out().contains("CUDA"), r.out());
        assertEquals(0, Cli.run("info", "--version").exit());
    }

    @Test
    void probeAgreesWithLibTorchAndTheClasspath() {
        Report r = InfoCommand.probe();
        assertEquals(classpathBuild(), r.build());
        assertTrue(r.version().matches("\\d+\\.\\d+\\.\\d+-\\d+\\.\\d+\\.\\d+"), r.version());
        assertNotNull(r.nativeJar(), "JavaCPP names the jar libjnitorch came from");
        assertTrue(r.nativeJar().startsWith("pytorch-" + r.version() + "-linux-x86_64" + (r.build() == Build.CUDA ? "-gpu" : "")),
                r.nativeJar());
        assertEquals(torch.cuda_is_available(), r.cudaAvailable());
        assertEquals(r.cudaAvailable() ? torch.cuda_device_count() : 0, r.gpus().size());
        if (r.build() == Build.CPU) {
            assertNull(r.cudaRuntime());
            assertNull(r.cudaLoadError());
        } else {
            // compiled against CUDA 13 (cuda presets 13.1); either that is known or why not
            assertTrue(r.cudaLoadError() != null || r.cudaRuntime() / 1000 == 13, r.toString());
        }
        // a driver's version or the reason there is none, never both
        assertTrue((r.driverCuda() == null) != (r.driverError() == null), r.toString());
    }

    @Test
    void linesOfThisMachineSayPlainlyWhetherCudaIsAvailable() {
        Report r = InfoCommand.probe();
        List<String> lines = InfoCommand.format(r);
        assertTrue(lines.get(0).startsWith("LibTorch " + r.version() + ": " + r.build() + " build (from " + r.nativeJar() + ")"),
                lines.get(0));
        assertTrue(lines.get(1).startsWith("NVIDIA driver: "), lines.get(1));
        String cuda = lines.get(2);
        if (r.cudaAvailable()) {
            assertTrue(cuda.startsWith("CUDA available: yes, " + r.gpus().size()), cuda);
            assertEquals(3 + r.gpus().size(), lines.size());
        } else {
            assertTrue(cuda.startsWith("CUDA available: no: "), cuda);
            assertTrue(cuda.length() > "CUDA available: no: ".length() + 10, "with a reason: " + cuda);
            assertEquals(3, lines.size());
        }
    }

    @Test
    void infoCommandPrintsLibdrmasAndLibTorch() {
        Cli.Run run = Cli.run("info");
        assertEquals(0, run.exit(), run.err());
        assertTrue(run.out().startsWith("libdrmas "), run.out());
        assertTrue(run.out().contains("\nLibTorch "), run.out());
        assertTrue(run.out().contains("\nCUDA available: "), run.out());
    }

    static Report cuda(Integer driver, String driverError, boolean available, List<Gpu> gpus) {
        return new Report("2.10.0-1.5.13", Build.CUDA, "pytorch-2.10.0-1.5.13-linux-x86_64-gpu.jar", 13010, 91900L, null,
                driver, driverError, available, gpus);
    }

    @Test
    void devicesAreListedWithNameMemoryAndComputeCapability() {
        List<String> lines = InfoCommand.format(cuda(13000, null, true, List.of(
                new Gpu(0, "NVIDIA H200", 150_110_011_392L, 9, 0), new Gpu(1, "NVIDIA H200", 150_110_011_392L, 9, 0))));
        assertEquals(List.of(
                "LibTorch 2.10.0-1.5.13: CUDA build (from pytorch-2.10.0-1.5.13-linux-x86_64-gpu.jar), CUDA runtime 13.1, cuDNN 9.19.0",
                "NVIDIA driver: CUDA 13.0",
                "CUDA available: yes, 2 devices",
                "  cuda:0  NVIDIA H200  139.8 GiB  compute capability 9.0",
                "  cuda:1  NVIDIA H200  139.8 GiB  compute capability 9.0"), lines);
        assertEquals("CUDA available: yes, 1 device",
                InfoCommand.format(cuda(13000, null, true, List.of(new Gpu(0, "NVIDIA A100-SXM4-80GB", 85_899_345_920L, 8, 0)))).get(2));
    }

    @Test
    void eachReasonForNoCudaIsNamed() {
        assertEquals("CUDA available: no: no NVIDIA driver on this machine (libcuda.so.1 not found)",
                InfoCommand.format(cuda(null, "libcuda.so.1 not found", false, List.of())).get(2));
        assertEquals("NVIDIA driver: none (libcuda.so.1 not found)",
                InfoCommand.format(cuda(null, "libcuda.so.1 not found", false, List.of())).get(1));
        assertEquals("CUDA available: no: the driver supports CUDA 12.8; this LibTorch needs a CUDA 13.x driver",
                InfoCommand.format(cuda(12080, null, false, List.of())).get(2));
        assertEquals("CUDA available: no: the driver sees no device (check nvidia-smi and CUDA_VISIBLE_DEVICES)",
                InfoCommand.format(cuda(13000, null, false, List.of())).get(2));
        Report cpu = new Report("2.10.0-1.5.13", Build.CPU, "pytorch-2.10.0-1.5.13-linux-x86_64.jar", null, null, null,
                13000, null, false, List.of());
        assertEquals("LibTorch 2.10.0-1.5.13: CPU build (from pytorch-2.10.0-1.5.13-linux-x86_64.jar)", InfoCommand.format(cpu).get(0));
        assertTrue(InfoCommand.format(cpu).get(2).startsWith("CUDA available: no: LibTorch is the CPU build (for a GPU run build the CUDA one: ./drmas --cuda"));
        Report broken = new Report("2.10.0-1.5.13", Build.CUDA, "pytorch-2.10.0-1.5.13-linux-x86_64-gpu.jar", null, null,
                "libcublas.so.13: cannot open shared object file: No such file or directory", 13000, null, false, List.of());
        assertEquals("LibTorch 2.10.0-1.5.13: CUDA build (from pytorch-2.10.0-1.5.13-linux-x86_64-gpu.jar), but its CUDA libraries"
                + " did not load: libcublas.so.13: cannot open shared object file: No such file or directory", InfoCommand.format(broken).get(0));
        assertTrue(InfoCommand.format(broken).get(2).startsWith("CUDA available: no: LibTorch's CUDA libraries did not load"));
    }

    @Test
    void versionsDecodeAsCudaAndCudnnWriteThem() {
        assertEquals("13.1", InfoCommand.cudaVersion(13010));
        assertEquals("12.8", InfoCommand.cudaVersion(12080));
        assertEquals("9.19.0", InfoCommand.cudnnVersion(91900));
        assertEquals("9.8.1", InfoCommand.cudnnVersion(90801));
    }
}
