#!/usr/bin/env python3
"""pyjelly peer tool: an independent Jelly implementation for interop tests and benchmarks.

Subcommands (see ``--help`` of each):

  to-jelly     IN.nt|IN.nq[.gz] OUT.jelly [--rows-per-frame N] [--preset small|big]
               [--physical triples|quads|graphs] [--grouped-per-graph] [--api generic|rdflib]
  from-jelly   IN.jelly OUT.nq [--api generic|rdflib]
  bench-encode IN.nt|IN.nq[.gz] [--preset big] [--rows-per-frame 512] [--grouped-per-graph]
               [--seconds S] [--api generic|rdflib]
  bench-decode IN.jelly [--seconds S] [--api generic|rdflib]
  dump-frames  IN.jelly

Which pyjelly API is used:
  * ``generic`` (default): ``pyjelly.integrations.generic`` -- no rdflib objects, fastest.
    N-Triples/N-Quads input is parsed by the small parser in this file into pyjelly's
    generic terms; decoded statements are written by the serializer in this file.
    Decoding drives pyjelly's generic adapters with a Decoder subclass that fixes
    pyjelly 0.8.2's crash on namespace-declaration rows (see _ns_safe_decoder_class).
  * ``rdflib``: ``pyjelly.integrations.rdflib`` -- terms are rdflib terms (built-in parser
    produces them; ``--rdflib-parser`` makes rdflib parse the input instead, which
    de-duplicates statements).  No RDF-star (rdflib 7 has no triple terms).
  ``dump-frames`` reads frames with pyjelly's own frame reader
  (``pyjelly.parse.ioutils.get_options_and_frames``, i.e. pyjelly's delimited/non-delimited
  autodetection) and the protobuf classes shipped in ``pyjelly.jelly``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import logging
import re
import sys
import time
from typing import IO, Any, Callable, Iterable, Iterator

from pyjelly import jelly
from pyjelly.integrations.generic.generic_sink import (
    IRI,
    BlankNode,
    DefaultGraph,
    GenericStatementSink,
    Literal,
    Prefix,
    Quad,
    Triple,
)
from pyjelly.options import LookupPreset, StreamParameters
from pyjelly.parse.ioutils import get_options_and_frames
from pyjelly.serialize.ioutils import write_delimited
from pyjelly.serialize.streams import SerializerOptions

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

PRESETS = {
    # name table / prefix table / datatype table
    "big": (4000, 150, 32),
    "small": (128, 16, 16),
}


def _rdflib_no_normalize() -> None:
    """rdflib canonicalizes typed literals by default ("2000"^^xsd:float -> "2000.0"); a
    codec peer must keep lexical forms exactly, so switch that off globally."""
    import rdflib  # noqa: PLC0415

    rdflib.NORMALIZE_LITERALS = False
    # rdflib warns "<x> does not look like a valid URI" for pyjelly's namespace rows
    logging.getLogger("rdflib.term").setLevel(logging.ERROR)


# ---------------------------------------------------------------------------
# N-Triples / N-Quads reading (own small parser; RDF 1.1 + RDF-star "<< >>" and
# RDF 1.2 "<<( )>>" triple terms)
# ---------------------------------------------------------------------------

_WS_RE = re.compile(r"[ \t]*")
_IRI_RE = re.compile(r"<([^<>]*)>")
# BLANK_NODE_LABEL: may contain '.', but not end with it.
_BNODE_RE = re.compile(r"_:([^\s<>\"()]*[^\s<>\"().])")
_LIT_RE = re.compile(
    r'"([^"\\]*(?:\\.[^"\\]*)*)"'
    r"(?:@([A-Za-z]+(?:-[A-Za-z0-9]+)*(?:--[A-Za-z]+)?)|\^\^<([^<>]*)>)?"
)
_UNESCAPE_RE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def _unescape_sub(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return chr(int(m.group(1), 16))
    if m.group(2) is not None:
        return chr(int(m.group(2), 16))
    c = m.group(3)
    try:
        return _ECHAR[c]
    except KeyError:
        raise ValueError(f"bad escape \\{c}") from None


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return _UNESCAPE_RE.sub(_unescape_sub, s)


class TermFactory:
    """Builds terms for one pyjelly integration."""

    def __init__(self, api: str) -> None:
        self.api = api
        self._iri_cache: dict[str, Any] = {}
        self._dt_cache: dict[str, Any] = {}
        if api == "generic":
            self.iri = self._generic_iri
            self.bnode = BlankNode
            self.literal = self._generic_literal
            self.triple = lambda s, p, o: Triple(s, p, o)
            self.stmt3 = lambda s, p, o: Triple(s, p, o)
            self.stmt4 = lambda s, p, o, g: Quad(s, p, o, g)
            self.default_graph = DefaultGraph
        else:
            import rdflib  # noqa: PLC0415

            _rdflib_no_normalize()
            self._rdflib = rdflib
            self.iri = self._rdflib_iri
            self.bnode = rdflib.BNode
            self.literal = self._rdflib_literal
            self.triple = self._rdflib_quoted
            self.stmt3 = lambda s, p, o: (s, p, o)
            self.stmt4 = lambda s, p, o, g: (s, p, o, g)
            self.default_graph = rdflib.graph.DATASET_DEFAULT_GRAPH_ID

    def _generic_iri(self, value: str) -> IRI:
        t = self._iri_cache.get(value)
        if t is None:
            if len(self._iri_cache) > 200_000:
                self._iri_cache.clear()
            t = self._iri_cache[value] = IRI(value)
        return t

    def _generic_literal(self, lex: str, lang: str | None, dt: str | None) -> Literal:
        if dt == XSD_STRING:
            dt = None
        return Literal(lex, lang, dt)

    def _rdflib_iri(self, value: str) -> Any:
        t = self._iri_cache.get(value)
        if t is None:
            if len(self._iri_cache) > 200_000:
                self._iri_cache.clear()
            t = self._iri_cache[value] = self._rdflib.URIRef(value)
        return t

    def _rdflib_literal(self, lex: str, lang: str | None, dt: str | None) -> Any:
        dtt = None
        if dt is not None and dt != XSD_STRING and not lang:
            dtt = self._rdflib.URIRef(dt)
        return self._rdflib.Literal(lex, lang=lang or None, datatype=dtt, normalize=False)

    def _rdflib_quoted(self, s: Any, p: Any, o: Any) -> Any:  # pragma: no cover
        msg = "RDF-star quoted triples are not supported with --api rdflib (rdflib 7 has no triple terms)"
        raise NotImplementedError(msg)


def _parse_term(line: str, pos: int, f: TermFactory) -> tuple[Any, int]:
    c = line[pos : pos + 1]
    if c == "<":
        if line.startswith("<<", pos):
            pos += 2
            paren = line.startswith("(", pos)
            if paren:
                pos += 1
            pos = _WS_RE.match(line, pos).end()  # type: ignore[union-attr]
            s, pos = _parse_term(line, pos, f)
            p, pos = _parse_term(line, pos, f)
            o, pos = _parse_term(line, pos, f)
            if paren:
                if not line.startswith(")", pos):
                    raise ValueError(f"expected ')>>' at column {pos}")
                pos += 1
                pos = _WS_RE.match(line, pos).end()  # type: ignore[union-attr]
            if not line.startswith(">>", pos):
                raise ValueError(f"expected '>>' at column {pos}")
            pos += 2
            term = f.triple(s, p, o)
        else:
            m = _IRI_RE.match(line, pos)
            if m is None:
                raise ValueError(f"bad IRI at column {pos}")
            term = f.iri(_unescape(m.group(1)))
            pos = m.end()
    elif c == "_":
        m = _BNODE_RE.match(line, pos)
        if m is None:
            raise ValueError(f"bad blank node at column {pos}")
        term = f.bnode(m.group(1))
        pos = m.end()
    elif c == '"':
        m = _LIT_RE.match(line, pos)
        if m is None:
            raise ValueError(f"bad literal at column {pos}")
        lex, lang, dt = m.groups()
        term = f.literal(_unescape(lex), lang, _unescape(dt) if dt is not None else None)
        pos = m.end()
    else:
        raise ValueError(f"unexpected {c!r} at column {pos}")
    return term, _WS_RE.match(line, pos).end()  # type: ignore[union-attr]


def _open_text(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")  # noqa: SIM115


def read_statements(path: str, api: str) -> tuple[list[Any], bool]:
    """Read an N-Triples / N-Quads file. Returns (statements, is_quads_file).

    Statements of a .nq file are always quads (default-graph lines get the default graph).
    """
    is_quads = ".nq" in path.rsplit("/", 1)[-1]
    f = TermFactory(api)
    out: list[Any] = []
    stmt3, stmt4, dg = f.stmt3, f.stmt4, f.default_graph
    with _open_text(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line[0] == "#":
                continue
            try:
                s, pos = _parse_term(line, 0, f)
                p, pos = _parse_term(line, pos, f)
                o, pos = _parse_term(line, pos, f)
                g = None
                if line[pos : pos + 1] != ".":
                    g, pos = _parse_term(line, pos, f)
                if line[pos : pos + 1] != ".":
                    raise ValueError(f"expected '.' at column {pos}")
                rest = line[pos + 1 :].strip()
                if rest and rest[0] != "#":
                    raise ValueError(f"trailing garbage at column {pos + 1}")
            except (ValueError, IndexError) as e:
                raise SystemExit(f"{path}:{lineno}: parse error: {e}") from None
            if g is not None and not is_quads:
                raise SystemExit(f"{path}:{lineno}: graph term in an N-Triples file")
            if is_quads:
                out.append(stmt4(s, p, o, dg if g is None else g))
            else:
                out.append(stmt3(s, p, o))
    return out, is_quads


# ---------------------------------------------------------------------------
# N-Triples / N-Quads writing (own serializer, canonical-style escaping)
# ---------------------------------------------------------------------------

# Characters that must be \u-escaped in an IRIREF (RDF 1.1 N-Triples grammar).
_IRI_BAD_RE = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_LIT_ESC_RE = re.compile(r'[\x00-\x1f"\\\x7f]')
_LIT_ESC = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_BNODE_OK_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?\Z")
_LANG_OK_RE = re.compile(r"[A-Za-z]+(?:-[A-Za-z0-9]+)*(?:--[A-Za-z]+)?\Z")


def _iri_sub(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04X}"


def _lit_sub(m: re.Match[str]) -> str:
    c = m.group(0)
    e = _LIT_ESC.get(c)
    return e if e is not None else f"\\u{ord(c):04X}"


def nt_iri(value: str) -> str:
    if _IRI_BAD_RE.search(value):
        value = _IRI_BAD_RE.sub(_iri_sub, value)
    return f"<{value}>"


def nt_bnode(label: str) -> str:
    # Jelly allows arbitrary bnode labels; N-Triples does not. Labels that are already
    # valid (and do not start with the reserved "x_") are kept, the rest are hex-encoded
    # injectively as "x_<utf8-hex>".
    if _BNODE_OK_RE.match(label) and not label.startswith("x_"):
        return "_:" + label
    return "_:x_" + label.encode("utf-8").hex()


def nt_literal(lex: str, lang: str | None, dt: str | None) -> str:
    if _LIT_ESC_RE.search(lex):
        lex = _LIT_ESC_RE.sub(_lit_sub, lex)
    if lang:
        if not _LANG_OK_RE.match(lang):
            raise ValueError(f"invalid language tag {lang!r}")
        return f'"{lex}"@{lang}'
    if dt and dt != XSD_STRING:
        return f'"{lex}"^^{nt_iri(dt)}'
    return f'"{lex}"'


class NtWriter:
    """Turns generic or rdflib terms into N-Triples / N-Quads text."""

    def __init__(self) -> None:
        self._iri_cache: dict[str, str] = {}
        self._rdflib: Any = None
        try:
            import rdflib  # noqa: PLC0415

            self._rdflib = rdflib
        except ImportError:  # pragma: no cover
            pass

    def term(self, t: Any) -> str:
        if isinstance(t, IRI):
            v = t._iri
            r = self._iri_cache.get(v)
            if r is None:
                if len(self._iri_cache) > 200_000:
                    self._iri_cache.clear()
                r = self._iri_cache[v] = nt_iri(v)
            return r
        if isinstance(t, Literal):
            return nt_literal(t._lex, t._langtag, t._datatype)
        if isinstance(t, BlankNode):
            return nt_bnode(t._identifier)
        if isinstance(t, tuple) and len(t) == 3:  # quoted triple (generic Triple)
            return f"<< {self.term(t[0])} {self.term(t[1])} {self.term(t[2])} >>"
        rl = self._rdflib
        if rl is not None:
            if isinstance(t, rl.URIRef):
                return nt_iri(str(t))
            if isinstance(t, rl.BNode):
                return nt_bnode(str(t))
            if isinstance(t, rl.Literal):
                dt = str(t.datatype) if t.datatype is not None else None
                return nt_literal(str(t), t.language, dt)
            if isinstance(t, rl.graph.Graph):
                return self.term(t.identifier)
        raise TypeError(f"cannot serialize term {t!r}")

    def is_default_graph(self, g: Any) -> bool:
        if g is None or g is DefaultGraph:
            return True
        rl = self._rdflib
        if rl is not None:
            if isinstance(g, rl.graph.Graph):
                g = g.identifier
            return g == rl.graph.DATASET_DEFAULT_GRAPH_ID
        return False

    def statement(self, st: Any) -> str:
        if len(st) == 4 and not self.is_default_graph(st[3]):
            return f"{self.term(st[0])} {self.term(st[1])} {self.term(st[2])} {self.term(st[3])} .\n"
        return f"{self.term(st[0])} {self.term(st[1])} {self.term(st[2])} .\n"


# ---------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------

_PHYSICAL = {
    "triples": jelly.PHYSICAL_STREAM_TYPE_TRIPLES,
    "quads": jelly.PHYSICAL_STREAM_TYPE_QUADS,
    "graphs": jelly.PHYSICAL_STREAM_TYPE_GRAPHS,
}


def _features(statements: list[Any], api: str) -> tuple[bool, bool]:
    """Return (rdf_star, generalized) for the loaded statements."""
    if api == "generic":
        node_types: tuple[type, ...] = (IRI, BlankNode, Literal)
        iri_t: type = IRI
        bn_t: type = BlankNode
        lit_t: type = Literal
    else:
        import rdflib  # noqa: PLC0415

        iri_t, bn_t, lit_t = rdflib.URIRef, rdflib.BNode, rdflib.Literal
        node_types = (iri_t, bn_t, lit_t)
    star = gen = False

    def visit(s: Any, p: Any, o: Any) -> None:
        nonlocal star, gen
        if not isinstance(p, iri_t) or isinstance(s, lit_t):
            gen = True
        for t in (s, o):
            if not isinstance(t, node_types):
                star = True
                visit(*t[:3])

    for st in statements:
        s, p, o = st[0], st[1], st[2]
        if type(s) is iri_t and type(p) is iri_t and type(o) in node_types:
            continue
        visit(s, p, o)
        if len(st) == 4 and isinstance(st[3], lit_t):
            gen = True
    return star, gen


def _group_by_graph(statements: list[Any], factory: Callable[[Any], Any]) -> Iterator[Any]:
    """Split consecutive quads by graph name; each run becomes one sink."""
    cur_g: Any = object()
    sink: Any = None
    for st in statements:
        g = st[3]
        if sink is None or g != cur_g:
            if sink is not None:
                yield sink
            cur_g = g
            sink = factory(g)
        sink.add(st)
    if sink is not None:
        yield sink


class Encoder:
    def __init__(
        self,
        *,
        api: str,
        preset: str,
        rows_per_frame: int,
        physical: str,
        grouped_per_graph: bool,
        rdf_star: bool,
        generalized: bool,
        stream_name: str = "",
    ) -> None:
        self.api = api
        self.physical = physical
        self.grouped = grouped_per_graph
        names, prefixes, datatypes = PRESETS[preset]
        if grouped_per_graph:
            logical = jelly.LOGICAL_STREAM_TYPE_DATASETS
        elif physical == "triples":
            logical = jelly.LOGICAL_STREAM_TYPE_FLAT_TRIPLES
        else:
            logical = jelly.LOGICAL_STREAM_TYPE_FLAT_QUADS
        self.options_factory = lambda: SerializerOptions(
            frame_size=rows_per_frame,
            logical_type=logical,
            params=StreamParameters(
                generalized_statements=generalized,
                rdf_star=rdf_star,
                stream_name=stream_name,
            ),
            lookup_preset=LookupPreset(
                max_names=names, max_prefixes=prefixes, max_datatypes=datatypes
            ),
        )

    def _stream(self, options: SerializerOptions) -> Any:
        from pyjelly.serialize.streams import stream_for_type  # noqa: PLC0415

        cls = stream_for_type(_PHYSICAL[self.physical])
        if self.api == "generic":
            from pyjelly.integrations.generic.serialize import (  # noqa: PLC0415
                GenericSinkTermEncoder,
            )

            return cls(
                encoder=GenericSinkTermEncoder(lookup_preset=options.lookup_preset),
                options=options,
            )
        return cls.for_rdflib(options)

    def frames(self, statements: list[Any]) -> Iterator[jelly.RdfStreamFrame]:
        options = self.options_factory()
        stream = self._stream(options)
        if self.api == "generic":
            from pyjelly.integrations.generic.serialize import stream_frames  # noqa: PLC0415
        else:
            from pyjelly.integrations.rdflib.serialize import stream_frames  # noqa: PLC0415

        if self.grouped:
            if self.api == "generic":
                for sink in _group_by_graph(statements, lambda g: GenericStatementSink(identifier=g)):
                    yield from stream_frames(stream, sink)
            else:
                if self.physical == "graphs":
                    raise SystemExit("--api rdflib: --grouped-per-graph supports --physical quads only")
                for run in _group_by_graph(statements, lambda g: _Run()):
                    yield from stream_frames(stream, (x for x in run.items))
            return

        if self.physical == "triples" and statements and len(statements[0]) == 4:
            data: Iterable[Any] = _quads_as_triples(statements, self.api)
        elif self.physical != "triples" and statements and len(statements[0]) == 3:
            data = _triples_as_quads(statements, self.api)
        else:
            data = statements
        yield from stream_frames(stream, (x for x in data))


class _Run:
    """A run of quads with the same graph name."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, st: Any) -> None:
        self.items.append(st)


