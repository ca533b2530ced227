//! The runner in-process: stages of this file behind the real FFI objects
//! ([`LoadedStage::from_stage`]), no plugin library built or loaded. What the runner promises
//! the stages (facts, typed flags, signals between stages, state slots) and the user (guards,
//! the archive that `expand` reads, one-line errors).

use super::*;
use crate::pipeline::Pipeline;
use crate::services::state_slot;
use condense_abi::{
    Context, Input, Replacements, Stage, StageConfig, StageError, StageOutput, StageReport,
    StageState,
};
use condense_model::{Block, Content, Conversation, Format, Message, Role};
use serde::{Deserialize, Serialize};

mod deferred;
mod edits;
mod marks;
mod unread;

/// The test stages' config: one behaviour per stage.
#[derive(Debug, Default, Serialize, Deserialize, StageConfig)]
#[serde(default, deny_unknown_fields)]
struct Config {
    /// What the stage does: `shrink`, `grow`, `fail`, `raise`, `observe`, `count`.
    mode: String,
}

/// What an `observe` stage saw, kept in its state so the test can read it back.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    forced: bool,
    disabled: bool,
    collapse_active: bool,
    format: String,
    tokens: usize,
    runs: usize,
}

impl StageState for Seen {}

struct Probe(String);

impl Stage for Probe {
    type Config = Config;
    const NAME: &'static str = "probe";
    const DESCRIPTION: &'static str = "Does what its mode says, for the runner's tests.";

    fn new(config: Config) -> Result<Self, StageError> {
        match config.mode.as_str() {
            "shrink" | "grow" | "fail" | "raise" | "observe" | "fold" | "nest" | "drop"
            | "replace" | "replace-grow" | "replace-renamed" | "replace-unanswer" | "read"
            | "dedup" => Ok(Probe(config.mode)),
            other => Err(format!(
                "mode must be shrink, grow, fail, raise or observe, got `{other}`"
            )
            .into()),
        }
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let mut report = StageReport::default();
        match self.0.as_str() {
            "fail" => Err("the disk is full".into()),
            "read" => {
                // Notes the text of every tool result it reads.
                let view = input.view()?;
                for slot in view.tool_results() {
                    report.note(slot.result.content().text());
                }
                Ok(StageOutput::unchanged(report))
            }
            "raise" => {
                report.raise(condense_abi::Signal::CollapseActive);
                Ok(StageOutput::unchanged(report))
            }
            "observe" => {
                let mut seen = cx.state::<Seen>()?;
                seen.forced = cx.flags.forced;
                seen.disabled = cx.flags.disabled;
                seen.collapse_active = cx.flags.raised(condense_abi::Signal::CollapseActive);
                seen.format = cx.format.map(|f| f.to_string()).unwrap_or_default();
                seen.tokens = cx.conversation_tokens;
                seen.runs += 1;
                seen.save()?;
                Ok(StageOutput::unchanged(report))
            }
            "fold" | "nest" => {
                // A running summary: everything before the last 3 messages folded into one
                // message `sum` listing the ids it stands for (rewritten in place each time;
                // `nest` keeps an earlier summary in brackets, so a summary made over an
                // earlier one differs from one made over the same messages at once).
                let mut conversation = input.into_conversation()?;
                let keep = conversation.messages.len().saturating_sub(3);
                if keep < 2 {
                    return Ok(StageOutput::unchanged(report));
                }
                let folded: Vec<Message> = conversation.messages.drain(..keep).collect();
                let ids: Vec<String> = folded
                    .iter()
                    .map(|m| match (m.id.as_str(), m.content.blocks.first()) {
                        ("sum", Some(Block::Text(t))) if self.0 == "nest" => {
                            format!("({})", t.text)
                        }
                        ("sum", Some(Block::Text(t))) => t.text.clone(),
                        (id, _) => id.to_string(),
                    })
                    .collect();
                let sum = Message::new("sum", Role::User, vec![Block::text(ids.join(" "))]);
                conversation.messages.insert(0, sum);
                report.blocks_changed = 1;
                Ok(StageOutput::changed(conversation, report))
            }
            "drop" => {
                // Drops every message before the last 3 (the archive anchors them to the
                // first one it keeps).
                let mut conversation = input.into_conversation()?;
                let keep = conversation.messages.len().saturating_sub(3);
                conversation.messages.drain(..keep);
                report.blocks_changed = keep;
                Ok(StageOutput::changed(conversation, report))
            }
            "grow" => {
                let mut conversation = input.into_conversation()?;
                conversation.messages.push(Message::new(
                    "extra",
                    Role::User,
                    vec![Block::text("more words than before")],
                ));
                report.blocks_changed = 1;
                Ok(StageOutput::changed(conversation, report))
            }
            "dedup" => {
                // snip's deduplication (`keep = "first"`): a tool result whose text an earlier
                // one has points back to it, when the pointer is shorter.
                let view = input.view()?;
                let mut replacements = Replacements::new(&view);
                let mut seen: Vec<(String, String)> = Vec::new();
                for slot in view.tool_results() {
                    let (text, id) = (slot.result.content().text(), slot.result.tool_use_id());
                    match seen.iter().find(|(t, _)| *t == text) {
                        Some((_, kept)) => {
                            let marker = condense_model::duplicate::duplicate_marker(
                                condense_model::duplicate::Toward::Earlier,
                                kept,
                            );
                            if marker.len() >= text.len() {
                                continue;
                            }
                            if let Some(result) = replacements.tool_result_mut(&slot.at()) {
                                result.content = Content::string(marker);
                                report.blocks_changed += 1;
                            }
                        }
                        None => seen.push((text, id.to_string())),
                    }
                }
                Ok(replacements.into_output(report))
            }
            "replace" | "replace-grow" | "replace-renamed" | "replace-unanswer" => {
                // shrink's change, handed back as the messages replaced in place; or one that
                // grows a message, renames it, or points its result at no call.
                let view = input.view()?;
                let mut replacements = Replacements::new(&view);
                for at in view.tool_results().map(|r| r.at()).collect::<Vec<_>>() {
                    if let Some(result) = replacements.tool_result_mut(&at) {
                        result.content = Content::string(match self.0.as_str() {
                            "replace-grow" => "more words than before ".repeat(1000),
                            _ => "[cut]".to_string(),
                        });
                        if self.0 == "replace-unanswer" {
                            result.tool_use_id = "nowhere".into();
                        }
                        report.blocks_changed += 1;
                    }
                    if self.0 == "replace-renamed" {
                        if let Some(m) = replacements.message_mut(at.message) {
                            m.id = "renamed".into();
                        }
                    }
                }
                Ok(replacements.into_output(report))
            }
            _ => {
                // shrink: every tool result becomes "[cut]".
                let mut conversation = input.into_conversation()?;
                for slot in conversation.tool_results_mut() {
                    slot.result.content = Content::string("[cut]");
                    report.blocks_changed += 1;
                }
                Ok(StageOutput::from_counted(conversation, report))
            }
        }
    }
}

