//! Config parsing, validation and the budget.

use condense_abi::{build_stage, metadata_of, parse_config};
use condense_testing::MemoryHost;
use truncate_oldest::{Config, TruncateOldest};

fn build(toml: &str) -> Result<TruncateOldest, String> {
    build_stage::<TruncateOldest>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.max_tokens, 0);
    assert!(config.keep_first_user);
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("max_token = 5").unwrap_err(),
        "unknown config key `max_token` (known: max_tokens, keep_first_user)"
    );
    assert_eq!(
        build("max_tokens = -5").unwrap_err(),
        "`[stage.config] max_tokens` must be a whole number (0 or more), found -5"
    );
    assert!(build("keep_first_user = 1").is_err());
}

#[test]
fn the_budget_defaults_to_the_window_minus_the_output_reserve() {
    let host = MemoryHost::default().with_window(100_000, 8_000);
    assert_eq!(build("").unwrap().budget(&host.run).unwrap().0, 92_000);
    assert_eq!(
        build("max_tokens = 5000")
            .unwrap()
            .budget(&host.run)
            .unwrap()
            .0,
        5_000
    );
    let none = MemoryHost::default().with_window(8_000, 8_000);
    assert_eq!(
        build("").unwrap().budget(&none.run).unwrap_err().message(),
        "no token budget: context_window (8000) - max_output_tokens (8000) \
         leaves nothing; set max_tokens"
    );
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<TruncateOldest>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
