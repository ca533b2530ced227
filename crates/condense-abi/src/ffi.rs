//! FFI-safe mirrors of the model types, and the conversions both ways.
//!
//! Strings move into `RString`s without copying; vectors are rebuilt element by element (one
//! allocation per vector, no string copies on the side that allocated them). Opaque JSON (tool
//! inputs, unknown fields) travels as the raw text the model already holds: nothing is
//! serialized on this path.

use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;
use condense_model as model;
use condense_model::RawJson;

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiConversation {
    pub system: ROption<FfiContent>,
    pub tools: RVec<FfiToolDef>,
    pub messages: RVec<FfiMessage>,
    pub extra: RString,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiToolDef {
    pub name: RString,
    pub raw: RString,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiMessage {
    pub id: RString,
    pub role: u8,
    pub timestamp: ROption<RString>,
    pub content: FfiContent,
    pub extra: RString,
    pub envelope: RString,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiContent {
    pub shape: u8,
    pub blocks: RVec<FfiBlock>,
}

/// One block. A tagged union would read better, but a flat struct keeps the layout trivially
/// stable and lets tool results nest without a recursive type.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiBlock {
    pub kind: u8,
    /// text / thinking / tool_use id / tool_use_id / image media type / image reference / opaque.
    pub a: RString,
    /// tool name / image data.
    pub b: RString,
    /// tool input.
    pub c: RString,
    pub extra: RString,
    /// tool_result: is_error (0 false, 1 true, 2 absent).
    pub flag: u8,
    /// tool_result: content shape.
    pub shape: u8,
    /// tool_result: its content blocks.
    pub children: RVec<FfiBlock>,
}

const KIND_TEXT: u8 = 0;
const KIND_THINKING: u8 = 1;
const KIND_TOOL_USE: u8 = 2;
const KIND_TOOL_RESULT: u8 = 3;
const KIND_IMAGE_BASE64: u8 = 4;
const KIND_IMAGE_REF: u8 = 5;
const KIND_OPAQUE: u8 = 6;

fn rs(s: String) -> RString {
    RString::from(s)
}

fn raw(j: RawJson) -> RString {
    RString::from(j.into_string())
}

fn unraw(s: RString) -> RawJson {
    RawJson::from_string_unchecked(s.into_string())
}

fn role_to_u8(role: model::Role) -> u8 {
    match role {
        model::Role::System => 0,
        model::Role::User => 1,
        model::Role::Assistant => 2,
        model::Role::Tool => 3,
        model::Role::Event => 4,
    }
}

fn role_from_u8(role: u8) -> Result<model::Role, String> {
    Ok(match role {
        0 => model::Role::System,
        1 => model::Role::User,
        2 => model::Role::Assistant,
        3 => model::Role::Tool,
        4 => model::Role::Event,
        other => return Err(format!("unknown role tag {other}")),
    })
}

fn shape_to_u8(shape: model::ContentShape) -> u8 {
    match shape {
        model::ContentShape::String => 0,
        model::ContentShape::Array => 1,
        model::ContentShape::Null => 2,
        model::ContentShape::Absent => 3,
    }
}

fn shape_from_u8(shape: u8) -> Result<model::ContentShape, String> {
    Ok(match shape {
        0 => model::ContentShape::String,
        1 => model::ContentShape::Array,
        2 => model::ContentShape::Null,
        3 => model::ContentShape::Absent,
        other => return Err(format!("unknown content shape tag {other}")),
    })
}

impl From<model::Conversation> for FfiConversation {
    fn from(c: model::Conversation) -> Self {
        FfiConversation {
            system: c.system.map(FfiContent::from).into(),
            tools: c
                .tools
                .into_iter()
                .map(|t| FfiToolDef {
                    name: rs(t.name),
                    raw: raw(t.raw),
                })
                .collect(),
            messages: c.messages.into_iter().map(FfiMessage::from).collect(),
            extra: raw(c.extra),
        }
    }
}

impl TryFrom<FfiConversation> for model::Conversation {
    type Error = String;
    fn try_from(c: FfiConversation) -> Result<Self, String> {
        Ok(model::Conversation {
            system: match c.system.into_option() {
                Some(content) => Some(content.try_into()?),
                None => None,
            },
            tools: c
                .tools
                .into_iter()
                .map(|t| model::ToolDef {
                    name: t.name.into_string(),
                    raw: unraw(t.raw),
                })
                .collect(),
            messages: exact(c.messages, model::Message::try_from)?,
            extra: unraw(c.extra),
        })
    }
}

impl From<model::Message> for FfiMessage {
    fn from(m: model::Message) -> Self {
        FfiMessage {
            id: rs(m.id),
            role: role_to_u8(m.role),
            timestamp: m.timestamp.map(rs).into(),
            content: m.content.into(),
            extra: raw(m.extra),
            envelope: raw(m.envelope),
        }
    }
}

impl TryFrom<FfiMessage> for model::Message {
    type Error = String;
    fn try_from(m: FfiMessage) -> Result<Self, String> {
        Ok(model::Message {
            id: m.id.into_string(),
            role: role_from_u8(m.role)?,
            timestamp: m.timestamp.into_option().map(RString::into_string),
            content: m.content.try_into()?,
            extra: unraw(m.extra),
            envelope: unraw(m.envelope),
        })
    }
}

impl From<model::Content> for FfiContent {
    fn from(c: model::Content) -> Self {
        FfiContent {
            shape: shape_to_u8(c.shape),
            blocks: c.blocks.into_iter().map(FfiBlock::from).collect(),
        }
    }
}

impl TryFrom<FfiContent> for model::Content {
    type Error = String;
    fn try_from(c: FfiContent) -> Result<Self, String> {
        Ok(model::Content {
            shape: shape_from_u8(c.shape)?,
            blocks: blocks_from_ffi(c.blocks)?,
        })
    }
}

fn blocks_from_ffi(blocks: RVec<FfiBlock>) -> Result<Vec<model::Block>, String> {
    exact(blocks, model::Block::try_from)
}

/// `items` converted one by one into a vector of exactly their number. Collecting a fallible
/// map would start at 4 and double (its size hint is 0): most contents hold one block, and the
/// spare room stayed with the conversation (a third of its blocks' memory).
fn exact<F, T>(items: RVec<F>, convert: impl Fn(F) -> Result<T, String>) -> Result<Vec<T>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(convert(item)?);
    }
    Ok(out)
}