fn pipeline(stages: &[(&str, &str, &str)]) -> LoadedPipeline {
    let mut text = String::new();
    for (name, mode, on_error) in stages {
        text.push_str(&format!(
            "[[stage]]\nname = \"{name}\"\nplugin = \"probe\"\non_error = \"{on_error}\"\n\
             [stage.config]\nmode = \"{mode}\"\n\n"
        ));
    }
    let pipeline = Pipeline::parse(&text, "test.toml", None).unwrap();
    LoadedPipeline::in_process(pipeline, |plugin, config| {
        assert_eq!(plugin, "probe");
        let stage = condense_abi::build_stage::<Probe>(config).map_err(|e| e.into_message())?;
        Ok(LoadedStage::from_stage(stage))
    })
    .unwrap()
}

fn conversation() -> Conversation {
    let output = "line of tool output\n".repeat(200);
    let messages = vec![
        Message::new("u1", Role::User, vec![Block::text("list the files")]),
        Message::new(
            "a1",
            Role::Assistant,
            vec![Block::tool_use(
                "c1",
                "Bash",
                condense_model::RawJson::from_string_unchecked("{}".into()),
            )],
        ),
        Message::new(
            "r1",
            Role::User,
            vec![Block::tool_result("c1", Content::string(output))],
        ),
    ];
    Conversation {
        messages,
        ..Conversation::default()
    }
}

fn options() -> RunOptions {
    RunOptions {
        now_ms: Some(1_750_000_000_000),
        format: "anthropic".into(),
        ..RunOptions::default()
    }
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    (dir, store)
}

#[test]
fn a_shrinking_stage_runs_and_expand_restores_the_input_exactly() {
    let (_dir, store) = store();
    let loaded = pipeline(&[("cut", "shrink", "fail")]);
    let input = conversation();
    let result = loaded.run(input.clone(), &store, "s", &options()).unwrap();
    assert_eq!(result.stages[0].status, "ran");
    assert!(result.tokens_after < result.tokens_before, "{result:?}");
    let mut restored = result.conversation.clone();
    crate::expand(&store, "s", &mut restored).unwrap();
    assert_eq!(restored, input);
}

