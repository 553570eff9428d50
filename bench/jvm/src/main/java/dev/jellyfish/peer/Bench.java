package dev.jellyfish.peer;

import dev.jellyfish.peer.JellyJvmPeer.Args;
import dev.jellyfish.peer.JellyJvmPeer.DecodeStats;
import dev.jellyfish.peer.JellyJvmPeer.EncodeSettings;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Locale;
import org.apache.jena.graph.Triple;
import org.apache.jena.riot.system.StreamRDFBase;
import org.apache.jena.sparql.core.Quad;

/**
 * In-memory throughput benchmarks. Input is fully loaded first; then warm-up iterations, at least W
 * ({@code --warmup}, 3) and for at least {@code --warmup-seconds} (5: the JIT's last compilations must
 * not fall into the measured loop), then measured iterations until at least S seconds have elapsed
 * (min. 1 iteration). Prints one JSON line.
 */
final class Bench {

    private Bench() {}

    /** Cheap sink: counts statements and keeps a reference to the last one so nothing is dead code. */
    static final class Blackhole extends StreamRDFBase {
        long n;
        Object last;

        @Override
        public void triple(Triple t) {
            n++;
            last = t;
        }

        @Override
        public void quad(Quad q) {
            n++;
            last = q;
        }
    }

    /**
     * The statements an encode benchmark runs on, loaded as its flags say: Jena's parsed input,
     * or with {@code --unshared} a node and string of their own per term occurrence.
     */
    record EncodeInput(EncodeSettings settings, List<Object> stmts, boolean grouped, boolean unshared) {
        static EncodeInput load(Args a, String in) {
            boolean grouped = a.has("--grouped-per-graph") || a.has("--frame-per-graph");
            EncodeSettings s = EncodeSettings.from(a, in, 512, grouped);
            List<Object> stmts = JellyJvmPeer.loadStatements(in);
            boolean unshared = a.has("--unshared");
            return new EncodeInput(s, unshared ? unshare(stmts) : stmts, grouped, unshared);
        }
    }

