//! Where a stage's config keys were written in the pipeline file, so that a config error the
//! plugin reports ("`[stage.config] keep_recent` must be a whole number") can name its
//! `file:line:column`.

/// Where a stage's config keys are in the pipeline file: `(key, line, column)`, plus the
/// stage's own line for errors that name no key. Not part of what a stage means, so every two
/// compare equal (a pipeline printed by `pipeline show` and read back is the same pipeline).
#[derive(Debug, Clone, Default)]
pub struct ConfigLocations {
    pub stage: (usize, usize),
    pub keys: Vec<(String, usize, usize)>,
}

impl PartialEq for ConfigLocations {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The byte offset of the value of `key = value` inside `span` of `text` (a `[stage.config]`
/// table), found by the key at the start of a line or after `{`/`,` of an inline table.
pub(super) fn key_value_offset(
    text: &str,
    mut span: std::ops::Range<usize>,
    key: &str,
) -> Option<usize> {
    // A `[stage.config]` header's span is the header alone: its keys run to the next header.
    if text.get(span.clone())?.starts_with('[') {
        let mut end = text.len();
        let mut at = span.end;
        for line in text[span.end..].split_inclusive('\n') {
            if line.trim_start().starts_with('[') {
                end = at;
                break;
            }
            at += line.len();
        }
        span.end = end;
    }
    let body = text.get(span.clone())?;
    let mut from = 0;
    while let Some(found) = body[from..].find(key) {
        let start = from + found;
        from = start + key.len();
        // Quoted keys: step back over the opening quote.
        let (start, end) = if body[..start].ends_with('"') && body[from..].starts_with('"') {
            (start - 1, from + 1)
        } else {
            (start, from)
        };
        let before = body[..start].trim_end_matches([' ', '\t']);
        let starts_entry = before.is_empty() || before.ends_with(['\n', '{', ',']);
        let rest = body[end..].trim_start_matches([' ', '\t']);
        if starts_entry && rest.starts_with('=') && !rest.starts_with("==") {
            let value = rest[1..].len() - rest[1..].trim_start_matches([' ', '\t']).len();
            return Some(span.start + body.len() - rest.len() + 1 + value);
        }
    }
    None
}
