//! A rejected `[stage.config]` value, said in words: which key, what it must be, what it is.
//!
//! serde says `invalid type: string "x", expected usize` and names no key, because the config
//! is deserialized as a whole. This module finds the key by trying each of the user's keys
//! alone over the defaults, and turns Rust type names into words a pipeline author knows:
//! `` `[stage.config] keep_recent` must be a whole number (0 or more), found "x" ``. The host
//! finds the key's `file:line:column` in the pipeline file from the backquoted name, so the
//! form `` `[stage.config] KEY` `` is part of the contract (see `condense_host::pipeline`).

use serde::de::DeserializeOwned;

/// The message for a config table that `C` refused with `serde_message`: the first key that
/// is refused on its own (over `defaults`), in words; else serde's own message.
pub(crate) fn explain<C: DeserializeOwned>(
    table: &toml::Table,
    defaults: &toml::Table,
    serde_message: &str,
) -> String {
    for (key, value) in table {
        let mut alone = defaults.clone();
        alone.insert(key.clone(), value.clone());
        if let Err(e) = C::deserialize(toml::Value::Table(alone)) {
            return in_words(key, value, e.message().trim_end());
        }
    }
    serde_message.to_string()
}

/// `` `[stage.config] KEY` must be TYPE, found VALUE `` when serde's message is a type or
/// value mismatch of the key's own value; `` `[stage.config] KEY`: MESSAGE `` otherwise (a
/// nested field, an unknown variant, a custom check).
fn in_words(key: &str, value: &toml::Value, message: &str) -> String {
    let mismatch = message.starts_with("invalid type:") || message.starts_with("invalid value:");
    let expected = message.rsplit_once(", expected ").map(|(_, e)| e.trim());
    match expected.and_then(type_in_words) {
        // A scalar expected but a list or table given could be a nested field's complaint:
        // only say "must be" when the value itself is a scalar or the expected type is not.
        Some(words) if mismatch && (is_scalar(value) || !words.is_scalar) => format!(
            "`[stage.config] {key}` must be {}, found {}",
            words.text,
            found(value)
        ),
        _ => format!("`[stage.config] {key}`: {message}"),
    }
}

struct Words {
    text: &'static str,
    is_scalar: bool,
}

fn type_in_words(expected: &str) -> Option<Words> {
    let scalar = |text| {
        Some(Words {
            text,
            is_scalar: true,
        })
    };
    match expected {
        "usize" | "u8" | "u16" | "u32" | "u64" | "u128" => scalar("a whole number (0 or more)"),
        "isize" | "i8" | "i16" | "i32" | "i64" | "i128" => scalar("a whole number"),
        "f32" | "f64" => scalar("a number"),
        "a boolean" => scalar("true or false"),
        "a string" | "a character" | "a borrowed string" => scalar("text in quotes"),
        "a sequence" => Some(Words {
            text: "a list [...]",
            is_scalar: false,
        }),
        e if e == "a map" || e.starts_with("struct ") => Some(Words {
            text: "a table { ... }",
            is_scalar: false,
        }),
        _ => None,
    }
}

fn is_scalar(v: &toml::Value) -> bool {
    !matches!(v, toml::Value::Array(_) | toml::Value::Table(_))
}

/// The value as written in TOML, cut to something one line can hold.
fn found(v: &toml::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let mut cut: String = s.chars().take(60).collect();
        cut.push('…');
        cut
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, serde::Serialize, Default)]
    #[serde(deny_unknown_fields, default)]
    struct C {
        keep_recent: usize,
        ratio: f64,
        on: bool,
        names: Vec<String>,
        mode: Mode,
    }

    #[derive(Debug, Deserialize, serde::Serialize, Default)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        #[default]
        Fast,
        Slow,
    }

    fn explain_of(text: &str) -> String {
        let table: toml::Table = toml::from_str(text).unwrap();
        let defaults = toml::Table::try_from(C::default()).unwrap();
        let e = C::deserialize(toml::Value::Table(table.clone())).unwrap_err();
        explain::<C>(&table, &defaults, e.message())
    }

    #[test]
    fn names_the_key_and_the_type_in_words() {
        assert_eq!(
            explain_of("keep_recent = \"x\""),
            "`[stage.config] keep_recent` must be a whole number (0 or more), found \"x\""
        );
        assert_eq!(
            explain_of("keep_recent = 3\nratio = 1\non = \"yes\""),
            "`[stage.config] on` must be true or false, found \"yes\""
        );
        assert_eq!(
            explain_of("names = \"a\""),
            "`[stage.config] names` must be a list [...], found \"a\""
        );
        assert_eq!(
            explain_of("keep_recent = -1"),
            "`[stage.config] keep_recent` must be a whole number (0 or more), found -1"
        );
    }

    #[test]
    fn other_complaints_keep_serde_words_with_the_key() {
        let m = explain_of("mode = \"medium\"");
        assert!(
            m.starts_with("`[stage.config] mode`: unknown variant `medium`, expected"),
            "{m}"
        );
        let m = explain_of("names = [1]");
        assert!(
            m.starts_with("`[stage.config] names`: invalid type: integer `1`"),
            "{m}"
        );
    }
}
