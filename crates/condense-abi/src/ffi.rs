//! FFI-safe mirrors of the model types, and the conversions both ways.
//!
//! Each mirror is generic over its strings ([`FfiText`]): owned `RString`s for what a stage
//! hands back (strings move in without copying; vectors are rebuilt element by element, one
//! allocation per vector), borrowed `RStr`s for the conversation a stage reads (pointers into
//! the host's own conversation: the host copies nothing, the plugin copies each string once
//! into its model). Opaque JSON (tool inputs, unknown fields) travels as the raw text the model
//! already holds: nothing is serialized on this path.

use abi_stable::std_types::{ROption, RStr, RString, RVec};
use abi_stable::StableAbi;
use condense_model as model;
use condense_model::RawJson;

/// A string of an FFI mirror: owned ([`RString`]) or borrowed from the host ([`RStr`]).
pub trait FfiText: StableAbi + Default {
    /// The string as the model holds it (a move for an owned one, a copy for a borrowed one).
    fn into_string(self) -> String;
}

impl FfiText for RString {
    fn into_string(self) -> String {
        RString::into_string(self)
    }
}

impl FfiText for RStr<'_> {
    fn into_string(self) -> String {
        self.as_str().to_owned()
    }
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiConversationOf<S> {
    pub system: ROption<FfiContentOf<S>>,
    pub tools: RVec<FfiToolDefOf<S>>,
    pub messages: RVec<FfiMessageOf<S>>,
    pub extra: S,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiToolDefOf<S> {
    pub name: S,
    pub raw: S,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiMessageOf<S> {
    pub id: S,
    pub role: u8,
    pub timestamp: ROption<S>,
    pub content: FfiContentOf<S>,
    pub extra: S,
    pub envelope: S,
}

#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiContentOf<S> {
    pub shape: u8,
    pub blocks: RVec<FfiBlockOf<S>>,
}

/// One block. A tagged union would read better, but a flat struct keeps the layout trivially
/// stable and lets tool results nest without a recursive type.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiBlockOf<S> {
    pub kind: u8,
    /// text / thinking / tool_use id / tool_use_id / image media type / image reference / opaque.
    pub a: S,
    /// tool name / image data.
    pub b: S,
    /// tool input.
    pub c: S,
    pub extra: S,
    /// tool_result: is_error (0 false, 1 true, 2 absent).
    pub flag: u8,
    /// tool_result: content shape.
    pub shape: u8,
    /// tool_result: its content blocks.
    pub children: RVec<FfiBlockOf<S>>,
}

/// What a stage hands back: owned strings.
pub type FfiConversation = FfiConversationOf<RString>;
pub type FfiMessage = FfiMessageOf<RString>;
pub type FfiContent = FfiContentOf<RString>;
pub type FfiBlock = FfiBlockOf<RString>;
pub type FfiToolDef = FfiToolDefOf<RString>;
/// The conversation a stage reads: strings borrowed from the host's.
pub type FfiConversationRef<'a> = FfiConversationOf<RStr<'a>>;
/// A block a stage asks the host to count: strings borrowed from the stage's.
pub type FfiBlockRef<'a> = FfiBlockOf<RStr<'a>>;

pub(crate) const KIND_TEXT: u8 = 0;
pub(crate) const KIND_THINKING: u8 = 1;
pub(crate) const KIND_TOOL_USE: u8 = 2;
pub(crate) const KIND_TOOL_RESULT: u8 = 3;
pub(crate) const KIND_IMAGE_BASE64: u8 = 4;
pub(crate) const KIND_IMAGE_REF: u8 = 5;
pub(crate) const KIND_OPAQUE: u8 = 6;

fn rs(s: String) -> RString {
    RString::from(s)
}

fn raw(j: RawJson) -> RString {
    RString::from(j.into_string())
}

fn unraw<S: FfiText>(s: S) -> RawJson {
    RawJson::from_string_unchecked(s.into_string())
}

fn rstr(s: &str) -> RStr<'_> {
    RStr::from_str(s)
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