/// Messages replaced in place (only they cross back) are checked, counted and archived as the
/// same change handed back whole: the same output, the same archive (its records are named by
/// their bytes), and `expand` restores the input.
#[test]
fn messages_replaced_in_place_are_archived_as_the_whole_change() {
    let input = with_turn(conversation(), 2);
    let (_a, whole_store) = store();
    let whole = pipeline(&[("cut", "shrink", "fail")])
        .run(input.clone(), &whole_store, "s", &options())
        .unwrap();
    let (_b, store) = store();
    let replaced = pipeline(&[("cut", "replace", "fail")])
        .run(input.clone(), &store, "s", &options())
        .unwrap();
    assert_eq!(replaced.stages[0].status, "ran");
    assert_eq!(replaced.stages[0].report.blocks_changed, 2);
    assert_eq!(replaced.conversation, whole.conversation);
    assert_eq!(
        (replaced.tokens_before, replaced.tokens_after),
        (whole.tokens_before, whole.tokens_after)
    );
    assert_eq!(replaced.archive_run.name(), whole.archive_run.name());
    let mut restored = replaced.conversation.clone();
    crate::expand(&store, "s", &mut restored).unwrap();
    assert_eq!(restored, input);
}

/// Stages in a row that change nothing read one mirror of the conversation; a stage after a
/// change reads a new one, of the changed conversation. Each stage's recorded output is the
/// conversation after it.
#[test]
fn stages_in_a_row_that_change_nothing_read_one_mirror() {
    let (_dir, store) = store();
    let loaded = pipeline(&[
        ("first", "read", "fail"),
        ("second", "read", "fail"),
        ("failing", "fail", "skip"),
        ("cut", "replace", "fail"),
        ("after", "read", "fail"),
    ]);
    let input = conversation();
    let opts = RunOptions {
        record_outputs: true,
        ..options()
    };
    let made = condense_abi::testing::mirrors_made();
    let result = loaded.run(input.clone(), &store, "s", &opts).unwrap();
    assert_eq!(condense_abi::testing::mirrors_made() - made, 2);
    let Some(Block::ToolResult(whole)) = input.messages[2].content.blocks.first() else {
        panic!("the third message is a tool result")
    };
    let notes = |i: usize| result.stages[i].report.notes.clone();
    assert_eq!(notes(0), [whole.content.text()]);
    assert_eq!(notes(1), notes(0));
    assert_eq!(result.stages[2].status, "skipped");
    assert_eq!(result.stages[3].report.blocks_changed, 1);
    assert_eq!(notes(4), ["[cut]"]);
    let outputs: Vec<_> = result.stages.iter().map(|s| s.output.clone()).collect();
    for output in &outputs[..3] {
        assert_eq!(output.as_ref(), Some(&input));
    }
    for output in &outputs[3..] {
        assert_eq!(output.as_ref(), Some(&result.conversation));
    }
    assert_ne!(result.conversation, input);
}

/// A replacement the guards refuse is undone: the next stage sees the conversation as it was.
/// Refused: one that grows its message, and one that leaves a result answering no call (a
/// change of shape, checked against the conversation as it was before it). One that renames its
/// message breaks the contract and is the stage's error, by name.
#[test]
fn a_refused_replacement_is_undone_and_a_renaming_one_is_an_error() {
    let (_dir, store) = store();
    let (_other, alone) = self::store();
    let shrunk = pipeline(&[("cut", "shrink", "fail")])
        .run(conversation(), &alone, "s", &options())
        .unwrap();
    let refused = [
        ("replace-grow", "made the conversation bigger ("),
        (
            "replace-unanswer",
            "broke an invariant: orphaned tool_result for `nowhere`",
        ),
    ];
    for (i, (mode, why)) in refused.into_iter().enumerate() {
        let result = pipeline(&[("refused", mode, "skip"), ("cut", "shrink", "fail")])
            .run(conversation(), &store, &format!("s{i}"), &options())
            .unwrap();
        assert_eq!(result.stages[0].status, "skipped", "{mode}");
        let error = result.stages[0].error.as_deref().unwrap_or_default();
        assert!(error.starts_with(why), "{mode}: {error}");
        assert_eq!(result.conversation, shrunk.conversation, "{mode}");
    }

    let err = pipeline(&[("namer", "replace-renamed", "fail")])
        .run(conversation(), &store, "renamed", &options())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "stage `namer` failed: returned a malformed change: replaced message 2 changed its id \
         (r1 -> renamed): a replacement keeps its id (return the whole conversation to change ids)"
    );
}