impl FfiBlock {
    fn new(kind: u8, a: RString) -> Self {
        FfiBlock {
            kind,
            a,
            b: RString::new(),
            c: RString::new(),
            extra: RString::new(),
            flag: 0,
            shape: 0,
            children: RVec::new(),
        }
    }
}

impl From<model::Block> for FfiBlock {
    fn from(b: model::Block) -> Self {
        match b {
            model::Block::Text(t) => FfiBlock {
                extra: raw(t.extra),
                ..FfiBlock::new(KIND_TEXT, rs(t.text))
            },
            model::Block::Thinking(t) => FfiBlock {
                extra: raw(t.extra),
                ..FfiBlock::new(KIND_THINKING, rs(t.thinking))
            },
            model::Block::ToolUse(t) => FfiBlock {
                b: rs(t.name),
                c: raw(t.input),
                extra: raw(t.extra),
                ..FfiBlock::new(KIND_TOOL_USE, rs(t.id))
            },
            model::Block::ToolResult(t) => FfiBlock {
                extra: raw(t.extra),
                flag: t.is_error.map_or(2, u8::from),
                shape: shape_to_u8(t.content.shape),
                children: t.content.blocks.into_iter().map(FfiBlock::from).collect(),
                ..FfiBlock::new(KIND_TOOL_RESULT, rs(t.tool_use_id))
            },
            model::Block::Image(i) => match i.source {
                model::ImageSource::Base64 { media_type, data } => FfiBlock {
                    b: rs(data),
                    extra: raw(i.extra),
                    ..FfiBlock::new(KIND_IMAGE_BASE64, rs(media_type))
                },
                model::ImageSource::Reference { json } => FfiBlock {
                    extra: raw(i.extra),
                    ..FfiBlock::new(KIND_IMAGE_REF, raw(json))
                },
            },
            model::Block::Opaque(o) => FfiBlock::new(KIND_OPAQUE, raw(o.json)),
        }
    }
}

impl TryFrom<FfiBlock> for model::Block {
    type Error = String;
    fn try_from(b: FfiBlock) -> Result<Self, String> {
        Ok(match b.kind {
            KIND_TEXT => model::Block::Text(model::TextBlock {
                text: b.a.into_string(),
                extra: unraw(b.extra),
            }),
            KIND_THINKING => model::Block::Thinking(model::ThinkingBlock {
                thinking: b.a.into_string(),
                extra: unraw(b.extra),
            }),
            KIND_TOOL_USE => model::Block::ToolUse(model::ToolUse {
                id: b.a.into_string(),
                name: b.b.into_string(),
                input: unraw(b.c),
                extra: unraw(b.extra),
            }),
            KIND_TOOL_RESULT => model::Block::ToolResult(model::ToolResult {
                tool_use_id: b.a.into_string(),
                content: model::Content {
                    shape: shape_from_u8(b.shape)?,
                    blocks: blocks_from_ffi(b.children)?,
                },
                is_error: match b.flag {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                },
                extra: unraw(b.extra),
            }),
            KIND_IMAGE_BASE64 => model::Block::Image(model::Image {
                source: model::ImageSource::Base64 {
                    media_type: b.a.into_string(),
                    data: b.b.into_string(),
                },
                extra: unraw(b.extra),
            }),
            KIND_IMAGE_REF => model::Block::Image(model::Image {
                source: model::ImageSource::Reference { json: unraw(b.a) },
                extra: unraw(b.extra),
            }),
            KIND_OPAQUE => model::Block::Opaque(model::Opaque { json: unraw(b.a) }),
            other => return Err(format!("unknown block kind tag {other}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_comes_back_whole_in_vectors_of_its_size() {
        let result = model::Block::tool_result("t1", model::Content::string("out"));
        let conv = model::Conversation {
            messages: (0..5)
                .map(|i| {
                    model::Message::new(
                        format!("m{i}"),
                        model::Role::User,
                        vec![model::Block::text("a"), result.clone()],
                    )
                })
                .collect(),
            ..model::Conversation::default()
        };
        let back = model::Conversation::try_from(FfiConversation::from(conv.clone()));
        assert_eq!(back.as_ref(), Ok(&conv));
        let back = back.unwrap_or_default();
        assert_eq!(back.messages.capacity(), 5);
        for m in &back.messages {
            assert_eq!(m.content.blocks.capacity(), 2);
            if let Some(model::Block::ToolResult(t)) = m.content.blocks.get(1) {
                assert_eq!(t.content.blocks.capacity(), 1);
            }
        }
    }
}
