//! Config parsing, validation and the budget.

use crate::support::FakeHost;
use condense_abi::{metadata_of, parse_config, Stage};
use truncate_oldest::{Config, TruncateOldest};

fn build(toml: &str) -> Result<TruncateOldest, String> {
    TruncateOldest::new(parse_config::<TruncateOldest>(toml)?)
}

#[test]
fn defaults() {
    let config = parse_config::<TruncateOldest>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.max_tokens, 0);
    assert!(config.keep_first_user);
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("max_token = 5").unwrap_err(),
        "truncate-oldest: unknown config key `max_token` (known: max_tokens, keep_first_user)"
    );
    assert!(build("max_tokens = -5")
        .unwrap_err()
        .starts_with("truncate-oldest: "));
    assert!(build("keep_first_user = 1").is_err());
}

#[test]
fn the_budget_defaults_to_the_window_minus_the_output_reserve() {
    let host = FakeHost::default().with_window(100_000, 8_000);
    assert_eq!(build("").unwrap().budget(&host).unwrap().0, 92_000);
    assert_eq!(
        build("max_tokens = 5000").unwrap().budget(&host).unwrap().0,
        5_000
    );
    let none = FakeHost::default().with_window(8_000, 8_000);
    assert_eq!(
        build("").unwrap().budget(&none).unwrap_err(),
        "truncate-oldest: no token budget: context_window (8000) - max_output_tokens (8000) \
         leaves nothing; set max_tokens"
    );
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<TruncateOldest>("0.1.0");
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
