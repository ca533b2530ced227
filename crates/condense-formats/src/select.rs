//! Finding the conversations inside a JSON value: `--select` pointers (RFC 6901 plus a `*`
//! segment meaning "every element") and auto-detection of the usual wrappers.

use crate::error::{describe, push_token, Ctx};
use crate::json::{has_key, Result};
use crate::{responses, FormatError};
use serde_json::Value;

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotKind {
    /// A request body: an object with a `messages` array (and maybe `system`, `tools`, ...).
    Body,
    /// A Responses API request body: an object with `input` (and maybe `instructions`, ...).
    Input,
    /// A bare list of messages or events.
    List,
}

/// One conversation's place inside a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Concrete JSON pointer (no `*`).
    pub pointer: String,
    pub kind: SlotKind,
}

enum Token {
    Key(String),
    Any,
}

/// A parsed `--select` pointer.
pub(crate) struct Select {
    text: String,
    tokens: Vec<Token>,
}

impl Select {
    pub fn parse(text: &str, ctx: &Ctx<'_>) -> Result<Select> {
        let err = |reason: &str| FormatError::Select {
            at: ctx.source.to_string(),
            select: text.to_string(),
            reason: reason.to_string(),
        };
        if text.is_empty() {
            return Ok(Select {
                text: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(err(
                "a JSON pointer starts with `/` (e.g. /messages or /*/traj)",
            ));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            if raw == "*" {
                tokens.push(Token::Any);
                continue;
            }
            let mut key = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    key.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => key.push('~'),
                    Some('1') => key.push('/'),
                    _ => return Err(err("`~` must be followed by 0 or 1 in a JSON pointer")),
                }
            }
            tokens.push(Token::Key(key));
        }
        Ok(Select {
            text: text.to_string(),
            tokens,
        })
    }

    /// The concrete pointers this selects in `root`, in document order.
    fn resolve(&self, root: &Value, ctx: &Ctx<'_>) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.walk(root, &self.tokens, String::new(), &mut out, ctx)?;
        if out.is_empty() {
            return Err(self.error(ctx, "selects nothing (every `*` matched an empty list)"));
        }
        Ok(out)
    }

    fn walk(
        &self,
        value: &Value,
        tokens: &[Token],
        ptr: String,
        out: &mut Vec<String>,
        ctx: &Ctx<'_>,
    ) -> Result<()> {
        let Some((token, rest)) = tokens.split_first() else {
            out.push(ptr);
            return Ok(());
        };
        let here = if ptr.is_empty() { "/" } else { ptr.as_str() };
        match (token, value) {
            (Token::Any, Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.walk(item, rest, format!("{ptr}/{i}"), out, ctx)?;
                }
            }
            (Token::Any, Value::Object(map)) => {
                for (key, item) in map {
                    self.walk(item, rest, push_token(&ptr, key), out, ctx)?;
                }
            }
            (Token::Any, other) => {
                let reason = format!(
                    "`*` at {here} needs an array or object, found {}",
                    describe(other)
                );
                return Err(self.error(ctx, &reason));
            }
            (Token::Key(key), Value::Object(map)) => match map.get(key) {
                Some(item) => self.walk(item, rest, push_token(&ptr, key), out, ctx)?,
                None => {
                    let reason = format!("no key `{key}` at {here} (found {})", describe(value));
                    return Err(self.error(ctx, &reason));
                }
            },
            (Token::Key(key), Value::Array(items)) => {
                match key.parse::<usize>().ok().and_then(|i| items.get(i)) {
                    Some(item) => self.walk(item, rest, format!("{ptr}/{key}"), out, ctx)?,
                    None => {
                        let reason = format!(
                            "no element `{key}` at {here} (an array of {} elements)",
                            items.len()
                        );
                        return Err(self.error(ctx, &reason));
                    }
                }
            }
            (Token::Key(key), other) => {
                let reason = format!(
                    "cannot look up `{key}` at {here}: found {}",
                    describe(other)
                );
                return Err(self.error(ctx, &reason));
            }
        }
        Ok(())
    }

    /// The slots this selects: arrays are message (or event) lists; an object is searched for a
    /// conversation the way a whole file is.
    pub fn slots(&self, root: &Value, ctx: &Ctx<'_>) -> Result<Vec<Slot>> {
        let mut slots = Vec::new();
        for pointer in self.resolve(root, ctx)? {
            match root.pointer(&pointer) {
                Some(Value::Array(_)) => slots.push(Slot {
                    pointer,
                    kind: SlotKind::List,
                }),
                Some(target @ Value::Object(_)) => match object_slot(target, &pointer) {
                    Some(slot) => slots.push(slot),
                    None => {
                        let reason = format!(
                            "{} is not a conversation: expected an array of messages or an \
                             object with `messages`, `input` or `history`, found {}",
                            shown(&pointer),
                            describe(target)
                        );
                        return Err(self.error(ctx, &reason));
                    }
                },
                other => {
                    let found = other.map_or_else(|| "nothing".to_string(), describe);
                    let reason = format!(
                        "{} is not a conversation: expected an array of messages, found {found}",
                        shown(&pointer)
                    );
                    return Err(self.error(ctx, &reason));
                }
            }
        }
        Ok(slots)
    }

    fn error(&self, ctx: &Ctx<'_>, reason: &str) -> FormatError {
        FormatError::Select {
            at: ctx.at(""),
            select: self.text.clone(),
            reason: reason.to_string(),
        }
    }
}

