//! Which content coding a response uses: HTTP `Accept-Encoding` and gRPC
//! `grpc-accept-encoding` negotiation.

/// A content coding the server can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// No compression.
    Identity,
    /// gzip (RFC 1952): one member per response.
    Gzip,
    /// Zstandard (RFC 8878): a sequence of frames.
    Zstd,
    /// Brotli (RFC 7932): one stream per response.
    Brotli,
}

/// Compressed codings in the server's order of preference, used to break ties
/// between equal q-values: zstd is the cheapest to produce per byte saved, brotli
/// compresses best, gzip is the fallback every client has.
const SERVER_PREFERENCE: [Encoding; 3] = [Encoding::Zstd, Encoding::Brotli, Encoding::Gzip];

/// q-values in thousandths (RFC 9110 allows at most three decimals), so they
/// compare exactly.
pub(crate) type QValue = u16;
const Q_MAX: QValue = 1000;

impl Encoding {
    /// Picks the coding for an HTTP response from the request's `Accept-Encoding`.
    ///
    /// Follows RFC 9110 §12.5.3: codings are matched case-insensitively, `q=0` rules a
    /// coding out, `*` stands for every coding not listed by name, and identity is
    /// the fallback. The highest q wins; ties go to the server's preference
    /// (zstd > br > gzip > identity). Identity competes only with the weight the
    /// header gives it (by name or `*`): `gzip;q=0.1` means gzip, while
    /// `gzip;q=0.5, identity` means identity. `x-gzip` counts as gzip. Unknown
    /// codings and entries with a malformed q are ignored. No header, or nothing
    /// acceptable (even `identity;q=0`), gives identity: compression is opt-in, and
    /// an uncompressed body serves a client better than a 406.
    pub fn negotiate(accept_encoding: Option<&str>) -> Encoding {
        let Some(header) = accept_encoding else {
            return Encoding::Identity;
        };
        let mut listed = AcceptedQ::default();
        for entry in header.split(',') {
            let Some((coding, q)) = parse_entry(entry) else {
                continue;
            };
            let slot = match coding {
                Coding::Known(enc) => listed.slot(enc),
                Coding::Any => &mut listed.any,
                Coding::Unknown => continue,
            };
            // A coding listed twice keeps its most favourable weight.
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
        let q_of = |enc: Encoding| -> QValue {
            match (listed.get(enc), listed.any) {
                (Some(q), _) => q,
                (None, Some(any)) => any,
                (None, None) => 0,
            }
        };
        let mut best = (Encoding::Identity, q_of(Encoding::Identity));
        for enc in SERVER_PREFERENCE.into_iter().rev() {
            let q = q_of(enc);
            if q > 0 && q >= best.1 {
                best = (enc, q);
            }
        }
        best.0
    }

    /// The `Content-Encoding` header value; `None` for identity (no header).
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Zstd => Some("zstd"),
            Encoding::Brotli => Some("br"),
        }
    }

    /// Picks the message coding for a gRPC response from the request's
    /// `grpc-accept-encoding` (a comma-separated list without weights). Only gzip
    /// and zstd are gRPC codings the server sends; zstd is preferred.
    pub fn from_grpc(grpc_accept_encoding: Option<&str>) -> Encoding {
        let mut gzip = false;
        for name in grpc_accept_encoding.unwrap_or("").split(',') {
            let name = name.trim();
            if name.eq_ignore_ascii_case("zstd") {
                return Encoding::Zstd;
            }
            gzip |= name.eq_ignore_ascii_case("gzip");
        }
        if gzip {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The `grpc-encoding` header value; `None` when gRPC messages go uncompressed
    /// (identity, and brotli, which is no gRPC coding).
    pub fn grpc_name(self) -> Option<&'static str> {
        match self {
            Encoding::Gzip => Some("gzip"),
            Encoding::Zstd => Some("zstd"),
            Encoding::Identity | Encoding::Brotli => None,
        }
    }

    /// A short stable name for metrics labels and grouping keys.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Zstd => "zstd",
            Encoding::Brotli => "br",
        }
    }
}

/// The q-values an `Accept-Encoding` header gives, `None` where it says nothing.
#[derive(Default)]
struct AcceptedQ {
    identity: Option<QValue>,
    gzip: Option<QValue>,
    zstd: Option<QValue>,
    brotli: Option<QValue>,
    any: Option<QValue>,
}

impl AcceptedQ {
    fn slot(&mut self, enc: Encoding) -> &mut Option<QValue> {
        match enc {
            Encoding::Identity => &mut self.identity,
            Encoding::Gzip => &mut self.gzip,
            Encoding::Zstd => &mut self.zstd,
            Encoding::Brotli => &mut self.brotli,
        }
    }

    fn get(&self, enc: Encoding) -> Option<QValue> {
        match enc {
            Encoding::Identity => self.identity,
            Encoding::Gzip => self.gzip,
            Encoding::Zstd => self.zstd,
            Encoding::Brotli => self.brotli,
        }
    }
}

enum Coding {
    Known(Encoding),
    Any,
    Unknown,
}

/// One `coding *( OWS ";" OWS param )` entry; `None` when it is empty or its q is
/// malformed.
fn parse_entry(entry: &str) -> Option<(Coding, QValue)> {
    let mut parts = entry.split(';');
    let name = parts.next()?.trim();
    if name.is_empty() {
        return None;
    }
    let coding = if name == "*" {
        Coding::Any
    } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
        Coding::Known(Encoding::Gzip)
    } else if name.eq_ignore_ascii_case("zstd") {
        Coding::Known(Encoding::Zstd)
    } else if name.eq_ignore_ascii_case("br") {
        Coding::Known(Encoding::Brotli)
    } else if name.eq_ignore_ascii_case("identity") {
        Coding::Known(Encoding::Identity)
    } else {
        Coding::Unknown
    };
    let mut q = Q_MAX;
    for param in parts {
        let (key, value) = param.split_once('=')?;
        if key.trim().eq_ignore_ascii_case("q") {
            q = parse_qvalue(value.trim())?;
        }
    }
    Some((coding, q))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths
