//! Changing a few messages of a long conversation without copying the rest.
//!
//! A stage that rewrites some messages in place (a tool result truncated, an old output
//! cleared) reads the conversation through its [`View`] and copies in only the messages it
//! changes; [`Replacements::into_output`] hands back just those
//! ([`crate::sdk::Change::Replaced`]), and the host checks, counts and archives only them.
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
/// `replace` module docs.
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::sdk::{check_replaced, replace_messages, Change, StageOutput, StageReport};
    use condense_model::{Block, Conversation, Message, Role};

    fn conversation() -> Conversation {
        let m = |id: &str, text: &str| Message::new(id, Role::User, vec![Block::text(text)]);
        Conversation {
            messages: vec![m("a", "one"), m("b", "two"), m("c", "three")],
            ..Conversation::default()
        }
    }

    #[test]
    fn replacements_land_in_place_and_the_rules_are_named() {
        let conv = conversation();
        let mut b = conv.messages[1].clone();
        b.content.blocks = vec![Block::text("TWO")];
        let out = StageOutput::replaced(vec![(1, b.clone())], StageReport::default());
        let (after, _) = out.apply_to(&conv).unwrap();
        assert_eq!(after.messages[1], b);
        assert_eq!(
            (&after.messages[0], &after.messages[2]),
            (&conv.messages[0], &conv.messages[2])
        );
        assert_eq!(
            StageOutput::replaced(Vec::new(), StageReport::default()).change,
            Change::Unchanged
        );

        let msgs = &conv.messages;
        let (a, c) = (msgs[0].clone(), msgs[2].clone());
        let err = |replaced: Vec<(usize, Message)>| check_replaced(&replaced, msgs).unwrap_err();
        assert_eq!(
            err(vec![(2, c.clone()), (0, a.clone())]),
            "replaced message 0 out of order (after 2): indices must ascend, each once"
        );
        assert_eq!(
            err(vec![(0, a.clone()), (0, a.clone())]),
            "replaced message 0 out of order (after 0): indices must ascend, each once"
        );
        assert_eq!(
            err(vec![(3, c.clone())]),
            "replaced message 3 of a conversation of 3 messages"
        );
        assert!(err(vec![(0, c)]).starts_with("replaced message 0 changed its id (a -> c)"));
        assert!(check_replaced(&[(0, a.clone())], msgs).is_ok());

        // Made in place, what was replaced comes back; a broken rule changes nothing.
        let mut made = conv.clone();
        let olds = replace_messages(&mut made, vec![(1, b.clone())]).unwrap();
        assert_eq!(olds, vec![(1, conv.messages[1].clone())]);
        assert_eq!(made.messages[1], b);
        assert!(replace_messages(&mut made, vec![(0, b), (5, a)]).is_err());
        assert_eq!(made.messages[0], conv.messages[0]);
    }
}
