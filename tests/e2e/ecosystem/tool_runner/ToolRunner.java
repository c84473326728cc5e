import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Runs the main classes of Kafka's one-shot tools (kafka-topics, kafka-configs, ...) one after another in one JVM,
 * as tests/e2e/ecosystem/kafka_jars.py's ToolRunner asks: each a JVM start of its own cost the tests seconds of CPU
 * apiece (Scala, the admin client, the tool's classes loaded and compiled again), most of a tool test's time.
 *
 * Each call gets what its own JVM would: an empty stdin, its own stdout and stderr (System.out/err and Scala's
 * Console, which keeps the System.out of its first use, write through the switchable streams installed here before
 * any Kafka or Scala class loads), and its exit status: Kafka's tools end through org.apache.kafka.common.utils.Exit,
 * whose procedure here records the status and unwinds the tool (what the process would print after its exit is
 * dropped). A main that throws prints what the JVM's default handler prints, status 1.
 *
 * Protocol, on the JVM's real stdin/stdout: a request is one line of base64 fields (the main class, then each
 * argument); the answer one line "KBUS-TOOL <status> <base64 stdout> <base64 stderr>".
 */
public final class ToolRunner {
    /** Where System.out/err write: the current call's buffer, or nothing once the call has exited. */
    static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        @Override public void write(int b) throws java.io.IOException { target.write(b); }
        @Override public void write(byte[] b, int off, int len) throws java.io.IOException { target.write(b, off, len); }
        @Override public void flush() throws java.io.IOException { target.flush(); }
    }

    /** System.out/err over a Switch: a tool that closes them (try-with-resources on System.out) leaves them open for
     * the next call, as its own JVM would have ended anyway. */
    static final class Unclosable extends PrintStream {
        Unclosable(OutputStream out) { super(out, true, StandardCharsets.UTF_8); }

        @Override public void close() { flush(); }
    }

    /** Thrown by the exit procedure: the tool's process would end here. */
    static final class ExitSignal extends Error {
        private static final long serialVersionUID = 1L;

        ExitSignal() { super(null, null, false, false); }
    }

    static final Switch OUT = new Switch();
    static final Switch ERR = new Switch();
    static volatile Integer exitStatus;

    public static void main(String[] ignored) throws Exception {
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.setOut(new Unclosable(OUT));
        System.setErr(new Unclosable(ERR));
        System.setIn(new ByteArrayInputStream(new byte[0]));
        installExitProcedure();
        Base64.Decoder dec = Base64.getDecoder();
        Base64.Encoder enc = Base64.getEncoder();
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] fields = line.split(" ", -1);
            String mainClass = new String(dec.decode(fields[0]), StandardCharsets.UTF_8);
            String[] args = new String[fields.length - 1];
            for (int i = 1; i < fields.length; i++) args[i - 1] = new String(dec.decode(fields[i]), StandardCharsets.UTF_8);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int status = run(mainClass, args, out, err);
            protocol.println("KBUS-TOOL " + status + " " + enc.encodeToString(out.toByteArray()) + " "
                + enc.encodeToString(err.toByteArray()));
        }
    }

    static int run(String mainClass, String[] args, ByteArrayOutputStream out, ByteArrayOutputStream err) {
        exitStatus = null;
        OUT.target = out;
        ERR.target = err;
        int status = 0;
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (!(cause instanceof ExitSignal) && exitStatus == null) {
                System.err.print("Exception in thread \"main\" ");
                cause.printStackTrace(System.err);
                status = 1;
            }
        } catch (ReflectiveOperationException e) {
            e.printStackTrace(System.err);
            status = 1;
        } finally {
            System.out.flush();
            System.err.flush();
            OUT.target = OutputStream.nullOutputStream();
            ERR.target = OutputStream.nullOutputStream();
        }
        Integer exited = exitStatus;
        return exited != null ? exited : status;
    }

    /** Exit.setExitProcedure(procedure) and Exit.setHaltProcedure(procedure), through reflection: this class is
     * compiled without Kafka's jars, for every Kafka version the tests run. */
    static void installExitProcedure() throws ReflectiveOperationException {
        Class<?> exit = Class.forName("org.apache.kafka.common.utils.Exit");
        Class<?> procedure = Class.forName("org.apache.kafka.common.utils.Exit$Procedure");
        Object proxy = Proxy.newProxyInstance(ToolRunner.class.getClassLoader(), new Class<?>[] {procedure},
            (self, method, margs) -> {
                switch (method.getName()) {
                    case "execute": break;
                    case "hashCode": return System.identityHashCode(self);
                    case "equals": return self == margs[0];
                    default: return "ToolRunner's exit procedure";
                }
                if (exitStatus == null) {
                    exitStatus = (Integer) margs[0];
                    // the process ends here: nothing printed after it would reach its stdout or stderr
                    System.out.flush();
                    System.err.flush();
                    OUT.target = OutputStream.nullOutputStream();
                    ERR.target = OutputStream.nullOutputStream();
                }
                throw new ExitSignal();
            });
        exit.getMethod("setExitProcedure", procedure).invoke(null, proxy);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, proxy);
    }
}
