//! The host side of the boundary: load a plugin library, build stages, call them.

use crate::boundary::{
    FfiHost, FfiHost_TO, FfiInput, FfiInput_TO, FfiReport, FfiStageBox, PluginModRef,
};
use crate::ffi::{FfiConversation, FfiMessage};
use crate::sdk::{
    ConfigKey, Host, StageEvent, StageMetadata, StageOutput, StageReport, SummaryRequest,
};
use abi_stable::library::{lib_header_from_path, LibraryError};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::sabi_types::RRef;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use condense_model::Conversation;
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
        crate::libfile::check_library(path).map_err(|source| LoadError::File {
            path: path.to_path_buf(),
            source,
        })?;
        // `lib_header_from_path(..).init_root_module()`, never `RootModule::load_from_file`:
        // the latter caches one library per module type, so a second plugin would silently
        // come back as the first.
        let header = lib_header_from_path(path).map_err(|e| classify(path, e))?;
        let module = header
            .init_root_module::<PluginModRef>()
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
    /// Runs the stage over `conversation`, which stays here: the plugin copies it in only if
    /// the stage reads it, and hands a new one back only if the stage changed it (`None` in the
    /// output means "unchanged"). Nothing is serialized either way; a panic inside the stage
    /// comes back as [`StageCallError::Failed`].
    pub fn apply(
        &self,
        conversation: &Conversation,
        host: &dyn Host,
    ) -> Result<StageOutput, StageCallError> {
        let adapter = HostAdapter(host);
        let host_to = FfiHost_TO::from_ptr(RRef::new(&adapter), TD_Opaque);
        let input = HostInput(conversation);
        let input_to = FfiInput_TO::from_ptr(RRef::new(&input), TD_Opaque);
        let out = self
            .inner
            .apply(input_to, host_to)
            .into_result()
            .map_err(|e| StageCallError::Failed(e.into_string()))?;
        let conversation = match out.conversation.into_option() {
            Some(c) => Some(c.try_into().map_err(StageCallError::Malformed)?),
            None => None,
        };
        Ok(StageOutput {
            conversation,
            report: report_from_ffi(out.report),
        })
    }
}

/// The host's conversation as the FFI input object: copied out only when the stage asks.
struct HostInput<'a>(&'a Conversation);

impl FfiInput for HostInput<'_> {
    fn materialize(&self) -> RResult<FfiConversation, RString> {
        guard_res(|| Ok(FfiConversation::from(self.0.clone())))
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
        flags: r.flags.into_iter().map(RString::into_string).collect(),
    }
}

/// The host services as the FFI object. A panic in host code must not cross the boundary
/// either, so each call is guarded and degrades to an error (or a neutral value).
pub(crate) struct HostAdapter<'a>(pub(crate) &'a dyn Host);

fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

fn guard_res<T>(f: impl FnOnce() -> Result<T, String>) -> RResult<T, RString> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e.into()),
        Err(_) => RResult::RErr("host service panicked".into()),
    }
}

impl FfiHost for HostAdapter<'_> {
    fn count_tokens(&self, text: RStr<'_>) -> u64 {
        guard(0, || self.0.count_tokens(text.as_str()) as u64)
    }
    fn now_ms(&self) -> i64 {
        guard(0, || self.0.now_ms())
    }
    fn store_put(&self, bytes: RSlice<'_, u8>) -> RResult<RString, RString> {
        guard_res(|| self.0.store_put(bytes.as_slice()).map(RString::from))
    }
    fn store_get(&self, key: RStr<'_>) -> RResult<ROption<RVec<u8>>, RString> {
        guard_res(|| {
            self.0
                .store_get(key.as_str())
                .map(|o| o.map(RVec::from).into())
        })
    }
    fn state_get(&self) -> RResult<ROption<RString>, RString> {
        guard_res(|| self.0.state_get().map(|o| o.map(RString::from).into()))
    }
    fn state_put(&self, state: RStr<'_>) -> RResult<(), RString> {
        guard_res(|| self.0.state_put(state.as_str()))
    }
    fn tokens_freed_before(&self) -> u64 {
        guard(0, || self.0.tokens_freed_before() as u64)
    }
    fn context_window(&self) -> u64 {
        guard(0, || self.0.context_window() as u64)
    }
    fn max_output_tokens(&self) -> u64 {
        guard(0, || self.0.max_output_tokens() as u64)
    }
    fn has_flag(&self, flag: RStr<'_>) -> bool {
        guard(false, || self.0.has_flag(flag.as_str()))
    }
    fn session_id(&self) -> RString {
        guard(RString::new(), || self.0.session_id().into())
    }
    fn source_format(&self) -> RString {
        guard(RString::new(), || self.0.source_format().into())
    }
    fn conversation_tokens(&self) -> u64 {
        guard(0, || self.0.conversation_tokens() as u64)
    }
    fn summarize(
        &self,
        messages: RVec<FfiMessage>,
        previous_summary: ROption<RString>,
        max_tokens: u64,
        purpose: RStr<'_>,
    ) -> RResult<RString, RString> {
        guard_res(|| {
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
            self.0.summarize(request).map(RString::from)
        })
    }
    fn output_reserve(&self) -> u64 {
        guard(0, || self.0.output_reserve() as u64)
    }
}
