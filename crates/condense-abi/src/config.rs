//! A stage's `[stage.config]` table: parsed with unknown keys refused, and described (keys,
//! types, defaults, descriptions) from the config struct alone through `#[derive(StageConfig)]`.
//!
//! ```
//! use condense_abi::StageConfig;
//!
//! #[derive(Default, serde::Serialize, serde::Deserialize, StageConfig)]
//! #[serde(default, deny_unknown_fields)]
//! struct Config {
//!     /// Results over this many bytes are cut.
//!     max_bytes: usize,
//! }
//! assert_eq!(Config::KEYS, [("max_bytes", "Results over this many bytes are cut.")]);
//! ```

use crate::sdk::{Stage, StageError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A stage's config type. Derive it (`#[derive(StageConfig)]`): every field is a key, and its
/// `///` doc comment is the key's description (a field without one does not compile). Its
/// `Default` gives the defaults; any key a user writes that is not a field is refused.
pub trait StageConfig: DeserializeOwned + Serialize + Default {
    /// `(key, description)` of every field, in declaration order.
    const KEYS: &'static [(&'static str, &'static str)];
}

/// A stage with no settings.
impl StageConfig for () {
    const KEYS: &'static [(&'static str, &'static str)] = &[];
}

/// One config key, as documented by a plugin's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigKey {
    pub name: String,
    /// TOML type of the default: `integer`, `string`, `boolean`, `array`, `table`, `float`, or
    /// `optional` when the default is unset.
    pub ty: String,
    /// The default as TOML text (empty when there is none).
    pub default: String,
    pub description: String,
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageMetadata {
    pub name: String,
    pub version: String,
    pub description: String,
    pub config_keys: Vec<ConfigKey>,
}

fn toml_type(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "float",
        toml::Value::Boolean(_) => "boolean",
        toml::Value::Datetime(_) => "datetime",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "table",
    }
}

/// The defaults of `C` as a TOML table. A config with no keys has none (`()` serializes to
/// no table at all); for any other, failing to serialize the defaults is an error, never an
/// empty table (which would make every key look optional and let anything through).
fn default_table<C: StageConfig>() -> Result<toml::Table, StageError> {
    if C::KEYS.is_empty() {
        return Ok(toml::Table::new());
    }
    toml::Table::try_from(C::default())
        .map_err(|e| StageError::new(format!("cannot serialize the config defaults: {e}")))
}

/// `C`'s keys in the order they are shown: those with a default first, then the optional ones
/// (unset by default), each group in declaration order.
fn shown_keys<C: StageConfig>(
    defaults: &toml::Table,
) -> impl Iterator<Item = (&'static str, &'static str, Option<&toml::Value>)> {
    let with = C::KEYS
        .iter()
        .filter_map(|(name, doc)| defaults.get(*name).map(|v| (*name, *doc, Some(v))));
    let optional = C::KEYS
        .iter()
        .filter(|(name, _)| !defaults.contains_key(*name))
        .map(|(name, doc)| (*name, *doc, None));
    with.chain(optional)
}

/// The metadata of stage type `S`, built from its constants and its derived config keys.
pub fn metadata_of<S: Stage>(version: &str) -> Result<StageMetadata, StageError> {
    let defaults = default_table::<S::Config>()?;
    let config_keys = shown_keys::<S::Config>(&defaults)
        .map(|(name, description, default)| ConfigKey {
            name: name.to_string(),
            ty: default.map_or("optional", toml_type).to_string(),
            default: default.map(toml::Value::to_string).unwrap_or_default(),
            description: description.to_string(),
        })
        .collect();
    Ok(StageMetadata {
        name: S::NAME.to_string(),
        version: version.to_string(),
        description: S::DESCRIPTION.to_string(),
        config_keys,
    })
}

/// Builds stage `S` from its `[stage.config]` table given as TOML text: the config is parsed
/// with [`parse_config`], then validated by [`Stage::new`]. This is what the host's constructor
/// call runs inside the plugin; the host names the stage in front of any error.
pub fn build_stage<S: Stage>(config_toml: &str) -> Result<S, StageError> {
    S::new(parse_config::<S::Config>(config_toml)?)
}

/// Parses a `[stage.config]` table given as TOML text into `C`, refusing keys that are not
/// fields of `C`.
pub fn parse_config<C: StageConfig>(toml_text: &str) -> Result<C, StageError> {
    let table: toml::Table = toml::from_str(toml_text)
        .map_err(|e| StageError::new(format!("config is not valid TOML: {}", e.message())))?;
    let mut unknown: Vec<&str> = table
        .keys()
        .map(String::as_str)
        .filter(|k| !C::KEYS.iter().any(|(known, _)| known == k))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        let defaults = default_table::<C>()?;
        let known: Vec<&str> = shown_keys::<C>(&defaults).map(|(k, _, _)| k).collect();
        return Err(StageError::new(format!(
            "unknown config key{} `{}` (known: {})",
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join("`, `"),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    C::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
        let defaults = default_table::<C>().unwrap_or_else(|_| toml::Table::new());
        StageError::new(crate::config_words::explain::<C>(
            &table,
            &defaults,
            e.message().trim_end(),
        ))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::StageConfig;

    #[derive(Debug, Serialize, Deserialize, StageConfig)]
    #[serde(default, deny_unknown_fields)]
    struct Config {
        /// How many to keep.
        /// Counted per tool.
        keep: usize,
        /// Optional cap.
        cap: Option<usize>,
    }

    impl Default for Config {
        fn default() -> Self {
            Config { keep: 3, cap: None }
        }
    }

    #[derive(Debug, Default, Serialize, Deserialize, StageConfig)]
    #[serde(default, deny_unknown_fields)]
    struct Optional {
        /// Unset by default.
        #[serde(skip_serializing_if = "Option::is_none")]
        last: Option<usize>,
        /// Set by default.
        keep: usize,
    }

    #[test]
    fn keys_come_from_the_fields_and_their_docs() {
        assert_eq!(
            Config::KEYS,
            [
                ("keep", "How many to keep. Counted per tool."),
                ("cap", "Optional cap.")
            ]
        );
    }

    #[test]
    fn only_fields_are_accepted_and_the_error_lists_them() {
        assert_eq!(parse_config::<Config>("keep = 5").unwrap().keep, 5);
        assert_eq!(parse_config::<Config>("cap = 9").unwrap().cap, Some(9));
        assert_eq!(
            parse_config::<Config>("kep = 5\nzz = 1")
                .unwrap_err()
                .message(),
            "unknown config keys `kep`, `zz` (known: keep, cap)"
        );
        assert_eq!(
            parse_config::<()>("x = 1").unwrap_err().message(),
            "unknown config key `x` (known: none)"
        );
        let optional = parse_config::<Optional>("last = 2").unwrap();
        assert_eq!((optional.last, optional.keep), (Some(2), 0));
        // An optional key (unset by default) is listed after the others wherever it stands.
        assert_eq!(
            parse_config::<Optional>("x = 1").unwrap_err().message(),
            "unknown config key `x` (known: keep, last)"
        );
    }

    #[test]
    fn a_wrong_type_is_said_in_words() {
        assert_eq!(
            parse_config::<Config>("keep = \"x\"")
                .unwrap_err()
                .message(),
            "`[stage.config] keep` must be a whole number (0 or more), found \"x\""
        );
    }
}