/// A replacement that keeps every message's shape (ids, roles, tool ids, content empty or not)
/// breaks no invariant, and the host looks for none: neither in the conversation it changed nor
/// in the one before. A whole new conversation is checked against the one before.
#[test]
fn a_change_that_keeps_every_shape_makes_no_pass_over_the_conversation() {
    let (_dir, store) = store();
    let passes = crate::guard::passes();
    let replaced = pipeline(&[("cut", "replace", "fail"), ("after", "read", "fail")])
        .run(conversation(), &store, "s", &options())
        .unwrap();
    assert_eq!(replaced.stages[0].report.blocks_changed, 1);
    assert_eq!(crate::guard::passes() - passes, 0);
    let passes = crate::guard::passes();
    let whole = pipeline(&[("cut", "shrink", "fail")])
        .run(conversation(), &store, "s2", &options())
        .unwrap();
    assert_eq!(crate::guard::passes() - passes, 2);
    assert_eq!(whole.conversation, replaced.conversation);
}

#[test]
fn a_stage_that_grows_the_conversation_is_refused_by_name() {
    let (_dir, store) = store();
    let err = pipeline(&[("bigger", "grow", "fail")])
        .run(conversation(), &store, "s", &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("stage `bigger` failed: made the conversation bigger ("),
        "{err}"
    );
    // With on_error = "skip" the run goes on without it, and says why.
    let result = pipeline(&[("bigger", "grow", "skip"), ("cut", "shrink", "fail")])
        .run(conversation(), &store, "s2", &options())
        .unwrap();
    assert_eq!(result.stages[0].status, "skipped");
    assert_eq!(result.stages[1].status, "ran");
}

#[test]
fn a_stage_error_carries_the_stage_name_once() {
    let (_dir, store) = store();
    let err = pipeline(&[("writer", "fail", "fail")])
        .run(conversation(), &store, "s", &options())
        .unwrap_err()
        .to_string();
    assert_eq!(err, "stage `writer` failed: the disk is full");
}

#[test]
fn a_refused_config_is_named_once_with_its_place() {
    let pipeline = Pipeline::parse(
        "[[stage]]\nname = \"odd\"\nplugin = \"probe\"\n[stage.config]\nmode = \"sideways\"\n",
        "test.toml",
        None,
    )
    .unwrap();
    let err = LoadedPipeline::in_process(pipeline, |_, config| {
        let stage = condense_abi::build_stage::<Probe>(config).map_err(|e| e.into_message())?;
        Ok(LoadedStage::from_stage(stage))
    })
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("stage `odd`: config rejected: "), "{err}");
    assert_eq!(err.matches("probe").count(), 0, "{err}");
    assert!(err.contains("got `sideways`"), "{err}");
}

#[test]
fn stages_see_the_facts_typed_flags_and_earlier_signals() {
    let (_dir, store) = store();
    let loaded = pipeline(&[("flag", "raise", "fail"), ("watch", "observe", "fail")]);
    let mut opts = options();
    opts.disabled = vec!["probe".into()];
    let result = loaded.run(conversation(), &store, "s", &opts).unwrap();
    assert_eq!(
        result.stages[0].report.signals,
        [condense_abi::Signal::CollapseActive]
    );
    let slot = state_slot(&loaded.pipeline, &loaded.stages[1].spec).unwrap();
    let text = store.state_get("s", &slot).unwrap().unwrap();
    let seen: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(seen["version"], 1);
    assert_eq!(seen["forced"], false);
    assert_eq!(seen["disabled"], true);
    assert_eq!(seen["collapse_active"], true);
    assert_eq!(seen["format"], Format::Anthropic.as_str());
    assert_eq!(seen["tokens"], result.tokens_before);
    assert_eq!(seen["runs"], 1);
}

