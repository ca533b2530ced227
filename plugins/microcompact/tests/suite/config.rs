//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use microcompact::{Config, Microcompact};

/// The stage built from `toml`, or the error's message.
fn build(toml: &str) -> Result<Microcompact, String> {
    build_stage::<Microcompact>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.keep_recent, 3);
    assert_eq!(config.gap_minutes, 60);
    assert_eq!(config.trigger_tokens, 40_000);
    assert_eq!(config.clear_at_least, 20_000);
    assert_eq!(config.min_input_chars, 1_000);
    assert!(!config.clear_tool_inputs && !config.emit_context_management);
    assert!(config.exclude_tools.is_empty());
    for tool in [
        "Read",
        "Bash",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    ] {
        assert!(
            config.compressible_tools.iter().any(|t| t == tool),
            "{tool}"
        );
    }
    assert!(!config.compressible_tools.iter().any(|t| t == "TodoWrite"));
}

#[test]
fn keep_recent_below_one_is_rejected() {
    assert_eq!(
        build("keep_recent = 0").unwrap_err(),
        "keep_recent must be >= 1 (the most recent result always survives), got 0"
    );
    assert!(build("keep_recent = -1").is_err());
    assert!(build("keep_recent = 1").is_ok());
}

#[test]
fn unknown_key_is_rejected() {
    let err = build("keep_last = 3").unwrap_err();
    assert_eq!(
        err,
        "unknown config key `keep_last` (known: compressible_tools, \
         exclude_tools, keep_recent, gap_minutes, trigger_tokens, clear_at_least, \
         clear_tool_inputs, min_input_chars, emit_context_management)"
    );
}

#[test]
fn empty_compressible_list_and_wrong_types_are_rejected() {
    assert_eq!(
        build("compressible_tools = []").unwrap_err(),
        "compressible_tools must not be empty: nothing would ever be cleared"
    );
    assert!(build("gap_minutes = \"1h\"")
        .unwrap_err()
        .starts_with("`[stage.config] gap_minutes`"));
    assert!(build("exclude_tools = \"Read\"").is_err());
    assert!(build("clear_tool_inputs = 1").is_err());
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<Microcompact>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert_eq!(meta.config_keys.len(), 9);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
