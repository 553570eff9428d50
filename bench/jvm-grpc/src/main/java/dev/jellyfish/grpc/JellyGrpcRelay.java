package dev.jellyfish.grpc;

import com.google.protobuf.ByteString;
import eu.neverblink.jelly.convert.jena.JenaConverterFactory;
import eu.neverblink.jelly.core.JellyOptions;
import eu.neverblink.jelly.core.ProtoDecoder;
import eu.neverblink.jelly.core.RdfHandler;
import eu.neverblink.jelly.core.proto.v1.RdfStreamFrame;
import eu.neverblink.jelly.core.proto.v1.RdfStreamRow;
import eu.neverblink.protoc.java.runtime.ProtoMessage;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.jena.graph.Node;
import org.apache.jena.sys.JenaSystem;

/**
 * A publish/subscribe relay on Jelly-JVM's codec and grpc-java: the nearest runnable
 * stand-in for a Jelly-JVM gRPC server here (its own {@code jelly-pekko-grpc_3} module
 * is not served; see README.md). It is a benchmark peer for {@code serve_bench}, not a
 * product: no log, no retention, no replay, no auth; memory only.
 *
 * <pre>
 * relay HOST:PORT     (PORT 0 picks one)
 *     stderr: "jelly-jvm-relay: listening on http://HOST:PORT" once it accepts calls
 * </pre>
 *
 * What it does per item is what a JVM service built on Jelly-JVM's object model does:
 * <ul>
 *   <li>{@code PublishRdf} (topic in the {@code x-jelly-topic} metadata, as jellyfish
 *       takes it): each frame is parsed into an {@link RdfStreamFrame}, its rows are
 *       decoded by one Jelly-JVM decoder per call into Jena nodes (which checks the
 *       stream: a malformed frame ends the call with {@code INVALID_ARGUMENT}), an
 *       {@code offset} metadata entry is added, and the frame is serialized again;</li>
 *   <li>{@code SubscribeRdf} (topic in the request's {@code topic} field) follows the
 *       topic from now: every frame published after the call began, in order. The
 *       response headers go out when the subscriber is registered, so a client knows
 *       when it would receive the next item. {@code requested_options} is ignored.</li>
 * </ul>
 * The handlers run on the transport's event loop ({@code directExecutor}): none of
 * them blocks, and this skips a hand-off to a thread pool for each message.
 */
public final class JellyGrpcRelay {
    private JellyGrpcRelay() {}

    /** One subscriber call; sends are serialized, since a call is not thread-safe. */
    static final class Subscriber {
        final ServerCall<byte[], byte[]> call;
        boolean open = true;

        Subscriber(ServerCall<byte[], byte[]> call) {
            this.call = call;
        }

        synchronized void send(byte[] frame) {
            if (open) {
                call.sendMessage(frame);
            }
        }

        synchronized void close() {
            open = false;
        }
    }

    /** A named stream: the next offset and its live subscribers. */
    static final class Topic {
        final CopyOnWriteArrayList<Subscriber> subscribers = new CopyOnWriteArrayList<>();
        long next;

        /** Gives {@code frame} the next offset (in its metadata) and hands it to every subscriber. */
        synchronized long append(RdfStreamFrame.Mutable frame) {
            long offset = next++;
            frame.addMetadata(RdfStreamFrame.MetadataEntry.newInstance()
                .setKey("offset")
                .setValue(ByteString.copyFromUtf8(Long.toString(offset))));
            byte[] bytes = frame.toByteArray();
            for (Subscriber s : subscribers) {
                s.send(bytes);
            }
            return offset;
        }
    }

    static final ConcurrentHashMap<String, Topic> TOPICS = new ConcurrentHashMap<>();

    static Topic topic(String name) {
        return TOPICS.computeIfAbsent(name, n -> new Topic());
    }

    public static void main(String[] args) throws Exception {
        JenaSystem.init();
        if (args.length != 1) {
            System.err.println("usage: relay HOST:PORT");
            System.exit(64);
        }
        int colon = args[0].lastIndexOf(':');
        InetSocketAddress addr = new InetSocketAddress(args[0].substring(0, colon),
            Integer.parseInt(args[0].substring(colon + 1)));
        ServerServiceDefinition service = ServerServiceDefinition.builder(JellyGrpcClient.SERVICE)
            .addMethod(JellyGrpcClient.PUBLISH, JellyGrpcRelay::publish)
            .addMethod(JellyGrpcClient.SUBSCRIBE, JellyGrpcRelay::subscribe)
            .build();
        Server server = NettyServerBuilder.forAddress(addr)
            .directExecutor()
            .maxInboundMessageSize(64 << 20)
            .addService(service)
            .build()
            .start();
        System.err.println("jelly-jvm-relay: listening on http://" + addr.getHostString() + ":" + server.getPort());
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        server.awaitTermination();
    }

    static <T> ServerCall.Listener<T> refuse(ServerCall<?, ?> call, String why) {
        call.close(Status.INVALID_ARGUMENT.withDescription(why), new Metadata());
        return new ServerCall.Listener<>() {};
    }

