//! The host side of the boundary: load a plugin library, build stages, call them.

use crate::boundary::{
    FfiHost, FfiHost_TO, FfiInput, FfiInput_TO, FfiReport, FfiRunContext, FfiStageBox,
    FfiStageOutput, PluginModRef,
};
use crate::checked::CheckedLayouts;
use crate::config::{ConfigKey, StageMetadata};
use crate::context::RunContext;
use crate::export::{run_to_ffi, signals_from_codes};
use crate::ffi::{FfiBlockRef, FfiConversationRef, FfiMessage};
use crate::sdk::{Change, Host, StageEvent, StageOutput, StageReport, SummaryRequest};
use abi_stable::library::{lib_header_from_path, LibraryError};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::sabi_types::RRef;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use condense_model::Conversation;
use std::cell::{Cell, OnceCell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Why a plugin could not be loaded. Each variant displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is not a complete shared library for this platform (checked before the
    /// dynamic loader maps it: a truncated library would kill the process with SIGBUS).
    #[error("{path}: not a usable plugin library: {source}")]
    File {
        path: PathBuf,
        source: crate::libfile::LibFileError,
    },
    #[error("{path}: cannot open plugin library: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("{path}: not a condense plugin (no stage module exported)")]
    NotAPlugin { path: PathBuf },
    #[error(
        "{path}: ABI version mismatch: this condense speaks ABI {host}, the plugin was built against {plugin}; rebuild the plugin against condense-abi {host}"
    )]
    VersionMismatch {
        path: PathBuf,
        host: String,
        plugin: String,
    },
    #[error("{path}: plugin ABI layout does not match this condense ({summary}); rebuild the plugin (--verbose shows the full layout report)")]
    Layout {
        path: PathBuf,
        summary: String,
        detail: String,
    },
    #[error("{path}: plugin failed to initialize: {reason}")]
    Init { path: PathBuf, reason: String },
    #[error("{path}: plugin metadata unavailable: {reason}")]
    Metadata { path: PathBuf, reason: String },
}

impl LoadError {
    /// The long form of the error, for `--verbose` (the full abi_stable layout report).
    pub fn detail(&self) -> Option<&str> {
        match self {
            LoadError::Layout { detail, .. } => Some(detail),
            _ => None,
        }
    }
}

/// Why calling a stage failed.
#[derive(Debug, thiserror::Error)]
pub enum StageCallError {
    /// The stage returned an error (or panicked: the message starts with `panicked:`).
    #[error("{0}")]
    Failed(String),
    /// The stage returned data that does not convert back to the model.
    #[error("returned malformed data: {0}")]
    Malformed(String),
}

/// A loaded plugin library. Libraries are never unloaded (unloading Rust cdylibs with
/// thread-locals is unsound), so a `Plugin` is cheap to keep and to copy.
#[derive(Clone, Copy)]
pub struct Plugin {
    module: PluginModRef,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Plugin")
    }
}

/// The first line of abi_stable's layout report, cut to something readable.
fn summarize_layout_error(full: &str) -> String {
    let interesting = full
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| {
            l.contains("incompatible")
                || l.contains("too many")
                || l.contains("mismatch")
                || l.contains("different")
        })
        .or_else(|| full.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("layouts differ");
    let mut s: String = interesting.chars().take(160).collect();
    if interesting.chars().count() > 160 {
        s.push('…');
    }
    s
}

