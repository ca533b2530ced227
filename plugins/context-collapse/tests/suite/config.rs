//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use context_collapse::{Config, ContextCollapse};

/// The stage from config text, or its error's message.
fn build(toml: &str) -> Result<ContextCollapse, String> {
    build_stage::<ContextCollapse>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults_are_the_reference_values() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.commit_at, 0.90);
    assert_eq!(config.block_at, 0.95);
    assert_eq!(config.keep_recent_turns, 4);
    assert_eq!(config.turns_per_span, 4);
    assert_eq!(config.backlog_span_tokens, 16_000);
    assert_eq!(config.backlog_commits, 16);
    assert_eq!(config.summary_ratio, 0.15);
    assert_eq!(config.summary_min_tokens, 1_000);
    assert_eq!(config.summary_window_share, 0.20);
    assert_eq!(config.summary_max_tokens, 20_000);
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("keep_recent = 3").unwrap_err(),
        "unknown config key `keep_recent` (known: commit_at, block_at, \
         keep_recent_turns, turns_per_span, backlog_span_tokens, backlog_commits, \
         summary_ratio, summary_min_tokens, summary_window_share, summary_max_tokens)"
    );
}

#[test]
fn invalid_values_are_rejected() {
    let err = |toml: &str| build(toml).unwrap_err();
    assert_eq!(
        err("commit_at = 0.0"),
        "commit_at must be a fraction of the effective window in (0, 1], got 0"
    );
    assert_eq!(
        err("commit_at = 0.9\nblock_at = 1.5"),
        "block_at must be a fraction of the effective window in (0, 1], got 1.5"
    );
    assert_eq!(
        err("commit_at = nan"),
        "commit_at must be a fraction of the effective window in (0, 1], got NaN"
    );
    assert_eq!(
        err("commit_at = 0.96"),
        "commit_at (0.96) must not be above block_at (0.95)"
    );
    assert_eq!(
        err("keep_recent_turns = 0"),
        "keep_recent_turns must be >= 1, got 0"
    );
    assert_eq!(
        err("turns_per_span = 0"),
        "turns_per_span must be >= 1, got 0"
    );
    assert_eq!(
        err("summary_max_tokens = 0"),
        "summary_max_tokens must be >= 1, got 0"
    );
    assert_eq!(
        err("summary_min_tokens = 0"),
        "summary_min_tokens must be >= 1, got 0"
    );
    assert_eq!(
        err("summary_ratio = 0.0"),
        "summary_ratio must be a fraction in (0, 1], got 0"
    );
    assert_eq!(
        err("summary_window_share = 1.5"),
        "summary_window_share must be a fraction in (0, 1], got 1.5"
    );
    let negative = err("keep_recent_turns = -1");
    assert!(
        negative.starts_with("`[stage.config] keep_recent_turns` must be"),
        "{negative}"
    );
    assert!(build("commit_at = 0.8\nblock_at = 0.8\nkeep_recent_turns = 1").is_ok());
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<ContextCollapse>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