def _quads_as_triples(statements: list[Any], api: str) -> Iterator[Any]:
    w = NtWriter()
    for st in statements:
        if not w.is_default_graph(st[3]):
            raise SystemExit("--physical triples: input has a named-graph quad; use quads/graphs")
        yield Triple(st[0], st[1], st[2]) if api == "generic" else st[:3]


def _triples_as_quads(statements: list[Any], api: str) -> Iterator[Any]:
    if api == "generic":
        for st in statements:
            yield Quad(st[0], st[1], st[2], DefaultGraph)
    else:
        import rdflib  # noqa: PLC0415

        dg = rdflib.graph.DATASET_DEFAULT_GRAPH_ID
        for st in statements:
            yield (st[0], st[1], st[2], dg)


def _make_encoder(args: argparse.Namespace, statements: list[Any], is_quads: bool) -> Encoder:
    physical = args.physical or ("quads" if is_quads else "triples")
    if args.grouped_per_graph and physical == "triples":
        raise SystemExit("--grouped-per-graph needs quads input / --physical quads|graphs")
    if physical == "graphs" and args.api != "generic":
        raise SystemExit("--physical graphs is only supported with --api generic")
    if args.grouped_per_graph and not is_quads:
        raise SystemExit("--grouped-per-graph needs an N-Quads input")
    star, gen = _features(statements, args.api)
    return Encoder(
        api=args.api,
        preset=args.preset,
        rows_per_frame=args.rows_per_frame,
        physical=physical,
        grouped_per_graph=args.grouped_per_graph,
        rdf_star=star,
        generalized=gen,
        stream_name=args.stream_name,
    )