fn classify(path: &Path, err: LibraryError) -> LoadError {
    let path = path.to_path_buf();
    match err {
        LibraryError::OpenError { err, .. } => {
            // dlerror() starts with the path again: say it once.
            let full = first_line(&err.to_string());
            let prefix = format!("{}: ", path.display());
            let reason = full.strip_prefix(&prefix).unwrap_or(&full).to_string();
            LoadError::Open { path, reason }
        }
        LibraryError::GetSymbolError { .. } => LoadError::NotAPlugin { path },
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => LoadError::VersionMismatch {
            path,
            host: expected_version.to_string(),
            plugin: actual_version.to_string(),
        },
        LibraryError::AbiInstability(e) => {
            let detail = e.to_string();
            LoadError::Layout {
                path,
                summary: summarize_layout_error(&detail),
                detail,
            }
        }
        LibraryError::InvalidAbiHeader(h) => LoadError::VersionMismatch {
            path,
            host: "abi_stable 0.11".to_string(),
            plugin: format!("abi_stable header {h:?}"),
        },
        other => LoadError::Init {
            path,
            reason: first_line(&other.to_string()),
        },
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

impl Plugin {
    /// Loads the plugin library at `path`, checking its ABI version and layout.
    pub fn load(path: &Path) -> Result<Plugin, LoadError> {
        Self::load_with(path, &mut CheckedLayouts::default())
    }

    /// [`Plugin::load`], skipping the layout check when `checked` says this host has passed
    /// it for this very library before (same build ids, see [`CheckedLayouts`]), and noting
    /// in `checked` a check that ran and passed. The ABI version is checked every time.
    pub fn load_with(path: &Path, checked: &mut CheckedLayouts) -> Result<Plugin, LoadError> {
        let file = crate::libfile::check_library(path).map_err(|source| LoadError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let pair = crate::checked::pair(file.build_id.as_deref());
        // `lib_header_from_path(..).init_root_module()`, never `RootModule::load_from_file`:
        // the latter caches one library per module type, so a second plugin would silently
        // come back as the first.
        let header = lib_header_from_path(path).map_err(|e| classify(path, e))?;
        let module = match pair {
            // SAFETY: `pair` hashes this host's build id and the library's, so this host has
            // run abi_stable's layout check on a library with the same linked content, and it
            // passed: the check is a function of the two files' layouts alone, so it would
            // pass again. abi_stable documents the unchecked load for such a cache.
            Some(pair) if checked.contains(pair) => unsafe {
                header.init_root_module_with_unchecked_layout::<PluginModRef>()
            },
            _ => {
                let module = header.init_root_module::<PluginModRef>();
                checked.ran(pair, module.is_ok());
                module
            }
        }
        .map_err(|e| classify(path, e))?;
        Ok(Plugin { module })
    }

    /// What the plugin says about itself.
    pub fn metadata(&self, path: &Path) -> Result<StageMetadata, LoadError> {
        let m = (self.module.metadata())()
            .into_result()
            .map_err(|e| LoadError::Metadata {
                path: path.to_path_buf(),
                reason: e.into_string(),
            })?;
        Ok(StageMetadata {
            name: m.name.into_string(),
            version: m.version.into_string(),
            description: m.description.into_string(),
            config_keys: m
                .config_keys
                .into_iter()
                .map(|k| ConfigKey {
                    name: k.name.into_string(),
                    ty: k.ty.into_string(),
                    default: k.default.into_string(),
                    description: k.description.into_string(),
                })
                .collect(),
        })
    }

    /// Builds a stage from its config table (TOML text). The error is the plugin's own one-line
    /// message ("snip: max_tool_result_bytes must be > 0, got 0").
    pub fn instantiate(&self, config_toml: &str) -> Result<LoadedStage, String> {
        (self.module.new_stage())(RStr::from_str(config_toml))
            .into_result()
            .map(|inner| LoadedStage { inner })
            .map_err(RString::into_string)
    }
}

/// A configured stage, ready to run.
pub struct LoadedStage {
    inner: FfiStageBox,
}

impl std::fmt::Debug for LoadedStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadedStage")
    }
}

impl LoadedStage {
    /// A stage of this process behind the same FFI objects a plugin library exports, without a
    /// library: for hosts' tests of the runner, and for embedding a stage in a binary.
    pub fn from_stage<S: crate::Stage>(stage: S) -> LoadedStage {
        LoadedStage {
            inner: crate::export::stage_object(stage),
        }
    }

    /// Runs the stage over `input`'s conversation, which stays here: the stage reads it through
    /// the mirror `input` lends (made on the first read), copies it in only to change it, and
    /// hands a new one back only if it changed it (`None` in the output means "unchanged").
    /// Nothing is serialized either way; a panic inside the stage, or inside one of `host`'s
    /// services while the stage runs, comes back as [`StageCallError::Failed`].
    pub fn apply(
        &self,
        input: &StageInput<'_>,
        run: &RunContext,
        host: &dyn Host,
    ) -> Result<StageOutput, StageCallError> {
        call_stage(
            &|run, input, host| self.inner.apply(run, input, host),
            run,
            input,
            host,
        )
    }
}

/// The FFI stage call of [`LoadedStage::apply`], over any stage object (tests call it on an
/// in-process adapter).
type FfiApply<'s> = dyn Fn(
        &FfiRunContext,
        FfiInput_TO<'_, RRef<'_, ()>>,
        FfiHost_TO<'_, RRef<'_, ()>>,
    ) -> RResult<FfiStageOutput, RString>
    + 's;

