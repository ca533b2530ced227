//! Which files in an agent's folders hold sessions: the extensions the readers take, and the
//! files some agents keep beside a session that are not conversations. The binary's folder
//! walk asks here, so a new format's files are added where the format is.
//!
//! ```
//! use condense_formats::files::{COMPANION_FILES, SESSION_EXTENSIONS};
//! assert!(SESSION_EXTENSIONS.contains(&"jsonl"));
//! assert!(COMPANION_FILES.contains(&"ui_messages.json"));
//! ```

/// File extensions a folder walk takes as sessions: JSON and JSONL (Claude Code, Codex CLI,
/// Cline, request bodies, evaluation outputs), and SWE-agent's `.traj` (JSON).
pub const SESSION_EXTENSIONS: [&str; 3] = ["json", "jsonl", "traj"];

/// Files agents keep next to their sessions that are not conversations: Cline / Roo Code's
/// task folder holds `ui_messages.json` (what the UI showed) and `task_metadata.json` beside
/// `api_conversation_history.json` (the conversation).
pub const COMPANION_FILES: [&str; 2] = ["ui_messages.json", "task_metadata.json"];
