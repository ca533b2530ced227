//! JSON helpers shared by every format: taking known keys out of objects, merging `extra` back,
//! content shapes, and serializing in the style of the input.

use crate::error::{Ctx, FormatError};
use condense_model::{Block, Content, ContentShape, RawJson};
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};
use serde_json::Value;
use std::io;

mod value_writer;

pub(crate) type Map = serde_json::Map<String, Value>;
pub(crate) type Result<T> = std::result::Result<T, FormatError>;

/// Keys starting with this prefix in an `extra` are hints a reader left for its writer (e.g. the
/// original OpenAI role `developer`). Writers use them and never write them out.
pub(crate) const HINT_PREFIX: &str = "condense:";
/// Hint: the object's original key order, when the writer's own order would differ.
pub(crate) const HINT_ORDER: &str = "order";

/// `ptr/token`: the JSON pointer one level down. Readers make one for every message and block
/// (an error must be able to name it), so it is built without the formatting machinery.
pub(crate) fn child(ptr: &str, token: &str) -> String {
    let mut out = String::with_capacity(ptr.len() + 1 + token.len());
    out.push_str(ptr);
    out.push('/');
    out.push_str(token);
    out
}

/// `ptr/index`: [`child`] for an array element.
pub(crate) fn child_at(ptr: &str, index: usize) -> String {
    let mut out = String::with_capacity(ptr.len() + 8);
    out.push_str(ptr);
    out.push('/');
    condense_model::push_decimal(&mut out, index);
    out
}

/// Removes a key, keeping the order of the others.
pub(crate) fn take(map: &mut Map, key: &str) -> Option<Value> {
    map.shift_remove(key)
}

/// Removes a key when its value is a string; leaves any other value in place.
/// Takes the value at `key`, leaving a `null` in its place (so the key keeps its position in
/// what is written back); `null` when there is no such key.
pub(crate) fn hollow(map: &mut Map, key: &str) -> Value {
    map.get_mut(key).map(Value::take).unwrap_or_default()
}

/// The string itself, or an empty one for any other value.
pub(crate) fn into_string_or_empty(value: Value) -> String {
    match value {
        Value::String(s) => s,
        _ => String::new(),
    }
}

pub(crate) fn take_string(map: &mut Map, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(_)) => match map.shift_remove(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// Removes a required string key, or explains what is wrong with it.
pub(crate) fn require_string(map: &mut Map, key: &str, ctx: &Ctx<'_>, ptr: &str) -> Result<String> {
    match map.get(key) {
        Some(Value::String(_)) => Ok(take_string(map, key).unwrap_or_default()),
        Some(other) => Err(ctx.unexpected(&format!("{ptr}/{key}"), "a string", other)),
        None => Err(ctx.missing(ptr, &format!("a string `{key}`"))),
    }
}

/// The value as an object, or an error naming what it is.
pub(crate) fn into_object(value: Value, ctx: &Ctx<'_>, ptr: &str, expected: &str) -> Result<Map> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ctx.unexpected(ptr, expected, &other)),
    }
}

/// Whether a value is an object holding this key.
pub(crate) fn has_key(value: &Value, key: &str) -> bool {
    value.as_object().is_some_and(|m| m.contains_key(key))
}

/// The string at `key` of an object value.
pub(crate) fn str_at<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// `data:<media type>;base64,<data>` → (media type, data). Joining them back gives the same URL.
pub(crate) fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let cut = rest.find(";base64,")?;
    Some((&rest[..cut], &rest[cut + ";base64,".len()..]))
}

/// Parses raw JSON text from the model, naming the owner on failure.
pub(crate) fn raw_value(raw: &RawJson, at: &dyn Fn() -> String) -> Result<Value> {
    raw.to_value().map_err(|e| FormatError::Write {
        at: at(),
        reason: format!("raw JSON does not parse: {e}"),
    })
}