def _load(args: argparse.Namespace) -> tuple[list[Any], bool]:
    if args.api == "rdflib" and args.rdflib_parser:
        return _load_with_rdflib(args.input)
    return read_statements(args.input, args.api)


def _load_with_rdflib(path: str) -> tuple[list[Any], bool]:
    import rdflib  # noqa: PLC0415

    _rdflib_no_normalize()
    is_quads = ".nq" in path.rsplit("/", 1)[-1]
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as fh:  # noqa: SIM115
        data = fh.read()
    if is_quads:
        ds = rdflib.Dataset()
        ds.parse(data=data, format="nquads")
        return [(s, p, o, g) for s, p, o, g in ds.quads((None, None, None, None))], True
    g = rdflib.Graph()
    g.parse(data=data, format="nt")
    return list(g), False


def cmd_to_jelly(args: argparse.Namespace) -> None:
    statements, is_quads = _load(args)
    enc = _make_encoder(args, statements, is_quads)
    n_frames = 0
    with open(args.output, "wb") as out:
        for frame in enc.frames(statements):
            write_delimited(frame, out)
            n_frames += 1
    print(
        json.dumps({"tool": "pyjelly", "op": "to-jelly", "statements": len(statements), "frames": n_frames}),
        file=sys.stderr,
    )


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