#[test]
fn the_recovery_chain_forces_levels_and_state_carries_across_runs() {
    let (_dir, store) = store();
    let mut loaded = pipeline(&[("watch", "observe", "fail")]);
    // A window the conversation cannot fit: the chain forces the stage after the normal run.
    loaded.pipeline.budget.context_window = 100;
    loaded.pipeline.budget.max_output_tokens = 10;
    let fit = loaded
        .fit(conversation(), &store, "s", &options(), false)
        .unwrap();
    assert!(!fit.fits);
    let statuses: Vec<_> = fit.result.stages.iter().map(|s| s.status).collect();
    assert_eq!(statuses, ["ran", "forced"]);
    let slot = state_slot(&loaded.pipeline, &loaded.stages[0].spec).unwrap();
    let seen: serde_json::Value =
        serde_json::from_str(&store.state_get("s", &slot).unwrap().unwrap()).unwrap();
    // The forced call saw the flag and the state its unforced call saved in the same run.
    assert_eq!(
        (seen["forced"].clone(), seen["runs"].clone()),
        (true.into(), 2.into())
    );
}

fn expands_to(st: &Store, output: &Conversation, input: &Conversation) {
    let mut restored = output.clone();
    crate::expand(st, "s", &mut restored).unwrap();
    assert_eq!(&restored, input);
}

/// `run` (resumed on `st` from `input`) made what a run over the whole input makes, names its
/// output in its record by each message's own archive key (not the key of a message's marked
/// form, which the point kept), and expands to `input`.
fn is_the_whole_runs_and_expands(
    loaded: &LoadedPipeline,
    run: &RunResult,
    (st, input): (&Store, &Conversation),
) {
    let (_whole_dir, whole_store) = store();
    let whole = loaded
        .run(input.clone(), &whole_store, "s", &options())
        .unwrap();
    assert_eq!(run.conversation, whole.conversation);
    assert_eq!(
        (run.tokens_before, run.tokens_after),
        (whole.tokens_before, whole.tokens_after)
    );
    let keys: Vec<String> = run
        .conversation
        .messages
        .iter()
        .map(|m| crate::archive::message_hash(m).unwrap())
        .collect();
    assert_eq!(run.archive_run.keys(), keys);
    expands_to(st, &run.conversation, input);
}

/// The pipelines random sessions run under: results cut, replaced in place, or deduplicated;
/// old messages folded into a summary (after the results are cut), or dropped; or folded into
/// summaries that nest the one before.
const RANDOM_PIPELINES: [&[(&str, &str, &str)]; 6] = [
    &[("cut", "shrink", "fail")],
    &[("swap", "replace", "fail")],
    &[("cut", "shrink", "fail"), ("fold", "fold", "fail")],
    &[("drop", "drop", "fail")],
    &[("swap", "replace", "fail"), ("nest", "nest", "fail")],
    &[("dedup", "dedup", "fail")],
];

/// Random session `session`'s pipeline ([`RANDOM_PIPELINES`] in turn), every other one keeping
/// its points in memory as `condense serve` does.
fn random_pipeline(session: usize) -> LoadedPipeline {
    let stages = RANDOM_PIPELINES[session % RANDOM_PIPELINES.len()];
    if session % 2 == 0 {
        pipeline(stages)
    } else {
        pipeline(stages).keeping_points()
    }
}

/// A small linear congruential generator: the same random sessions every run.
struct Lcg(u64);

impl Lcg {
    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize % n.max(1)
    }
}

/// `conversation()` and one more turn: a request, a tool call and its long result.
fn with_turn(mut conv: Conversation, n: usize) -> Conversation {
    let output = format!("output of turn {n}\n").repeat(100);
    conv.messages.extend([
        Message::new(format!("u{n}x"), Role::User, vec![Block::text("and again")]),
        Message::new(
            format!("a{n}x"),
            Role::Assistant,
            vec![Block::tool_use(
                format!("c{n}x"),
                "Bash",
                condense_model::RawJson::from_string_unchecked("{}".into()),
            )],
        ),
        Message::new(
            format!("r{n}x"),
            Role::User,
            vec![Block::tool_result(
                format!("c{n}x"),
                Content::string(output),
            )],
        ),
    ]);
    conv
}

fn resuming() -> RunOptions {
    RunOptions {
        resume: true,
        ..options()
    }
}

