package dev.pykafka;

import java.util.concurrent.ThreadLocalRandom;

/** What a scenario gets: its name, the bootstrap and a random suffix for topic, group and txn ids. */
final class Ctx {
    final String name;
    final String bootstrap;
    final String suffix;
    private final long t0 = System.nanoTime();
    /** What the scenario is doing now; named in the FAIL line. */
    volatile String step = "start";

    Ctx(String name, String bootstrap) {
        this.name = name;
        this.bootstrap = bootstrap;
        this.suffix = String.format("%08x", ThreadLocalRandom.current().nextInt());
    }

    /** A name unique to this run: {@code <scenario>-<what>-<suffix>}. */
    String id(String what) {
        return name + "-" + what + "-" + suffix;
    }

    /** Marks the start of a step (printed, and named in the FAIL line if the scenario fails in it). */
    void step(String fmt, Object... args) {
        step = String.format(fmt, args);
        log("step: %s", step);
    }

    void log(String fmt, Object... args) {
        System.out.printf("# [%7.3f] %s%n", (System.nanoTime() - t0) / 1e9, String.format(fmt, args));
        System.out.flush();
    }
}