_NS_DECODER: Any = None


def _ns_safe_decoder_class() -> Any:
    """pyjelly's Decoder with a working namespace-declaration handler.

    pyjelly 0.8.2 (mypyc build): Decoder.decode_namespace_declaration passes the already
    decoded IRI *object* to adapter.namespace_declaration, whose compiled signature wants
    a str -> "TypeError: str object expected; got ...generic_sink.IRI" on any stream that
    has namespace rows (version 2).  Override it in an interpreted subclass (allowed by
    mypyc_attr(allow_interpreted_subclasses=True)); the IRI is still decoded so the
    prefix/name "previous index" state stays correct.
    """
    global _NS_DECODER  # noqa: PLW0603
    if _NS_DECODER is None:
        from pyjelly.parse.decode import Decoder  # noqa: PLC0415

        class NsSafeDecoder(Decoder):  # type: ignore[misc, valid-type]
            def decode_namespace_declaration(self, declaration: Any) -> Any:
                iri = self.decode_iri(declaration.value)
                return Prefix(declaration.name, iri)

        _NS_DECODER = NsSafeDecoder
    return _NS_DECODER


def _generic_flat(inp: IO[bytes]) -> Iterator[Any]:
    """Flat decode with pyjelly's generic adapters (namespace declarations dropped)."""
    from pyjelly.integrations.generic.parse import (  # noqa: PLC0415
        GenericGraphsAdapter,
        GenericQuadsAdapter,
        GenericTriplesAdapter,
    )

    options, frames = get_options_and_frames(inp)
    pt = options.stream_types.physical_type
    if pt == jelly.PHYSICAL_STREAM_TYPE_TRIPLES:
        adapter: Any = GenericTriplesAdapter(options)
    elif pt == jelly.PHYSICAL_STREAM_TYPE_QUADS:
        adapter = GenericQuadsAdapter(options)
    elif pt == jelly.PHYSICAL_STREAM_TYPE_GRAPHS:
        adapter = GenericGraphsAdapter(options)
    else:
        raise SystemExit(f"unsupported physical stream type {pt}")
    decoder = _ns_safe_decoder_class()(adapter=adapter)
    for frame in frames:
        for item in decoder.iter_rows(frame):
            if isinstance(item, Prefix):
                continue
            yield item


