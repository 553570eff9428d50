package dev.jellyfish.peer;

import com.google.protobuf.CodedOutputStream;
import eu.neverblink.jelly.convert.jena.JenaConverterFactory;
import eu.neverblink.jelly.core.ProtoEncoder;
import eu.neverblink.jelly.core.memory.EncoderAllocator;
import eu.neverblink.jelly.core.memory.ReusableRowBuffer;
import eu.neverblink.jelly.core.memory.RowBuffer;
import eu.neverblink.jelly.core.proto.v1.RdfStreamFrame;
import eu.neverblink.jelly.core.proto.v1.RdfStreamOptions;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import org.apache.jena.graph.Node;
import org.apache.jena.graph.Triple;
import org.apache.jena.sparql.core.Quad;

/**
 * Writes a delimited Jelly stream using Jelly-JVM's low-level encoder (ProtoEncoder from
 * JenaConverterFactory) and controls frame boundaries itself.
 *
 * <p>Framing policy:
 * <ul>
 *   <li>{@code rowsPerFrame > 0}: a frame is flushed once the row buffer holds at least that many
 *       rows (rows include options/name/prefix/datatype entries, same policy as Jelly-JVM's RIOT
 *       stream writer).</li>
 *   <li>{@code perGraph}: a frame is flushed whenever the graph term of the next quad differs from
 *       the previous quad's graph, and never because of size (one frame per run of same-graph
 *       quads).</li>
 *   <li>{@link #flush()} may also be called by the caller at any point (e.g. frames-file replay).</li>
 * </ul>
 */
final class FrameWriter {

    private final CodedOutputStream coded;
    private final ReusableRowBuffer buffer;
    private final EncoderAllocator allocator;
    private final ProtoEncoder<Node> encoder;
    private final RdfStreamFrame.Mutable frame;
    private final int rowsPerFrame;
    private final boolean perGraph;
    private final boolean quadsPhysical;

    private Node lastGraph = null;
    private boolean haveLastGraph = false;
    private long frames = 0;
    private long statements = 0;

    FrameWriter(OutputStream out, RdfStreamOptions options, int rowsPerFrame, boolean perGraph, boolean quadsPhysical) {
        this.rowsPerFrame = rowsPerFrame;
        this.perGraph = perGraph;
        this.quadsPhysical = quadsPhysical;
        int cap = Math.max(16, (rowsPerFrame > 0 ? rowsPerFrame : 256) + 8);
        this.coded = CodedOutputStream.newInstance(out, 8192);
        this.buffer = RowBuffer.newReusableForEncoder(cap);
        this.allocator = EncoderAllocator.newArenaAllocator(cap);
        this.frame = RdfStreamFrame.newInstance().setRows(buffer);
        this.encoder = JenaConverterFactory.getInstance()
            .encoder(ProtoEncoder.Params.of(options, false, buffer, allocator));
    }

    void triple(Triple t) {
        triple(t.getSubject(), t.getPredicate(), t.getObject());
    }

    void triple(Node s, Node p, Node o) {
        if (quadsPhysical) {
            quad(s, p, o, Quad.defaultGraphIRI);
            return;
        }
        encoder.handleTriple(s, p, o);
        statements++;
        afterStatement();
    }

    void quad(Quad q) {
        quad(q.getSubject(), q.getPredicate(), q.getObject(), q.getGraph());
    }

    void quad(Node s, Node p, Node o, Node g) {
        if (!quadsPhysical) {
            if (g == null || Quad.isDefaultGraph(g)) {
                encoder.handleTriple(s, p, o);
                statements++;
                afterStatement();
                return;
            }
            throw new IllegalArgumentException(
                "Named-graph quad in a TRIPLES stream (use --physical quads): " + g
            );
        }
        if (g == null || Quad.isDefaultGraph(g)) {
            g = Quad.defaultGraphIRI;
        }
        if (perGraph) {
            if (haveLastGraph && !g.equals(lastGraph)) {
                flush();
            }
            lastGraph = g;
            haveLastGraph = true;
        }
        encoder.handleQuad(s, p, o, g);
        statements++;
        afterStatement();
    }

    private void afterStatement() {
        if (!perGraph && rowsPerFrame > 0 && buffer.size() >= rowsPerFrame) {
            flush();
        }
    }

    /** Writes the buffered rows as one delimited frame (no-op if the buffer is empty). */
    void flush() {
        if (buffer.isEmpty()) {
            return;
        }
        frame.resetCachedSize();
        try {
            frame.writeDelimitedTo(coded);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            buffer.clear();
            allocator.releaseAll();
        }
        frames++;
    }

    /** Flushes the last frame and the underlying coded stream (does not close the OutputStream). */
    void finish() {
        flush();
        try {
            coded.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    long frames() {
        return frames;
    }

    long statements() {
        return statements;
    }
}
