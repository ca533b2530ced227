//! Config parsing and validation.

use condense_abi::{build_stage, metadata_of, parse_config};
use observation_mask::{Config, ObservationMask};

fn build(toml: &str) -> Result<ObservationMask, String> {
    build_stage::<ObservationMask>(toml).map_err(|e| e.into_message())
}

#[test]
fn defaults_are_the_swe_agent_window() {
    let config = parse_config::<Config>("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.keep_last, 5);
    assert!(config.per_tool);
    assert!(config.tools.is_empty() && config.exclude_tools.is_empty());
}

#[test]
fn unknown_key_is_rejected() {
    assert_eq!(
        build("keep = 3").unwrap_err(),
        "unknown config key `keep` (known: keep_last, per_tool, tools, exclude_tools)"
    );
}

#[test]
fn invalid_values_are_rejected() {
    assert_eq!(
        build("keep_last = 0").unwrap_err(),
        "keep_last must be > 0, got 0 (the latest result is what the agent acts on)"
    );
    assert_eq!(
        build("tools = [\"bash\"]\nexclude_tools = [\"Read\", \"bash\"]").unwrap_err(),
        "tool `bash` is in both tools and exclude_tools"
    );
    assert_eq!(
        build("exclude_tools = [\" \"]").unwrap_err(),
        "exclude_tools must not hold an empty tool name"
    );
    assert_eq!(
        build("keep_last = -1").unwrap_err(),
        "`[stage.config] keep_last` must be a whole number (0 or more), found -1"
    );
    assert!(build("per_tool = \"yes\"").is_err());
}

#[test]
fn eligibility_follows_tools_and_exclude_tools() {
    let all = build("").unwrap();
    assert!(all.eligible(Some("bash")) && all.eligible(None));
    let only = build("tools = [\"bash\"]").unwrap();
    assert!(only.eligible(Some("bash")));
    assert!(!only.eligible(Some("Read")));
    assert!(!only.eligible(None), "unknown tools are not in the list");
    let except = build("exclude_tools = [\"Read\"]").unwrap();
    assert!(!except.eligible(Some("Read")));
    assert!(except.eligible(Some("bash")) && except.eligible(None));
}

#[test]
fn every_key_is_documented() {
    let meta = metadata_of::<ObservationMask>("0.1.0").unwrap();
    insta::assert_json_snapshot!("metadata", meta);
    assert!(meta.config_keys.iter().all(|k| !k.description.is_empty()));
}
