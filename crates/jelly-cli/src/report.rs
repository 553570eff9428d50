//! A tiny value tree written as YAML or JSON (for `inspect`).

use std::fmt::Write as _;

/// A report value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(Vec<(String, Value)>),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// Builds a map from pairs.
pub fn map(pairs: Vec<(&str, Value)>) -> Value {
    Value::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn float(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        "null".into()
    }
}

/// Pretty JSON.
pub fn to_json(v: &Value) -> String {
    let mut out = String::new();
    json(v, 0, &mut out);
    out.push('\n');
    out
}

fn json(v: &Value, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent + 1);
    let end = "  ".repeat(indent);
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&float(*f)),
        Value::Str(s) => json_str(out, s),
        Value::List(items) if items.is_empty() => out.push_str("[]"),
        Value::Map(items) if items.is_empty() => out.push_str("{}"),
        Value::List(items) => {
            out.push_str("[\n");
            for (i, it) in items.iter().enumerate() {
                out.push_str(&pad);
                json(it, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&end);
            out.push(']');
        }
        Value::Map(items) => {
            out.push_str("{\n");
            for (i, (k, it)) in items.iter().enumerate() {
                out.push_str(&pad);
                json_str(out, k);
                out.push_str(": ");
                json(it, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&end);
            out.push('}');
        }
    }
}

/// Block-style YAML.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Map(_) | Value::List(_) => yaml_block(v, 0, &mut out),
        other => {
            out.push_str(&yaml_scalar(other));
            out.push('\n');
        }
    }
    out
}

fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => {
            if f.is_finite() {
                float(*f)
            } else {
                ".nan".into()
            }
        }
        Value::Str(s) => {
            // Plain scalars only when unambiguous; JSON strings are valid YAML.
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                && s.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
                );
            if plain {
                s.clone()
            } else {
                let mut o = String::new();
                json_str(&mut o, s);
                o
            }
        }
        Value::List(l) if l.is_empty() => "[]".into(),
        Value::Map(m) if m.is_empty() => "{}".into(),
        _ => String::new(),
    }
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::List(l) => !l.is_empty(),
        Value::Map(m) => !m.is_empty(),
        _ => false,
    }
}

fn yaml_block(v: &Value, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    match v {
        Value::Map(items) => {
            for (k, it) in items {
                out.push_str(&pad);
                out.push_str(k);
                out.push(':');
                if is_block(it) {
                    out.push('\n');
                    yaml_block(it, indent + 1, out);
                } else {
                    out.push(' ');
                    out.push_str(&yaml_scalar(it));
                    out.push('\n');
                }
            }
        }
        Value::List(items) => {
            for it in items {
                out.push_str(&pad);
                out.push_str("- ");
                if let Value::Map(m) = it
                    && !m.is_empty()
                {
                    // First key on the dash line, the rest indented under it.
                    let mut sub = String::new();
                    yaml_block(it, indent + 1, &mut sub);
                    let trimmed = sub.trim_start_matches(' ');
                    out.push_str(trimmed);
                    continue;
                }
                if is_block(it) {
                    out.push('\n');
                    yaml_block(it, indent + 1, out);
                } else {
                    out.push_str(&yaml_scalar(it));
                    out.push('\n');
                }
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&yaml_scalar(other));
            out.push('\n');
        }
    }
}

/// One item of a list that is the value of a key of the top-level map, as
/// [`to_json`] or [`to_yaml`] would write it there, so that a long list can be written
/// item by item instead of being held whole (`first`: no separator before it).
pub fn top_list_item(v: &Value, first: bool, json: bool) -> String {
    let mut out = String::new();
    if json {
        // `json` of the list at indent 1: items at indent 2, each after ",\n" but the first.
        if !first {
            out.push_str(",\n");
        }
        out.push_str(&"  ".repeat(2));
        self::json(v, 2, &mut out);
    } else {
        // A one-item list renders its item exactly as a longer list does.
        yaml_block(&Value::List(vec![v.clone()]), 1, &mut out);
    }
    out
}

/// Splits the text of `report`, a map whose last value is an empty list that stands
/// for `items` items written with [`top_list_item`], into what comes before the items
/// and what comes after them. With no items, the text is `report`'s own (`[]`).
pub fn around_top_list(report: &Value, items: u64, json: bool) -> (String, String) {
    let text = if json {
        to_json(report)
    } else {
        to_yaml(report)
    };
    if items == 0 {
        return (text, String::new());
    }
    let (suffix, open, close) = if json {
        ("[]\n}\n", "[\n", "\n  ]\n}\n")
    } else {
        (" []\n", "\n", "")
    };
    match text.strip_suffix(suffix) {
        Some(head) => (format!("{head}{open}"), close.to_string()),
        // Not a map ending in an empty list: nothing to fill in.
        None => (text, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_shapes() {
        let v = map(vec![
            ("a", 1u64.into()),
            ("b", "x y".into()),
            (
                "l",
                Value::List(vec![map(vec![("i", 0u64.into()), ("j", true.into())])]),
            ),
        ]);
        assert_eq!(to_yaml(&v), "a: 1\nb: \"x y\"\nl:\n  - i: 0\n    j: true\n");
        assert!(to_json(&v).contains("\"l\": [\n    {\n      \"i\": 0,"));
    }

    /// A list written item by item is byte for byte the list written whole, for 0, 1
    /// and several items (inspect --per-frame relies on it).
    #[test]
    fn streamed_top_list_matches_whole_list() {
        let item = |i: u64| {
            map(vec![
                ("index", i.into()),
                (
                    "rows",
                    map(vec![("total", 3u64.into()), ("name", 0u64.into())]),
                ),
            ])
        };
        for n in [0u64, 1, 3] {
            let whole = map(vec![
                ("file", "x.jelly".into()),
                ("o", map(vec![("a", Value::Null)])),
                ("detail", Value::List((0..n).map(item).collect())),
            ]);
            let empty = map(vec![
                ("file", "x.jelly".into()),
                ("o", map(vec![("a", Value::Null)])),
                ("detail", Value::List(vec![])),
            ]);
            for json in [false, true] {
                let (head, tail) = around_top_list(&empty, n, json);
                let items: String = (0..n)
                    .map(|i| top_list_item(&item(i), i == 0, json))
                    .collect();
                let want = if json {
                    to_json(&whole)
                } else {
                    to_yaml(&whole)
                };
                assert_eq!(format!("{head}{items}{tail}"), want, "n={n} json={json}");
            }
        }
    }
}
