//! The plugin side of the boundary: what [`export_stage!`](crate::export_stage) expands to.
//!
//! Every entry point runs inside `catch_unwind`: a panic that reached the FFI boundary would
//! abort the host (each cdylib has its own std, so the host cannot catch it), so it is turned
//! into an error here, inside the plugin, with the panic message and location.

use crate::boundary::{
    FfiConfigKey, FfiEvent, FfiHost_TO, FfiInput_TO, FfiMetadata, FfiReport, FfiStage, FfiStageBox,
    FfiStageOutput, FfiStage_TO, PluginMod,
};
use crate::ffi::{FfiConversation, FfiMessage};
use crate::sdk::{build_stage, metadata_of, Host, Input, Stage, StageReport, SummaryRequest};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::sabi_types::RRef;
use abi_stable::std_types::{RResult, RSlice, RStr, RString, RVec};
use condense_model::Conversation;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces this library's panic hook (each cdylib has its own) with one that records the
/// message instead of printing it: the host reports it as one line, never a panic trace.
fn install_quiet_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let (msg, location) = describe_panic(info);
            let at = location.map(|l| format!(" at {l}")).unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// A panic's message (`&str` or `String` payloads) and its `file:line`, for one-line reports.
pub fn describe_panic(info: &std::panic::PanicHookInfo<'_>) -> (String, Option<String>) {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    (
        msg,
        info.location()
            .map(|l| format!("{}:{}", l.file(), l.line())),
    )
}

/// Runs `f`, turning a panic into `Err("panicked: <message> at <file>:<line>")`.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> RResult<T, RString> {
    install_quiet_panic_hook();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e.into()),
        Err(_) => {
            let msg = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".to_string());
            RResult::RErr(format!("panicked: {msg}").into())
        }
    }
}

/// The plugin-side view of the host services.
struct PluginHost<'r, 'a, 'b>(&'r FfiHost_TO<'a, RRef<'b, ()>>);

impl Host for PluginHost<'_, '_, '_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.count_tokens(RStr::from_str(text)) as usize
    }
    fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        self.0
            .store_put(RSlice::from_slice(bytes))
            .into_result()
            .map(RString::into_string)
            .map_err(RString::into_string)
    }
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.0
            .store_get(RStr::from_str(key))
            .into_result()
            .map(|o| o.into_option().map(RVec::into_vec))
            .map_err(RString::into_string)
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        self.0
            .state_get()
            .into_result()
            .map(|o| o.into_option().map(RString::into_string))
            .map_err(RString::into_string)
    }
    fn state_put(&self, state: &str) -> Result<(), String> {
        self.0
            .state_put(RStr::from_str(state))
            .into_result()
            .map_err(RString::into_string)
    }
    fn tokens_freed_before(&self) -> usize {
        self.0.tokens_freed_before() as usize
    }
    fn context_window(&self) -> usize {
        self.0.context_window() as usize
    }
    fn max_output_tokens(&self) -> usize {
        self.0.max_output_tokens() as usize
    }
    fn has_flag(&self, flag: &str) -> bool {
        self.0.has_flag(RStr::from_str(flag))
    }
    fn session_id(&self) -> String {
        self.0.session_id().into_string()
    }
    fn source_format(&self) -> String {
        self.0.source_format().into_string()
    }
    fn conversation_tokens(&self) -> usize {
        self.0.conversation_tokens() as usize
    }
    fn output_reserve(&self) -> usize {
        self.0.output_reserve() as usize
    }
    fn summarize(&self, request: SummaryRequest) -> Result<String, String> {
        let messages = request.messages.into_iter().map(FfiMessage::from).collect();
        self.0
            .summarize(
                messages,
                request.previous_summary.map(RString::from).into(),
                request.max_tokens as u64,
                RStr::from_str(&request.purpose),
            )
            .into_result()
            .map(RString::into_string)
            .map_err(RString::into_string)
    }
}

pub(crate) fn report_to_ffi(r: StageReport) -> FfiReport {
    FfiReport {
        blocks_changed: r.blocks_changed as u64,
        tokens_freed: r.tokens_freed.map(|t| t as u64).into(),
        notes: r.notes.into_iter().map(RString::from).collect(),
        events: r
            .events
            .into_iter()
            .map(|e| FfiEvent {
                kind: e.kind.into(),
                message_id: e.message_id.into(),
                detail: e.detail.into(),
                tokens: e.tokens as u64,
            })
            .collect(),
        archive_removed: r.archive_removed,
        flags: r.flags.into_iter().map(RString::from).collect(),
    }
}

/// Wraps a [`Stage`] as the FFI stage object.
struct Adapter<S>(S);