/// Calls a stage through the boundary with `host`'s services, turning a host service that
/// panicked during the call into the stage's failure (the stage saw a neutral answer, which it
/// must not be trusted with).
pub(crate) fn call_stage(
    apply: &FfiApply<'_>,
    run: &RunContext,
    input: &StageInput<'_>,
    host: &dyn Host,
) -> Result<StageOutput, StageCallError> {
    let adapter = HostAdapter::new(host);
    let host_to = FfiHost_TO::from_ptr(RRef::new(&adapter), TD_Opaque);
    let input_to = FfiInput_TO::from_ptr(RRef::new(input), TD_Opaque);
    let out = apply(&run_to_ffi(run), input_to, host_to).into_result();
    if let Some(panic) = adapter.panic.take() {
        return Err(StageCallError::Failed(panic));
    }
    let out = out.map_err(|e| StageCallError::Failed(e.into_string()))?;
    let change = match out.conversation.into_option() {
        Some(c) => Change::Whole(c.try_into().map_err(StageCallError::Malformed)?),
        None if out.replaced.is_empty() => Change::Unchanged,
        None => Change::Replaced(
            out.replaced
                .into_iter()
                .map(|r| {
                    let index = usize::try_from(r.index).map_err(|_| {
                        StageCallError::Malformed(format!("replaced message index {}", r.index))
                    })?;
                    let message = r.message.try_into().map_err(StageCallError::Malformed)?;
                    Ok((index, message))
                })
                .collect::<Result<_, StageCallError>>()?,
        ),
    };
    Ok(StageOutput {
        change,
        report: report_from_ffi(out.report),
    })
}

/// The conversation stages are handed, as the host holds it while they run: the conversation,
/// and its mirror across the boundary (vectors of `#[repr(C)]` structs borrowing its strings),
/// made when the first stage reads it and lent to every stage handed the same `StageInput`.
///
/// A host hands consecutive stages one `StageInput` for as long as none changes the
/// conversation: making the mirror and dropping it cost about 0.45 M instructions at 160k
/// tokens, per stage that read it when each had its own (`condense-host`'s `run/stage.rs`
/// hands them out; its tests count the mirrors made with
/// [`testing::mirrors_made`](crate::testing::mirrors_made)).
pub struct StageInput<'c> {
    conversation: &'c Conversation,
    mirror: OnceCell<FfiConversationRef<'c>>,
}

impl<'c> StageInput<'c> {
    /// The input of stages over `conversation`; its mirror is made when a stage first reads it.
    pub fn new(conversation: &'c Conversation) -> Self {
        StageInput {
            conversation,
            mirror: OnceCell::new(),
        }
    }

    fn mirror(&self) -> &FfiConversationRef<'c> {
        self.mirror.get_or_init(|| {
            MIRRORS_MADE.set(MIRRORS_MADE.get() + 1);
            FfiConversationRef::from(self.conversation)
        })
    }
}

thread_local! {
    /// How many mirrors [`StageInput`]s made on this thread ([`crate::testing::mirrors_made`]).
    static MIRRORS_MADE: Cell<usize> = const { Cell::new(0) };
}

/// How many mirrors of a conversation [`StageInput`]s made on this thread so far.
pub(crate) fn mirrors_made() -> usize {
    MIRRORS_MADE.get()
}

impl FfiInput for StageInput<'_> {
    fn lend(&self) -> RResult<&FfiConversationRef<'_>, RString> {
        // Borrowing plain data has nothing that panics short of allocation failure (the
        // vectors of the mirror), which aborts anyway.
        RResult::ROk(self.mirror())
    }
}

fn report_from_ffi(r: FfiReport) -> StageReport {
    StageReport {
        blocks_changed: r.blocks_changed as usize,
        tokens_freed: r.tokens_freed.into_option().map(|t| t as usize),
        notes: r.notes.into_iter().map(RString::into_string).collect(),
        events: r
            .events
            .into_iter()
            .map(|e| StageEvent {
                kind: e.kind.into_string(),
                message_id: e.message_id.into_string(),
                detail: e.detail.into_string(),
                tokens: e.tokens as usize,
            })
            .collect(),
        archive_removed: r.archive_removed,
        signals: signals_from_codes(&r.signals),
    }
}

