package dev.pykafka;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Entry point: {@code java -jar client-scenarios.jar <scenario> <bootstrap> [--timeout SECONDS]}.
 *
 * <p>Each scenario drives Apache Kafka's Java client against {@code bootstrap} and asserts what it got
 * back. Success prints a last line {@code OK <scenario>} and exits 0. A failed check prints
 * {@code FAIL <scenario>: <what>} (plus the stack trace on stderr) and exits 1. A scenario that runs past
 * its timeout (default 100 s) dumps all threads to stderr, prints {@code FAIL <scenario>: timeout} and
 * exits 2. Progress lines start with {@code #}.
 *
 * <p>Client logging (slf4j-simple) goes to stderr at WARN; set SCENARIO_LOG_LEVEL=info|debug to see more.
 */
public final class Scenarios {

    /** One end-to-end scenario. */
    interface Scenario {
        void run(Ctx ctx) throws Exception;
    }

    static final Map<String, Scenario> ALL = new LinkedHashMap<>();

    static {
        ALL.put("admin", AdminScenario::run);
        ALL.put("produce-consume", ProduceConsumeScenario::run);
        ALL.put("idempotent", IdempotentScenario::run);
        ALL.put("transactions", TransactionsScenario::run);
        ALL.put("consume-transform-produce", ConsumeTransformProduceScenario::run);
        ALL.put("groups", GroupsScenario::run);
        ALL.put("admin-transactions", AdminTransactionsScenario::run);
        ALL.put("consumer-protocol", ConsumerProtocolScenario::run);
    }

    /** Scenarios for several brokers with a control endpoint (CONTROL_URL), not in ``list``. */
    static final Map<String, Scenario> CLUSTER = new LinkedHashMap<>();

    static {
        CLUSTER.put("failover", FailoverScenario::run);
        CLUSTER.put("txn-faults", TxnFaultsScenario::run);
    }

    private Scenarios() {}

    public static void main(String[] args) {
        String level = System.getenv().getOrDefault("SCENARIO_LOG_LEVEL", "warn");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");

        if (args.length == 1 && args[0].equals("list")) {
            ALL.keySet().forEach(System.out::println);
            return;
        }
        if (args.length < 2) {
            System.err.println("usage: Scenarios <scenario> <bootstrap> [--timeout SECONDS] | list");
            System.err.println("scenarios: " + String.join(", ", ALL.keySet()));
            System.exit(64);
        }
        String name = args[0];
        String bootstrap = args[1];
        long timeoutSec = 100;
        for (int i = 2; i < args.length; i++) {
            if (args[i].equals("--timeout") && i + 1 < args.length) {
                timeoutSec = Long.parseLong(args[++i]);
            } else {
                System.err.println("unknown argument " + args[i]);
                System.exit(64);
            }
        }
        Scenario scenario = ALL.getOrDefault(name, CLUSTER.get(name));
        if (scenario == null) {
            System.err.println("unknown scenario " + name + "; known: " + String.join(", ", ALL.keySet()));
            System.exit(64);
        }
        Ctx ctx = new Ctx(name, bootstrap);
        startWatchdog(ctx, timeoutSec);
        long t0 = System.nanoTime();
        try {
            scenario.run(ctx);
        } catch (Throwable t) {
            System.out.flush();
            t.printStackTrace(System.err);
            System.err.flush();
            String what = t instanceof AssertionError ? String.valueOf(t.getMessage()) : t.toString();
            System.out.println("FAIL " + name + ": " + what + " (during: " + ctx.step + ")");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        ctx.log("done in %.2f s", (System.nanoTime() - t0) / 1e9);
        System.out.println("OK " + name);
        System.out.flush();
        // Do not wait on stray client threads.
        Runtime.getRuntime().halt(0);
    }

    private static void startWatchdog(Ctx ctx, long timeoutSec) {
        String name = ctx.name;
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(timeoutSec * 1000);
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("=== scenario " + name + " timed out after " + timeoutSec + " s; thread dump:");
            for (ThreadInfo ti : ManagementFactory.getThreadMXBean().dumpAllThreads(false, false)) {
                System.err.print(ti.toString());
            }
            System.err.flush();
            System.out.println("FAIL " + name + ": timeout after " + timeoutSec + " s (during: " + ctx.step + ")");
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }, "scenario-watchdog");
        t.setDaemon(true);
        t.start();
    }
}
