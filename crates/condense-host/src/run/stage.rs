//! One stage's run inside a pipeline run, in two steps: the call across the boundary over the
//! conversation as it stands ([`LoadedPipeline::call`]), then the host's guards on its change
//! and the archive of what it removed ([`LoadedPipeline::settle`]).
//!
//! Stages in a row that leave the conversation as it was read one mirror of it
//! ([`StageInput`], [`LoadedPipeline::run_stages`]): the first stage that reads it has it made,
//! the next ones borrow it, and a new one is made only after a stage changed the conversation.
//! While they run, the conversation is out of the run's state, so that the state can take each
//! stage's run; it goes back before a change is made in it.

use super::accept::Accepted;
use super::state::RunState;
use super::{HostError, LoadedPipeline, LoadedSpec, RunOptions, StageRun};
use crate::archive::{ArchiveOptions, OriginalTexts};
use crate::pipeline::OnError;
use crate::services::Services;
use condense_abi::{
    Change, RunContext, RunFlags, StageCallError, StageInput, StageOutput, StageReport,
};
use condense_model::Conversation;
use condense_store::Store;
use std::time::Instant;

/// A stage's call, before the host's guards saw its change.
pub(super) struct Called<'l> {
    loaded: &'l LoadedSpec,
    /// The conversation's tokens when the stage was called.
    tokens: usize,
    /// What the stage answered; `None` for a disabled stage (not called).
    answer: Option<Result<StageOutput, StageCallError>>,
    /// What the host's services noted while the stage ran.
    host_notes: Vec<String>,
    millis: f64,
}

impl Called<'_> {
    /// Whether the stage handed back a change (which the guards may still refuse).
    fn changes(&self) -> bool {
        matches!(&self.answer, Some(Ok(out)) if out.change != Change::Unchanged)
    }
}

/// What the stages of one pass share: where they archive, and how they run.
#[derive(Clone, Copy)]
struct Pass<'a, 't> {
    store: &'a Store,
    session: &'a str,
    opts: &'a RunOptions,
    /// Forced by the recovery chain.
    recovery: bool,
    texts: &'a OriginalTexts<'t>,
}

