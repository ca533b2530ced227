//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use tool_result_budget::{Config, ToolResultBudget};

/// The stage built from `toml`, or the error's message.
fn build(toml: &str) -> Result<ToolResultBudget, String> {
    build_stage::<ToolResultBudget>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults_are_the_reference_constants() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.max_result_size_chars, 50_000);
    assert_eq!(config.preview_bytes, 2_000);
    assert!(config.per_tool.is_empty());
}

#[test]
fn per_tool_overrides_the_default_limit() {
    let stage =
        build("max_result_size_chars = 40000\nper_tool = { Read = 100000, Bash = 30000 }").unwrap();
    assert_eq!(stage.limit_for(Some("Read")), 100_000);
    assert_eq!(stage.limit_for(Some("Bash")), 30_000);
    assert_eq!(stage.limit_for(Some("Grep")), 40_000);
    assert_eq!(stage.limit_for(None), 40_000);
}

#[test]
fn unknown_key_is_rejected() {
    let err = build("max_result_bytes = 10").unwrap_err();
    assert_eq!(
        err,
        "unknown config key `max_result_bytes` \
         (known: max_result_size_chars, preview_bytes, per_tool)"
    );
}

#[test]
fn zero_limit_is_rejected() {
    assert_eq!(
        build("max_result_size_chars = 0").unwrap_err(),
        "max_result_size_chars must be > 0, got 0"
    );
    assert_eq!(
        build("per_tool = { Read = 0 }").unwrap_err(),
        "per_tool.Read must be > 0, got 0"
    );
}

#[test]
fn preview_larger_than_the_limit_is_rejected() {
    assert_eq!(
        build("max_result_size_chars = 1000\npreview_bytes = 1001").unwrap_err(),
        "preview_bytes must be <= max_result_size_chars (1000), got 1001"
    );
    assert!(build("max_result_size_chars = 1000\npreview_bytes = 1000").is_ok());
    assert!(build("preview_bytes = 0").is_ok());
}

#[test]
fn wrong_types_are_rejected() {
    let err = build("max_result_size_chars = \"big\"").unwrap_err();
    assert!(
        err.starts_with("`[stage.config] max_result_size_chars`"),
        "{err}"
    );
    assert!(build("max_result_size_chars = -1").is_err());
    assert!(build("per_tool = { Read = \"x\" }").is_err());
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<ToolResultBudget>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