/// Parses an `extra` or `envelope` as an object of fields.
pub(crate) fn raw_map(raw: &RawJson, at: &dyn Fn() -> String) -> Result<Map> {
    raw.to_map().map_err(|e| FormatError::Write {
        at: at(),
        reason: format!("extra fields are not a JSON object: {e}"),
    })
}

/// Merges `extra` into an object being written. Fields the writer already set win (the model is
/// the truth for what it maps); nested objects merge key by key; hint keys are dropped, and an
/// order hint (see [`remember_order`]) puts the keys back in their original order.
pub(crate) fn merge_extra(obj: &mut Map, extra: &RawJson, at: &dyn Fn() -> String) -> Result<()> {
    if extra.is_empty() {
        return Ok(());
    }
    merge_fields(obj, raw_map(extra, at)?);
    Ok(())
}

/// [`merge_extra`] for an `extra` already parsed (e.g. to take hints out of it first).
pub(crate) fn merge_fields(obj: &mut Map, extra: Map) {
    merge_into(obj, extra);
}

fn merge_into(obj: &mut Map, extra: Map) {
    let mut order = None;
    for (key, value) in extra {
        if let Some(name) = key.strip_prefix(HINT_PREFIX) {
            if name == HINT_ORDER {
                order = Some(value);
            }
            continue;
        }
        match (obj.get_mut(&key), value) {
            (None, Value::Object(from)) => {
                let mut into = Map::new();
                merge_into(&mut into, from);
                obj.insert(key, Value::Object(into));
            }
            (None, value) => {
                obj.insert(key, value);
            }
            (Some(Value::Object(into)), Value::Object(from)) => merge_into(into, from),
            (Some(_), _) => {}
        }
    }
    if let Some(Value::Array(order)) = order {
        let mut rest = std::mem::take(obj);
        for key in order.iter().filter_map(Value::as_str) {
            if let Some(value) = rest.shift_remove(key) {
                obj.insert(key.to_string(), value);
            }
        }
        obj.extend(rest);
    }
}

/// The keys of an object, in order (taken before a reader takes the known ones out).
pub(crate) fn keys_of(map: &Map) -> Vec<String> {
    map.keys().cloned().collect()
}

/// Records the original key order in `leftover` when the writer, which writes the `known` keys
/// it mapped in that order and then the leftover keys, would not reproduce it. Call it once the
/// reader has taken out every key it maps.
pub(crate) fn remember_order(original: Vec<String>, known: &[&str], leftover: &mut Map) {
    let written = known
        .iter()
        .copied()
        .filter(|k| original.iter().any(|o| o == k) && !leftover.contains_key(*k))
        .chain(
            leftover
                .keys()
                .map(String::as_str)
                .filter(|k| !k.starts_with(HINT_PREFIX)),
        );
    if !written.eq(original.iter().map(String::as_str)) {
        // The keys move into the hint: a Claude Code session hints nearly every assistant
        // message and tool result, and copying the keys was 54 K allocations a read.
        let order = original.into_iter().map(Value::String).collect();
        set_hint(leftover, HINT_ORDER, Value::Array(order));
    }
}

/// The leftover fields of an object as an `extra`, with an order hint when needed (see
/// [`remember_order`]).
pub(crate) fn leftover(original: Vec<String>, known: &[&str], mut map: Map) -> RawJson {
    remember_order(original, known, &mut map);
    RawJson::from_map(map)
}

/// Takes a hint the reader left in a parsed `extra` (see [`HINT_PREFIX`]).
pub(crate) fn take_hint(extra: &mut Map, name: &str) -> Option<Value> {
    extra.shift_remove(&format!("{HINT_PREFIX}{name}"))
}

/// Whether raw fields hold the hint `name` (looked for in the text, without parsing it: a key
/// `"condense:<name>"` appears nowhere else).
pub(crate) fn has_hint(raw: &RawJson, name: &str) -> bool {
    let text = raw.as_str();
    text.match_indices(HINT_PREFIX).any(|(at, _)| {
        let rest = &text[at + HINT_PREFIX.len()..];
        text[..at].ends_with('"') && rest.starts_with(name) && rest[name.len()..].starts_with('"')
    })
}

