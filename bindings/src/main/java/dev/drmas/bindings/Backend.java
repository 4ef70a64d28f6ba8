// Backend.java — where the kernels run. The process-wide choice is made once, logged, and
// can be forced with -Ddrmas.backend=cpu|cuda|auto (auto: CUDA when a GPU is usable).
// Tests construct each backend explicitly instead of relying on the choice.
package dev.drmas.bindings;

public enum Backend {
    CPU(0),
    CUDA(1);

    public static final String PROPERTY = "drmas.backend";
    private static final System.Logger LOG = System.getLogger("dev.drmas.bindings");
    private static volatile Backend selected;

    private final int device;

    Backend(int device) {
        this.device = device;
    }

    /** The DRMAS_DEVICE_* value. */
    public int device() {
        return device;
    }

    /** Whether this backend can run here: CPU always; CUDA when compiled in and a GPU is visible. */
    public boolean available() {
        return this == CPU || LibDrmas.cudaAvailable();
    }

    /** The process-wide backend, chosen on first use. */
    public static Backend selected() {
        Backend b = selected;
        if (b == null) {
            synchronized (Backend.class) {
                b = selected;
                if (b == null) {
                    b = choose(System.getProperty(PROPERTY, "auto"));
                    LOG.log(System.Logger.Level.INFO, "drmas kernels: backend " + b + " (libdrmas "
                            + LibDrmas.version() + ", CUDA compiled " + LibDrmas.cudaCompiled()
                            + ", available " + LibDrmas.cudaAvailable() + "; -D" + PROPERTY + " overrides)");
                    selected = b;
                }
            }
        }
        return b;
    }

    static Backend choose(String wanted) {
        switch (wanted.trim().toLowerCase()) {
            case "auto":
                return LibDrmas.cudaAvailable() ? CUDA : CPU;
            case "cpu":
                return CPU;
            case "cuda":
                if (!LibDrmas.cudaAvailable()) {
                    throw new IllegalStateException("-D" + PROPERTY + "=cuda but CUDA is not usable here (compiled "
                            + LibDrmas.cudaCompiled() + ", device visible " + LibDrmas.cudaAvailable() + ")");
                }
                return CUDA;
            default:
                throw new IllegalArgumentException("-D" + PROPERTY + "=" + wanted + ": expected cpu, cuda or auto");
        }
    }
}
