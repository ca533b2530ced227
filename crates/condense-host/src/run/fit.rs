//! The recovery chain: the pipeline run until the conversation fits, forcing the levels one
//! by one ([`LoadedPipeline::fit`]).

use super::state::RunState;
use super::{HostError, LoadedPipeline, ReadFrom, RunOptions, RunResult};
use crate::archive::OriginalTexts;
use crate::resume::{InputHash, Start};
use condense_model::Conversation;
use condense_store::Store;
use serde::Serialize;

impl LoadedPipeline {
    /// The recovery chain: runs the pipeline, and while the result does not fit the budget
    /// (or, with `prompt_too_long`, until at least one forced level has shrunk it), runs the
    /// levels again from lightest to heaviest with their triggers forced (`flags.forced`),
    /// stopping at the first that makes it fit.
    pub fn fit(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        prompt_too_long: bool,
    ) -> Result<FitResult, HostError> {
        let read = ReadFrom::nothing();
        self.fit_with_texts(conversation, store, session, opts, prompt_too_long, &read)
    }

    /// [`fit`](Self::fit) with what the input's document tells (see
    /// [`run_with_texts`](Self::run_with_texts)).
    pub fn fit_with_texts(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        prompt_too_long: bool,
        read: &ReadFrom<'_>,
    ) -> Result<FitResult, HostError> {
        let texts = read.texts;
        self.resuming(
            read.input(conversation),
            store,
            session,
            opts,
            |start| self.fit_in(start, store, session, opts, prompt_too_long, texts),
            |fit| &fit.result,
        )
    }

    /// [`fit_with_texts`](Self::fit_with_texts), inside its transaction.
    fn fit_in(
        &self,
        start: Start,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        prompt_too_long: bool,
        texts: &OriginalTexts<'_>,
    ) -> Result<(FitResult, Option<InputHash>), HostError> {
        let mut state = self.run_all(start, store, session, opts, texts)?;
        let fits = |state: &RunState, shrunk: bool| {
            !state.count.budget(&self.pipeline.budget).over_window() && (!prompt_too_long || shrunk)
        };
        if fits(&state, false) {
            let (result, point) =
                state.finish(&self.pipeline, store, session, opts, self.keys.as_ref())?;
            let fit = FitResult {
                fit_by: None,
                fits: true,
                result,
            };
            return Ok((fit, point));
        }
        let mut fit_by = None;
        let mut shrunk = false;
        for loaded in self.stages.iter().filter(|l| l.stage.is_some()) {
            let stage = std::slice::from_ref(loaded);
            self.run_stages(stage, &mut state, store, session, opts, true, texts)?;
            shrunk |= state.runs.last().is_some_and(|run| run.tokens_saved > 0);
            if fits(&state, shrunk) {
                fit_by = Some(loaded.spec.name.clone());
                break;
            }
        }
        let fits_now = fit_by.is_some();
        let (result, point) =
            state.finish(&self.pipeline, store, session, opts, self.keys.as_ref())?;
        let fit = FitResult {
            fit_by,
            fits: fits_now,
            result,
        };
        Ok((fit, point))
    }
}

/// What [`LoadedPipeline::fit`] found.
#[derive(Debug, Clone, Serialize)]
pub struct FitResult {
    /// The stage whose forced run made the conversation fit (None: it fitted without forcing,
    /// or nothing made it fit; see `fits`).
    pub fit_by: Option<String>,
    pub fits: bool,
    pub result: RunResult,
}