/// (RFC 9110 §12.4.2); `None` for anything else (`NaN`, `1.5`, `-1`, `.5`).
pub(crate) fn parse_qvalue(s: &str) -> Option<QValue> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: QValue = 0;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += QValue::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(Q_MAX),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Encoding::{self, *};

    fn neg(h: &str) -> Encoding {
        Encoding::negotiate(Some(h))
    }

    #[test]
    fn no_header_or_empty_header_is_identity() {
        assert_eq!(Encoding::negotiate(None), Identity);
        assert_eq!(neg(""), Identity);
        assert_eq!(neg(" , ,"), Identity);
    }

    #[test]
    fn server_preference_breaks_ties() {
        assert_eq!(neg("gzip, deflate, br, zstd"), Zstd);
        assert_eq!(neg("gzip, br"), Brotli);
        assert_eq!(neg("gzip"), Gzip);
        assert_eq!(neg("gzip, identity"), Gzip);
        assert_eq!(neg("*"), Zstd);
    }

    #[test]
    fn q_values_decide_before_preference() {
        assert_eq!(neg("zstd;q=0.5, gzip;q=0.8"), Gzip);
        assert_eq!(neg("zstd;q=0.5, gzip"), Gzip);
        assert_eq!(neg("br;q=0.9, zstd;q=0.899"), Brotli);
        assert_eq!(neg("gzip;q=0.5, identity"), Identity);
        assert_eq!(neg("gzip;q=1.0, br;q=1.000"), Brotli);
        assert_eq!(neg("gzip; q=0.3 ,zstd ; Q = 0.2"), Gzip);
        assert_eq!(neg("gzip;level=9;q=0.4, br;q=0.3"), Gzip);
    }

    #[test]
    fn q_zero_rules_a_coding_out() {
        assert_eq!(neg("zstd;q=0, gzip"), Gzip);
        assert_eq!(neg("zstd;q=0, br;q=0.000, gzip;q=0.001"), Gzip);
        assert_eq!(neg("gzip;q=0"), Identity);
        assert_eq!(
            neg("identity;q=0"),
            Identity,
            "nothing acceptable falls back"
        );
        assert_eq!(neg("identity;q=0, gzip"), Gzip);
    }

    #[test]
    fn star_covers_what_is_not_listed() {
        assert_eq!(neg("*;q=0.5, gzip"), Gzip);
        assert_eq!(neg("*, zstd;q=0"), Brotli);
        assert_eq!(neg("*;q=0"), Identity);
        assert_eq!(neg("*;q=0, br;q=0.1"), Brotli);
        assert_eq!(neg("*;q=0.3, identity;q=0.7"), Identity);
    }

    #[test]
    fn case_insensitive_and_aliases() {
        assert_eq!(neg("GZIP"), Gzip);
        assert_eq!(neg("ZStd;Q=1"), Zstd);
        assert_eq!(neg("Br"), Brotli);
        assert_eq!(neg("x-gzip"), Gzip);
    }

    #[test]
    fn unknown_codings_and_malformed_entries_are_ignored() {
        assert_eq!(neg("deflate, compress, snappy"), Identity);
        assert_eq!(neg("deflate, gzip;q=0.1"), Gzip);
        assert_eq!(neg("zstd;q=2, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q=abc, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q=0.1234, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q=1.5, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q=-1, gzip;q=0.2"), Gzip);
        assert_eq!(neg("zstd;q=0.5;q=, br"), Brotli);
        assert_eq!(neg(";q=1, gzip"), Gzip);
    }

    #[test]
    fn duplicate_entries_keep_the_highest_weight() {
        assert_eq!(neg("zstd;q=0, zstd;q=0.9, gzip;q=0.5"), Zstd);
    }

    #[test]
    fn content_encoding_and_names() {
        assert_eq!(Identity.content_encoding(), None);
        assert_eq!(Gzip.content_encoding(), Some("gzip"));
        assert_eq!(Zstd.content_encoding(), Some("zstd"));
        assert_eq!(Brotli.content_encoding(), Some("br"));
        let names: Vec<_> = [Identity, Gzip, Zstd, Brotli]
            .iter()
            .map(|e| e.name())
            .collect();
        assert_eq!(names, ["identity", "gzip", "zstd", "br"]);
    }

    #[test]
    fn grpc_lists() {
        assert_eq!(Encoding::from_grpc(None), Identity);
        assert_eq!(Encoding::from_grpc(Some("")), Identity);
        assert_eq!(Encoding::from_grpc(Some("identity")), Identity);
        assert_eq!(Encoding::from_grpc(Some("gzip")), Gzip);
        assert_eq!(Encoding::from_grpc(Some("identity,deflate,gzip")), Gzip);
        assert_eq!(Encoding::from_grpc(Some("gzip, zstd")), Zstd);
        assert_eq!(Encoding::from_grpc(Some(" ZSTD ")), Zstd);
        assert_eq!(Encoding::from_grpc(Some("br,snappy")), Identity);
        assert_eq!(Gzip.grpc_name(), Some("gzip"));
        assert_eq!(Zstd.grpc_name(), Some("zstd"));
        assert_eq!(Brotli.grpc_name(), None);
        assert_eq!(Identity.grpc_name(), None);
    }
}