def iter_decoded(inp: IO[bytes], api: str) -> Iterator[Any]:
    """Yield decoded statements (namespace declarations are dropped)."""
    if api == "generic":
        yield from _generic_flat(inp)
    else:
        _rdflib_no_normalize()
        from pyjelly.integrations.rdflib.parse import Prefix as RPrefix  # noqa: PLC0415
        from pyjelly.integrations.rdflib.parse import parse_jelly_flat as rparse  # noqa: PLC0415

        for item in rparse(inp):
            if isinstance(item, RPrefix):
                continue
            yield item


def cmd_from_jelly(args: argparse.Namespace) -> None:
    w = NtWriter()
    n = 0
    with open(args.input, "rb") as inp, open(args.output, "w", encoding="utf-8", newline="\n") as out:
        buf: list[str] = []
        for st in iter_decoded(inp, args.api):
            buf.append(w.statement(st))
            n += 1
            if len(buf) >= 8192:
                out.write("".join(buf))
                buf.clear()
        out.write("".join(buf))
    print(json.dumps({"tool": "pyjelly", "op": "from-jelly", "statements": n}), file=sys.stderr)


# ---------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------


def _bench_loop(fn: Callable[[], tuple[int, int]], seconds: float) -> tuple[int, int, int, float]:
    fn()  # warm-up
    iters = 0
    total_stmts = 0
    t0 = time.perf_counter()
    while True:
        stmts, nbytes = fn()
        iters += 1
        total_stmts += stmts
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return iters, total_stmts, nbytes, elapsed


