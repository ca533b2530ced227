//! The plugin side of the boundary: what [`export_stage!`](crate::export_stage) expands to.
//!
//! Every entry point runs inside `catch_unwind`: a panic that reached the FFI boundary would
//! abort the host (each cdylib has its own std, so the host cannot catch it), so it is turned
//! into an error here, inside the plugin, with the panic message and location.

use crate::boundary::{
    FfiConfigKey, FfiEvent, FfiHost_TO, FfiInput_TO, FfiMetadata, FfiReplaced, FfiReport,
    FfiRunContext, FfiStage, FfiStageBox, FfiStageOutput, FfiStage_TO, PluginMod,
};
use crate::config::{build_stage, metadata_of};
use crate::context::{Context, RunContext, RunFlags, Signal};
use crate::ffi::{FfiBlockRef, FfiConversation, FfiMessage};
use crate::sdk::{Change, Host, Input, Stage, StageError, StageReport, SummaryRequest};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::sabi_types::RRef;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use condense_model::{Block, Format};
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
    let msg = condense_text::panic_message(info.payload())
        .unwrap_or("unknown panic payload")
        .to_string();
    (
        msg,
        info.location()
            .map(|l| format!("{}:{}", l.file(), l.line())),
    )
}

/// Runs `f`, turning a panic into `Err("panicked: <message> at <file>:<line>")`.
fn guarded<T>(f: impl FnOnce() -> Result<T, StageError>) -> RResult<T, RString> {
    install_quiet_panic_hook();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e.into_message().into()),
        Err(_) => {
            let msg = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".to_string());
            RResult::RErr(format!("panicked: {msg}").into())
        }
    }
}

/// What a [`Context`] calls: any [`Host`] of this process (by the blanket
/// impl below), or the host across the boundary ([`PluginHost`]). Crate-private: stages see
/// the context's methods, hosts implement [`Host`]; this only lets the context hold either
/// without naming the FFI object's lifetimes.
pub(crate) trait Services {
    fn count_tokens(&self, text: &str) -> usize;
    fn count_block(&self, block: &Block) -> usize;
    fn store_put(&self, bytes: &[u8]) -> Result<String, String>;
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String>;
    fn state_get(&self) -> Result<Option<String>, String>;
    fn state_put(&self, state: &str) -> Result<(), String>;
    fn summarize(&self, request: SummaryRequest) -> Result<String, String>;
}

impl<H: Host> Services for H {
    fn count_tokens(&self, text: &str) -> usize {
        Host::count_tokens(self, text)
    }
    fn count_block(&self, block: &Block) -> usize {
        Host::count_block(self, block)
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        Host::store_put(self, bytes)
    }
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        Host::store_get(self, key)
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        Host::state_get(self)
    }
    fn state_put(&self, state: &str) -> Result<(), String> {
        Host::state_put(self, state)
    }
    fn summarize(&self, request: SummaryRequest) -> Result<String, String> {
        Host::summarize(self, request)
    }
}

/// The plugin-side view of the host services: the FFI object.
struct PluginHost<'r, 'a, 'b>(&'r FfiHost_TO<'a, RRef<'b, ()>>);

