// CommandArgsTest.java — arguments that the JVM decoded by an ASCII locale get their characters back
// from the process's argv bytes (as /proc/self/cmdline holds them), and an argument that is not UTF-8
// either is a user error naming it. The end-to-end case, a child JVM under LC_ALL=C, is in
// TokenizeCommandTest.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class CommandArgsTest {
    /** A cmdline: each argument's bytes followed by a NUL. */
    static byte[] cmdline(byte[]... argv) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (byte[] a : argv) {
            b.writeBytes(a);
            b.write(0);
        }
        return b.toByteArray();
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void argumentsAnAsciiLocaleDamagedAreDecodedAgainAsUtf8() {
        String text = "h\u00e9llo \ud83d\ude00";
        String[] asJvmGaveThem = {"tokenize", new String(utf8(text), StandardCharsets.US_ASCII)};
        assertTrue(asJvmGaveThem[1].contains("\uFFFD"));
        byte[] argv = cmdline(utf8("java"), utf8("-cp"), utf8("x.jar"), utf8("dev.drmas.cli.Main"), utf8("tokenize"), utf8(text));
        assertArrayEquals(new String[] {"tokenize", text}, CommandArgs.recover(asJvmGaveThem, StandardCharsets.US_ASCII, argv));
    }

    @Test
    void argumentsWithoutReplacementCharactersAreLeftAlone() {
        String[] args = {"tokenize", "plain"};
        assertSame(args, CommandArgs.recover(args));
    }

    @Test
    void anArgumentThatIsNotUtf8EitherIsAUserError() {
        byte[] latin1 = {'c', 'a', 'f', (byte) 0xe9};
        String[] args = {"generate", "--prompt", new String(latin1, StandardCharsets.US_ASCII)};
        byte[] argv = cmdline(utf8("java"), utf8("generate"), utf8("--prompt"), latin1);
        UserError e = assertThrows(UserError.class, () -> CommandArgs.recover(args, StandardCharsets.US_ASCII, argv));
        assertTrue(e.getMessage().contains("argument 3") && e.getMessage().contains("LC_ALL=C.UTF-8"), e.getMessage());
        // argv that does not hold these arguments (an @argfile, no /proc): the same error, nothing guessed
        assertThrows(UserError.class, () -> CommandArgs.recover(args, StandardCharsets.US_ASCII, new byte[0]));
        assertThrows(UserError.class, () -> CommandArgs.recover(args, StandardCharsets.US_ASCII, cmdline(utf8("java"), utf8("x"))));
    }
}
