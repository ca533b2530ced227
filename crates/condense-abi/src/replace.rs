//! Changing a few messages of a long conversation without copying the rest.
//!
//! A stage that rewrites some messages in place (a tool result truncated, an old output
//! cleared) reads the conversation through its [`View`] and copies in only the messages it
//! changes; [`Replacements::into_output`] hands back just those ([`Change::Replaced`]), and the
//! host checks, counts and archives only them.
//!
//! ```
//! use condense_abi::testing::{apply, MemoryHost};
//! use condense_abi::{Context, Input, Replacements, Stage, StageConfig, StageError};
//! use condense_abi::{StageOutput, StageReport};
//! use condense_model::{Block, Conversation, Message, Role};
//!
//! #[derive(Default, serde::Serialize, serde::Deserialize, StageConfig)]
//! struct Config {}
//!
//! /// Upper-cases the last message.
//! struct Shout;
//! impl Stage for Shout {
//!     type Config = Config;
//!     const NAME: &'static str = "shout";
//!     const DESCRIPTION: &'static str = "Upper-cases the last message.";
//!     fn new(_: Config) -> Result<Self, StageError> { Ok(Shout) }
//!     fn apply(&self, input: Input<'_>, _: &Context<'_>) -> Result<StageOutput, StageError> {
//!         let view = input.view()?;
//!         let mut replacements = Replacements::new(&view);
//!         let last = view.len().checked_sub(1);
//!         if let Some(message) = last.and_then(|i| replacements.message_mut(i)) {
//!             for block in &mut message.content.blocks {
//!                 if let Block::Text(t) = block {
//!                     t.text = t.text.to_uppercase();
//!                 }
//!             }
//!         }
//!         let report = StageReport { blocks_changed: replacements.len(), ..StageReport::default() };
//!         Ok(replacements.into_output(report))
//!     }
//! }
//!
//! let mut conv = Conversation::default();
//! conv.messages.push(Message::new("1", Role::User, vec![Block::text("first")]));
//! conv.messages.push(Message::new("2", Role::User, vec![Block::text("last")]));
//! let out = apply(&Shout, &conv, &MemoryHost::default()).unwrap();
//! assert!(out.replaced == [1] && !out.copied);
//! assert_eq!(out.conversation.messages[1].content.text(), "LAST");
//! assert_eq!(out.conversation.messages[0], conv.messages[0]);
//! ```

use crate::sdk::{StageOutput, StageReport};
use crate::view::View;
use condense_model::{Message, ReadMessage, ToolResult, ToolResultAt};
use std::collections::BTreeMap;

/// The messages of a [`View`] a stage has copied to change, by index: see the
/// [module docs](self).
pub struct Replacements<'a, 'v> {
    view: &'a View<'v>,
    messages: BTreeMap<usize, Message>,
}

impl<'a, 'v> Replacements<'a, 'v> {
    /// No message copied yet.
    pub fn new(view: &'a View<'v>) -> Self {
        Replacements {
            view,
            messages: BTreeMap::new(),
        }
    }

    /// The message at `index`, to change: copied from the view the first time it is asked for.
    /// `None` past the last message.
    pub fn message_mut(&mut self, index: usize) -> Option<&mut Message> {
        match self.messages.entry(index) {
            std::collections::btree_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::btree_map::Entry::Vacant(e) => {
                Some(e.insert(self.view.message(index)?.to_message()))
            }
        }
    }

    /// The tool result at `at` ([`condense_model::ToolResultRef::at`] of the view's
    /// [`View::tool_results`]), to change: its message copied as by [`message_mut`](Self::message_mut).
    pub fn tool_result_mut(&mut self, at: &ToolResultAt) -> Option<&mut ToolResult> {
        self.message_mut(at.message)?.tool_result_mut(at.block)
    }

    /// How many messages were copied.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether no message was copied.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The copied messages, by ascending index, to overlay on a whole copy of the conversation
    /// (a stage that ends up changing more than messages in place).
    pub fn into_messages(self) -> Vec<(usize, Message)> {
        self.messages.into_iter().collect()
    }

    /// The stage's output: the copied messages replace theirs in place
    /// ([`StageOutput::replaced`]; unchanged when none was copied).
    pub fn into_output(self, report: StageReport) -> StageOutput {
        StageOutput::replaced(self.into_messages(), report)
    }
}
