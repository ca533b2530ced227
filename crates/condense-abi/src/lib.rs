//! The stable ABI between the condense host and its stage plugins, and the surface stage
//! authors write against.
//!
//! This is the only crate that depends on `abi_stable`: swapping the ABI for another (a
//! hand-written `#[repr(C)]` table over libloading, say) touches nothing else. Stage authors
//! implement [`Stage`] over the ordinary model types and export it with one line:
//!
//! ```ignore
//! condense_abi::export_stage!(MyStage);
//! ```
//!
//! The host loads plugins with [`Plugin::load`] (or [`Plugin::load_with`], which skips the
//! layout check of a library this host has passed before: [`CheckedLayouts`]), builds configured stages with
//! [`Plugin::instantiate`] and runs them with [`LoadedStage::apply`], giving each a [`Host`] and
//! a [`StageInput`] (one for every stage in a row that leaves the conversation as it was).
//!
//! The conversation stays with the host while a stage runs: the stage gets an [`Input`], reads
//! it in place through a [`View`] (FFI-safe `RVec`s of `#[repr(C)]` structs borrowing the
//! host's strings, never JSON), copies it in only to change it, and hands one back only if it
//! changed it ([`StageOutput::unchanged`]). So a stage that decides from host figures costs
//! microseconds whatever the conversation's size, and one that only looks copies nothing.
//! The ABI version is this crate's version; a plugin built against an incompatible one is
//! refused with both versions named.
//!
//! The abi_stable macros expand to `unsafe` code and code that trips a few style lints, so
//! those are allowed crate-wide here (and only here); our own `unsafe` is two blocks in
//! `__private` and the unchecked load of an already checked library in `loader`, each with its
//! safety argument.
#![allow(unsafe_code, non_local_definitions, non_camel_case_types)]

// `#[derive(StageConfig)]` names `::condense_abi::StageConfig`; this crate's own tests derive it.
#[cfg(test)]
extern crate self as condense_abi;

mod boundary;
mod checked;
mod config;
mod config_words;
mod context;
mod export;
mod ffi;
pub mod libfile;
mod loader;
mod replace;
mod sdk;
mod state;
pub mod testing;
mod view;

pub use checked::CheckedLayouts;
pub use condense_sdk_derive::StageConfig;
pub use config::{build_stage, metadata_of, parse_config, ConfigKey, StageConfig, StageMetadata};
pub use context::{Context, RunContext, RunFlags, Signal};
pub use export::describe_panic;
pub use loader::{in_host_service, LoadError, LoadedStage, Plugin, StageCallError, StageInput};
pub use replace::Replacements;
pub use sdk::{
    replace_messages, Change, Host, Input, Stage, StageError, StageEvent, StageOutput, StageReport,
    SummaryRequest,
};
pub use state::{StageState, Versioned};
pub use view::{BlockView, ContentView, MessageView, ToolResultSlot, ToolResultView, View};

/// The ABI version host and plugins must agree on (this crate's version).
pub const ABI_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Ties a stage type to the plugin crate's version; implemented by [`export_stage!`].
#[doc(hidden)]
pub trait ExportedStage: 'static {
    type Stage: Stage;
    const VERSION: &'static str;
}

/// Items [`export_stage!`] expands to. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable::library::LibHeader;
    use abi_stable::library::{__call_root_module_loader, CheckTypeLayout, RootModuleResult};
    use abi_stable::prefix_type::PrefixTypeTrait;

    use crate::boundary::{ForgedPluginMod, ForgedPluginModRef, PluginModRef};
    use crate::export::{metadata_ffi, plugin_module};
    use crate::ExportedStage;

    /// The symbol abi_stable looks for in a library (`abi_stable::library::ROOT_MODULE_LOADER_NAME`;
    /// a unit test checks the two agree). Spelled out because `#[export_name]` needs a literal.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __condense_root_symbol {
        () => {
            "_1as_0lib_1header_0root_bmodule_bloader"
        };
    }

    extern "C" fn metadata<E: ExportedStage>(
    ) -> abi_stable::std_types::RResult<crate::boundary::FfiMetadata, abi_stable::std_types::RString>
    {
        metadata_ffi::<E::Stage>(E::VERSION)
    }

    fn root_module<E: ExportedStage>() -> PluginModRef {
        plugin_module::<E::Stage>(metadata::<E>)
    }

    extern "C" fn loader<E: ExportedStage>() -> RootModuleResult {
        __call_root_module_loader(root_module::<E>)
    }

    /// The library header of a plugin exporting `E`.
    pub const fn lib_header<E: ExportedStage>() -> LibHeader {
        // SAFETY: `loader::<E>` returns the `PrefixRef` of a `PluginModRef`, erased by
        // abi_stable's own `__call_root_module_loader`, which is what `from_constructor`
        // requires for `M = PluginModRef`.
        #[allow(unsafe_code)]
        unsafe {
            LibHeader::from_constructor::<PluginModRef>(loader::<E>, CheckTypeLayout::Yes)
        }
    }

    fn forged_root_module<E: ExportedStage>() -> ForgedPluginModRef {
        let real = root_module::<E>();
        ForgedPluginMod {
            metadata: real.metadata(),
            new_stage: real.new_stage(),
        }
        .leak_into_prefix()
    }

    extern "C" fn forged_loader<E: ExportedStage>() -> RootModuleResult {
        __call_root_module_loader(forged_root_module::<E>)
    }

    /// A header that claims ABI version 99.0.0, for the host's version-mismatch test only.
    pub const fn forged_lib_header<E: ExportedStage>() -> LibHeader {
        // SAFETY: as in `lib_header`, for `M = ForgedPluginModRef`.
        #[allow(unsafe_code)]
        unsafe {
            LibHeader::from_constructor::<ForgedPluginModRef>(
                forged_loader::<E>,
                CheckTypeLayout::Yes,
            )
        }
    }
}

/// Exports a [`Stage`] type as this crate's plugin: `condense_abi::export_stage!(MyStage);`.
///
/// The crate must be built as a `cdylib` (add `rlib` too to unit-test the stage directly).
#[macro_export]
macro_rules! export_stage {
    ($stage:ty) => {
        $crate::export_stage!(@with lib_header, $stage);
    };
    (@forged_abi_version $stage:ty) => {
        $crate::export_stage!(@with forged_lib_header, $stage);
    };
    (@with $header:ident, $stage:ty) => {
        const _: () = {
            #[doc(hidden)]
            pub struct CondenseExport;
            impl $crate::ExportedStage for CondenseExport {
                type Stage = $stage;
                const VERSION: &'static str = env!("CARGO_PKG_VERSION");
            }
            #[doc(hidden)]
            #[export_name = $crate::__condense_root_symbol!()]
            pub static CONDENSE_LIB_HEADER: $crate::__private::LibHeader =
                $crate::__private::$header::<CondenseExport>();
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_symbol_matches_abi_stable() {
        assert_eq!(
            crate::__condense_root_symbol!(),
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
