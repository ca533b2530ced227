//! A request body with its message list cut short, found by a byte scan.
//!
//! A proxy that must know a request's session before it reads the body (to take the request's
//! place in its session's line) reads the body with its list cut after the first user message:
//! the session comes from the system prompt, that message and the top-level `metadata`. The
//! list is most of the body, and a parse that skips it still decodes every byte of it; the
//! scan (`crate::scan`) steps over strings sixteen bytes at a time and decodes nothing.
//!
//! ```
//! use condense_formats::cut::ListCut;
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}],"metadata":{}}"#;
//! let cut = ListCut::of(body, "messages").unwrap();
//! assert_eq!(cut.len(), 2);
//! assert_eq!(
//!     cut.first(1).as_ref(),
//!     br#"{"model":"m","messages":[{"role":"user","content":"a"}],"metadata":{}}"#
//! );
//! assert_eq!(cut.first(2).as_ref(), &body[..]); // the whole list: the body itself
//! assert!(ListCut::of(b"{} x", "messages").is_none()); // not one JSON object
//! ```
//!
//! The scan is lenient: it checks the body's shape, not every value, so a body that is not
//! valid JSON may still cut; reading the cut is what checks it.

use crate::known::Matched;
use crate::scan;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

/// A JSON object's top-level array, located: see the [module docs](self).
#[derive(Debug)]
pub struct ListCut<'b> {
    body: &'b [u8],
    /// The array's span and its elements' spans; `None` when the object has no such member, or
    /// its value is not an array (a Responses `input` may be a string): nothing to cut.
    list: Option<(Range<usize>, Vec<Range<usize>>)>,
    /// The known list the scan stepped over, for the read of the same body to take.
    matched: Option<Matched>,
    /// The object's members: each key's span (with its quotes) and its value's.
    members: Vec<(Range<usize>, Range<usize>)>,
}

impl<'b> ListCut<'b> {
    /// Locates the member `list` of the object `body` (whitespace around it allowed). `None`
    /// when `body` is not one object, or names `list` more than once (which of two members a
    /// reader takes is its own business: the caller then reads the body whole).
    pub fn of(body: &'b [u8], list: &str) -> Option<ListCut<'b>> {
        Self::cut(body, list, None)
    }

    /// [`ListCut::of`] the message list of a body read as `format` (a Responses body's
    /// `input`, any other's `messages`), stepping over the list's prefix an earlier read knew
    /// with the same text ([`crate::known`], `known` as [`crate::read_shared_knowing`] asks it
    /// for that format): hashed, not scanned, so a session's growing list costs a scan of its
    /// new messages only.
    pub fn of_knowing(
        body: &'b [u8],
        format: crate::Format,
        known: Option<&dyn Fn(u64) -> Vec<crate::known::KnownList>>,
    ) -> Option<ListCut<'b>> {
        let lookup = known.map(|lists| crate::parallel::Lookup {
            lists,
            matched: None,
            frames: None,
            elements: crate::known::reads_elements(format).then_some(format),
        });
        Self::cut(body, crate::body::list_member(format), lookup)
    }

    fn cut(
        body: &'b [u8],
        list: &str,
        lookup: Option<crate::parallel::Lookup<'_>>,
    ) -> Option<ListCut<'b>> {
        let mut matched = None;
        let mut step = |first: &Range<usize>| {
            let found = scan::known_prefix(body, first, lookup?)?;
            let spans = found.spans().to_vec();
            matched = Some(found);
            Some(spans)
        };
        let step: Option<scan::KnownElements<'_, '_>> = lookup.is_some().then_some(&mut step);
        // The reader's own walk of an object's members, which finds each array's elements on
        // the way; it runs on text serde_json accepted, so what it lets pass here (a key that
        // is not a string, text after the object) is refused by hand.
        let start = scan::skip_ws(body, 0);
        let mut arrays = HashMap::new();
        let step = step.map(|s| (list.as_bytes(), s));
        let (members, end, _) = scan::object_at(body, start, &mut arrays, step)?;
        let keys_are_strings = members.iter().all(|(key, _)| body[key.start] == b'"');
        if !keys_are_strings || scan::skip_ws(body, end) != body.len() {
            return None;
        }
        let mut named = members.iter().filter(|(key, _)| key_is(body, key, list));
        let list = match (named.next(), named.next()) {
            (Some(_), Some(_)) => return None,
            (Some((_, value)), None) => arrays
                .remove(&value.start)
                .map(|elements| (value.clone(), elements)),
            (None, _) => None,
        };
        Some(ListCut {
            body,
            list,
            matched,
            members,
        })
    }

    /// The text of the value of each top-level member named `name`, in order (a key spelled
    /// with escapes is the same key).
    pub fn member_values(&self, name: &str) -> Vec<&'b [u8]> {
        let body = self.body;
        self.members
            .iter()
            .filter(|(key, _)| key_is(body, key, name))
            .map(|(_, value)| &body[value.clone()])
            .collect()
    }

    /// The known list the scan stepped over ([`ListCut::of_knowing`]), for the read of this
    /// same body to take ([`crate::read_shared_knowing`]).
    pub fn into_matched(self) -> Option<Matched> {
        self.matched
    }

    /// How many elements the list has (0 when there is none to cut).
    pub fn len(&self) -> usize {
        self.list.as_ref().map_or(0, |(_, elements)| elements.len())
    }

    /// Whether the list is empty or missing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body with the list cut to its first `keep` elements (the separators between them as
    /// they were); the body itself when that keeps every element.
    pub fn first(&self, keep: usize) -> Cow<'b, [u8]> {
        let Some((array, elements)) = &self.list else {
            return Cow::Borrowed(self.body);
        };
        if keep >= elements.len() {
            return Cow::Borrowed(self.body);
        }
        let body = self.body;
        let mut out = Vec::with_capacity(body.len() - (array.end - array.start));
        out.extend_from_slice(&body[..array.start]);
        self.push_list(keep, &mut out);
        out.extend_from_slice(&body[array.end..]);
        Cow::Owned(out)
    }

    /// [`ListCut::first`] without the top-level members named in `leave_out`: an object of the
    /// other members, each as written (the list cut), one comma between each two.
    pub fn first_without(&self, keep: usize, leave_out: &[&str]) -> Cow<'b, [u8]> {
        if leave_out.is_empty() {
            return self.first(keep);
        }
        let body = self.body;
        let list_at = self.list.as_ref().map(|(array, _)| array.start);
        let mut out = b"{".to_vec();
        for (key, value) in &self.members {
            if leave_out.iter().any(|name| key_is(body, key, name)) {
                continue;
            }
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(&body[key.start..value.start]);
            match list_at {
                Some(at) if at == value.start => self.push_list(keep, &mut out),
                _ => out.extend_from_slice(&body[value.clone()]),
            }
        }
        out.push(b'}');
        Cow::Owned(out)
    }

    /// The list cut to its first `keep` elements, bracketed, onto `out`.
    fn push_list(&self, keep: usize, out: &mut Vec<u8>) {
        let Some((array, elements)) = &self.list else {
            return;
        };
        let body = self.body;
        if keep >= elements.len() {
            out.extend_from_slice(&body[array.clone()]);
            return;
        }
        let kept = match elements.get(..keep) {
            Some([first, .., last]) => &body[first.start..last.end],
            Some([only]) => &body[only.clone()],
            _ => &[][..],
        };
        out.push(b'[');
        out.extend_from_slice(kept);
        out.push(b']');
    }
}