impl Services for PluginHost<'_, '_, '_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.count_tokens(RStr::from_str(text)) as usize
    }
    fn count_block(&self, block: &Block) -> usize {
        self.0.count_block(FfiBlockRef::from(block)) as usize
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

/// The FFI code of a format: 0 for none, else 1 + its index in [`Format::ALL`].
pub(crate) fn format_code(format: Option<Format>) -> u8 {
    format
        .and_then(|f| Format::ALL.iter().position(|g| *g == f))
        .map_or(0, |i| i as u8 + 1)
}

fn format_from_code(code: u8) -> Option<Format> {
    usize::from(code)
        .checked_sub(1)
        .and_then(|i| Format::ALL.get(i).copied())
}

/// Signal codes back to signals; codes this build does not know (from a newer peer) are dropped.
pub(crate) fn signals_from_codes(codes: &[u8]) -> Vec<Signal> {
    codes.iter().filter_map(|c| Signal::from_code(*c)).collect()
}

pub(crate) fn run_to_ffi(run: &RunContext) -> FfiRunContext {
    FfiRunContext {
        now_ms: run.now_ms,
        context_window: run.context_window as u64,
        max_output_tokens: run.max_output_tokens as u64,
        output_reserve: run.output_reserve as u64,
        tokens_freed_before: run.tokens_freed_before as u64,
        conversation_tokens: run.conversation_tokens as u64,
        session: run.session.as_str().into(),
        format: format_code(run.format),
        forced: run.flags.forced,
        disabled: run.flags.disabled,
        signals: run.flags.signals.iter().map(|s| s.code()).collect(),
    }
}

fn run_from_ffi(run: &FfiRunContext) -> RunContext {
    RunContext {
        now_ms: run.now_ms,
        context_window: run.context_window as usize,
        max_output_tokens: run.max_output_tokens as usize,
        output_reserve: run.output_reserve as usize,
        tokens_freed_before: run.tokens_freed_before as usize,
        conversation_tokens: run.conversation_tokens as usize,
        session: run.session.as_str().to_string(),
        format: format_from_code(run.format),
        flags: RunFlags {
            forced: run.forced,
            disabled: run.disabled,
            signals: signals_from_codes(&run.signals),
        },
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
        signals: r.signals.into_iter().map(Signal::code).collect(),
    }
}

/// Wraps a [`Stage`] as the FFI stage object.
struct Adapter<S>(S);

impl<S: Stage> FfiStage for Adapter<S> {
    fn apply(
        &self,
        run: &FfiRunContext,
        input: FfiInput_TO<'_, RRef<'_, ()>>,
        host: FfiHost_TO<'_, RRef<'_, ()>>,
    ) -> RResult<FfiStageOutput, RString> {
        guarded(|| {
            let lend = || {
                input
                    .lend()
                    .into_result()
                    .map_err(|e| StageError::new(e.into_string()))
            };
            let run = run_from_ffi(run);
            let host = PluginHost(&host);
            let cx = Context::plugin(&run, &host);
            let out = self.0.apply(Input::lent(&lend, None), &cx)?;
            let (conversation, replaced) = match out.change {
                Change::Unchanged => (ROption::RNone, RVec::new()),
                Change::Whole(c) => (ROption::RSome(FfiConversation::from(c)), RVec::new()),
                Change::Replaced(messages) => (
                    ROption::RNone,
                    messages
                        .into_iter()
                        .map(|(index, m)| FfiReplaced {
                            index: index as u64,
                            message: FfiMessage::from(m),
                        })
                        .collect(),
                ),
            };
            Ok(FfiStageOutput {
                conversation,
                replaced,
                report: report_to_ffi(out.report),
            })
        })
    }
}

/// `stage` as the FFI stage object.
pub(crate) fn stage_object<S: Stage>(stage: S) -> FfiStageBox {
    FfiStage_TO::from_value(Adapter(stage), TD_Opaque)
}

extern "C" fn new_stage<S: Stage>(config: RStr<'_>) -> RResult<FfiStageBox, RString> {
    guarded(|| Ok(stage_object(build_stage::<S>(config.as_str())?)))
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
        let m = metadata_of::<S>(version)?;
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
    use crate::ffi::FfiConversationRef;
    use crate::testing::MemoryHost;
    use crate::StageOutput;
    use condense_model::{Block, Conversation, Message, Role};
    use std::cell::Cell;

    struct CountingInput<'c> {
        mirror: FfiConversationRef<'c>,
        lent: Cell<usize>,
    }

    impl FfiInput for CountingInput<'_> {
        fn lend(&self) -> RResult<&FfiConversationRef<'_>, RString> {
            self.lent.set(self.lent.get() + 1);
            RResult::ROk(&self.mirror)
        }
    }

    /// Reads the conversation only when `read`; appends a message only when `change`; asks the
    /// host to count a text when `count`.
    struct Probe {
        read: bool,
        change: bool,
        count: bool,
    }

    impl Stage for Probe {
        type Config = ();
        const NAME: &'static str = "probe";
        const DESCRIPTION: &'static str = "Test stage.";
        fn new(_: ()) -> Result<Self, StageError> {
            Ok(Probe {
                read: false,
                change: false,
                count: false,
            })
        }
        fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
            if self.count {
                // A stage that swallows what the host answers still fails when the host panicked.
                let _ = cx.count_tokens("some text");
            }
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

    fn conversation() -> Conversation {
        let mut conversation = Conversation::default();
        conversation
            .messages
            .push(Message::new("m1", Role::User, vec![Block::text("hello")]));
        conversation
    }

    fn run(read: bool, change: bool) -> (usize, Option<Conversation>) {
        let conversation = conversation();
        let input = CountingInput {
            mirror: (&conversation).into(),
            lent: Cell::new(0),
        };
        let memory = MemoryHost::default();
        let host = crate::loader::HostAdapter::new(&memory);
        let host_to = FfiHost_TO::from_ptr(RRef::new(&host), TD_Opaque);
        let input_to = FfiInput_TO::from_ptr(RRef::new(&input), TD_Opaque);
        let probe = Probe {
            read,
            change,
            count: false,
        };
        let out = Adapter(probe)
            .apply(&run_to_ffi(&RunContext::default()), input_to, host_to)
            .unwrap();
        let conversation = out
            .conversation
            .into_option()
            .map(|c| Conversation::try_from(c).unwrap());
        (input.lent.get(), conversation)
    }

    #[test]
    fn the_run_context_crosses_whole() {
        let mut run = RunContext {
            format: Some(Format::Cline),
            flags: RunFlags {
                forced: true,
                disabled: false,
                signals: vec![Signal::Compacted, Signal::CollapseActive],
            },
            conversation_tokens: 12_345,
            ..RunContext::default()
        };
        assert_eq!(run_from_ffi(&run_to_ffi(&run)), run);
        run.format = None;
        assert_eq!(run_from_ffi(&run_to_ffi(&run)), run);
    }

    #[test]
    fn a_panicking_host_service_fails_the_stage_in_one_line() {
        let memory = MemoryHost::default().with_counter(|_| panic!("tokenizer table missing"));
        let stage = Adapter(Probe {
            read: false,
            change: false,
            count: true,
        });
        let conversation = conversation();
        let err = crate::loader::call_stage(
            &|run, input, host| stage.apply(run, input, host),
            &RunContext::default(),
            &crate::StageInput::new(&conversation),
            &memory,
        )
        .unwrap_err();
        let line = err.to_string();
        assert!(
            line.starts_with("host service `count_tokens` panicked: tokenizer table missing"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
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
        let (lent, out) = run(true, true);
        assert_eq!(lent, 1);
        let ids: Vec<String> = out.unwrap().messages.into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["m1", "m2"]);
    }
}