/// Adds a hint to a map of leftover fields.
pub(crate) fn set_hint(map: &mut Map, name: &str, value: Value) {
    map.insert(format!("{HINT_PREFIX}{name}"), value);
}

/// Reads a content field: absent, null, a string, or an array of blocks.
pub(crate) fn read_content(
    value: Option<Value>,
    ctx: &Ctx<'_>,
    ptr: &str,
    read_block: &mut dyn FnMut(Value, &str) -> Result<Block>,
) -> Result<Content> {
    match value {
        None => Ok(Content::empty(ContentShape::Absent)),
        Some(Value::Null) => Ok(Content::empty(ContentShape::Null)),
        Some(Value::String(s)) => Ok(Content::string(s)),
        Some(Value::Array(items)) => {
            let mut blocks = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                blocks.push(read_block(item, &child_at(ptr, i))?);
            }
            Ok(Content::blocks(blocks))
        }
        Some(other) => {
            Err(ctx.unexpected(ptr, "a string, an array of content blocks or null", &other))
        }
    }
}

/// Writes content in the shape it was read in when the blocks still fit that shape: `None` means
/// "no key". A string shape holding anything but one plain text block falls back to an array.
pub(crate) fn write_content(
    shape: ContentShape,
    blocks: &[&Block],
    write_block: &mut dyn FnMut(&Block) -> Result<Value>,
) -> Result<Option<Value>> {
    // Only a string-shaped write copies the text.
    let plain = || match blocks {
        [] => Some(String::new()),
        [Block::Text(t)] if t.extra.is_empty() => Some(t.text.clone()),
        _ => None,
    };
    let as_array = |write_block: &mut dyn FnMut(&Block) -> Result<Value>| -> Result<Value> {
        let items = blocks
            .iter()
            .map(|b| write_block(b))
            .collect::<Result<Vec<_>>>()?;
        Ok(Value::Array(items))
    };
    Ok(match shape {
        ContentShape::Array => Some(as_array(write_block)?),
        ContentShape::Null if blocks.is_empty() => Some(Value::Null),
        ContentShape::Absent if blocks.is_empty() => None,
        ContentShape::String | ContentShape::Null | ContentShape::Absent => match plain() {
            Some(text) => Some(Value::String(text)),
            None => Some(as_array(write_block)?),
        },
    })
}

/// How the input was laid out, so output looks the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Style {
    /// Indent of pretty-printed input; `None` for compact (and for JSONL).
    pub indent: Option<String>,
    /// The input was pure ASCII (e.g. Python's `ensure_ascii`): escape non-ASCII as `\uXXXX`.
    pub ascii: bool,
    pub trailing_newline: bool,
    /// Compact input with Python's separators: `": "` after keys.
    pub spaced_colon: bool,
    /// Compact input with Python's separators: `", "` between values.
    pub spaced_comma: bool,
}

impl Style {
    /// Detects pretty-printing and its indent width from the input text.
    pub fn detect(text: &str) -> Style {
        let trimmed = text.trim();
        let indent = if crate::lines::first_line_break(trimmed).is_some() {
            let unit = trimmed
                .split('\n')
                .skip(1)
                .map(|line| {
                    line.chars()
                        .take_while(|c| *c == ' ' || *c == '\t')
                        .collect::<String>()
                })
                .find(|ws| !ws.is_empty());
            Some(match unit {
                Some(ws) if ws.starts_with('\t') => "\t".to_string(),
                Some(ws) if ws.len() <= 8 => ws,
                _ => "  ".to_string(),
            })
        } else {
            None
        };
        let (spaced_colon, spaced_comma) = match indent {
            None => crate::scan::spaced_separators(text),
            Some(_) => (false, false),
        };
        Style {
            indent,
            ascii: text.is_ascii(),
            trailing_newline: text.ends_with('\n'),
            spaced_colon,
            spaced_comma,
        }
    }

