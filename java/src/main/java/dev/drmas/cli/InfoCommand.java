// InfoCommand.java — `drmas info`: the libdrmas build and backend in use, and LibTorch's build
// (CPU or CUDA), the NVIDIA driver, whether CUDA is available and each device's name and memory,
// for bug reports and for checking a GPU server's setup. probe() asks the real libraries;
// format() turns its answers into lines, so that a test can check both.
package dev.drmas.cli;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.drmas.bindings.Backend;
import dev.drmas.bindings.LibDrmas;
import dev.drmas.bindings.NativeLibrary;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.pytorch.global.torch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

@Command(name = "info", mixinStandardHelpOptions = true,
        description = {"Print the libdrmas build and kernel backend, LibTorch's build (CPU or CUDA),",
                "the NVIDIA driver, whether CUDA is available and each CUDA device's name and memory."})
final class InfoCommand implements Runnable {
    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        PrintWriter out = spec.commandLine().getOut();
        out.println("libdrmas " + LibDrmas.version() + " at " + NativeLibrary.get().path());
        out.println("CUDA compiled: " + LibDrmas.cudaCompiled() + ", device available: " + LibDrmas.cudaAvailable());
        out.println("backend: " + Backend.selected() + " (override with -D" + Backend.PROPERTY + "=cpu|cuda|auto)");
        out.println("CPU threads: " + LibDrmas.numThreads() + " (set OMP_NUM_THREADS to change)");
        format(probe()).forEach(out::println);
        out.flush();
    }

    enum Build { CPU, CUDA }

    /** One CUDA device as LibTorch sees it (cudaDeviceProp); totalBytes -1 when unreadable (name says why). */
    record Gpu(int index, String name, long totalBytes, int major, int minor) {
    }

    /**
     * What LibTorch and the driver answered. {@code nativeJar}: where libjnitorch was unpacked from
     * (null if JavaCPP did not say); {@code cudaRuntime}, {@code cudnn}: the versions the CUDA
     * build was compiled against (CUDART_VERSION, e.g. 13010; CUDNN_VERSION), null on the CPU
     * build or when its CUDA libraries did not load ({@code cudaLoadError} then says why);
     * {@code driverCuda}: the CUDA version of the NVIDIA driver (cuDriverGetVersion, e.g. 13000),
     * null without a driver ({@code driverError} then says why).
     */
    record Report(String version, Build build, String nativeJar, Integer cudaRuntime, Long cudnn, String cudaLoadError,
                  Integer driverCuda, String driverError, boolean cudaAvailable, List<Gpu> gpus) {
    }

    /** Asks the LibTorch on the classpath and the NVIDIA driver; never throws for a missing GPU, driver or library. */
    static Report probe() {
        String version = pytorchVersion();
        // the -gpu jar holds the CUDA half of LibTorch; the CPU jar has none
        boolean gpuJar = torch.class.getResource("/org/bytedeco/pytorch/" + Loader.getPlatform() + "-gpu/libjnitorch_cuda.so") != null;
        Integer runtime = null;
        Long cudnn = null;
        String loadError = null;
        if (gpuJar) {
            // JavaCPP preloads libtorch_cuda with the torch class but skips it quietly when a
            // library it links is missing, and LibTorch then runs on the CPU alone: say which
            loadError = torchCudaLoadError();
            var hooks = torch.getCUDAHooks();
            if (hooks.isBuilt()) {
                runtime = (int) hooks.versionCUDART();
                cudnn = hooks.compiledWithCuDNN() ? hooks.versionCuDNN() : null;
            } else if (loadError == null) {
                loadError = "libtorch_cuda loaded but did not register with LibTorch";
            }
        }
        boolean available = torch.cuda_is_available();
        List<Gpu> gpus = available ? gpus(torch.cuda_device_count()) : List.of();
        int[] driver = new int[1];
        String driverError = driverCudaVersion(driver);
        return new Report(version, gpuJar ? Build.CUDA : Build.CPU, nativeJar(), runtime, cudnn, loadError,
                driverError == null ? driver[0] : null, driverError, available, gpus);
    }

    /** The lines `drmas info` prints about LibTorch and CUDA. */
    static List<String> format(Report r) {
        List<String> lines = new ArrayList<>();
        String from = r.nativeJar() == null ? "" : " (from " + r.nativeJar() + ")";
        if (r.build() == Build.CPU) {
            lines.add("LibTorch " + r.version() + ": CPU build" + from);
        } else if (r.cudaLoadError() != null) {
            lines.add("LibTorch " + r.version() + ": CUDA build" + from + ", but its CUDA libraries did not load: "
                    + r.cudaLoadError().strip());
        } else {
            lines.add("LibTorch " + r.version() + ": CUDA build" + from + ", CUDA runtime " + cudaVersion(r.cudaRuntime())
                    + (r.cudnn() == null ? "" : ", cuDNN " + cudnnVersion(r.cudnn())));
        }
        lines.add("NVIDIA driver: " + (r.driverCuda() != null ? "CUDA " + cudaVersion(r.driverCuda()) : "none (" + r.driverError() + ")"));
        if (r.cudaAvailable()) {
            lines.add("CUDA available: yes, " + r.gpus().size() + (r.gpus().size() == 1 ? " device" : " devices"));
            for (Gpu g : r.gpus()) {
                lines.add(g.totalBytes() < 0 ? "  cuda:" + g.index() + "  " + g.name()
                        : String.format(Locale.ROOT, "  cuda:%d  %s  %.1f GiB  compute capability %d.%d",
                                g.index(), g.name(), g.totalBytes() / (double) (1L << 30), g.major(), g.minor()));
            }
        } else {
            lines.add("CUDA available: no: " + whyNoCuda(r));
        }
        return lines;
    }

    private static String whyNoCuda(Report r) {
        if (r.build() == Build.CPU) {
            return "LibTorch is the CPU build (for a GPU run build the CUDA one: ./drmas --cuda, README \"Installing on a GPU server\")";
        }
        if (r.cudaLoadError() != null) {
            return "LibTorch's CUDA libraries did not load (above); install them as README \"Installing on a GPU server\" says";
        }
        if (r.driverCuda() == null) return "no NVIDIA driver on this machine (" + r.driverError() + ")";
        if (r.cudaRuntime() != null && r.driverCuda() / 1000 < r.cudaRuntime() / 1000) {
            return "the driver supports CUDA " + cudaVersion(r.driverCuda()) + "; this LibTorch needs a CUDA "
                    + r.cudaRuntime() / 1000 + ".x driver";
        }
        return "the driver sees no device (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    }

    /** 13010 -> "13.1" (CUDA's encoding: 1000 * major + 10 * minor). */
    static String cudaVersion(int v) {
        return v / 1000 + "." + (v % 1000) / 10;
    }

    /** 91900 -> "9.19.0" (cuDNN 9's encoding: 10000 * major + 100 * minor + patch). */
    static String cudnnVersion(long v) {
        return v / 10000 + "." + (v % 10000) / 100 + "." + v % 100;
    }

    private static String pytorchVersion() {
        try {
            String v = Loader.getVersion("org.bytedeco", "pytorch", torch.class);
            return v != null ? v : "(version unknown)";
        } catch (java.io.IOException e) {
            return "(version unknown: " + e.getMessage() + ")";
        }
    }

    /**
     * Null when libtorch_cuda is loaded, else the dynamic loader's reason (the first library it
     * links that cannot be found), from loading JavaCPP's cached copy again.
     */
    private static String torchCudaLoadError() {
        for (String path : Loader.getLoadedLibraries().values()) {
            if (path != null && path.endsWith("/libtorch_cuda.so")) return null;
        }
        try {
            var cached = Loader.cacheResource(torch.class, "/org/bytedeco/pytorch/" + Loader.getPlatform() + "-gpu/libtorch_cuda.so");
            if (cached == null) return "libtorch_cuda.so is not in the -gpu jar";
            System.load(cached.getAbsolutePath());
            return null;
        } catch (UnsatisfiedLinkError e) {
            // "<cache path>/libtorch_cuda.so: libcusparse.so.12: cannot open shared object file: ..."
            String m = String.valueOf(e.getMessage());
            int at = m.indexOf("libtorch_cuda.so: ");
            return at >= 0 ? m.substring(at) : m;
        } catch (java.io.IOException e) {
            return "libtorch_cuda.so could not be unpacked: " + e.getMessage();
        }
    }

    /** The jar (the folder of JavaCPP's cache it was unpacked to) that libjnitorch came from. */
    private static String nativeJar() {
        for (var e : Loader.getLoadedLibraries().entrySet()) {
            String path = e.getValue();
            if (path == null || !Path.of(path).getFileName().toString().equals("libjnitorch.so")) continue;
            // JavaCPP's cache keeps each jar's files under a folder named after the jar
            for (Path p = Path.of(path).getParent(); p != null; p = p.getParent()) {
                if (p.getFileName() != null && p.getFileName().toString().endsWith(".jar")) return p.getFileName().toString();
            }
            return path;
        }
        return null;
    }

    /**
     * Each device's name, memory and compute capability, from at::cuda::getDeviceProperties. The
     * classes that call it (torch_cuda, and cudaDeviceProp of the CUDA presets) are on the
     * classpath of the CUDA build only, so they are reached by reflection and the CPU build
     * compiles without them.
     */
    private static List<Gpu> gpus(int count) {
        List<Gpu> gpus = new ArrayList<>();
        try {
            Class<?> torchCuda = Class.forName("org.bytedeco.pytorch.global.torch_cuda");
            var properties = torchCuda.getMethod("getDeviceProperties", byte.class);
            for (int i = 0; i < count; i++) {
                Object prop = properties.invoke(null, (byte) i);
                Object name = prop.getClass().getMethod("name").invoke(prop);
                String text = (String) name.getClass().getMethod("getString").invoke(name);
                long bytes = (long) prop.getClass().getMethod("totalGlobalMem").invoke(prop);
                int major = (int) prop.getClass().getMethod("major").invoke(prop);
                int minor = (int) prop.getClass().getMethod("minor").invoke(prop);
                gpus.add(new Gpu(i, text, bytes, major, minor));
            }
        } catch (ReflectiveOperationException | LinkageError e) {
            // e.g. the CUDA presets' JNI wrapper missing: still list the devices LibTorch counts
            Throwable cause = e instanceof java.lang.reflect.InvocationTargetException t && t.getCause() != null ? t.getCause() : e;
            for (int i = gpus.size(); i < count; i++) gpus.add(new Gpu(i, "(properties unreadable: " + cause + ")", -1, 0, 0));
        }
        return gpus;
    }

    /**
     * Puts the driver's CUDA version into {@code version[0]} and returns null, or returns why
     * there is none. Asks libcuda.so.1 (the driver's library, not the toolkit's) directly, so
     * that the answer does not depend on LibTorch's build.
     */
    private static String driverCudaVersion(int[] version) {
        SymbolLookup cuda;
        try {
            // the global arena: libcuda stays loaded (unloading the driver library is not safe)
            cuda = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
        } catch (IllegalArgumentException e) {
            return "libcuda.so.1 not found";
        }
        var symbol = cuda.find("cuDriverGetVersion");
        if (symbol.isEmpty()) return "libcuda.so.1 has no cuDriverGetVersion";
        MethodHandle get = Linker.nativeLinker().downcallHandle(symbol.get(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            int status = (int) get.invokeExact(out);
            if (status != 0) return "cuDriverGetVersion failed with CUDA error " + status;
            version[0] = out.get(JAVA_INT, 0);
            return null;
        } catch (Throwable t) {
            return "cuDriverGetVersion failed: " + t;
        }
    }
}