/// The input's fingerprints from its reader stand in for the run's own hashing of the
/// input's messages: the same start and output when they are right; a message taken as edited
/// when they disagree with the point (so they are what the point is matched with); ignored
/// when they are not one per message.
#[test]
fn a_readers_fingerprints_match_the_resume_point_in_place_of_hashing() {
    let loaded = pipeline(&[("cut", "shrink", "fail")]);
    let input = with_turn(conversation(), 2);
    let right: Vec<u128> = input
        .messages
        .iter()
        .map(condense_model::fingerprint::fingerprint)
        .collect();
    let mut wrong = right.clone();
    wrong[0] ^= 1;
    let texts = |_: &Message, _: usize| None;
    let second_run = |fingerprints: Option<&[u128]>| {
        let (dir, st) = store();
        loaded.run(conversation(), &st, "s", &resuming()).unwrap();
        let read = ReadFrom {
            texts: &texts,
            fingerprints,
            unread: None,
            lists_known: false,
        };
        let result = loaded
            .run_with_texts(input.clone(), &st, "s", &resuming(), &read)
            .unwrap();
        drop(dir);
        result
    };
    let hashed = second_run(None);
    assert!(hashed.resumed.is_some());
    let given = second_run(Some(&right));
    assert_eq!(given.resumed, hashed.resumed);
    assert_eq!(given.conversation, hashed.conversation);
    // The output's own fingerprints, made once for the point (and a proxy's keys and hashes).
    let output: Vec<u128> = given
        .conversation
        .messages
        .iter()
        .map(condense_model::fingerprint::fingerprint)
        .collect();
    assert_eq!(given.output_fingerprints, output);
    // A fingerprint the point does not have is a message the client edited: taken from the
    // input.
    let wrong_run = second_run(Some(&wrong)).resumed;
    assert_eq!(wrong_run.map(|r| r.edited_messages), Some(1));
    assert_eq!(second_run(Some(&right[1..])).resumed, hashed.resumed);
}

#[test]
fn a_turn_appended_starts_from_the_previous_output_and_expands_exactly() {
    let (_dir, st) = store();
    let loaded = pipeline(&[("cut", "shrink", "fail"), ("watch", "observe", "fail")]);
    let first = loaded.run(conversation(), &st, "s", &resuming()).unwrap();
    assert_eq!(first.resumed, None, "nothing to resume from yet");

    let input = with_turn(conversation(), 2);
    let second = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
    let resumed = second.resumed.clone().expect("the input extends the first");
    assert_eq!(
        (
            resumed.input_messages,
            resumed.output_messages,
            resumed.new_messages
        ),
        (3, 3, 3)
    );
    // The stages saw the first output (its result already cut) plus the new turn, and the
    // run still reports the whole input's count before the stages.
    let (_whole_dir, whole_store) = store();
    let whole = loaded
        .run(input.clone(), &whole_store, "s", &options())
        .unwrap();
    assert_eq!(second.tokens_before, whole.tokens_before);
    assert_eq!(second.conversation, whole.conversation);
    assert!(resumed.tokens_started < whole.tokens_before, "{resumed:?}");
    assert_eq!(second.stages[0].tokens_before, resumed.tokens_started);
    let slot = state_slot(&loaded.pipeline, &loaded.stages[1].spec).unwrap();
    let seen: serde_json::Value =
        serde_json::from_str(&st.state_get("s", &slot).unwrap().unwrap()).unwrap();
    assert_eq!(seen["tokens"], second.tokens_after);

    // Expansion unwinds both runs: the whole second input comes back.
    let mut restored = second.conversation.clone();
    crate::expand(&st, "s", &mut restored).unwrap();
    assert_eq!(restored, input);

    // A third turn resumes from the second output, not the first, and still reports the whole
    // input's count (the covered messages' tokens kept with the point, the rest counted).
    let input = with_turn(input, 3);
    let third = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
    assert_eq!(third.resumed.map(|r| r.input_messages), Some(6));
    let (_whole_dir, whole_store) = store();
    let whole = loaded.run(input, &whole_store, "s", &options()).unwrap();
    assert_eq!(third.tokens_before, whole.tokens_before);
}