pub(crate) fn role_from_u8(role: u8) -> Result<model::Role, String> {
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

pub(crate) fn shape_from_u8(shape: u8) -> Result<model::ContentShape, String> {
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

impl<S: FfiText> TryFrom<FfiConversationOf<S>> for model::Conversation {
    type Error = String;
    fn try_from(c: FfiConversationOf<S>) -> Result<Self, String> {
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

impl<S: FfiText> TryFrom<FfiMessageOf<S>> for model::Message {
    type Error = String;
    fn try_from(m: FfiMessageOf<S>) -> Result<Self, String> {
        Ok(model::Message {
            id: m.id.into_string(),
            role: role_from_u8(m.role)?,
            timestamp: m.timestamp.into_option().map(S::into_string),
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

impl<S: FfiText> TryFrom<FfiContentOf<S>> for model::Content {
    type Error = String;
    fn try_from(c: FfiContentOf<S>) -> Result<Self, String> {
        Ok(model::Content {
            shape: shape_from_u8(c.shape)?,
            blocks: blocks_from_ffi(c.blocks)?,
        })
    }
}

fn blocks_from_ffi<S: FfiText>(blocks: RVec<FfiBlockOf<S>>) -> Result<Vec<model::Block>, String> {
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

impl<S: FfiText> FfiBlockOf<S> {
    fn new(kind: u8, a: S) -> Self {
        FfiBlockOf {
            kind,
            a,
            b: S::default(),
            c: S::default(),
            extra: S::default(),
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

impl<S: FfiText> TryFrom<FfiBlockOf<S>> for model::Block {
    type Error = String;
    fn try_from(b: FfiBlockOf<S>) -> Result<Self, String> {
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

impl<'a> From<&'a model::Conversation> for FfiConversationRef<'a> {
    fn from(c: &'a model::Conversation) -> Self {
        FfiConversationOf {
            system: c.system.as_ref().map(FfiContentOf::from).into(),
            tools: c
                .tools
                .iter()
                .map(|t| FfiToolDefOf {
                    name: rstr(&t.name),
                    raw: rstr(t.raw.as_str()),
                })
                .collect(),
            messages: c.messages.iter().map(FfiMessageOf::from).collect(),
            extra: rstr(c.extra.as_str()),
        }
    }
}

impl<'a> From<&'a model::Message> for FfiMessageOf<RStr<'a>> {
    fn from(m: &'a model::Message) -> Self {
        FfiMessageOf {
            id: rstr(&m.id),
            role: role_to_u8(m.role),
            timestamp: m.timestamp.as_deref().map(rstr).into(),
            content: (&m.content).into(),
            extra: rstr(m.extra.as_str()),
            envelope: rstr(m.envelope.as_str()),
        }
    }
}

impl<'a> From<&'a model::Content> for FfiContentOf<RStr<'a>> {
    fn from(c: &'a model::Content) -> Self {
        FfiContentOf {
            shape: shape_to_u8(c.shape),
            blocks: c.blocks.iter().map(FfiBlockOf::from).collect(),
        }
    }
}

impl<'a> From<&'a model::Block> for FfiBlockOf<RStr<'a>> {
    fn from(b: &'a model::Block) -> Self {
        match b {
            model::Block::Text(t) => FfiBlockOf {
                extra: rstr(t.extra.as_str()),
                ..FfiBlockOf::new(KIND_TEXT, rstr(&t.text))
            },
            model::Block::Thinking(t) => FfiBlockOf {
                extra: rstr(t.extra.as_str()),
                ..FfiBlockOf::new(KIND_THINKING, rstr(&t.thinking))
            },
            model::Block::ToolUse(t) => FfiBlockOf {
                b: rstr(&t.name),
                c: rstr(t.input.as_str()),
                extra: rstr(t.extra.as_str()),
                ..FfiBlockOf::new(KIND_TOOL_USE, rstr(&t.id))
            },
            model::Block::ToolResult(t) => FfiBlockOf {
                extra: rstr(t.extra.as_str()),
                flag: t.is_error.map_or(2, u8::from),
                shape: shape_to_u8(t.content.shape),
                children: t.content.blocks.iter().map(FfiBlockOf::from).collect(),
                ..FfiBlockOf::new(KIND_TOOL_RESULT, rstr(&t.tool_use_id))
            },
            model::Block::Image(i) => match &i.source {
                model::ImageSource::Base64 { media_type, data } => FfiBlockOf {
                    b: rstr(data),
                    extra: rstr(i.extra.as_str()),
                    ..FfiBlockOf::new(KIND_IMAGE_BASE64, rstr(media_type))
                },
                model::ImageSource::Reference { json } => FfiBlockOf {
                    extra: rstr(i.extra.as_str()),
                    ..FfiBlockOf::new(KIND_IMAGE_REF, rstr(json.as_str()))
                },
            },
            model::Block::Opaque(o) => FfiBlockOf::new(KIND_OPAQUE, rstr(o.json.as_str())),
        }
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

    /// Every kind of block, nested results, system, tools and unknown fields: what a stage
    /// reads through the borrowed mirror is the host's conversation exactly, as through the
    /// owned one.
    #[test]
    fn the_borrowed_mirror_reads_as_the_owned_one() {
        let raw = |s: &str| RawJson::from_string_unchecked(s.into());
        let blocks = vec![
            model::Block::Text(model::TextBlock {
                text: "hello".into(),
                extra: raw(r#"{"cache_control":{"type":"ephemeral"}}"#),
            }),
            model::Block::Thinking(model::ThinkingBlock {
                thinking: "hmm".into(),
                extra: raw(r#"{"signature":"s"}"#),
            }),
            model::Block::tool_use("t1", "Bash", raw(r#"{"command":"ls"}"#)),
            model::Block::ToolResult(model::ToolResult {
                tool_use_id: "t1".into(),
                content: model::Content {
                    shape: model::ContentShape::Array,
                    blocks: vec![model::Block::text("a.rs"), model::Block::text("b.rs")],
                },
                is_error: Some(true),
                extra: RawJson::default(),
            }),
            model::Block::Image(model::Image {
                source: model::ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBOR".into(),
                },
                extra: RawJson::default(),
            }),
            model::Block::Image(model::Image {
                source: model::ImageSource::Reference {
                    json: raw(r#"{"type":"url","url":"u"}"#),
                },
                extra: RawJson::default(),
            }),
            model::Block::Opaque(model::Opaque {
                json: raw(r#"{"type":"server_tool_use"}"#),
            }),
        ];
        let mut message = model::Message::new("m1", model::Role::Assistant, blocks);
        message.timestamp = Some("2026-12-03T00:00:00Z".into());
        message.envelope = raw(r#"{"uuid":"u1"}"#);
        let conv = model::Conversation {
            system: Some(model::Content::string("be brief")),
            tools: vec![model::ToolDef {
                name: "Bash".into(),
                raw: raw(r#"{"name":"Bash"}"#),
            }],
            messages: vec![
                message,
                model::Message::new("m2", model::Role::User, vec![]),
            ],
            extra: raw(r#"{"model":"m"}"#),
        };
        let borrowed = model::Conversation::try_from(FfiConversationRef::from(&conv));
        assert_eq!(borrowed.as_ref(), Ok(&conv));
        let owned = model::Conversation::try_from(FfiConversation::from(conv.clone()));
        assert_eq!(owned, borrowed);
    }
}