impl LoadedPipeline {
    /// Runs `stages` in order over the run's conversation, each run added to `state.runs`.
    /// Stages in a row that change nothing read one [`StageInput`] (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_stages<'l>(
        &self,
        stages: impl IntoIterator<Item = &'l LoadedSpec>,
        state: &mut RunState,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        recovery: bool,
        texts: &OriginalTexts<'_>,
    ) -> Result<(), HostError> {
        let pass = Pass {
            store,
            session,
            opts,
            recovery,
            texts,
        };
        let mut stages = stages.into_iter();
        loop {
            let current = std::mem::take(&mut state.current);
            let changing = self.until_a_change(&mut stages, &current, state, pass);
            // Back before anything is made in it, error or not.
            state.current = current;
            let Some(called) = changing? else {
                return Ok(());
            };
            let mut run = self.settle(called, state, pass)?;
            run.output = opts.record_outputs.then(|| state.current.clone());
            state.runs.push(run);
        }
    }

    /// Calls `stages` in order over `current` (the run's conversation, out of `state`
    /// meanwhile), all reading one [`StageInput`], and settles each that leaves it as it was.
    /// The first call that changes it comes back unsettled: its change is made once the
    /// conversation is back in `state`.
    fn until_a_change<'l>(
        &self,
        stages: &mut impl Iterator<Item = &'l LoadedSpec>,
        current: &Conversation,
        state: &mut RunState,
        pass: Pass<'_, '_>,
    ) -> Result<Option<Called<'l>>, HostError> {
        let input = StageInput::new(current);
        for loaded in stages {
            let called = self.call(loaded, state, &input, pass)?;
            if called.changes() {
                return Ok(Some(called));
            }
            let mut run = self.settle(called, state, pass)?;
            run.output = pass.opts.record_outputs.then(|| current.clone());
            state.runs.push(run);
        }
        Ok(None)
    }

    /// Calls one stage over `input` (the run's conversation, out of `state` meanwhile).
    fn call<'l>(
        &self,
        loaded: &'l LoadedSpec,
        state: &RunState,
        input: &StageInput<'_>,
        pass: Pass<'_, '_>,
    ) -> Result<Called<'l>, HostError> {
        let Pass {
            store,
            session,
            opts,
            recovery,
            ..
        } = pass;
        let spec = &loaded.spec;
        let tokens = state.count.total;
        let Some(stage) = &loaded.stage else {
            return Ok(Called {
                loaded,
                tokens,
                answer: None,
                host_notes: Vec::new(),
                millis: 0.0,
            });
        };
        let budget = &self.pipeline.budget;
        let run = RunContext {
            now_ms: state.now_ms,
            context_window: budget.context_window,
            max_output_tokens: budget.max_output_tokens,
            // The reserve in use (scaled for small windows), the one the host's budget counts.
            output_reserve: budget.reserve(),
            tokens_freed_before: state.freed,
            // What the real request carries: the file's tokens and the fixed tokens it lacks.
            conversation_tokens: tokens + budget.fixed_tokens,
            session: session.to_string(),
            format: opts.format.parse().ok(),
            flags: RunFlags {
                forced: recovery || opts.forced.contains(&spec.plugin),
                disabled: opts.disabled.contains(&spec.plugin),
                signals: state.signals.clone(),
            },
        };
        let slot = loaded
            .slot(&self.pipeline)
            .map_err(|message| HostError::Config {
                stage: spec.name.clone(),
                message,
            })?;
        let services = Services {
            counter: &self.counter,
            store,
            session,
            stage: &spec.name,
            slot,
            call: state.runs.len(),
            state_mode: opts.state,
            budget,
            summarizer: self.summarizer.as_ref(),
            run: &state.services,
            notes: Default::default(),
        };
        let started = Instant::now();
        // The stage borrows the conversation: the host keeps it, to archive what changed and to
        // carry on unchanged when the stage fails, is refused, or changes nothing.
        let answer = stage.apply(input, &run, &services);
        Ok(Called {
            loaded,
            tokens,
            answer: Some(answer),
            host_notes: services.notes.take(),
            millis: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// The host's guards on a called stage's change, and the change made in `state`'s
    /// conversation (which must be in it, unless the stage changed nothing) with what it removed
    /// archived. The run's `output` is left for the caller to record.
    fn settle(
        &self,
        called: Called<'_>,
        state: &mut RunState,
        pass: Pass<'_, '_>,
    ) -> Result<StageRun, HostError> {
        let Pass {
            store,
            session,
            opts,
            recovery,
            texts,
        } = pass;
        let Called {
            loaded,
            tokens: current_tokens,
            answer,
            host_notes,
            millis,
        } = called;
        let spec = &loaded.spec;
        let base = |status: &'static str, error: Option<String>, millis: f64| StageRun {
            name: spec.name.clone(),
            plugin: spec.plugin.clone(),
            status,
            error,
            tokens_before: current_tokens,
            tokens_after: current_tokens,
            tokens_saved: 0,
            millis,
            report: StageReport::default(),
            output: None,
        };
        let Some(answer) = answer else {
            return Ok(base("disabled", None, 0.0));
        };
        let outcome = answer
            .map_err(|e| match e {
                StageCallError::Failed(m) => (m, None),
                other => (other.to_string(), None),
            })
            .and_then(|out| {
                let accepted = self.accept(out.change, state, current_tokens);
                // A refused output keeps its report, so the user sees what the stage tried.
                match accepted {
                    Ok(accepted) => Ok((accepted, out.report)),
                    Err(message) => Err((message, Some(Box::new(out.report)))),
                }
            });
        let with_host_notes = |mut report: StageReport| {
            if !host_notes.is_empty() {
                report.notes.splice(0..0, host_notes.iter().cloned());
            }
            report
        };
        match outcome {
            Ok((accepted, report)) => {
                let report = with_host_notes(report);
                let archive = ArchiveOptions {
                    format: Some(opts.format.as_str()),
                    texts: Some(texts),
                };
                let after = settled_count(accepted, state, (store, session), archive, &report)?
                    .unwrap_or(current_tokens);
                let saved = current_tokens - after;
                state.freed += saved;
                state.signals.extend(report.signals.iter().copied());
                Ok(StageRun {
                    status: if recovery { "forced" } else { "ran" },
                    tokens_after: after,
                    tokens_saved: saved,
                    report,
                    ..base("ran", None, millis)
                })
            }
            Err((message, report)) => match spec.on_error {
                OnError::Fail => Err(HostError::StageFailed {
                    stage: spec.name.clone(),
                    message,
                }),
                OnError::Skip => Ok(StageRun {
                    report: with_host_notes(report.map(|r| *r).unwrap_or_default()),
                    ..base("skipped", Some(message), millis)
                }),
            },
        }
    }
}

/// Makes an accepted change the run's ([`Accepted::commit`]): the conversation's tokens after
/// it, when it changed anything.
fn settled_count(
    accepted: Accepted,
    state: &mut RunState,
    at: (&Store, &str),
    archive: ArchiveOptions<'_>,
    report: &StageReport,
) -> Result<Option<usize>, HostError> {
    let checked = accepted.commit(state, at, archive, report.archive_removed)?;
    Ok(checked.map(|(count, violations)| {
        let total = count.total;
        state.count = count;
        if violations.is_some() {
            state.violations = violations;
        }
        total
    }))
}