/// Whether the quoted key at `key` in `body` is `name` ([`scan::key_is`] on bytes).
fn key_is(body: &[u8], key: &Range<usize>, name: &str) -> bool {
    std::str::from_utf8(&body[key.clone()]).is_ok_and(|k| scan::key_is(k, 0..k.len(), name))
}

#[cfg(test)]
mod tests {
    use super::ListCut;

    fn cut(body: &str, list: &str, keep: usize) -> Option<String> {
        let c = ListCut::of(body.as_bytes(), list)?;
        Some(String::from_utf8(c.first(keep).into_owned()).unwrap())
    }

    #[test]
    fn the_list_is_cut_and_everything_else_kept_as_written() {
        let body = " {\"a\" : [1, 2],\n \"messages\" : [ {\"x\":\"]\\\"[\"} ,\n 2 , 3 ] , \"z\":{\"messages\":[9]} } \n";
        assert_eq!(ListCut::of(body.as_bytes(), "messages").unwrap().len(), 3);
        assert_eq!(
            cut(body, "messages", 0).unwrap(),
            " {\"a\" : [1, 2],\n \"messages\" : [] , \"z\":{\"messages\":[9]} } \n"
        );
        assert_eq!(
            cut(body, "messages", 2).unwrap(),
            " {\"a\" : [1, 2],\n \"messages\" : [{\"x\":\"]\\\"[\"} ,\n 2] , \"z\":{\"messages\":[9]} } \n"
        );
        assert_eq!(cut(body, "messages", 3).unwrap(), body);
        let c = ListCut::of(body.as_bytes(), "messages").unwrap();
        assert_eq!(c.member_values("a"), [&b"[1, 2]"[..]]);
        assert_eq!(c.member_values("z"), [&br#"{"messages":[9]}"#[..]]);
        assert!(c.member_values("metadata").is_empty());
        assert_eq!(
            String::from_utf8(c.first_without(1, &["a", "z"]).into_owned()).unwrap(),
            "{\"messages\" : [{\"x\":\"]\\\"[\"}]}"
        );
        assert_eq!(
            String::from_utf8(c.first_without(9, &["messages"]).into_owned()).unwrap(),
            "{\"a\" : [1, 2],\"z\":{\"messages\":[9]}}"
        );
        assert_eq!(c.first_without(1, &[]), c.first(1));
        let twice = ListCut::of(br#"{"a":1,"m\u0061":[],"a":"2"}"#, "messages").unwrap();
        assert_eq!(twice.member_values("a"), [&b"1"[..], &br#""2""#[..]]);
        // A key spelled with an escape is the same key.
        assert_eq!(
            cut(r#"{"messag\u0065s":[1,2]}"#, "messages", 1).unwrap(),
            r#"{"messag\u0065s":[1]}"#
        );
    }

    #[test]
    fn nothing_to_cut_gives_the_body_and_a_bad_shape_gives_none() {
        for body in [
            r#"{"input":"just this"}"#,
            r#"{"model":"m"}"#,
            "{}",
            " { } ",
        ] {
            let c = ListCut::of(body.as_bytes(), "input").unwrap();
            assert_eq!(
                (c.len(), c.first(0).as_ref()),
                (0, body.as_bytes()),
                "{body}"
            );
        }
        for body in [
            "",
            "[]",
            "not json",
            r#"{"messages":[]} x"#,
            r#"{"messages":[1,2}"#,
            r#"{"messages" [1]}"#,
            r#"{"messages":[1]"#,
            r#"{"messages":[1],"messages":[2]}"#,
            r#"{1:[1]}"#,
        ] {
            assert!(ListCut::of(body.as_bytes(), "messages").is_none(), "{body}");
        }
    }
}
