package dev.jellyfish.grpc;

import eu.neverblink.jelly.convert.jena.JenaConverterFactory;
import eu.neverblink.jelly.convert.jena.JenaDecoderConverter;
import eu.neverblink.jelly.core.JellyOptions;
import eu.neverblink.jelly.core.ProtoDecoder;
import eu.neverblink.jelly.core.ProtoEncoder;
import eu.neverblink.jelly.core.RdfHandler;
import eu.neverblink.jelly.core.memory.EncoderAllocator;
import eu.neverblink.jelly.core.memory.ReusableRowBuffer;
import eu.neverblink.jelly.core.memory.RowBuffer;
import eu.neverblink.jelly.core.proto.v1.PhysicalStreamType;
import eu.neverblink.jelly.core.proto.v1.RdfStreamFrame;
import eu.neverblink.jelly.core.proto.v1.RdfStreamOptions;
import eu.neverblink.protoc.java.runtime.ProtoMessage;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.jena.graph.Node;
import org.apache.jena.riot.RDFDataMgr;
import org.apache.jena.riot.RDFFormat;
import org.apache.jena.riot.system.StreamRDF;
import org.apache.jena.riot.system.StreamRDFBase;
import org.apache.jena.riot.system.StreamRDFWriter;
import org.apache.jena.sparql.core.Quad;
import org.apache.jena.sys.JenaSystem;

/**
 * A Jelly gRPC client made of Jelly-JVM (encoder, decoder, Jena conversion) and
 * grpc-java, with the service's two methods declared by hand over raw message bytes.
 *
 * <pre>
 * publish   HOST:PORT TOPIC IN.nq STATEMENTS_PER_FRAME
 *     stdout: items=N first=F last=L (the server's response metadata)
 * subscribe HOST:PORT TOPIC N_FRAMES [NAME PREFIX DATATYPE]
 *     stdout: the statements of the first N_FRAMES frames as N-Quads
 *     stderr: offsets=o1,o2,... (the frames' metadata)
 * relay     HOST:PORT
 *     a server: see {@link JellyGrpcRelay}
 * </pre>
 *
 * A gRPC error prints {@code status=CODE: message} on stderr and exits with 2.
 */
public final class JellyGrpcClient {
    static final String SERVICE = "eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService";

