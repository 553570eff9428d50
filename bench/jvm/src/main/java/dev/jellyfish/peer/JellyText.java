package dev.jellyfish.peer;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.MessageOptions;
import com.google.protobuf.DescriptorProtos.OneofDescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.TextFormat;
import eu.neverblink.jelly.core.utils.IoUtils;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * jelly-text (Jelly frames in the protobuf text format) the way the JVM jelly-cli handles it:
 * protobuf-java's {@code TextFormat}, printing with {@code Message.toString()} after a
 * {@code # Frame N} line and parsing with {@code TextFormat.merge}. jelly-cli uses the generated
 * classes of {@code jelly-core-protos-google}, which the Maven repository reachable here does not
 * have; the same messages (rdf.proto, Jelly-RDF 1.1) are described here at run time and handled
 * as {@link DynamicMessage}s, so the printer and parser are the same protobuf-java code.
 *
 * <p>One difference, on purpose: jelly-cli's to-jelly ignores the {@code # Frame} lines and
 * regroups the rows {@code --rows-per-frame} at a time; {@code text-to-jelly} here starts a frame
 * at each {@code # Frame} line (as jellyfish does), so streams can be compared frame by frame.
 */
final class JellyText {
    private JellyText() {}

    private static final String PKG = ".eu.ostrzyciel.jelly.core.proto.v1.";

    private static FieldDescriptorProto.Builder field(String name, int number, FieldDescriptorProto.Type type) {
        return FieldDescriptorProto.newBuilder()
            .setName(name)
            .setNumber(number)
            .setType(type)
            .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL);
    }

    private static FieldDescriptorProto u32(String name, int number) {
        return field(name, number, FieldDescriptorProto.Type.TYPE_UINT32).build();
    }

    private static FieldDescriptorProto str(String name, int number) {
        return field(name, number, FieldDescriptorProto.Type.TYPE_STRING).build();
    }

    private static FieldDescriptorProto msg(String name, int number, String type) {
        return field(name, number, FieldDescriptorProto.Type.TYPE_MESSAGE).setTypeName(PKG + type).build();
    }

    private static FieldDescriptorProto inOneof(FieldDescriptorProto f, int oneof) {
        return f.toBuilder().setOneofIndex(oneof).build();
    }

    private static DescriptorProto message(String name, FieldDescriptorProto... fields) {
        DescriptorProto.Builder b = DescriptorProto.newBuilder().setName(name);
        for (FieldDescriptorProto f : fields) {
            b.addField(f);
        }
        return b.build();
    }

    /** The fields of one term position: IRI, blank node, literal, and the fourth kind. */
    private static void term(DescriptorProto.Builder b, String p, int first, int oneof, String fourthName, String fourthType) {
        b.addField(inOneof(msg(p + "_iri", first, "RdfIri"), oneof));
        b.addField(inOneof(str(p + "_bnode", first + 1), oneof));
        if (fourthType.equals("RdfDefaultGraph")) {
            b.addField(inOneof(msg(fourthName, first + 2, fourthType), oneof));
            b.addField(inOneof(msg(p + "_literal", first + 3, "RdfLiteral"), oneof));
        } else {
            b.addField(inOneof(msg(p + "_literal", first + 2, "RdfLiteral"), oneof));
            b.addField(inOneof(msg(fourthName, first + 3, fourthType), oneof));
        }
    }

    private static DescriptorProto statement(String name, boolean quad) {
        DescriptorProto.Builder b = DescriptorProto.newBuilder().setName(name);
        String[] positions = quad ? new String[] {"subject", "predicate", "object", "graph"} : new String[] {"subject", "predicate", "object"};
        for (String o : positions) {
            b.addOneofDecl(OneofDescriptorProto.newBuilder().setName(o));
        }
        term(b, "s", 1, 0, "s_triple_term", "RdfTriple");
        term(b, "p", 5, 1, "p_triple_term", "RdfTriple");
        term(b, "o", 9, 2, "o_triple_term", "RdfTriple");
        if (quad) {
            term(b, "g", 13, 3, "g_default_graph", "RdfDefaultGraph");
        }
        return b.build();
    }

    private static EnumDescriptorProto enumType(String name, Object... namesAndNumbers) {
        EnumDescriptorProto.Builder b = EnumDescriptorProto.newBuilder().setName(name);
        for (int i = 0; i < namesAndNumbers.length; i += 2) {
            b.addValue(EnumValueDescriptorProto.newBuilder()
                .setName((String) namesAndNumbers[i])
                .setNumber((Integer) namesAndNumbers[i + 1]));
        }
        return b.build();
    }

    /** RdfStreamFrame of rdf.proto (Jelly-RDF 1.1), built at run time. */
    static Descriptor frameDescriptor() {
        DescriptorProto.Builder graphStart = DescriptorProto.newBuilder().setName("RdfGraphStart")
            .addOneofDecl(OneofDescriptorProto.newBuilder().setName("graph"));
        term(graphStart, "g", 1, 0, "g_default_graph", "RdfDefaultGraph");
        DescriptorProto.Builder row = DescriptorProto.newBuilder().setName("RdfStreamRow")
            .addOneofDecl(OneofDescriptorProto.newBuilder().setName("row"));
        String[][] rows = {
            {"options", "1", "RdfStreamOptions"}, {"triple", "2", "RdfTriple"}, {"quad", "3", "RdfQuad"},
            {"graph_start", "4", "RdfGraphStart"}, {"graph_end", "5", "RdfGraphEnd"},
            {"namespace", "6", "RdfNamespaceDeclaration"}, {"name", "9", "RdfNameEntry"},
            {"prefix", "10", "RdfPrefixEntry"}, {"datatype", "11", "RdfDatatypeEntry"},
        };
        for (String[] r : rows) {
            row.addField(inOneof(msg(r[0], Integer.parseInt(r[1]), r[2]), 0));
        }
        DescriptorProto literal = DescriptorProto.newBuilder().setName("RdfLiteral")
            .addOneofDecl(OneofDescriptorProto.newBuilder().setName("literalKind"))
            .addField(str("lex", 1))
            .addField(inOneof(str("langtag", 2), 0))
            .addField(inOneof(u32("datatype", 3), 0))
            .build();
        DescriptorProto options = message("RdfStreamOptions",
            str("stream_name", 1),
            field("physical_type", 2, FieldDescriptorProto.Type.TYPE_ENUM).setTypeName(PKG + "PhysicalStreamType").build(),
            field("generalized_statements", 3, FieldDescriptorProto.Type.TYPE_BOOL).build(),
            field("rdf_star", 4, FieldDescriptorProto.Type.TYPE_BOOL).build(),
            u32("max_name_table_size", 9),
            u32("max_prefix_table_size", 10),
            u32("max_datatype_table_size", 11),
            field("logical_type", 14, FieldDescriptorProto.Type.TYPE_ENUM).setTypeName(PKG + "LogicalStreamType").build(),
            u32("version", 15));
        DescriptorProto metadataEntry = DescriptorProto.newBuilder().setName("MetadataEntry")
            .setOptions(MessageOptions.newBuilder().setMapEntry(true))
            .addField(str("key", 1))
            .addField(field("value", 2, FieldDescriptorProto.Type.TYPE_BYTES))
            .build();
        DescriptorProto frame = DescriptorProto.newBuilder().setName("RdfStreamFrame")
            .addField(msg("rows", 1, "RdfStreamRow").toBuilder().setLabel(FieldDescriptorProto.Label.LABEL_REPEATED))
            .addField(msg("metadata", 15, "RdfStreamFrame.MetadataEntry").toBuilder().setLabel(FieldDescriptorProto.Label.LABEL_REPEATED))
            .addNestedType(metadataEntry)
            .build();
        FileDescriptorProto file = FileDescriptorProto.newBuilder()
            .setName("rdf.proto")
            .setPackage("eu.ostrzyciel.jelly.core.proto.v1")
            .setSyntax("proto3")
            .addMessageType(message("RdfIri", u32("prefix_id", 1), u32("name_id", 2)))
            .addMessageType(literal)
            .addMessageType(message("RdfDefaultGraph"))
            .addMessageType(statement("RdfTriple", false))
            .addMessageType(statement("RdfQuad", true))
            .addMessageType(graphStart)
            .addMessageType(message("RdfGraphEnd"))
            .addMessageType(message("RdfNamespaceDeclaration", str("name", 1), msg("value", 2, "RdfIri")))
            .addMessageType(message("RdfNameEntry", u32("id", 1), str("value", 2)))
            .addMessageType(message("RdfPrefixEntry", u32("id", 1), str("value", 2)))
            .addMessageType(message("RdfDatatypeEntry", u32("id", 1), str("value", 2)))
            .addMessageType(options)
            .addMessageType(row)
            .addMessageType(frame)
            .addEnumType(enumType("PhysicalStreamType",
                "PHYSICAL_STREAM_TYPE_UNSPECIFIED", 0, "PHYSICAL_STREAM_TYPE_TRIPLES", 1,
                "PHYSICAL_STREAM_TYPE_QUADS", 2, "PHYSICAL_STREAM_TYPE_GRAPHS", 3))
            .addEnumType(enumType("LogicalStreamType",
                "LOGICAL_STREAM_TYPE_UNSPECIFIED", 0, "LOGICAL_STREAM_TYPE_FLAT_TRIPLES", 1,
                "LOGICAL_STREAM_TYPE_FLAT_QUADS", 2, "LOGICAL_STREAM_TYPE_GRAPHS", 3,
                "LOGICAL_STREAM_TYPE_DATASETS", 4, "LOGICAL_STREAM_TYPE_SUBJECT_GRAPHS", 13,
                "LOGICAL_STREAM_TYPE_NAMED_GRAPHS", 14, "LOGICAL_STREAM_TYPE_TIMESTAMPED_NAMED_GRAPHS", 114))
            .build();
        try {
            return FileDescriptor.buildFrom(file, new FileDescriptor[0]).findMessageTypeByName("RdfStreamFrame");
        } catch (DescriptorValidationException e) {
            throw new IllegalStateException("rdf.proto descriptor: " + e.getMessage(), e);
        }
    }

    /**
     * text-from-jelly IN.jelly OUT.txt|- [IN OUT]... : each frame as "# Frame N" and
     * Message.toString(). Several pairs share one JVM start.
     */
    static void fromJelly(JellyJvmPeer.Args a) throws IOException {
        Descriptor desc = frameDescriptor();
        a.pos(1, "OUT");
        for (int p = 0; p + 1 < a.positional.size(); p += 2) {
            fromJelly(desc, a.positional.get(p), a.positional.get(p + 1));
        }
    }

    private static void fromJelly(Descriptor desc, String inPath, String outPath) throws IOException {
        try (InputStream raw = new BufferedInputStream(Files.newInputStream(Path.of(inPath)));
             OutputStream out = outPath.equals("-") ? System.out : new BufferedOutputStream(Files.newOutputStream(Path.of(outPath)))) {
            IoUtils.AutodetectDelimitingResponse det = IoUtils.autodetectDelimiting(raw);
            int index = 0;
            if (det.isDelimited()) {
                CodedInputStream in = CodedInputStream.newInstance(det.newInput());
                in.setSizeLimit(Integer.MAX_VALUE);
                while (!in.isAtEnd()) {
                    byte[] frame = in.readRawBytes(in.readRawVarint32());
                    write(out, index++, DynamicMessage.parseFrom(desc, frame));
                }
            } else {
                write(out, index, DynamicMessage.parseFrom(desc, det.newInput().readAllBytes()));
            }
            out.flush();
        }
    }

    private static void write(OutputStream out, int index, DynamicMessage frame) throws IOException {
        out.write(("# Frame " + index + "\n").getBytes(StandardCharsets.UTF_8));
        out.write(frame.toString().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * text-to-jelly IN.txt OUT.jelly [IN OUT]... : a frame per "# Frame" section,
     * TextFormat.merge, delimited.
     */
    static void toJelly(JellyJvmPeer.Args a) throws IOException {
        Descriptor desc = frameDescriptor();
        a.pos(1, "OUT.jelly");
        for (int p = 0; p + 1 < a.positional.size(); p += 2) {
            toJelly(desc, a.positional.get(p), a.positional.get(p + 1));
        }
    }

    private static void toJelly(Descriptor desc, String inPath, String outPath) throws IOException {
        String text = Files.readString(Path.of(inPath));
        try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(Path.of(outPath)))) {
            StringBuilder section = new StringBuilder();
            boolean started = false;
            for (String line : text.split("\n", -1)) {
                if (line.strip().startsWith("# Frame")) {
                    if (started || !section.toString().isBlank()) {
                        writeFrame(out, desc, section.toString());
                    }
                    section.setLength(0);
                    started = true;
                }
                section.append(line).append('\n');
            }
            if (started || !section.toString().isBlank()) {
                writeFrame(out, desc, section.toString());
            }
        }
    }

    private static void writeFrame(OutputStream out, Descriptor desc, String text) throws IOException {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(desc);
        TextFormat.merge(text, b);
        b.build().writeDelimitedTo(out);
    }
}