    static void encode(Args a) {
        String in = a.pos(0, "IN");
        double seconds = a.getDouble("--seconds", 5.0);
        EncodeInput e = EncodeInput.load(a, in);
        EncodeSettings s = e.settings();
        boolean grouped = e.grouped();
        boolean unshared = e.unshared();
        List<Object> input = e.stmts();
        int n = input.size();

        int[] warmSize = {1 << 16};
        long warmup = warmUp(a, () -> warmSize[0] = encodeOnce(input, s, warmSize[0]).bytes);
        int size = warmSize[0];
        long frames = 0;
        long iters = 0;
        long bytes = 0;
        long t0 = System.nanoTime();
        long deadline = t0 + (long) (seconds * 1e9);
        double best = Double.MAX_VALUE;
        java.util.ArrayList<Double> times = new java.util.ArrayList<>(1 << 16);
        long now;
        do {
            long ti = System.nanoTime();
            CountingResult r = encodeOnce(input, s, size);
            now = System.nanoTime();
            best = Math.min(best, (now - ti) / 1e9);
            times.add((now - ti) / 1e9);
            bytes = r.bytes;
            frames = r.frames;
            size = r.bytes;
            iters++;
        } while (now < deadline);
        double total = (now - t0) / 1e9;
        double perIter = total / iters;
        System.out.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"encode\",\"input\":\"%s\",\"statements\":%d,\"seconds\":%.6f," +
                "\"stmts_per_sec\":%.1f,\"bytes\":%d,\"frames\":%d,\"iterations\":%d,\"total_seconds\":%.3f," +
                "\"best_seconds\":%.6f,\"median_seconds\":%.6f,\"warmup\":%d,\"preset\":\"%s\",\"rows_per_frame\":%d,\"grouped\":%b," +
                "\"physical\":\"%s\",\"input_form\":\"%s\"}%n",
            jsonEsc(in), n, perIter, n / perIter, bytes, frames, iters, total, best, median(times), warmup, s.preset,
            grouped ? 0 : s.rowsPerFrame, grouped, s.quads ? "quads" : "triples",
            unshared ? "unshared" : "parsed"
        );
    }

    /**
     * The statements with a node object and a string of their own for every term occurrence, as
     * owned statements are in the jellyfish benchmark's owned-input encode (Jena's parser instead
     * shares the node objects it has cached). A copied string has its own character array and no
     * cached hash code. Datatypes stay Jena's shared {@code RDFDatatype} objects (Jena has one per
     * datatype IRI); quoted triples stay as parsed.
     */
    static List<Object> unshare(List<Object> stmts) {
        List<Object> out = new java.util.ArrayList<>(stmts.size());
        for (Object o : stmts) {
            if (o instanceof Triple t) {
                out.add(Triple.create(fresh(t.getSubject()), fresh(t.getPredicate()), fresh(t.getObject())));
            } else {
                Quad q = (Quad) o;
                out.add(Quad.create(fresh(q.getGraph()), fresh(q.getSubject()), fresh(q.getPredicate()),
                    fresh(q.getObject())));
            }
        }
        return out;
    }

    static org.apache.jena.graph.Node fresh(org.apache.jena.graph.Node n) {
        if (n == null || Quad.isDefaultGraph(n)) {
            return n;
        }
        if (n.isURI()) {
            return org.apache.jena.graph.NodeFactory.createURI(copy(n.getURI()));
        }
        if (n.isBlank()) {
            return org.apache.jena.graph.NodeFactory.createBlankNode(copy(n.getBlankNodeLabel()));
        }
        if (n.isLiteral()) {
            String lang = n.getLiteralLanguage();
            if (lang != null && !lang.isEmpty()) {
                return org.apache.jena.graph.NodeFactory.createLiteralLang(copy(n.getLiteralLexicalForm()), copy(lang));
            }
            return org.apache.jena.graph.NodeFactory.createLiteralDT(copy(n.getLiteralLexicalForm()),
                n.getLiteralDatatype());
        }
        return n;
    }

    /** A string equal to {@code s} with its own character array (so no shared hash code either). */
    static String copy(String s) {
        return new String(s.toCharArray());
    }

    record CountingResult(int bytes, long frames) {}

    static CountingResult encodeOnce(List<Object> stmts, EncodeSettings s, int sizeHint) {
        ByteArrayOutputStream bos = new ByteArrayOutputStream(sizeHint + 64);
        FrameWriter w = s.newWriter(bos);
        for (Object o : stmts) {
            if (o instanceof Triple t) {
                w.triple(t);
            } else {
                w.quad((Quad) o);
            }
        }
        w.finish();
        return new CountingResult(bos.size(), w.frames());
    }

    static void decode(Args a) throws IOException {
        String in = a.pos(0, "IN");
        double seconds = a.getDouble("--seconds", 5.0);

        byte[] data;
        if (JellyJvmPeer.isJelly(in)) {
            try (InputStream is = JellyJvmPeer.openMaybeGz(in)) {
                data = is.readAllBytes();
            }
        } else {
            boolean grouped = a.has("--grouped-per-graph") || a.has("--frame-per-graph");
            EncodeSettings s = EncodeSettings.from(a, in, 512, grouped);
            data = JellyJvmPeer.encodeAll(JellyJvmPeer.loadStatements(in), s, 1 << 20);
        }

        final byte[] input = data;
        long warmup = warmUp(a, () -> JellyJvmPeer.decodeBytes(input, new Blackhole()));
        // Both are set by every measured iteration.
        long n = 0;
        long frames = 0;
        long iters = 0;
        long t0 = System.nanoTime();
        long deadline = t0 + (long) (seconds * 1e9);
        double best = Double.MAX_VALUE;
        java.util.ArrayList<Double> times = new java.util.ArrayList<>(1 << 16);
        long now;
        long sinkCheck = 0;
        do {
            long ti = System.nanoTime();
            Blackhole bh = new Blackhole();
            DecodeStats st = JellyJvmPeer.decodeBytes(data, bh);
            now = System.nanoTime();
            best = Math.min(best, (now - ti) / 1e9);
            times.add((now - ti) / 1e9);
            n = bh.n;
            frames = st.frames();
            sinkCheck += bh.last == null ? 0 : 1;
            iters++;
        } while (now < deadline);
        double total = (now - t0) / 1e9;
        double perIter = total / iters;
        if (sinkCheck < 0) {
            System.err.println("unreachable");
        }
        System.out.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"decode\",\"input\":\"%s\",\"statements\":%d,\"seconds\":%.6f," +
                "\"stmts_per_sec\":%.1f,\"bytes\":%d,\"frames\":%d,\"iterations\":%d,\"total_seconds\":%.3f," +
                "\"best_seconds\":%.6f,\"median_seconds\":%.6f,\"warmup\":%d}%n",
            jsonEsc(in), n, perIter, n / perIter, data.length, frames, iters, total, best, median(times), warmup
        );
    }

    /**
     * Paired-slice mode, driven by {@code jelly-bench paired} over stdin and stdout. Loads the input
     * as {@code bench-encode} or {@code bench-decode} do (first positional: {@code encode} or
     * {@code decode}), warms up for {@code --warmup-seconds} (default 5) and prints
     * {@code {"ready":...}}. Then, for each line read from stdin (a slice length in milliseconds), runs
     * whole iterations until the slice is over and prints one JSON line with their count and time.
     * Ends at end of input. The driver alternates these slices with its own, so that both tools see
     * the same phases of a shared host.
     */
    static void slices(Args a) throws IOException {
        String op = a.pos(0, "encode|decode");
        String in = a.pos(1, "IN");
        Runnable once;
        long statements;
        String form;
        if (op.equals("encode")) {
            EncodeInput e = EncodeInput.load(a, in);
            EncodeSettings s = e.settings();
            List<Object> stmts = e.stmts();
            statements = stmts.size();
            form = e.unshared() ? "unshared" : "parsed";
            int[] size = {encodeOnce(stmts, s, 1 << 16).bytes};
            once = () -> size[0] = encodeOnce(stmts, s, size[0]).bytes;
        } else if (op.equals("decode")) {
            byte[] data;
            try (InputStream is = JellyJvmPeer.openMaybeGz(in)) {
                data = is.readAllBytes();
            }
            Blackhole probe = new Blackhole();
            JellyJvmPeer.decodeBytes(data, probe);
            statements = probe.n;
            form = "jelly";
            long[] sink = {0};
            once = () -> {
                Blackhole bh = new Blackhole();
                JellyJvmPeer.decodeBytes(data, bh);
                sink[0] += bh.n;
            };
        } else {
            throw new JellyJvmPeer.UsageException("bench-slices: the first argument is encode or decode");
        }
        warmUp(a, once);
        System.out.printf(Locale.ROOT, "{\"ready\":true,\"op\":\"%s\",\"statements\":%d,\"input_form\":\"%s\"}%n",
            op, statements, form);
        System.out.flush();
        java.io.BufferedReader cmds = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        String line;
        while ((line = cmds.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            long sliceNs = (long) (Double.parseDouble(line) * 1e6);
            long t0 = System.nanoTime();
            long iters = 0;
            long now;
            do {
                once.run();
                iters++;
                now = System.nanoTime();
            } while (now - t0 < sliceNs);
            System.out.printf(Locale.ROOT, "{\"iterations\":%d,\"seconds\":%.9f}%n", iters, (now - t0) / 1e9);
            System.out.flush();
        }
    }

    /**
     * Runs {@code once} at least {@code --warmup} times (default 3) and for at least
     * {@code --warmup-seconds} (default 5): a time, not only a count, so that the JIT's last
     * compilations do not fall into the measured loop. Returns the iterations run.
     */
    static long warmUp(Args a, Runnable once) {
        int min = a.getInt("--warmup", 3);
        long end = System.nanoTime() + (long) (a.getDouble("--warmup-seconds", 5.0) * 1e9);
        long i = 0;
        while (i < min || System.nanoTime() < end) {
            once.run();
            i++;
        }
        return i;
    }

    /** The median of the iteration times: steadier than the mean on a shared host. */
    static double median(java.util.ArrayList<Double> times) {
        java.util.Collections.sort(times);
        return times.get(times.size() / 2);
    }

        static String jsonEsc(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }
}
