//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use snip::{Config, Keep, Snip};

/// The stage built from `toml`, or the error's message.
fn build(toml: &str) -> Result<Snip, String> {
    build_stage::<Snip>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.min_duplicate_chars, 200);
    assert_eq!(config.keep, Keep::First);
    assert_eq!(config.max_tool_result_bytes, 4_096);
    assert_eq!(config.keep_tail_bytes, 0);
    assert_eq!(config.protect_recent_turns, 1);
    assert!(config.strip_images);
}

#[test]
fn every_key_can_be_set() {
    let stage = build(
        "min_duplicate_chars = 50\nkeep = \"last\"\nmax_tool_result_bytes = 8192\n\
         keep_tail_bytes = 1024\nprotect_recent_turns = 3\nstrip_images = false",
    )
    .unwrap();
    assert_eq!(
        *stage.config(),
        Config {
            min_duplicate_chars: 50,
            keep: Keep::Last,
            max_tool_result_bytes: 8_192,
            keep_tail_bytes: 1_024,
            protect_recent_turns: 3,
            strip_images: false,
        }
    );
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("max_tool_result_size = 10").unwrap_err(),
        "unknown config key `max_tool_result_size` (known: min_duplicate_chars, keep, \
         max_tool_result_bytes, keep_tail_bytes, protect_recent_turns, strip_images)"
    );
}

#[test]
fn zero_limits_are_rejected() {
    assert_eq!(
        build("max_tool_result_bytes = 0").unwrap_err(),
        "max_tool_result_bytes must be > 0, got 0"
    );
    assert_eq!(
        build("min_duplicate_chars = 0").unwrap_err(),
        "min_duplicate_chars must be > 0, got 0"
    );
    assert!(build("keep_tail_bytes = 0\nprotect_recent_turns = 0").is_ok());
}

#[test]
fn keep_must_be_first_or_last() {
    let err = build("keep = \"middle\"").unwrap_err();
    assert!(
        err.starts_with("`[stage.config] keep`: unknown variant `middle`"),
        "{err}"
    );
    assert!(err.contains("`first`") && err.contains("`last`"), "{err}");
    assert!(build("keep = \"First\"").is_err());
}

#[test]
fn wrong_types_are_rejected() {
    assert!(build("max_tool_result_bytes = \"4k\"").is_err());
    assert!(build("keep_tail_bytes = -1").is_err());
    assert!(build("strip_images = 1").is_err());
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<Snip>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert_eq!(meta.config_keys.len(), 6);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