#[test]
fn an_input_that_does_not_extend_the_previous_one_runs_whole() {
    let loaded = pipeline(&[("cut", "shrink", "fail")]);
    let resumed_after = |first: Conversation, opts: &RunOptions, next: Conversation| {
        let (_dir, st) = store();
        loaded.run(first, &st, "s", &resuming()).unwrap();
        loaded.run(next, &st, "s", opts).unwrap().resumed
    };
    let grown = with_turn(conversation(), 2);
    assert!(resumed_after(conversation(), &resuming(), grown.clone()).is_some());

    // A shorter input, another system prompt: the whole input. (Earlier messages edited in
    // place resume where the output stands for each alone: `tests::edits`.)
    assert_eq!(
        resumed_after(grown.clone(), &resuming(), conversation()),
        None
    );
    let mut other_system = grown.clone();
    other_system.system = Some(Content::string("You are terse."));
    assert_eq!(
        resumed_after(conversation(), &resuming(), other_system),
        None
    );

    // Other settings (a disabled stage, another window), --fresh, or resume off: whole too.
    let disabled = RunOptions {
        disabled: vec!["probe".into()],
        ..resuming()
    };
    assert_eq!(
        resumed_after(conversation(), &disabled, grown.clone()),
        None
    );
    let fresh = RunOptions {
        state: StateMode::Fresh,
        ..resuming()
    };
    assert_eq!(resumed_after(conversation(), &fresh, grown.clone()), None);
    assert_eq!(
        resumed_after(conversation(), &options(), grown.clone()),
        None
    );
    let (_dir, st) = store();
    loaded.run(conversation(), &st, "s", &resuming()).unwrap();
    let mut wider = pipeline(&[("cut", "shrink", "fail")]);
    wider.pipeline.budget.context_window *= 2;
    let run = wider.run(grown.clone(), &st, "s", &resuming()).unwrap();
    assert_eq!(run.resumed, None);

    // A run without resume keeps no point: the next one has nothing to start from.
    let (_dir, st) = store();
    loaded.run(conversation(), &st, "s", &options()).unwrap();
    let run = loaded.run(grown.clone(), &st, "s", &resuming()).unwrap();
    assert_eq!(run.resumed, None);
    // --fresh still leaves one.
    let (_dir, st) = store();
    loaded.run(conversation(), &st, "s", &fresh).unwrap();
    let run = loaded.run(grown, &st, "s", &resuming()).unwrap();
    assert!(run.resumed.is_some());
}

#[test]
fn a_run_over_the_whole_input_after_resumed_runs_expands_and_so_do_theirs() {
    // A running summary resumed turn by turn, then the same input run whole (`--no-resume`,
    // or an edited turn): the two runs make the same summary from different inputs. Each
    // output must expand to the input, whichever run's entries the archive holds first.
    // `fold`: both make the same summary message (the archive holds two ways to unwind it);
    // `nest`: different ones, next to the same unchanged messages.
    for mode in ["fold", "nest"] {
        let loaded = pipeline(&[("fold", mode, "fail")]);
        let (_dir, st) = store();
        let mut input = conversation();
        let mut resumed = None;
        for n in 2..=4 {
            input = with_turn(input, n);
            let run = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
            assert_eq!(run.resumed.is_some(), n > 2, "{mode}");
            resumed = Some(run.conversation);
        }
        let resumed = resumed.unwrap();
        let whole = loaded.run(input.clone(), &st, "s", &options()).unwrap();
        assert_eq!(whole.resumed, None);
        assert_eq!(whole.conversation == resumed, mode == "fold", "{mode}");
        for out in [&whole.conversation, &resumed] {
            let mut restored = out.clone();
            crate::expand(&st, "s", &mut restored).unwrap();
            assert_eq!(restored, input, "{mode}");
        }
        // Without the run records (a store written before them), expand uses every segment:
        // a removed run is anchored to the summary changed next to it, not to a message both
        // histories kept, and a replacement goes only with its own run's insertions.
        for (name, _) in st.records("runs-s").unwrap() {
            st.record_remove("runs-s", &name).unwrap();
        }
        for out in [&whole.conversation, &resumed] {
            let mut restored = out.clone();
            crate::expand(&st, "s", &mut restored).unwrap();
            assert_eq!(restored, input, "{mode}, no run records");
        }
    }
}

/// A pipeline that runs turn after turn (`condense serve`) loads a session's stored token
/// counts on its first run of the session only; a new pipeline (a new process) loads them.
#[test]
fn a_long_lived_pipeline_loads_a_sessions_stored_counts_once() {
    let (_dir, st) = store();
    let p = pipeline(&[("look", "observe", "fail")]);
    let conv = conversation();
    p.run(conv.clone(), &st, "s", &options()).unwrap();
    // Another process stored a count for a block this pipeline has not counted (a wrong one,
    // to tell where a count came from).
    let next = with_turn(conv, 1);
    let block = &next.messages[3].content.blocks[0];
    let tokenizer = p.counter.kind();
    st.token_counts_put("s", tokenizer.as_str(), vec![(block.content_hash(), 999)])
        .unwrap();
    let real = TokenCounter::new(tokenizer).count_conversation(&next).total;
    let own = TokenCounter::new(tokenizer).count_block(block);
    let fresh = pipeline(&[("look", "observe", "fail")]);
    let loaded = fresh.run(next.clone(), &st, "s", &options()).unwrap();
    assert_eq!(loaded.tokens_before, real - own + 999);
    // The first pipeline does not read the session's counts again: it counts the block.
    let again = p.run(next, &st, "s", &options()).unwrap();
    assert_eq!(again.tokens_before, real);
}

