//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use redact_secrets::{Config, RedactSecrets};

fn build(toml: &str) -> Result<RedactSecrets, String> {
    build_stage::<RedactSecrets>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert!(config.thinking);
    assert!(config.envelopes);
    let stage = build("").unwrap();
    assert_eq!(
        stage.pattern_names(),
        redact_secrets::patterns::builtin_names()
    );
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("pattern = []").unwrap_err(),
        "unknown config key `pattern` (known: patterns, disable, thinking, envelopes)"
    );
    let err = build("patterns = [{ name = \"x\", regexp = \"y\" }]").unwrap_err();
    assert!(
        err.starts_with("`[stage.config] patterns`: unknown field `regexp`"),
        "{err}"
    );
}

#[test]
fn invalid_user_regex_is_named() {
    assert_eq!(
        build("patterns = [{ name = \"ok\", regex = \"ok_[0-9]{8}\" }, { name = \"internal-token\", regex = \"itk_[a-z\" }]")
            .unwrap_err(),
        "patterns[1] (internal-token): invalid regex: unclosed character class"
    );
}

#[test]
fn a_regex_matching_the_empty_string_is_rejected() {
    assert_eq!(
        build("patterns = [{ name = \"loose\", regex = \"x*\" }]").unwrap_err(),
        "patterns[0] (loose): regex matches the empty string"
    );
}

#[test]
fn bad_names_are_rejected() {
    assert_eq!(
        build("patterns = [{ name = \"Internal Token\", regex = \"x\" }]").unwrap_err(),
        "patterns[0]: name must be lowercase letters, digits and -, got \"Internal Token\""
    );
    assert_eq!(
        build("patterns = [{ name = \"jwt\", regex = \"x\" }]").unwrap_err(),
        "patterns[0]: name `jwt` is already taken by another pattern"
    );
    assert_eq!(
        build("patterns = [{ name = \"a\", regex = \"x\" }, { name = \"a\", regex = \"y\" }]")
            .unwrap_err(),
        "patterns[1]: name `a` is already taken by another pattern"
    );
}

#[test]
fn unknown_disabled_pattern_is_rejected() {
    let err = build("disable = [\"jwt\", \"github\"]").unwrap_err();
    assert!(
        err.starts_with("disable: unknown built-in pattern `github` (known: private-key, jwt,"),
        "{err}"
    );
    let stage = build("disable = [\"jwt\", \"url-password\"]").unwrap();
    assert!(!stage.pattern_names().contains(&"jwt"));
    assert!(!stage.pattern_names().contains(&"url-password"));
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<RedactSecrets>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
