//! The FFI contract itself: the stage object, the host services object and the root module.
//!
//! Evolution rules (abi_stable prefix types): methods and fields are only ever appended below
//! the `last_prefix_field` marker; a new host then still loads old plugins for the appended
//! items it can do without, and an old host loads new plugins.

use crate::ffi::{FfiBlockRef, FfiConversation, FfiConversationRef, FfiMessage};
use abi_stable::library::RootModule;
use abi_stable::sabi_types::RRef;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec};
use abi_stable::{declare_root_module_statics, package_version_strings, sabi_trait, StableAbi};

/// What a stage hands back: the new conversation whole, or the messages it replaced in place,
/// or neither when it changed nothing (then nothing crosses back); and its report.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiStageOutput {
    pub conversation: ROption<FfiConversation>,
    /// With no `conversation`: the messages replaced in place ([`crate::Change::Replaced`]).
    pub replaced: RVec<FfiReplaced>,
    pub report: FfiReport,
}

/// One message replaced in place, at `index` of the conversation the stage was handed.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiReplaced {
    pub index: u64,
    pub message: FfiMessage,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiReport {
    pub blocks_changed: u64,
    /// The stage's own figure of tokens freed, when it has one (snip's `tokens_freed`).
    pub tokens_freed: ROption<u64>,
    pub notes: RVec<RString>,
    pub events: RVec<FfiEvent>,
    /// Whether the host may archive what the stage removed (false for secret redaction).
    pub archive_removed: bool,
    /// Signals for the later stages of the run ([`crate::Signal`] codes).
    pub signals: RVec<u8>,
}

/// The facts of one stage call ([`crate::RunContext`]), crossing once per call.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiRunContext {
    pub now_ms: i64,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub output_reserve: u64,
    pub tokens_freed_before: u64,
    pub conversation_tokens: u64,
    pub session: RString,
    /// 0: unknown; otherwise 1 + the index in `Format::ALL`.
    pub format: u8,
    pub forced: bool,
    pub disabled: bool,
    /// [`crate::Signal`] codes raised earlier in the run.
    pub signals: RVec<u8>,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiEvent {
    pub kind: RString,
    pub message_id: RString,
    pub detail: RString,
    pub tokens: u64,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiMetadata {
    pub name: RString,
    pub version: RString,
    pub description: RString,
    pub config_keys: RVec<FfiConfigKey>,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiConfigKey {
    pub name: RString,
    pub ty: RString,
    pub default: RString,
    pub description: RString,
}

/// The host's services. Plugins never do I/O themselves; the plain facts of a call come in
/// [`FfiRunContext`] instead.
#[sabi_trait]
pub trait FfiHost {
    fn count_tokens(&self, text: RStr<'_>) -> u64;
    fn count_block(&self, block: FfiBlockRef<'_>) -> u64;
    fn store_put(&self, bytes: RSlice<'_, u8>) -> RResult<RString, RString>;
    fn store_get(&self, key: RStr<'_>) -> RResult<ROption<RVec<u8>>, RString>;
    fn state_get(&self) -> RResult<ROption<RString>, RString>;
    fn state_put(&self, state: RStr<'_>) -> RResult<(), RString>;
    #[sabi(last_prefix_field)]
    fn summarize(
        &self,
        messages: RVec<FfiMessage>,
        previous_summary: ROption<RString>,
        max_tokens: u64,
        purpose: RStr<'_>,
    ) -> RResult<RString, RString>;
}

/// The conversation a stage is handed, held by the host. The plugin asks for it only if the
/// stage reads it, so a stage that decides from host services alone costs nothing here. What it
/// gets is lent: the host's mirror of its conversation (every string the host's), made once
/// and lent to every stage after it until one changes the conversation
/// ([`StageInput`](crate::StageInput)), so no stage pays for making or dropping it.
#[sabi_trait]
pub trait FfiInput {
    #[sabi(last_prefix_field)]
    fn lend(&self) -> RResult<&FfiConversationRef<'_>, RString>;
}

/// A configured stage living in a plugin.
#[sabi_trait]
pub trait FfiStage: Send + Sync {
    #[sabi(last_prefix_field)]
    fn apply(
        &self,
        run: &FfiRunContext,
        input: FfiInput_TO<'_, RRef<'_, ()>>,
        host: FfiHost_TO<'_, RRef<'_, ()>>,
    ) -> RResult<FfiStageOutput, RString>;
}

/// The boxed stage object that crosses the boundary.
pub type FfiStageBox = FfiStage_TO<'static, RBox<()>>;

/// The root module every plugin exports.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub metadata: extern "C" fn() -> RResult<FfiMetadata, RString>,
    /// Builds a stage from its `[stage.config]` table, given as TOML text.
    #[sabi(last_prefix_field)]
    pub new_stage: extern "C" fn(RStr<'_>) -> RResult<FfiStageBox, RString>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "condense_stage";
    const NAME: &'static str = "condense stage plugin";
    // The ABI version is this crate's version: a plugin built against another minor version
    // (or major, from 1.0 on) is refused at load time with both versions named.
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

pub use forged::{ForgedPluginMod, ForgedPluginModRef};

// The forged module's accessors are read only through abi_stable's layout check.
#[allow(dead_code)]
mod forged {
    use super::*;

    /// The same module claiming ABI version 99.0.0. Exists only so the host's version check can be
    /// exercised on a real library (the `test-faulty` plugin's `forged-abi-version` feature); never
    /// use it in a real plugin.
    #[doc(hidden)]
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = ForgedPluginModRef)))]
    #[sabi(missing_field(panic))]
    pub struct ForgedPluginMod {
        pub metadata: extern "C" fn() -> RResult<FfiMetadata, RString>,
        #[sabi(last_prefix_field)]
        pub new_stage: extern "C" fn(RStr<'_>) -> RResult<FfiStageBox, RString>,
    }

    impl RootModule for ForgedPluginModRef {
        declare_root_module_statics! {ForgedPluginModRef}
        const BASE_NAME: &'static str = "condense_stage";
        const NAME: &'static str = "condense stage plugin";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new("99.0.0");
    }
}
