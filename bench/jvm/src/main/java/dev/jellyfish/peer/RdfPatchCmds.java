package dev.jellyfish.peer;

import dev.jellyfish.peer.JellyJvmPeer.Args;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.apache.jena.graph.Node;
import org.apache.jena.rdfpatch.RDFChanges;
import org.apache.jena.rdfpatch.RDFPatch;
import org.apache.jena.rdfpatch.RDFPatchOps;
import org.apache.jena.rdfpatch.changes.RDFChangesCollector;
import org.apache.jena.rdfpatch.changes.RDFChangesN;
import org.apache.jena.rdfpatch.text.RDFChangesWriterText;
import org.apache.jena.rdfpatch.text.RDFPatchReaderText;
import org.apache.jena.riot.RDFParser;
import org.apache.jena.riot.lang.LabelToNode;
import org.apache.jena.riot.out.NodeFmtLib;
import org.apache.jena.sparql.core.DatasetGraph;
import org.apache.jena.sparql.core.DatasetGraphFactory;
import org.apache.jena.sparql.core.Quad;

/**
 * RDF Patch (text, {@code application/rdf-patch}) commands backed by Apache Jena's
 * {@code jena-rdfpatch}: read + re-write, apply to a dataset, and throughput benchmarks.
 *
 * <p>Jena's RDF Patch reader keeps blank node labels as written (they are global in RDF Patch),
 * and so do these commands on output: {@code rdfpatch-apply} reads the base N-Quads with
 * {@link LabelToNode#createUseLabelAsGiven()} and writes {@code _:label} as is.
 */
final class RdfPatchCmds {

    private RdfPatchCmds() {}

    /** Counts rows by kind; keeps the last node so nothing is dead code in benchmarks. */
    static final class Counter implements RDFChanges {
        long h, a, d, pa, pd, tx, tc, ta, z;
        Object last;

        long rows() {
            return h + a + d + pa + pd + tx + tc + ta + z;
        }

        String json() {
            return String.format(
                Locale.ROOT,
                "{\"H\":%d,\"A\":%d,\"D\":%d,\"PA\":%d,\"PD\":%d,\"TX\":%d,\"TC\":%d,\"TA\":%d,\"Z\":%d,\"rows\":%d}",
                h, a, d, pa, pd, tx, tc, ta, z, rows()
            );
        }

        @Override public void header(String field, Node value) { h++; last = value; }
        @Override public void add(Node g, Node s, Node p, Node o) { a++; last = o; }
        @Override public void delete(Node g, Node s, Node p, Node o) { d++; last = o; }
        @Override public void addPrefix(Node g, String prefix, String iri) { pa++; last = iri; }
        @Override public void deletePrefix(Node g, String prefix) { pd++; last = prefix; }
        @Override public void txnBegin() { tx++; }
        @Override public void txnCommit() { tc++; }
        @Override public void txnAbort() { ta++; }
        @Override public void segment() { z++; }
        @Override public void start() {}
        @Override public void finish() {}
    }

    /** rdfpatch-read IN.rdfp OUT.rdfp|- : Jena reader -> Jena text writer; counts JSON on stdout. */
    static void read(Args a) throws IOException {
        String in = a.pos(0, "IN.rdfp");
        String out = a.pos(1, "OUT.rdfp");
        Counter counter = new Counter();
        OutputStream os = out.equals("-")
            ? System.out
            : new BufferedOutputStream(Files.newOutputStream(Path.of(out)), 1 << 16);
        try (InputStream is = Files.newInputStream(Path.of(in))) {
            RDFChangesWriterText writer = RDFChangesWriterText.create(os);
            RDFChanges both = new RDFChangesN(counter, writer);
            both.start();
            new RDFPatchReaderText(is).apply(both);
            both.finish();
            writer.close();
        }
        os.flush();
        if (os != System.out) {
            os.close();
            System.out.println(counter.json());
        } else {
            System.err.println(counter.json());
        }
    }

    /** rdfpatch-apply BASE.nq PATCH.rdfp OUT.nq : RDFPatchOps.applyChange on a TIM dataset. */
    static void apply(Args a) throws IOException {
        String base = a.pos(0, "BASE.nq");
        String patch = a.pos(1, "PATCH.rdfp");
        String out = a.pos(2, "OUT.nq");
        DatasetGraph dsg = DatasetGraphFactory.createTxnMem();
        RDFParser.source(base).labelToNode(LabelToNode.createUseLabelAsGiven()).parse(dsg);
        long before = dsg.stream().count();
        try (InputStream is = Files.newInputStream(Path.of(patch))) {
            RDFPatchOps.applyChange(dsg, RDFPatchOps.read(is));
        }
        List<String> lines = new ArrayList<>();
        dsg.begin(org.apache.jena.query.TxnType.READ);
        try {
            Iterator<Quad> it = dsg.find();
            while (it.hasNext()) {
                lines.add(line(it.next()));
            }
        } finally {
            dsg.end();
        }
        Collections.sort(lines);
        try (Writer w = new OutputStreamWriter(
                new BufferedOutputStream(Files.newOutputStream(Path.of(out))), StandardCharsets.UTF_8)) {
            for (String l : lines) {
                w.write(l);
                w.write('\n');
            }
        }
        System.out.printf(Locale.ROOT, "{\"base\":%d,\"result\":%d}%n", before, lines.size());
    }

