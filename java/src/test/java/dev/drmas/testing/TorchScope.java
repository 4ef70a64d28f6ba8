// TorchScope.java — a JUnit extension for tests that make LibTorch tensors: LibTorch on 2 threads
// (this machine's cores), and a JavaCPP PointerScope around each test so that every tensor the
// test makes is freed when it ends. Use with @ExtendWith(TorchScope.class).
package dev.drmas.testing;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

public final class TorchScope implements BeforeAllCallback, BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(TorchScope.class);

    @Override
    public void beforeAll(ExtensionContext context) {
        torch.set_num_threads(2);
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getStore(NS).put("scope", new PointerScope());
    }

    @Override
    public void afterEach(ExtensionContext context) {
        PointerScope s = context.getStore(NS).remove("scope", PointerScope.class);
        if (s != null) s.close();
    }
}
