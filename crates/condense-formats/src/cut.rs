//! A request body with its message list cut short, found by a byte scan.
//!
//! A proxy that must know a request's session before it reads the body (to take the request's
//! place in its session's line) reads the body with its list cut after the first user message:
//! the session comes from the system prompt, that message and the top-level `metadata`. The
//! list is most of the body, and a parse that skips it still decodes every byte of it; the
//! scan ([`crate::scan`]) steps over strings eight bytes at a time and decodes nothing.
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
        Self::of_knowing(body, list, None)
    }

    /// [`ListCut::of`], stepping over the list's prefix an earlier read knew with the same text
    /// ([`crate::known`], `known` as [`crate::read_shared_knowing`] asks it): hashed, not
    /// scanned, so a session's growing list costs a scan of its new messages only.
    pub fn of_knowing(
        body: &'b [u8],
        list: &str,
        known: Option<&dyn Fn(u64) -> Vec<crate::known::KnownList>>,
    ) -> Option<ListCut<'b>> {
        let mut matched = None;
        let mut step = |first: &Range<usize>| {
            let lookup = crate::parallel::Lookup {
                lists: known?,
                matched: None,
            };
            let found = scan::known_prefix(body, first, lookup)?;
            let spans = found.spans().to_vec();
            matched = Some(found);
            Some(spans)
        };
        let start = scan::skip_ws(body, 0);
        if body.get(start) != Some(&b'{') {
            return None;
        }
        let mut at = scan::skip_ws(body, start + 1);
        let mut found = None;
        let mut members = Vec::new();
        if body.get(at) == Some(&b'}') {
            at += 1;
        } else {
            loop {
                let key = scan::value(body, at)?;
                if body.get(key.start) != Some(&b'"') {
                    return None;
                }
                at = scan::skip_ws(body, key.end);
                if body.get(at) != Some(&b':') {
                    return None;
                }
                let value_start = scan::skip_ws(body, at + 1);
                let named = std::str::from_utf8(&body[key.clone()])
                    .is_ok_and(|k| scan::key_is(k, 0..k.len(), list));
                let value_end = match (named, body.get(value_start)) {
                    (true, Some(b'[')) => {
                        let known: Option<scan::KnownElements<'_, '_>> =
                            known.is_some().then_some(&mut step);
                        let (elements, end, _) = scan::array_at(body, value_start, known)?;
                        if found.is_some() {
                            return None;
                        }
                        found = Some(Some((value_start..end, elements)));
                        end
                    }
                    (true, _) => {
                        if found.is_some() {
                            return None;
                        }
                        found = Some(None);
                        scan::value(body, value_start)?.end
                    }
                    (false, _) => scan::value(body, value_start)?.end,
                };
                members.push((key, value_start..value_end));
                at = scan::skip_ws(body, value_end);
                match body.get(at)? {
                    b',' => at = scan::skip_ws(body, at + 1),
                    b'}' => {
                        at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (scan::skip_ws(body, at) == body.len()).then_some(ListCut {
            body,
            list: found.flatten(),
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
            .filter(|(key, _)| {
                std::str::from_utf8(&body[key.clone()])
                    .is_ok_and(|k| scan::key_is(k, 0..k.len(), name))
            })
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
            let name = std::str::from_utf8(&body[key.clone()]).unwrap_or("");
            if leave_out
                .iter()
                .any(|n| scan::key_is(name, 0..name.len(), n))
            {
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
