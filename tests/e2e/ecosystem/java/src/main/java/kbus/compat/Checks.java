package kbus.compat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs named checks of the Java client against a broker and prints one line per check:
 * {@code RESULT <name> PASS} or {@code RESULT <name> FAIL <reason>} (the stack trace goes to stderr).
 * Usage: Checks HOST:PORT SUFFIX [CHECK...]; SUFFIX keeps topic and group names apart between runs.
 */
public final class Checks {
    interface Check {
        void run(Env env) throws Exception;
    }

    static Map<String, Check> all() {
        Map<String, Check> checks = new LinkedHashMap<>();
        checks.put("producer_acks_all_idempotent_compression_headers", ProducerChecks::ackAllIdempotentCompressionHeaders);
        checks.put("producer_errors", ProducerChecks::errors);
        checks.put("consumer_group_range", ConsumerChecks::rangeGroup);
        checks.put("consumer_group_cooperative_sticky", ConsumerChecks::cooperativeSticky);
        checks.put("consumer_static_membership", ConsumerChecks::staticMembership);
        checks.put("consumer_seek_offsets_for_times", ConsumerChecks::seekAndOffsetsForTimes);
        checks.put("consumer_commit_sync_async", ConsumerChecks::commitSyncAsync);
        checks.put("consumer_group_protocol", GroupProtocolChecks::consumerGroupProtocol);
        checks.put("admin_topics", AdminChecks::topics);
        checks.put("admin_configs", AdminChecks::configs);
        checks.put("admin_list_offsets_delete_records", AdminChecks::listOffsetsDeleteRecords);
        checks.put("admin_describe_cluster", AdminChecks::describeCluster);
        checks.put("admin_consumer_groups", AdminChecks::consumerGroups);
        checks.put("admin_log_dirs_producers_election", AdminChecks::logDirsProducersElection);
        checks.put("transactions_commit_abort_fence_offsets", TransactionChecks::commitAbortFenceOffsets);
        return checks;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Checks HOST:PORT SUFFIX [CHECK...]");
            System.exit(2);
        }
        Map<String, Check> checks = all();
        List<String> names = args.length > 2 ? Arrays.asList(args).subList(2, args.length) : new ArrayList<>(checks.keySet());
        int failed = 0;
        for (String name : names) {
            Check check = checks.get(name);
            if (check == null) {
                System.out.println("RESULT " + name + " FAIL no such check");
                failed++;
                continue;
            }
            long start = System.nanoTime();
            try (Env env = new Env(args[0], args[1] + "-" + name.replace('_', '-'))) {
                check.run(env);
                System.out.printf("RESULT %s PASS %.1fs%n", name, (System.nanoTime() - start) / 1e9);
            } catch (Throwable e) {
                failed++;
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                System.err.println("check " + name + " failed:\n" + trace);
                String reason = String.valueOf(e).replace('\n', ' ');
                Throwable cause = e.getCause();
                if (cause != null) reason += " <- " + String.valueOf(cause).replace('\n', ' ');
                System.out.println("RESULT " + name + " FAIL " + reason);
            }
            System.out.flush();
        }
        System.exit(failed == 0 ? 0 : 1);
    }
}
