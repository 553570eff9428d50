package dev.jellyfish.peer;

import eu.neverblink.jelly.convert.jena.JenaConverterFactory;
import eu.neverblink.jelly.convert.jena.JenaDecoderConverter;
import eu.neverblink.jelly.core.JellyOptions;
import eu.neverblink.jelly.core.ProtoDecoder;
import eu.neverblink.jelly.core.RdfHandler;
import eu.neverblink.jelly.core.memory.RowBuffer;
import eu.neverblink.jelly.core.proto.v1.LogicalStreamType;
import eu.neverblink.jelly.core.proto.v1.PhysicalStreamType;
import eu.neverblink.jelly.core.proto.v1.RdfStreamFrame;
import eu.neverblink.jelly.core.proto.v1.RdfStreamOptions;
import eu.neverblink.jelly.core.utils.IoUtils;
import eu.neverblink.protoc.java.runtime.MessageFactory;
import eu.neverblink.protoc.java.runtime.ProtoMessage;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.jena.graph.Node;
import org.apache.jena.graph.Triple;
import org.apache.jena.riot.Lang;
import org.apache.jena.riot.RDFFormat;
import org.apache.jena.riot.RDFLanguages;
import org.apache.jena.riot.RDFParser;
import org.apache.jena.riot.system.StreamRDF;
import org.apache.jena.riot.system.StreamRDFBase;
import org.apache.jena.riot.system.StreamRDFWriter;
import org.apache.jena.sparql.core.Quad;
import org.apache.jena.sys.JenaSystem;

/**
 * jelly-jvm-peer: a small CLI around Jelly-JVM (+ Apache Jena) used by jellyfish to
 * cross-check interoperability and to benchmark against the reference implementation.
 * Run without arguments for usage.
 */
public final class JellyJvmPeer {