def _report(op: str, args: argparse.Namespace, stmts_per_iter: int, iters: int, total: int,
            nbytes: int, elapsed: float, extra: dict[str, Any]) -> None:
    rec = {
        "tool": "pyjelly",
        "op": op,
        "statements": stmts_per_iter,
        "seconds": round(elapsed, 6),
        "stmts_per_sec": round(total / elapsed, 1) if elapsed > 0 else None,
        "bytes": nbytes,
        "iterations": iters,
        "api": args.api,
    }
    rec.update(extra)
    print(json.dumps(rec))


def cmd_bench_encode(args: argparse.Namespace) -> None:
    statements, is_quads = _load(args)
    enc = _make_encoder(args, statements, is_quads)

    def once() -> tuple[int, int]:
        out = io.BytesIO()
        for frame in enc.frames(statements):
            write_delimited(frame, out)
        return len(statements), out.tell()

    iters, total, nbytes, elapsed = _bench_loop(once, args.seconds)
    _report("encode", args, len(statements), iters, total, nbytes, elapsed,
            {"preset": args.preset, "rows_per_frame": args.rows_per_frame,
             "physical": enc.physical, "grouped_per_graph": args.grouped_per_graph,
             "input": args.input})


def cmd_bench_decode(args: argparse.Namespace) -> None:
    with open(args.input, "rb") as fh:
        data = fh.read()

    def once() -> tuple[int, int]:
        n = 0
        for _ in iter_decoded(io.BytesIO(data), args.api):
            n += 1
        return n, len(data)

    n, _ = once()
    iters, total, nbytes, elapsed = _bench_loop(once, args.seconds)
    _report("decode", args, n, iters, total, nbytes, elapsed, {"input": args.input})