    static String jsonEscape(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    static String node(Node n) {
        if (n.isBlank()) {
            return "_:" + n.getBlankNodeLabel();
        }
        return NodeFmtLib.strNT(n);
    }

    static String line(Quad q) {
        StringBuilder sb = new StringBuilder();
        sb.append(node(q.getSubject())).append(' ')
            .append(node(q.getPredicate())).append(' ')
            .append(node(q.getObject())).append(' ');
        if (!q.isDefaultGraph()) {
            sb.append(node(q.getGraph())).append(' ');
        }
        return sb.append('.').toString();
    }

    // ------------------------------------------------------------------------------------
    // Benchmarks: like bench-encode / bench-decode (warmup, then iterations for S seconds).
    // ------------------------------------------------------------------------------------

    interface Op {
        long run() throws IOException;
    }

    static void bench(Args a, String op, Op body, long rows, long bytes) throws IOException {
        double seconds = a.getDouble("--seconds", 5.0);
        int warmup = a.getInt("--warmup", 3);
        for (int i = 0; i < warmup; i++) {
            body.run();
        }
        long iters = 0;
        long t0 = System.nanoTime();
        long deadline = t0 + (long) (seconds * 1e9);
        double best = Double.MAX_VALUE;
        long now;
        do {
            long ti = System.nanoTime();
            long got = body.run();
            now = System.nanoTime();
            if (got != rows) {
                throw new IllegalStateException("row count changed: " + got + " vs " + rows);
            }
            best = Math.min(best, (now - ti) / 1e9);
            iters++;
        } while (now < deadline);
        double total = (now - t0) / 1e9;
        double perIter = total / iters;
        System.out.printf(
            Locale.ROOT,
            "{\"tool\":\"jena-rdfpatch\",\"op\":\"%s\",\"input\":\"%s\",\"rows\":%d,\"seconds\":%.6f," +
                "\"rows_per_sec\":%.1f,\"best_seconds\":%.6f,\"best_rows_per_sec\":%.1f,\"bytes\":%d," +
                "\"iterations\":%d,\"total_seconds\":%.3f,\"warmup\":%d}%n",
            op, jsonEscape(a.pos(0, "IN")), rows, perIter, rows / perIter, best, rows / best,
            bytes, iters, total, warmup
        );
    }

    /** bench-rdfpatch-read IN.rdfp: parse the text (in memory) into a counting RDFChanges. */
    static void benchRead(Args a) throws IOException {
        byte[] bytes = Files.readAllBytes(Path.of(a.pos(0, "IN.rdfp")));
        Counter first = new Counter();
        new RDFPatchReaderText(new ByteArrayInputStream(bytes)).apply(first);
        bench(a, "rdfpatch-read", () -> {
            Counter c = new Counter();
            new RDFPatchReaderText(new ByteArrayInputStream(bytes)).apply(c);
            return c.rows();
        }, first.rows(), bytes.length);
    }

    /** bench-rdfpatch-write IN.rdfp: the patch is held in memory (collected), then written as text. */
    static void benchWrite(Args a) throws IOException {
        byte[] bytes = Files.readAllBytes(Path.of(a.pos(0, "IN.rdfp")));
        RDFChangesCollector collector = new RDFChangesCollector();
        Counter counter = new Counter();
        new RDFPatchReaderText(new ByteArrayInputStream(bytes)).apply(new RDFChangesN(collector, counter));
        // The collector keeps headers in a map emitted first: fine for patches whose headers
        // all come first (our workloads); rows are counted on the input.
        RDFPatch patch = collector.getRDFPatch();
        long rows = counter.rows();
        int[] size = {writeOnce(patch, bytes.length + 1024).size()};
        // "bytes" is the size of Jena's own output (it writes numbers bare, blank nodes as <_:x>).
        bench(a, "rdfpatch-write", () -> {
            size[0] = writeOnce(patch, size[0] + 1024).size();
            return rows;
        }, rows, size[0]);
    }

    static ByteArrayOutputStream writeOnce(RDFPatch patch, int capacity) {
        ByteArrayOutputStream bos = new ByteArrayOutputStream(capacity);
        RDFChangesWriterText w = RDFChangesWriterText.create(bos);
        patch.apply(w);
        w.close();
        return bos;
    }
}