    /** {@code PublishRdf}: client streaming; answers an empty {@code RdfStreamReceived}. */
    static ServerCall.Listener<byte[]> publish(ServerCall<byte[], byte[]> call, Metadata headers) {
        String name = headers.get(JellyGrpcClient.TOPIC);
        if (name == null) {
            return refuse(call, "missing request metadata `x-jelly-topic`");
        }
        Topic topic = topic(name);
        long[] statements = {0};
        RdfHandler.AnyStatementHandler<Node> count = new RdfHandler.AnyStatementHandler<>() {
            @Override
            public void handleNamespace(String prefix, Node namespace) {}

            @Override
            public void handleTriple(Node s, Node p, Node o) {
                statements[0]++;
            }

            @Override
            public void handleQuad(Node s, Node p, Node o, Node g) {
                statements[0]++;
            }
        };
        ProtoDecoder<Node, ?> decoder = JenaConverterFactory.getInstance()
            .anyStatementDecoder(count, JellyOptions.DEFAULT_SUPPORTED_OPTIONS);
        call.request(1);
        return new ServerCall.Listener<>() {
            long frames;
            long first = -1;
            long last = -1;
            boolean closed;

            @Override
            public void onMessage(byte[] message) {
                if (closed) {
                    return;
                }
                try {
                    RdfStreamFrame.Mutable frame = RdfStreamFrame.newInstance();
                    ProtoMessage.mergeFrom(frame, message);
                    for (RdfStreamRow row : frame.getRows()) {
                        decoder.ingestRow(row);
                    }
                    last = topic.append(frame);
                    if (first < 0) {
                        first = last;
                    }
                    frames++;
                } catch (Exception e) {
                    closed = true;
                    call.close(Status.INVALID_ARGUMENT
                        .withDescription("frame " + frames + ": " + e.getMessage()), new Metadata());
                    return;
                }
                call.request(1);
            }

            @Override
            public void onHalfClose() {
                if (closed) {
                    return;
                }
                Metadata h = new Metadata();
                h.put(Metadata.Key.of("x-jelly-items", Metadata.ASCII_STRING_MARSHALLER), Long.toString(frames));
                if (first >= 0) {
                    h.put(Metadata.Key.of("x-jelly-first-offset", Metadata.ASCII_STRING_MARSHALLER),
                        Long.toString(first));
                    h.put(Metadata.Key.of("x-jelly-last-offset", Metadata.ASCII_STRING_MARSHALLER),
                        Long.toString(last));
                }
                call.sendHeaders(h);
                call.sendMessage(new byte[0]);
                call.close(Status.OK, new Metadata());
            }
        };
    }

    /** {@code SubscribeRdf}: server streaming, from now on. */
    static ServerCall.Listener<byte[]> subscribe(ServerCall<byte[], byte[]> call, Metadata headers) {
        call.request(1);
        return new ServerCall.Listener<>() {
            Topic topic;
            Subscriber sub;

            @Override
            public void onMessage(byte[] request) {
                String name = topicField(request);
                if (name == null || name.isEmpty()) {
                    refuse(call, "the request names no topic");
                    return;
                }
                topic = topic(name);
                sub = new Subscriber(call);
                // Registered first, headers next, both under the subscriber's lock: a
                // publish in between waits for the headers instead of being missed.
                synchronized (sub) {
                    topic.subscribers.add(sub);
                    call.sendHeaders(new Metadata());
                }
            }

            @Override
            public void onCancel() {
                leave();
            }

            @Override
            public void onComplete() {
                leave();
            }

            private void leave() {
                if (sub != null) {
                    sub.close();
                    topic.subscribers.remove(sub);
                }
            }
        };
    }

    /**
     * Field 1 (`topic`) of an `RdfStreamSubscribe` message (the last one, as protobuf
     * merges), or null if there is none or the message is malformed.
     */
    static String topicField(byte[] m) {
        String topic = null;
        int i = 0;
        while (i < m.length) {
            long[] tag = varint(m, i);
            if (tag == null) {
                return null;
            }
            i = (int) tag[1];
            switch ((int) (tag[0] & 7)) {
                case 0 -> {
                    long[] v = varint(m, i);
                    if (v == null) {
                        return null;
                    }
                    i = (int) v[1];
                }
                case 1 -> i += 8;
                case 5 -> i += 4;
                case 2 -> {
                    long[] len = varint(m, i);
                    if (len == null || len[0] < 0 || len[0] > m.length - len[1]) {
                        return null;
                    }
                    int start = (int) len[1];
                    if (tag[0] >>> 3 == 1) {
                        topic = new String(m, start, (int) len[0], StandardCharsets.UTF_8);
                    }
                    i = start + (int) len[0];
                }
                default -> {
                    return null;
                }
            }
        }
        return i == m.length ? topic : null;
    }

    /** A varint at {@code i}: its value and the index after it, or null if cut short. */
    static long[] varint(byte[] m, int i) {
        long v = 0;
        for (int shift = 0; shift < 64 && i < m.length; shift += 7) {
            byte b = m[i++];
            v |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                return new long[] {v, i};
            }
        }
        return null;
    }
}