    /** Messages as their bytes: the client encodes and decodes them itself. */
    static final MethodDescriptor.Marshaller<byte[]> RAW = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }
    };

    static final MethodDescriptor<byte[], byte[]> SUBSCRIBE = MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "SubscribeRdf"))
        .setRequestMarshaller(RAW)
        .setResponseMarshaller(RAW)
        .build();

    static final MethodDescriptor<byte[], byte[]> PUBLISH = MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(MethodDescriptor.MethodType.CLIENT_STREAMING)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "PublishRdf"))
        .setRequestMarshaller(RAW)
        .setResponseMarshaller(RAW)
        .build();

    static final Metadata.Key<String> TOPIC = Metadata.Key.of("x-jelly-topic", Metadata.ASCII_STRING_MARSHALLER);

    public static void main(String[] args) throws Exception {
        // Initialise Jena (and Jelly's RIOT registration) before any Jena class is used.
        JenaSystem.init();
        if (args.length >= 1 && args[0].equals("relay")) {
            JellyGrpcRelay.main(java.util.Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length < 4) {
            System.err.println("usage: publish HOST:PORT TOPIC IN.nq N | subscribe HOST:PORT TOPIC N [NAME PREFIX DATATYPE]");
            System.exit(64);
        }
        ManagedChannel ch = ManagedChannelBuilder.forTarget(args[1]).usePlaintext()
            .maxInboundMessageSize(64 << 20).build();
        int code = 0;
        try {
            switch (args[0]) {
                case "publish" -> publish(ch, args[2], args[3], Integer.parseInt(args[4]));
                case "subscribe" -> subscribe(ch, args[2], Integer.parseInt(args[3]), args);
                default -> {
                    System.err.println("unknown command " + args[0]);
                    code = 64;
                }
            }
        } catch (StatusRuntimeException e) {
            System.err.println("status=" + e.getStatus().getCode() + ": " + e.getStatus().getDescription());
            code = 2;
        } finally {
            ch.shutdownNow();
            ch.awaitTermination(5, TimeUnit.SECONDS);
        }
        System.exit(code);
    }

    /** Reads N-Quads and sends them as a QUADS stream, {@code perFrame} statements a frame. */
    static void publish(ManagedChannel ch, String topic, String path, int perFrame) throws Exception {
        List<Quad> quads = new ArrayList<>();
        RDFDataMgr.parse(new StreamRDFBase() {
            @Override
            public void quad(Quad q) {
                quads.add(q);
            }

            @Override
            public void triple(org.apache.jena.graph.Triple t) {
                quads.add(Quad.create(Quad.defaultGraphIRI, t));
            }
        }, path);

        RdfStreamOptions opts = JellyOptions.SMALL_STRICT.clone()
            .setPhysicalType(PhysicalStreamType.QUADS);
        ReusableRowBuffer buffer = RowBuffer.newReusableForEncoder(perFrame + 64);
        EncoderAllocator allocator = EncoderAllocator.newArenaAllocator(perFrame + 64);
        RdfStreamFrame.Mutable frame = RdfStreamFrame.newInstance().setRows(buffer);
        ProtoEncoder<Node> encoder = JenaConverterFactory.getInstance()
            .encoder(ProtoEncoder.Params.of(opts, false, buffer, allocator));
        List<byte[]> frames = new ArrayList<>();
        int inFrame = 0;
        for (Quad q : quads) {
            encoder.handleQuad(q.getSubject(), q.getPredicate(), q.getObject(), q.getGraph());
            if (++inFrame == perFrame) {
                frames.add(take(frame, buffer, allocator));
                inFrame = 0;
            }
        }
        if (!buffer.isEmpty()) {
            frames.add(take(frame, buffer, allocator));
        }

        Metadata md = new Metadata();
        md.put(TOPIC, topic);
        AtomicReference<Metadata> headers = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        Channel c = ClientInterceptors.intercept(ch,
            MetadataUtils.newAttachHeadersInterceptor(md),
            MetadataUtils.newCaptureMetadataInterceptor(headers, trailers));
        CompletableFuture<byte[]> done = new CompletableFuture<>();
        ClientCall<byte[], byte[]> call = c.newCall(PUBLISH, CallOptions.DEFAULT);
        StreamObserver<byte[]> out = ClientCalls.asyncClientStreamingCall(call, new StreamObserver<>() {
            @Override
            public void onNext(byte[] value) {
                done.complete(value);
            }

            @Override
            public void onError(Throwable t) {
                done.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                done.complete(new byte[0]);
            }
        });
        for (byte[] f : frames) {
            out.onNext(f);
        }
        out.onCompleted();
        try {
            done.get(60, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof StatusRuntimeException s) {
                throw s;
            }
            throw e;
        }
        Metadata h = headers.get();
        System.out.println("items=" + header(h, "x-jelly-items") + " first=" + header(h, "x-jelly-first-offset")
            + " last=" + header(h, "x-jelly-last-offset") + " frames=" + frames.size());
    }

    static String header(Metadata h, String key) {
        return h == null ? null : h.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER));
    }

    /** The buffered rows as one non-delimited frame. */
    static byte[] take(RdfStreamFrame.Mutable frame, ReusableRowBuffer buffer, EncoderAllocator allocator) {
        frame.resetCachedSize();
        byte[] b = frame.toByteArray();
        buffer.clear();
        allocator.releaseAll();
        return b;
    }

    /** Receives {@code n} frames, decodes them as one stream, prints N-Quads. */
    static void subscribe(ManagedChannel ch, String topic, int n, String[] args) throws Exception {
        RdfStreamOptions.Mutable req = null;
        if (args.length >= 7) {
            req = RdfStreamOptions.newInstance()
                .setPhysicalType(PhysicalStreamType.QUADS)
                .setMaxNameTableSize(Integer.parseInt(args[4]))
                .setMaxPrefixTableSize(Integer.parseInt(args[5]))
                .setMaxDatatypeTableSize(Integer.parseInt(args[6]))
                .setVersion(1);
        }
        ByteArrayOutputStream msg = new ByteArrayOutputStream();
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        msg.write(0x0a);
        varint(msg, t.length);
        msg.write(t);
        if (req != null) {
            byte[] o = req.toByteArray();
            msg.write(0x12);
            varint(msg, o.length);
            msg.write(o);
        }

        PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        StreamRDF w = StreamRDFWriter.getWriterStream(stdout, RDFFormat.NQUADS);
        w.start();
        JenaDecoderConverter conv = JenaConverterFactory.getInstance().decoderConverter();
        RdfHandler.AnyStatementHandler<Node> handler = new RdfHandler.AnyStatementHandler<>() {
            @Override
            public void handleNamespace(String prefix, Node namespace) {}

            @Override
            public void handleTriple(Node s, Node p, Node o) {
                w.triple(conv.makeTriple(s, p, o));
            }

            @Override
            public void handleQuad(Node s, Node p, Node o, Node g) {
                w.quad(conv.makeQuad(s, p, o, g));
            }
        };
        ProtoDecoder<Node, ?> decoder = JenaConverterFactory.getInstance()
            .anyStatementDecoder(handler, JellyOptions.DEFAULT_SUPPORTED_OPTIONS);
        RowBuffer rows = RowBuffer.newSingle(decoder::ingestRow);
        List<String> offsets = new ArrayList<>();
        Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(ch, SUBSCRIBE, CallOptions.DEFAULT, msg.toByteArray());
        for (int i = 0; i < n && it.hasNext(); i++) {
            byte[] bytes = it.next();
            RdfStreamFrame.Mutable frame = RdfStreamFrame.newInstance().setRows(rows);
            ProtoMessage.mergeFrom(frame, bytes);
            rows.clear();
            for (RdfStreamFrame.MetadataEntry e : frame.getMetadata()) {
                if (e.getKey().equals("offset")) {
                    offsets.add(e.getValue().toStringUtf8());
                }
            }
        }
        w.finish();
        stdout.flush();
        System.err.println("offsets=" + String.join(",", offsets));
    }

    static void varint(ByteArrayOutputStream out, int v) {
        while ((v & ~0x7f) != 0) {
            out.write((v & 0x7f) | 0x80);
            v >>>= 7;
        }
        out.write(v);
    }
}