# ---------------------------------------------------------------------------
# Frame dump
# ---------------------------------------------------------------------------


def _enum_name(enum: Any, value: int) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def cmd_dump_frames(args: argparse.Namespace) -> None:
    with open(args.input, "rb") as inp:
        # pyjelly's own reader: delimited/non-delimited autodetection and options
        # taken from the first non-empty frame.
        parser_options, frames = get_options_and_frames(inp)
        first_options = None
        count = 0
        for idx, frame in enumerate(frames):
            if first_options is None:
                for row in frame.rows:
                    if row.WhichOneof("row") == "options":
                        first_options = row.options
                        break
                if first_options is not None:
                    o = first_options
                    print(json.dumps({
                        "type": "options",
                        "frame": idx,
                        "delimited": parser_options.params.delimited,
                        "physical_type": _enum_name(jelly.PhysicalStreamType, o.physical_type),
                        "logical_type": _enum_name(jelly.LogicalStreamType, o.logical_type),
                        "physical_type_value": o.physical_type,
                        "logical_type_value": o.logical_type,
                        "max_name_table_size": o.max_name_table_size,
                        "max_prefix_table_size": o.max_prefix_table_size,
                        "max_datatype_table_size": o.max_datatype_table_size,
                        "version": o.version,
                        "stream_name": o.stream_name,
                        "generalized_statements": o.generalized_statements,
                        "rdf_star": o.rdf_star,
                    }))
            kinds: dict[str, int] = {}
            for row in frame.rows:
                k = row.WhichOneof("row") or "unset"
                kinds[k] = kinds.get(k, 0) + 1
            print(json.dumps({
                "type": "frame",
                "frame": idx,
                "rows": len(frame.rows),
                "row_kinds": kinds,
                "metadata": {k: frame.metadata[k].hex() for k in sorted(frame.metadata)},
            }))
            count += 1
        print(json.dumps({"type": "end", "frames": count}))


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def _add_api(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api", choices=("generic", "rdflib"), default="generic",
                   help="pyjelly integration to use (default: generic, no rdflib)")