thread_local! {
    /// Set while a host service runs under [`HostAdapter`]'s guard on this thread.
    static IN_HOST_SERVICE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is inside a host service called by a stage. A host binary's panic
/// hook checks it to stay quiet: such a panic is caught and reported as the stage's failure, in
/// one line.
pub fn in_host_service() -> bool {
    IN_HOST_SERVICE.with(Cell::get)
}

/// The host services as the FFI object. A panic in host code must not cross the boundary
/// either: each call is guarded, answers a neutral value (or an error), and the first panic is
/// kept so [`call_stage`] fails the stage with it.
pub(crate) struct HostAdapter<'a> {
    host: &'a dyn Host,
    panic: RefCell<Option<String>>,
}

impl<'a> HostAdapter<'a> {
    pub(crate) fn new(host: &'a dyn Host) -> Self {
        HostAdapter {
            host,
            panic: RefCell::new(None),
        }
    }

    /// Runs service `name`, answering `fallback` if it panics.
    fn guard<T>(&self, name: &str, fallback: T, f: impl FnOnce() -> T) -> T {
        let was = IN_HOST_SERVICE.with(|c| c.replace(true));
        let result = catch_unwind(AssertUnwindSafe(f));
        IN_HOST_SERVICE.with(|c| c.set(was));
        match result {
            Ok(v) => v,
            Err(payload) => {
                let message =
                    condense_text::panic_message(&*payload).unwrap_or("unknown panic payload");
                let line = format!("host service `{name}` panicked: {message}");
                let line = line.lines().next().unwrap_or_default().to_string();
                self.panic.borrow_mut().get_or_insert(line);
                fallback
            }
        }
    }

    fn guard_res<T>(
        &self,
        name: &str,
        f: impl FnOnce() -> Result<T, String>,
    ) -> RResult<T, RString> {
        self.guard(name, Err(format!("host service `{name}` panicked")), f)
            .map_err(RString::from)
            .into()
    }
}

impl FfiHost for HostAdapter<'_> {
    fn count_tokens(&self, text: RStr<'_>) -> u64 {
        self.guard("count_tokens", 0, || {
            self.host.count_tokens(text.as_str()) as u64
        })
    }
    fn count_block(&self, block: FfiBlockRef<'_>) -> u64 {
        match condense_model::Block::try_from(block) {
            Ok(block) => self.guard("count_block", 0, || self.host.count_block(&block) as u64),
            Err(e) => {
                self.panic.borrow_mut().get_or_insert(format!(
                    "host service `count_block` refused a malformed block: {e}"
                ));
                0
            }
        }
    }
    fn store_put(&self, bytes: RSlice<'_, u8>) -> RResult<RString, RString> {
        self.guard_res("store_put", || {
            self.host.store_put(bytes.as_slice()).map(RString::from)
        })
    }
    fn store_get(&self, key: RStr<'_>) -> RResult<ROption<RVec<u8>>, RString> {
        self.guard_res("store_get", || {
            self.host
                .store_get(key.as_str())
                .map(|o| o.map(RVec::from).into())
        })
    }
    fn state_get(&self) -> RResult<ROption<RString>, RString> {
        self.guard_res("state_get", || {
            self.host.state_get().map(|o| o.map(RString::from).into())
        })
    }
    fn state_put(&self, state: RStr<'_>) -> RResult<(), RString> {
        self.guard_res("state_put", || self.host.state_put(state.as_str()))
    }
    fn summarize(
        &self,
        messages: RVec<FfiMessage>,
        previous_summary: ROption<RString>,
        max_tokens: u64,
        purpose: RStr<'_>,
    ) -> RResult<RString, RString> {
        self.guard_res("summarize", || {
            let messages = messages
                .into_iter()
                .map(condense_model::Message::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            let request = SummaryRequest {
                messages,
                previous_summary: previous_summary.into_option().map(RString::into_string),
                max_tokens: max_tokens as usize,
                purpose: purpose.as_str().to_string(),
            };
            self.host.summarize(request).map(RString::from)
        })
    }
}