/// One body slot per element of an array.
fn bodies(len: usize, kind: SlotKind) -> Vec<Slot> {
    (0..len)
        .map(|i| Slot {
            pointer: format!("/{i}"),
            kind,
        })
        .collect()
}

fn shown(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the top level"
    } else {
        pointer
    }
}

/// A conversation directly in an object: a request body, or a `history` list.
fn object_slot(value: &Value, pointer: &str) -> Option<Slot> {
    if value.get("messages").is_some_and(Value::is_array) {
        Some(Slot {
            pointer: pointer.to_string(),
            kind: SlotKind::Body,
        })
    } else if responses::is_request(value) {
        Some(Slot {
            pointer: pointer.to_string(),
            kind: SlotKind::Input,
        })
    } else if value.get("history").is_some_and(Value::is_array) {
        Some(Slot {
            pointer: format!("{pointer}/history"),
            kind: SlotKind::List,
        })
    } else {
        None
    }
}

/// Finds the conversations in a value without `--select`:
/// - an object with a `messages` array: a request body (mini-swe-agent trajectories too);
/// - an object with an `input` that is a Responses request's: that body;
/// - an object with a `history` array: that list (SWE-agent `.traj`, OpenHands output lines);
/// - an array of objects that each hold a `traj` array: every `traj` (tau-bench);
/// - an array of request bodies (of one API): every body;
/// - any other array: a list of messages or events.
pub(crate) fn autodetect(root: &Value, ctx: &Ctx<'_>) -> Result<Vec<Slot>> {
    match root {
        Value::Object(_) => object_slot(root, "").map(|s| vec![s]).ok_or_else(|| {
            ctx.detect(format!(
                "no conversation found: expected an object with a `messages` or `history` \
                 array or a Responses `input`, or an array of messages, found {} (use \
                 --select to point at the messages)",
                describe(root)
            ))
        }),
        Value::Array(items) => {
            let all = |f: &dyn Fn(&Value) -> bool| !items.is_empty() && items.iter().all(f);
            if all(&|v| v.get("traj").is_some_and(Value::is_array)) {
                Ok((0..items.len())
                    .map(|i| Slot {
                        pointer: format!("/{i}/traj"),
                        kind: SlotKind::List,
                    })
                    .collect())
            } else if all(&|v| {
                v.get("messages").is_some_and(Value::is_array) && !has_key(v, "role")
            }) {
                Ok(bodies(items.len(), SlotKind::Body))
            } else if all(&responses::is_request) {
                Ok(bodies(items.len(), SlotKind::Input))
            } else {
                Ok(vec![Slot {
                    pointer: String::new(),
                    kind: SlotKind::List,
                }])
            }
        }
        other => Err(ctx.detect(format!(
            "no conversation found: expected a JSON object or array, found {}",
            describe(other)
        ))),
    }
}