impl<S: Stage> FfiStage for Adapter<S> {
    fn apply(
        &self,
        input: FfiInput_TO<'_, RRef<'_, ()>>,
        host: FfiHost_TO<'_, RRef<'_, ()>>,
    ) -> RResult<FfiStageOutput, RString> {
        guarded(|| {
            let materialize = || -> Result<Conversation, String> {
                input
                    .materialize()
                    .into_result()
                    .map_err(RString::into_string)?
                    .try_into()
            };
            let out = self
                .0
                .apply(Input::lazy(&materialize), &PluginHost(&host))?;
            Ok(FfiStageOutput {
                conversation: out.conversation.map(FfiConversation::from).into(),
                report: report_to_ffi(out.report),
            })
        })
    }
}

extern "C" fn new_stage<S: Stage>(config: RStr<'_>) -> RResult<FfiStageBox, RString> {
    guarded(|| {
        let stage = build_stage::<S>(config.as_str())?;
        Ok(FfiStage_TO::from_value(Adapter(stage), TD_Opaque))
    })
}

/// The module a plugin exports: metadata and the stage constructor for `S`.
#[doc(hidden)]
pub fn plugin_module<S: Stage>(
    metadata: extern "C" fn() -> RResult<FfiMetadata, RString>,
) -> <PluginMod as PrefixTypeTrait>::PrefixRef {
    PluginMod {
        metadata,
        new_stage: new_stage::<S>,
    }
    .leak_into_prefix()
}

/// Metadata of `S` at plugin version `version`, as the FFI type.
#[doc(hidden)]
pub fn metadata_ffi<S: Stage>(version: &'static str) -> RResult<FfiMetadata, RString> {
    guarded(|| {
        let m = metadata_of::<S>(version);
        Ok(FfiMetadata {
            name: m.name.into(),
            version: m.version.into(),
            description: m.description.into(),
            config_keys: m
                .config_keys
                .into_iter()
                .map(|k| FfiConfigKey {
                    name: k.name.into(),
                    ty: k.ty.into(),
                    default: k.default.into(),
                    description: k.description.into(),
                })
                .collect(),
        })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! The plugin side of the boundary, driven in-process with FFI objects built here: what
    //! crosses (and how often) when a stage reads, changes or ignores the conversation.

    use super::*;
    use crate::boundary::{FfiInput, FfiStage};
    use crate::testing::MemoryHost;
    use crate::StageOutput;
    use condense_model::{Block, Message, Role};
    use std::cell::Cell;

    struct CountingInput {
        conversation: Conversation,
        materialized: Cell<usize>,
    }

    impl FfiInput for CountingInput {
        fn materialize(&self) -> RResult<FfiConversation, RString> {
            self.materialized.set(self.materialized.get() + 1);
            RResult::ROk(self.conversation.clone().into())
        }
    }

    /// Reads the conversation only when `read`; appends a message only when `change`.
    struct Probe {
        read: bool,
        change: bool,
    }

    impl Stage for Probe {
        type Config = ();
        const NAME: &'static str = "probe";
        const DESCRIPTION: &'static str = "Test stage.";
        fn new(_: ()) -> Result<Self, String> {
            Ok(Probe {
                read: false,
                change: false,
            })
        }
        fn apply(&self, input: Input<'_>, _host: &dyn Host) -> Result<StageOutput, String> {
            if !self.read {
                return Ok(StageOutput::unchanged(StageReport::default()));
            }
            let mut conversation = input.into_conversation()?;
            if !self.change {
                return Ok(StageOutput::unchanged(StageReport::default()));
            }
            conversation
                .messages
                .push(Message::new("m2", Role::User, vec![Block::text("added")]));
            Ok(StageOutput::changed(conversation, StageReport::default()))
        }
    }

    fn run(read: bool, change: bool) -> (usize, Option<Conversation>) {
        let mut conversation = Conversation::default();
        conversation
            .messages
            .push(Message::new("m1", Role::User, vec![Block::text("hello")]));
        let input = CountingInput {
            conversation,
            materialized: Cell::new(0),
        };
        let memory = MemoryHost::default();
        let host = crate::loader::HostAdapter(&memory);
        let host_to = FfiHost_TO::from_ptr(RRef::new(&host), TD_Opaque);
        let input_to = FfiInput_TO::from_ptr(RRef::new(&input), TD_Opaque);
        let out = Adapter(Probe { read, change })
            .apply(input_to, host_to)
            .unwrap();
        let conversation = out
            .conversation
            .into_option()
            .map(|c| Conversation::try_from(c).unwrap());
        (input.materialized.get(), conversation)
    }

    #[test]
    fn a_stage_that_does_not_read_costs_no_copy_either_way() {
        assert_eq!(run(false, false), (0, None));
    }

    #[test]
    fn reading_copies_in_once_and_an_unchanged_result_copies_nothing_back() {
        assert_eq!(run(true, false), (1, None));
    }

    #[test]
    fn a_changed_conversation_comes_back_whole() {
        let (materialized, out) = run(true, true);
        assert_eq!(materialized, 1);
        let ids: Vec<String> = out.unwrap().messages.into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["m1", "m2"]);
    }
}
