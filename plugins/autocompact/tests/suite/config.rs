//! Config parsing and validation.

use autocompact::{Autocompact, Config, PinRule};
use condense_abi::{build_stage, metadata_of, parse_config};

/// The stage from config text, or its error's message.
fn build(toml: &str) -> Result<Autocompact, String> {
    build_stage::<Autocompact>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults_are_the_reference_constants() {
    let c = parse_config::<Config>("").unwrap();
    assert_eq!(c, Config::default());
    assert!(c.enabled);
    assert_eq!(c.buffer_tokens, 13_000);
    assert_eq!(c.threshold_pct, None);
    assert_eq!(c.min_turns_between, 2);
    assert_eq!(c.max_consecutive_failures, 3);
    assert_eq!(c.summary_max_tokens, 20_000);
    assert_eq!(c.restore_files, 5);
    assert_eq!(c.restore_file_max_tokens, 5_000);
    assert!(c.read_tools.contains(&"Read".to_string()));
    assert!(c.pin.is_empty());
    assert_eq!(c.pin_budget_tokens, 25_000);
    assert_eq!(c.pin_max_tokens, 5_000);
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("threshold = 0.9").unwrap_err(),
        "unknown config key `threshold` (known: enabled, buffer_tokens, \
         min_turns_between, max_consecutive_failures, summary_max_tokens, restore_files, \
         restore_file_max_tokens, read_tools, pin, pin_budget_tokens, pin_max_tokens, \
         threshold_pct)"
    );
    // Inside a pin rule too.
    let err = build(r#"pin = [{ tol = "TodoWrite" }]"#).unwrap_err();
    assert!(err.contains("unknown field `tol`"), "{err}");
}

#[test]
fn threshold_pct_is_validated() {
    for ok in [0.5, 0.85, 0.93, 0.98] {
        let stage = build(&format!("threshold_pct = {ok}")).unwrap();
        assert_eq!(stage.config().threshold_pct, Some(ok));
    }
    for bad in ["0.49", "0.99", "1.5", "0.0", "-0.9", "nan", "inf"] {
        let err = build(&format!("threshold_pct = {bad}")).unwrap_err();
        assert!(
            err.starts_with(
                "threshold_pct must be a fraction of the effective window in 0.5..=0.98, got"
            ),
            "{bad}: {err}"
        );
    }
    let err = build("threshold_pct = \"90%\"").unwrap_err();
    assert!(
        err.starts_with("`[stage.config] threshold_pct` must be"),
        "{err}"
    );
}

#[test]
fn pin_rules_are_validated() {
    let ok = build(r#"pin = [{ tool = "TodoWrite" }, { regex = "IMPORTANT:.*" }]"#).unwrap();
    assert_eq!(
        ok.config().pin,
        vec![
            PinRule {
                tool: Some("TodoWrite".into()),
                regex: None
            },
            PinRule {
                tool: None,
                regex: Some("IMPORTANT:.*".into())
            }
        ]
    );
    assert_eq!(
        build(r#"pin = [{ tool = "A", regex = "b" }]"#).unwrap_err(),
        "pin[0] must have exactly one non-empty `tool` or `regex`"
    );
    assert_eq!(
        build(r#"pin = [{ tool = "A" }, {}]"#).unwrap_err(),
        "pin[1] must have exactly one non-empty `tool` or `regex`"
    );
    assert!(build(r#"pin = [{ regex = "(" }]"#)
        .unwrap_err()
        .starts_with("pin[0].regex is not a valid regex: "));
}

#[test]
fn zero_limits_are_rejected() {
    for key in [
        "max_consecutive_failures",
        "summary_max_tokens",
        "restore_file_max_tokens",
        "pin_max_tokens",
    ] {
        assert_eq!(
            build(&format!("{key} = 0")).unwrap_err(),
            format!("{key} must be >= 1, got 0")
        );
    }
    // No restoration at all is a valid choice.
    assert!(build("restore_files = 0\npin_budget_tokens = 0\nmin_turns_between = 0").is_ok());
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<Autocompact>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
    assert!(meta
        .config_keys
        .iter()
        .any(|k| k.name == "threshold_pct" && k.ty == "optional"));
}