/// A pipeline that keeps its resume points in memory (`condense serve`) starts a turn from the
/// point in memory, exactly as one reading it from the store would, and only while the store
/// still holds that point: after another process ran the session, it reads the store's.
#[test]
fn points_kept_in_memory_resume_as_stored_ones_and_only_while_current() {
    use std::sync::atomic::Ordering;
    let stages = [("cut", "shrink", "fail")];
    let kept = pipeline(&stages).keeping_points();
    let plain = pipeline(&stages);
    let hits = || kept.points.as_ref().unwrap().hits.load(Ordering::Relaxed);
    let ((_dir, st), (_other_dir, other)) = (store(), store());
    let turn2 = with_turn(conversation(), 2);
    for (loaded, st) in [(&kept, &st), (&plain, &other)] {
        loaded.run(conversation(), st, "s", &resuming()).unwrap();
    }
    let from_memory = kept.run(turn2.clone(), &st, "s", &resuming()).unwrap();
    let from_store = plain.run(turn2.clone(), &other, "s", &resuming()).unwrap();
    assert_eq!(
        hits(),
        1,
        "the second turn started from the point in memory"
    );
    assert!(from_memory.resumed.is_some());
    assert_eq!(from_memory.resumed, from_store.resumed);
    assert_eq!(from_memory.conversation, from_store.conversation);
    assert_eq!(from_memory.tokens_before, from_store.tokens_before);
    // The run record is named by its output's archive keys, most of them remembered from the
    // first turn (`KeyMemo`): the same record as hashing every message.
    assert_eq!(from_memory.archive_run, from_store.archive_run);

    // Another process runs the session one turn further on the same store: the point in
    // memory (6 input messages) still matches the next input, but the store's is newer.
    let turn3 = with_turn(turn2, 3);
    plain.run(turn3.clone(), &st, "s", &resuming()).unwrap();
    let next = kept
        .run(with_turn(turn3, 4), &st, "s", &resuming())
        .unwrap();
    assert_eq!(next.resumed.map(|r| r.input_messages), Some(9));
    assert_eq!(hits(), 1, "a point the store no longer holds is not used");
}

/// A resumed run takes the archive keys of the output it starts from out of its point, so it
/// hashes only the messages it changed or added: its run record is the one hashing every
/// message gives, and a point without keys (an older condense's) is read as before.
#[test]
fn a_resumed_run_takes_its_archive_keys_from_the_point() {
    let p = pipeline(&[("cut", "shrink", "fail")]);
    let stores = [store(), store(), store()];
    for (_, st) in &stores {
        p.run(conversation(), st, "s", &resuming()).unwrap();
    }
    let point = |st: &Store| -> serde_json::Value {
        serde_json::from_slice(&st.record_get("resume", "s").unwrap().unwrap()).unwrap()
    };
    let set_point = |st: &Store, value: &serde_json::Value| {
        st.record_put("resume", "s", &serde_json::to_vec(value).unwrap())
            .unwrap();
    };
    let kept = point(&stores[0].1);
    let outputs = kept["layout"].as_array().unwrap().len();
    assert_eq!(kept["keys"].as_array().map(Vec::len), Some(outputs));
    // The second store's point as an older condense wrote it; the third's with one key wrong.
    let mut without = kept.clone();
    without.as_object_mut().unwrap().remove("keys");
    set_point(&stores[1].1, &without);
    let mut wrong = kept.clone();
    wrong["keys"][0] = serde_json::json!("0".repeat(32));
    set_point(&stores[2].1, &wrong);

    let turn2 = with_turn(conversation(), 2);
    let runs: Vec<RunResult> = stores
        .iter()
        .map(|(_, st)| p.run(turn2.clone(), st, "s", &resuming()).unwrap())
        .collect();
    assert!(runs.iter().all(|r| r.resumed.is_some()));
    assert_eq!(runs[0].conversation, runs[1].conversation);
    assert_eq!(runs[0].archive_run, runs[1].archive_run);
    // The keys are used, not made again: a wrong one names another record.
    assert_ne!(runs[2].archive_run, runs[1].archive_run);
}
