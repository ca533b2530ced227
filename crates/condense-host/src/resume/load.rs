//! Finding a session's resume point: the settings it must have been made under
//! ([`settings_hash`]), the point as stored or kept in memory ([`load()`]), and the output
//! messages it stored ([`read_stored`]).

use super::{blocks, hex, messages_namespace, InputsKept, Point, PointMemory, NAMESPACE, VERSION};
use crate::pipeline::Pipeline;
use crate::run::{LoadedSpec, RunOptions};
use condense_model::fingerprint::{self, Fingerprinter};
use condense_model::Message;
use condense_store::{Store, StoreError};
use condense_tokens::ConversationCount;
use std::borrow::Cow;
use std::hash::Hash;
use twox_hash::XxHash3_128;

/// A session's point as a run finds it.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(super) point: Point<'static>,
    /// The messages its output stored, with their fingerprints, when memory kept them (else
    /// they are read from the store once the point is found to fit the input).
    pub(super) stored: Option<Vec<(u128, Message)>>,
    /// The input messages its output kept as they were (memory only).
    pub(super) kept: InputsKept,
    /// Its output's token counts (memory only).
    pub(super) count: Option<ConversationCount>,
    /// The fingerprints of the messages its output stored, while memory waits for the output
    /// itself ([`PointMemory::fill`]): kept by moving it in once the caller is done with it,
    /// where copying the messages at the save cost a request a copy of the whole output.
    pub(super) awaiting: Option<Vec<u128>>,
}

/// The messages a point names (`names`, in the session's [`MESSAGES_PREFIX`](super::MESSAGES_PREFIX) namespace), with
/// their fingerprints. `None` when one is missing or does not read: then no resuming.
pub(super) fn read_stored(
    store: &Store,
    session: &str,
    names: &[Cow<'_, str>],
) -> Option<Vec<(u128, Message)>> {
    let names: Vec<&str> = names.iter().map(|n| n.as_ref()).collect();
    let records = store
        .records_get(&messages_namespace(session), &names)
        .ok()?;
    records
        .into_iter()
        .map(|bytes| {
            let message = condense_model::packed::unpack_message(&bytes?)?;
            Some((fingerprint::fingerprint(&message), message))
        })
        .collect()
}

/// Everything that shapes a run's output besides its input and the forced levels: each
/// stage's name, plugin and settings slot (its config, the budget, tokenizer and summarizer),
/// the library it was loaded from (path, and size and modification time when it was loaded:
/// a rebuilt plugin is not resumed from, and a run stats no file), the disabled stages, the
/// fixed tokens and the format.
pub(crate) fn settings_hash(
    pipeline: &Pipeline,
    stages: &[LoadedSpec],
    opts: &RunOptions,
) -> Option<String> {
    let mut h = Fingerprinter::new();
    (VERSION, env!("CARGO_PKG_VERSION")).hash(&mut h);
    for loaded in stages {
        let spec = &loaded.spec;
        (&spec.name, &spec.plugin, spec.enabled).hash(&mut h);
        if spec.enabled {
            loaded.slot(pipeline).ok()?.hash(&mut h);
        }
        if let Some(path) = &loaded.path {
            let (len, modified) = loaded.file()?;
            (path, len, modified).hash(&mut h);
        }
    }
    (
        &opts.disabled,
        &opts.format,
        pipeline.budget.fixed_tokens,
        pipeline.budget.context_window,
        pipeline.budget.max_output_tokens,
    )
        .hash(&mut h);
    Some(hex(&h))
}

/// The session's point, with its stored messages and the input messages its output kept when
/// memory has them.
pub(super) fn load(
    store: &Store,
    session: &str,
    memory: Option<&PointMemory>,
) -> Result<Option<Loaded>, StoreError> {
    let Some(bytes) = store.record_get(NAMESPACE, session)? else {
        return Ok(None);
    };
    if let Some(remembered) =
        memory.and_then(|m| m.take(store, session, XxHash3_128::oneshot(&bytes)))
    {
        return Ok(Some(remembered));
    }
    // A point that does not read (written by another version) is no point: run whole.
    let Ok(mut point) = serde_json::from_slice::<Point<'static>>(&bytes) else {
        return Ok(None);
    };
    // Its lists whole again; without their stored names it is no point either, and the keys
    // are only a help (a point without them hashes the output again).
    let tail = std::mem::take(&mut point.output);
    let Some(output) = blocks::join(store, session, &point.output_blocks, tail) else {
        return Ok(None);
    };
    point.output = output;
    let tail = std::mem::take(&mut point.keys);
    point.keys = blocks::join(store, session, &point.key_blocks, tail).unwrap_or_default();
    Ok(Some(Loaded {
        point,
        stored: None,
        kept: InputsKept::new(),
        count: None,
        awaiting: None,
    }))
}