    static final String USAGE = String.join(
        "\n",
        "usage: java -jar jelly-jvm-peer.jar <command> [args]",
        "",
        "  to-jelly IN.(nt|nq|...) OUT.jelly [--rows-per-frame N] [--preset small|big]",
        "           [--physical triples|quads] [--logical flat|graphs|datasets|named-graphs|subject-graphs|none]",
        "           [--frame-per-graph] [--frames-file FILE] [--rdf-star] [--generalized]",
        "      Parse RDF with Jena RIOT (streaming) and write a delimited Jelly stream.",
        "      Defaults: --preset big, --rows-per-frame 256, --physical triples for .nt / quads otherwise,",
        "      --logical flat. --frames-file replays statement counts per frame (one integer per line,",
        "      '#' comments ignored); leftover statements go to a last frame.",
        "  from-jelly IN.jelly OUT.(nq|nt)|-",
        "      Decode a Jelly stream (delimited or not, autodetected) and write N-Quads (N-Triples if",
        "      OUT ends with .nt) via Jena. Prints a JSON summary line on stderr.",
        "  count IN.(jelly|nt|nq|...)",
        "      Print a JSON line with the statement count (triples, quads) and frame count for Jelly.",
        "  compare A B",
        "      Load both files (Jelly or RDF text) into Jena datasets and check isomorphism (blank",
        "      nodes matched up to renaming; set semantics). Prints JSON; exit 0 if isomorphic, 1 if not.",
        "  node-sharing IN.(nt|nq)",
        "      Load the statements as bench-encode does and print ONE JSON line: IRI occurrences, distinct",
        "      IRIs and distinct IRI node objects (Jena's parser shares the node objects it has cached, so",
        "      most occurrences of an IRI are one object).",
        "  bench-encode IN.(nt|nq) [--preset big] [--rows-per-frame 512] [--grouped-per-graph]",
        "           [--physical triples|quads] [--seconds S] [--warmup W] [--warmup-seconds S]",
        "           [--rdf-star] [--generalized]",
        "           [--unshared]   (--unshared: a node and string object per term occurrence, as owned input)",
        "  bench-decode IN.jelly|IN.(nt|nq) [--seconds S] [--warmup W] [--warmup-seconds S] [--preset ..]",
        "           [--rows-per-frame ..]   (warm-up: at least W iterations and S seconds; defaults 3, 5)",
        "      (an RDF text input is first encoded in memory with the given preset/frame size)",
        "      Both print ONE JSON line: {\"tool\":\"jelly-jvm\",\"op\":...,\"statements\":N,\"seconds\":..,",
        "      \"stmts_per_sec\":..,\"bytes\":..,...}",
        "  bench-slices encode|decode IN [bench-encode's options] [--warmup-seconds S]",
        "      Load as bench-encode / bench-decode, warm up for S seconds (default 5), print {\"ready\":..}, then for each line of",
        "      stdin (a slice in milliseconds) run whole iterations for that long and print",
        "      {\"iterations\":N,\"seconds\":..}. Driven by `jelly-bench paired`.",
        "  rdfpatch-read IN.rdfp OUT.rdfp|-",
        "      RDF Patch text (Apache Jena jena-rdfpatch): parse with RDFPatchReaderText, write back with",
        "      RDFChangesWriterText. Prints row counts as JSON on stdout (stderr when OUT is -):",
        "      {\"H\":..,\"A\":..,\"D\":..,\"PA\":..,\"PD\":..,\"TX\":..,\"TC\":..,\"TA\":..,\"Z\":..,\"rows\":..}",
        "  rdfpatch-apply BASE.nq PATCH.rdfp OUT.nq",
        "      Load BASE (blank node labels kept as given) into a transactional in-memory dataset, apply the",
        "      patch with RDFPatchOps.applyChange, write the result as sorted N-Quads (labels kept).",
        "  bench-rdfpatch-read IN.rdfp [--seconds S] [--warmup W]",
        "  bench-rdfpatch-write IN.rdfp [--seconds S] [--warmup W]",
        "      RDF Patch text parse / write throughput (in memory). ONE JSON line:",
        "      {\"tool\":\"jena-rdfpatch\",\"op\":..,\"rows\":N,\"seconds\":..,\"rows_per_sec\":..,\"best_seconds\":..}",
        "  text-from-jelly IN.jelly OUT.txt|- [IN OUT]...",
        "      jelly-text as the JVM jelly-cli prints it: each frame as `# Frame N` and protobuf-java's",
        "      TextFormat (Message.toString) of the frame.",
        "  text-to-jelly IN.txt OUT.jelly [IN OUT]...",
        "      jelly-text back to delimited Jelly with TextFormat.merge, one frame per `# Frame` section",
        "      (jelly-cli itself regroups rows by --rows-per-frame instead).",
        "  patch-to-jelly / patch-from-jelly",
        "      Not available: jelly-jena-patch / jelly-core-patch are not obtainable from the Maven",
        "      repository reachable here (see README.md). Exits with status 3."
    );