    /// The style of JSONL input: compact lines (separators as on the first line). Not
    /// [`Style::detect`] of the whole text: every line of JSONL starts with no indent, so its
    /// search for one went through every line (2% of reading a long Claude Code session).
    pub fn lines(text: &str) -> Style {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let (spaced_colon, spaced_comma) = crate::scan::spaced_separators(first);
        Style {
            indent: None,
            ascii: text.is_ascii(),
            trailing_newline: text.ends_with('\n'),
            spaced_colon,
            spaced_comma,
        }
    }

    /// Serializes a value in this style (without the trailing newline) onto `out`.
    pub fn write(&self, value: &Value, out: &mut Vec<u8>) -> Result<()> {
        let res = match (&self.indent, self.ascii) {
            (Some(indent), ascii) => {
                let pretty = PrettyFormatter::with_indent(indent.as_bytes());
                serialize(
                    value,
                    out,
                    Ascii {
                        inner: pretty,
                        ascii,
                        colon: false,
                        comma: false,
                    },
                )
            }
            (None, ascii) => serialize(
                value,
                out,
                Ascii {
                    inner: CompactFormatter,
                    ascii,
                    colon: self.spaced_colon,
                    comma: self.spaced_comma,
                },
            ),
        };
        res.map_err(|e| FormatError::Write {
            at: "output".to_string(),
            reason: e.to_string(),
        })
    }
}

fn serialize<F: Formatter>(value: &Value, out: &mut Vec<u8>, mut fmt: Ascii<F>) -> io::Result<()> {
    let ascii = fmt.ascii;
    value_writer::write_value(value, out, &mut fmt, ascii)
}

/// A formatter that, when `ascii` is set, escapes every non-ASCII character as `\uXXXX` (UTF-16,
/// lowercase hex, as Python writes it), writes `": "` / `", "` when `colon` / `comma` are set
/// (Python's compact default), and otherwise behaves as `inner`.
struct Ascii<F> {
    inner: F,
    ascii: bool,
    colon: bool,
    comma: bool,
}

/// `fragment` with every non-ASCII character escaped as `\\uXXXX` (UTF-16, lowercase hex, as
/// Python writes it).
fn write_ascii_escaped<W: ?Sized + io::Write>(w: &mut W, fragment: &str) -> io::Result<()> {
    if fragment.is_ascii() {
        return w.write_all(fragment.as_bytes());
    }
    let mut start = 0;
    for (i, c) in fragment.char_indices() {
        if c.is_ascii() {
            continue;
        }
        w.write_all(&fragment.as_bytes()[start..i])?;
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            write!(w, "\\u{unit:04x}")?;
        }
        start = i + c.len_utf8();
    }
    w.write_all(&fragment.as_bytes()[start..])
}

macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $name<W: ?Sized + io::Write>(&mut self, w: &mut W $(, $arg: $ty)*) -> io::Result<()> {
                self.inner.$name(w $(, $arg)*)
            }
        )*
    };
}

impl<F: Formatter> Formatter for Ascii<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.ascii {
            return w.write_all(fragment.as_bytes());
        }
        write_ascii_escaped(w, fragment)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        match (self.comma, first) {
            (true, false) => w.write_all(b", "),
            _ => self.inner.begin_array_value(w, first),
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        match (self.comma, first) {
            (true, false) => w.write_all(b", "),
            _ => self.inner.begin_object_key(w, first),
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.colon {
            return w.write_all(b": ");
        }
        self.inner.begin_object_value(w)
    }

    forward! {
        begin_array(),
        end_array(),
        end_array_value(),
        begin_object(),
        end_object(),
        end_object_key(),
        end_object_value(),
    }
}