def _add_encode_opts(p: argparse.ArgumentParser, *, rows_default: int, preset_default: str) -> None:
    p.add_argument("--rows-per-frame", type=int, default=rows_default,
                   help="target rows per frame (pyjelly closes a frame once it has >= N rows)")
    p.add_argument("--preset", choices=tuple(PRESETS), default=preset_default,
                   help="big = 4000/150/32, small = 128/16/16 (name/prefix/datatype tables)")
    p.add_argument("--physical", choices=("triples", "quads", "graphs"), default=None,
                   help="physical stream type (default: triples for .nt, quads for .nq)")
    p.add_argument("--grouped-per-graph", action="store_true",
                   help="N-Quads only: one frame per run of consecutive quads with the same "
                        "graph name (logical type DATASETS)")
    p.add_argument("--stream-name", default="", help="stream_name option to write")
    p.add_argument("--rdflib-parser", action="store_true",
                   help="with --api rdflib: parse the input with rdflib instead of the built-in parser")
    _add_api(p)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="pyjelly_peer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("to-jelly", help="N-Triples/N-Quads -> delimited Jelly")
    p.add_argument("input")
    p.add_argument("output")
    _add_encode_opts(p, rows_default=256, preset_default="big")
    p.set_defaults(fn=cmd_to_jelly)

    p = sub.add_parser("from-jelly", help="Jelly (delimited or not) -> N-Quads / N-Triples")
    p.add_argument("input")
    p.add_argument("output")
    _add_api(p)
    p.set_defaults(fn=cmd_from_jelly)

    p = sub.add_parser("bench-encode", help="encode throughput (data pre-loaded)")
    p.add_argument("input")
    p.add_argument("--seconds", type=float, default=5.0)
    _add_encode_opts(p, rows_default=512, preset_default="big")
    p.set_defaults(fn=cmd_bench_encode)

    p = sub.add_parser("bench-decode", help="decode throughput (file pre-loaded)")
    p.add_argument("input")
    p.add_argument("--seconds", type=float, default=5.0)
    _add_api(p)
    p.set_defaults(fn=cmd_bench_decode)

    p = sub.add_parser("dump-frames", help="print frames, metadata and stream options as JSON lines")
    p.add_argument("input")
    p.set_defaults(fn=cmd_dump_frames)

    args = ap.parse_args(argv)
    try:
        args.fn(args)
    except BrokenPipeError:  # e.g. `dump-frames x | head`
        sys.stderr.close()


if __name__ == "__main__":
    main()