    public static void main(String[] args) {
        // Initialise Jena (and, via its subsystem ServiceLoader, Jelly's RIOT registration) before
        // touching any RIOT class; otherwise class-init order can NPE inside StreamRDFWriter.
        JenaSystem.init();
        if (args.length == 0 || args[0].equals("-h") || args[0].equals("--help")) {
            System.out.println(USAGE);
            System.exit(args.length == 0 ? 2 : 0);
        }
        String cmd = args[0];
        Args a = Args.parse(args, 1);
        try {
            switch (cmd) {
                case "to-jelly" -> toJelly(a);
                case "from-jelly" -> fromJelly(a);
                case "count" -> count(a);
                case "compare" -> compare(a);
                case "node-sharing" -> nodeSharing(a);
                case "bench-encode" -> Bench.encode(a);
                case "bench-decode" -> Bench.decode(a);
                case "bench-slices" -> Bench.slices(a);
                case "text-from-jelly" -> JellyText.fromJelly(a);
                case "text-to-jelly" -> JellyText.toJelly(a);
                case "rdfpatch-read" -> RdfPatchCmds.read(a);
                case "rdfpatch-apply" -> RdfPatchCmds.apply(a);
                case "bench-rdfpatch-read" -> RdfPatchCmds.benchRead(a);
                case "bench-rdfpatch-write" -> RdfPatchCmds.benchWrite(a);
                case "patch-to-jelly", "patch-from-jelly" -> {
                    System.err.println(
                        "error: " + cmd + " is not supported: Jelly-JVM's patch modules " +
                        "(eu.neverblink.jelly:jelly-jena-patch / jelly-core-patch) are not available " +
                        "from the reachable Maven repository. See bench/jvm/README.md."
                    );
                    System.exit(3);
                }
                default -> {
                    System.err.println("error: unknown command: " + cmd);
                    System.err.println(USAGE);
                    System.exit(2);
                }
            }
        } catch (UsageException e) {
            System.err.println("error: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
        } catch (Exception e) {
            System.err.println("error: " + e);
            e.printStackTrace(System.err);
            System.exit(1);
        }
    }

    // ------------------------------------------------------------------ options

    static final class UsageException extends RuntimeException {
        UsageException(String m) {
            super(m);
        }
    }

    /** Tiny hand-rolled argument parser: positionals + --flag [value]. */
    static final class Args {
        static final java.util.Set<String> BOOLEAN_FLAGS = java.util.Set.of(
            "--frame-per-graph", "--grouped-per-graph", "--rdf-star", "--generalized", "--unshared"
        );
        final List<String> positional = new ArrayList<>();
        final Map<String, String> flags = new HashMap<>();

        static Args parse(String[] args, int from) {
            Args a = new Args();
            for (int i = from; i < args.length; i++) {
                String s = args[i];
                if (s.startsWith("--")) {
                    String key = s;
                    String val = null;
                    int eq = s.indexOf('=');
                    if (eq > 0) {
                        key = s.substring(0, eq);
                        val = s.substring(eq + 1);
                    } else if (BOOLEAN_FLAGS.contains(s)) {
                        val = "true";
                    } else {
                        if (i + 1 >= args.length) {
                            throw new UsageException("missing value for " + s);
                        }
                        val = args[++i];
                    }
                    a.flags.put(key, val);
                } else {
                    a.positional.add(s);
                }
            }
            return a;
        }

        String pos(int i, String name) {
            if (i >= positional.size()) {
                throw new UsageException("missing argument " + name);
            }
            return positional.get(i);
        }

        boolean has(String f) {
            return flags.containsKey(f);
        }

        String get(String f, String def) {
            return flags.getOrDefault(f, def);
        }

        int getInt(String f, int def) {
            String v = flags.get(f);
            if (v == null) {
                return def;
            }
            try {
                return Integer.parseInt(v);
            } catch (NumberFormatException e) {
                throw new UsageException("bad integer for " + f + ": " + v);
            }
        }

        double getDouble(String f, double def) {
            String v = flags.get(f);
            if (v == null) {
                return def;
            }
            try {
                return Double.parseDouble(v);
            } catch (NumberFormatException e) {
                throw new UsageException("bad number for " + f + ": " + v);
            }
        }
    }

    /** Encoder settings derived from the command line. */
    static final class EncodeSettings {
        String preset = "big";
        int rowsPerFrame = 256;
        boolean quads;
        boolean perGraph;
        LogicalStreamType logical;
        boolean rdfStar;
        boolean generalized;

        static EncodeSettings from(Args a, String input, int defaultRows, boolean perGraphFlag) {
            EncodeSettings s = new EncodeSettings();
            s.preset = a.get("--preset", "big").toLowerCase(Locale.ROOT);
            if (!s.preset.equals("big") && !s.preset.equals("small")) {
                throw new UsageException("--preset must be small or big");
            }
            s.rowsPerFrame = a.getInt("--rows-per-frame", defaultRows);
            String phys = a.get("--physical", isTriplesInput(input) ? "triples" : "quads");
            switch (phys) {
                case "triples" -> s.quads = false;
                case "quads" -> s.quads = true;
                default -> throw new UsageException("--physical must be triples or quads");
            }
            s.perGraph = perGraphFlag;
            s.rdfStar = a.has("--rdf-star");
            s.generalized = a.has("--generalized");
            String logical = a.get("--logical", "flat");
            s.logical = switch (logical) {
                case "flat" -> s.quads ? LogicalStreamType.FLAT_QUADS : LogicalStreamType.FLAT_TRIPLES;
                case "graphs" -> LogicalStreamType.GRAPHS;
                case "datasets" -> LogicalStreamType.DATASETS;
                case "named-graphs" -> LogicalStreamType.NAMED_GRAPHS;
                case "subject-graphs" -> LogicalStreamType.SUBJECT_GRAPHS;
                case "none" -> LogicalStreamType.UNSPECIFIED;
                default -> throw new UsageException("bad --logical: " + logical);
            };
            return s;
        }

        RdfStreamOptions options() {
            boolean big = preset.equals("big");
            // BIG = 4000/150/32, SMALL = 128/16/16 (same values as Jelly-JVM's JellyOptions presets).
            return RdfStreamOptions.newInstance()
                .setMaxNameTableSize(big ? 4000 : 128)
                .setMaxPrefixTableSize(big ? 150 : 16)
                .setMaxDatatypeTableSize(big ? 32 : 16)
                .setPhysicalType(quads ? PhysicalStreamType.QUADS : PhysicalStreamType.TRIPLES)
                .setLogicalType(logical)
                .setRdfStar(rdfStar)
                .setGeneralizedStatements(generalized);
        }

        FrameWriter newWriter(OutputStream out) {
            return new FrameWriter(out, options(), perGraph ? 0 : rowsPerFrame, perGraph, quads);
        }
    }

    static boolean isTriplesInput(String path) {
        Lang l = langOf(path);
        return l != null && RDFLanguages.isTriples(l);
    }

    static Lang langOf(String path) {
        String p = path.endsWith(".gz") ? path.substring(0, path.length() - 3) : path;
        if (p.endsWith(".nt")) {
            return Lang.NTRIPLES;
        }
        if (p.endsWith(".nq")) {
            return Lang.NQUADS;
        }
        return RDFLanguages.filenameToLang(p);
    }

    static boolean isJelly(String path) {
        return path.endsWith(".jelly") || path.endsWith(".jelly.gz");
    }

    static void parseRdf(String path, StreamRDF sink) {
        Lang lang = langOf(path);
        if (lang == null) {
            throw new UsageException("cannot guess RDF syntax of " + path);
        }
        RDFParser.source(Path.of(path)).lang(lang).parse(sink);
    }

    // ------------------------------------------------------------------ to-jelly

    static void toJelly(Args a) throws IOException {
        String in = a.pos(0, "IN");
        String out = a.pos(1, "OUT.jelly");
        EncodeSettings s = EncodeSettings.from(a, in, 256, a.has("--frame-per-graph") || a.has("--grouped-per-graph"));
        int[] plan = a.has("--frames-file") ? readFramesFile(a.get("--frames-file", null)) : null;
        if (plan != null && s.perGraph) {
            throw new UsageException("--frames-file and --frame-per-graph are exclusive");
        }
        long t0 = System.nanoTime();
        FrameWriter w;
        try (OutputStream os = new BufferedOutputStream(Files.newOutputStream(Path.of(out)), 1 << 16)) {
            w = plan != null
                ? new FrameWriter(os, s.options(), 0, false, s.quads)
                : s.newWriter(os);
            final FrameWriter fw = w;
            final long[] sinceFlush = { 0 };
            final int[] planIdx = { 0 };
            StreamRDF sink = new StreamRDFBase() {
                @Override
                public void triple(Triple t) {
                    fw.triple(t);
                    afterStmt();
                }

                @Override
                public void quad(Quad q) {
                    fw.quad(q);
                    afterStmt();
                }

                private void afterStmt() {
                    if (plan == null) {
                        return;
                    }
                    sinceFlush[0]++;
                    if (planIdx[0] < plan.length && sinceFlush[0] >= plan[planIdx[0]]) {
                        fw.flush();
                        sinceFlush[0] = 0;
                        planIdx[0]++;
                    }
                }
            };
            parseRdf(in, sink);
            w.finish();
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        System.err.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"to-jelly\",\"statements\":%d,\"frames\":%d,\"bytes\":%d,\"seconds\":%.3f}%n",
            w.statements(), w.frames(), Files.size(Path.of(out)), secs
        );
    }

    static int[] readFramesFile(String path) throws IOException {
        List<Integer> xs = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(path))) {
            String t = line.strip();
            if (t.isEmpty() || t.startsWith("#")) {
                continue;
            }
            xs.add(Integer.parseInt(t.split("\\s+")[0]));
        }
        return xs.stream().mapToInt(Integer::intValue).toArray();
    }

    // ------------------------------------------------------------------ decoding

    /** Result of decoding a Jelly stream. */
    record DecodeStats(long triples, long quads, long frames) {}

    /**
     * Decodes a Jelly stream (delimited or not, autodetected with Jelly-JVM's IoUtils) and passes
     * every statement to the sink as a Jena Triple or Quad.
     */
    static DecodeStats decodeJelly(InputStream in, StreamRDF sink) throws IOException {
        final JenaDecoderConverter conv = JenaConverterFactory.getInstance().decoderConverter();
        final long[] counts = new long[3];
        RdfHandler.AnyStatementHandler<Node> handler = new RdfHandler.AnyStatementHandler<>() {
            @Override
            public void handleNamespace(String prefix, Node namespace) {
                sink.prefix(prefix, namespace.getURI());
            }

            @Override
            public void handleTriple(Node s, Node p, Node o) {
                counts[0]++;
                sink.triple(conv.makeTriple(s, p, o));
            }

            @Override
            public void handleQuad(Node s, Node p, Node o, Node g) {
                counts[1]++;
                sink.quad(conv.makeQuad(s, p, o, g));
            }
        };
        ProtoDecoder<Node, ?> decoder = JenaConverterFactory.getInstance()
            .anyStatementDecoder(handler, JellyOptions.DEFAULT_SUPPORTED_OPTIONS);
        RowBuffer rows = RowBuffer.newSingle(decoder::ingestRow);
        RdfStreamFrame.Mutable frame = RdfStreamFrame.newInstance().setRows(rows);
        MessageFactory<RdfStreamFrame> reuse = () -> frame;
        IoUtils.AutodetectDelimitingResponse det = IoUtils.autodetectDelimiting(in);
        if (det.isDelimited()) {
            IoUtils.readStream(det.newInput(), reuse, f -> {
                counts[2]++;
                rows.clear();
            });
        } else {
            ProtoMessage.parseFrom(det.newInput(), reuse);
            rows.clear();
            counts[2]++;
        }
        return new DecodeStats(counts[0], counts[1], counts[2]);
    }

    static void fromJelly(Args a) throws IOException {
        String in = a.pos(0, "IN.jelly");
        String out = a.pos(1, "OUT.nq");
        boolean nt = out.endsWith(".nt");
        long t0 = System.nanoTime();
        DecodeStats st;
        OutputStream os = out.equals("-")
            ? new BufferedOutputStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), 1 << 16)
            : new BufferedOutputStream(Files.newOutputStream(Path.of(out)), 1 << 16);
        try (InputStream is = openMaybeGz(in); os) {
            StreamRDF w = StreamRDFWriter.getWriterStream(os, nt ? RDFFormat.NTRIPLES : RDFFormat.NQUADS);
            w.start();
            st = decodeJelly(is, w);
            w.finish();
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        System.err.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"from-jelly\",\"statements\":%d,\"triples\":%d,\"quads\":%d,\"frames\":%d,\"seconds\":%.3f}%n",
            st.triples() + st.quads(), st.triples(), st.quads(), st.frames(), secs
        );
    }

    static InputStream openMaybeGz(String path) throws IOException {
        InputStream is = new java.io.BufferedInputStream(Files.newInputStream(Path.of(path)), 1 << 16);
        return path.endsWith(".gz") ? new java.util.zip.GZIPInputStream(is, 1 << 16) : is;
    }

    static void count(Args a) throws IOException {
        String in = a.pos(0, "IN");
        long triples;
        long quads;
        long frames = -1;
        if (isJelly(in)) {
            try (InputStream is = openMaybeGz(in)) {
                DecodeStats st = decodeJelly(is, new StreamRDFBase());
                triples = st.triples();
                quads = st.quads();
                frames = st.frames();
            }
        } else {
            final long[] c = new long[2];
            parseRdf(in, new StreamRDFBase() {
                @Override
                public void triple(Triple t) {
                    c[0]++;
                }

                @Override
                public void quad(Quad q) {
                    c[1]++;
                }
            });
            triples = c[0];
            quads = c[1];
        }
        PrintStream o = System.out;
        o.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"count\",\"statements\":%d,\"triples\":%d,\"quads\":%d,\"frames\":%d}%n",
            triples + quads, triples, quads, frames
        );
    }

    static org.apache.jena.sparql.core.DatasetGraph loadDataset(String path) throws IOException {
        org.apache.jena.sparql.core.DatasetGraph dsg = org.apache.jena.sparql.core.DatasetGraphFactory.createGeneral();
        StreamRDF sink = org.apache.jena.riot.system.StreamRDFLib.dataset(dsg);
        if (isJelly(path)) {
            try (InputStream is = openMaybeGz(path)) {
                sink.start();
                decodeJelly(is, sink);
                sink.finish();
            }
        } else {
            parseRdf(path, sink);
        }
        return dsg;
    }

    static void compare(Args a) throws IOException {
        String p1 = a.pos(0, "A");
        String p2 = a.pos(1, "B");
        var d1 = loadDataset(p1);
        var d2 = loadDataset(p2);
        long n1 = countQuads(d1);
        long n2 = countQuads(d2);
        boolean iso = n1 == n2 && org.apache.jena.sparql.util.IsoMatcher.isomorphic(d1, d2);
        System.out.printf(
            Locale.ROOT,
            "{\"tool\":\"jelly-jvm\",\"op\":\"compare\",\"isomorphic\":%b,\"a_statements\":%d,\"b_statements\":%d}%n",
            iso, n1, n2
        );
        if (!iso) {
            System.exit(1);
        }
    }

    static long countQuads(org.apache.jena.sparql.core.DatasetGraph d) {
        long n = d.getDefaultGraph().size();
        var it = d.listGraphNodes();
        while (it.hasNext()) {
            n += d.getGraph(it.next()).size();
        }
        return n;
    }

    // ------------------------------------------------------------------ node-sharing

    static void nodeSharing(Args a) {
        List<Object> stmts = loadStatements(a.pos(0, "IN"));
        java.util.Set<String> iris = new java.util.HashSet<>();
        java.util.Set<Node> objects = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        long occurrences = 0;
        for (Object o : stmts) {
            Node[] nodes = o instanceof Triple t
                ? new Node[] {t.getSubject(), t.getPredicate(), t.getObject()}
                : new Node[] {((Quad) o).getSubject(), ((Quad) o).getPredicate(), ((Quad) o).getObject(),
                    ((Quad) o).getGraph()};
            for (Node n : nodes) {
                if (n == null || !n.isURI()) continue;
                occurrences++;
                objects.add(n);
                iris.add(n.getURI());
            }
        }
        System.out.printf(
            Locale.ROOT,
            "{\"iri_occurrences\":%d,\"distinct_iris\":%d,\"distinct_iri_objects\":%d}%n",
            occurrences, iris.size(), objects.size()
        );
    }

    // ------------------------------------------------------------------ helpers for Bench

    /** Loads all statements of an RDF text file into memory (Triples for triple syntaxes, Quads otherwise). */
    static List<Object> loadStatements(String path) {
        List<Object> out = new ArrayList<>();
        parseRdf(path, new StreamRDFBase() {
            @Override
            public void triple(Triple t) {
                out.add(t);
            }

            @Override
            public void quad(Quad q) {
                out.add(q);
            }
        });
        return out;
    }

    static byte[] encodeAll(List<Object> stmts, EncodeSettings s, int sizeHint) {
        ByteArrayOutputStream bos = new ByteArrayOutputStream(Math.max(1024, sizeHint));
        FrameWriter w = s.newWriter(bos);
        for (Object o : stmts) {
            if (o instanceof Triple t) {
                w.triple(t);
            } else {
                w.quad((Quad) o);
            }
        }
        w.finish();
        return bos.toByteArray();
    }

    static DecodeStats decodeBytes(byte[] data, StreamRDF sink) {
        try {
            return decodeJelly(new ByteArrayInputStream(data), sink);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
