//! The costs of the optional pieces a rendering weighs: the errors' bullets, and the earlier
//! requests' three forms (first line, first 300 characters, whole) with their token counts,
//! each made only when the fill or the writer first asks for it.
//!
//! The fill takes requests newest first and stops at the first that does not fit, and the
//! writer writes only the requests kept, so the forms of omitted requests are never made. A
//! running summary renders its whole record at every commit: building every form of every
//! earlier request each time made a commit cost the whole record, however little of it the
//! budget kept. A bullet is written into one reused buffer to be counted, and straight into
//! the text to be written, never into a string of its own: while the record is smaller than
//! the budget, what a commit costs is what it renders, and a string per bullet made that
//! grow faster than the summary it renders into.
//!
//! A [`RenderMemo`] keeps the pieces' counts from one rendering to the next: a running
//! summary's record renders mostly the same bullets at every commit, and asking the caller's
//! counter again for each (a hash and a lookup in a table as large as the conversation) was
//! most of what a commit's rendering cost once the record had grown.

use super::{push_bullet, push_error_bullet, Parts, REQUEST_CHARS, REQUEST_LINE_CHARS};
use crate::text::first_line_marked;
use condense_model::prehashed::PrehashedMap;
use condense_text::{cut_chars, prefix_chars};
use std::borrow::Cow;
use twox_hash::XxHash3_64;

/// Pieces longer than this are counted by the caller's counter every time, not kept: they are
/// rare, and hashing them costs about what the counter's own lookup costs.
const MEMO_PIECE_BYTES: usize = 2048;
/// A memo holding this many pieces starts over (a bound on its memory, never reached by one
/// session's record in practice).
const MEMO_PIECES: usize = 1 << 16;

/// The token counts of the pieces renderings wrote (bullets, file and error lines), kept from
/// one rendering to the next ([`crate::Retained::render_memo`]). A piece is known by a 64-bit
/// hash of its text and its length, as the host's token counter knows texts: a small table of
/// numbers, which a lookup finds in the processor's cache, where a table of the texts
/// themselves cost a cache miss per piece. A memo belongs to one counter: counts are only
/// valid for the counter that made them.
#[derive(Clone, Default)]
pub struct RenderMemo {
    /// Hash of the piece -> (its length, its tokens).
    tokens: PrehashedMap<u64, (usize, usize)>,
}

impl std::fmt::Debug for RenderMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RenderMemo({} pieces)", self.tokens.len())
    }
}

impl RenderMemo {
    /// The tokens of `piece`: kept, or counted with `count` and kept.
    fn count(&mut self, piece: &str, count: &dyn Fn(&str) -> usize) -> usize {
        if piece.len() > MEMO_PIECE_BYTES {
            return count(piece);
        }
        let key = XxHash3_64::oneshot(piece.as_bytes());
        match self.tokens.get(&key) {
            Some(&(len, t)) if len == piece.len() => return t,
            // Another piece under the same hash: counted, and kept in its place.
            Some(_) => {}
            None if self.tokens.len() >= MEMO_PIECES => self.tokens.clear(),
            None => {}
        }
        let t = count(piece);
        self.tokens.insert(key, (piece.len(), t));
        t
    }
}

/// Token counts of the candidates, each counted at most once (both layouts share them), and
/// the earlier requests' forms, made when first needed.
pub(super) struct Costs<'a, 'c> {
    pub(super) count: &'c dyn Fn(&str) -> usize,
    pub(super) memo: &'c mut RenderMemo,
    pub(super) errors: Vec<Option<usize>>,
    pub(super) forms: Forms<'a>,
    /// Where a piece is written to be counted (reused: see the module docs).
    pub(super) scratch: String,
}

impl Costs<'_, '_> {
    pub(super) fn error(&mut self, p: &Parts<'_>, i: usize) -> usize {
        if let Some(t) = self.errors[i] {
            return t;
        }
        let t = self.piece(|out| push_error_bullet(out, &p.errors[i]));
        self.errors[i] = Some(t);
        t
    }

    pub(super) fn request(&mut self, i: usize, form: usize) -> usize {
        let f = self.forms.get(i, form);
        if let Some(t) = f.tokens {
            return t;
        }
        self.scratch.clear();
        push_bullet(&mut self.scratch, &f.text);
        let t = self.memo.count(&self.scratch, self.count);
        f.tokens = Some(t);
        t
    }

    /// The tokens of what `write` writes.
    pub(super) fn piece(&mut self, write: impl FnOnce(&mut String)) -> usize {
        self.scratch.clear();
        write(&mut self.scratch);
        self.memo.count(&self.scratch, self.count)
    }
}

/// Form indexes: the first line, the first 300 characters, the whole request.
pub(super) const LINE: usize = 0;
pub(super) const SHORT: usize = 1;
pub(super) const FULL: usize = 2;

/// One form of one request: its text (borrowed when it is the request itself, as it is for
/// most), and its bullet's tokens once asked for.
pub(super) struct Form<'a> {
    text: Cow<'a, str>,
    tokens: Option<usize>,
}

/// The forms of the earlier requests of one rendering.
pub(super) struct Forms<'a> {
    requests: &'a [String],
    /// Newest first (index 0 is the latest earlier request), grown as far as asked.
    made: Vec<[Option<Form<'a>>; 3]>,
}

impl<'a> Forms<'a> {
    pub(super) fn new(requests: &'a [String]) -> Self {
        Forms {
            requests,
            made: Vec::new(),
        }
    }

    /// Form `form` of request `i` (an index into the requests, oldest first).
    pub(super) fn get(&mut self, i: usize, form: usize) -> &mut Form<'a> {
        let requests: &'a [String] = self.requests;
        let j = requests.len() - 1 - i;
        if self.made.len() <= j {
            self.made.resize_with(j + 1, Default::default);
        }
        self.made[j][form].get_or_insert_with(|| Form {
            text: text_of(&requests[i], form),
            tokens: None,
        })
    }

    /// Whether two forms of request `i` are the same text. Comparing texts is comparing
    /// bullets: [`push_bullet`] is one to one (it only prefixes each line).
    pub(super) fn same(&mut self, i: usize, a: usize, b: usize) -> bool {
        self.get(i, a);
        self.get(i, b);
        let slot = &self.made[self.requests.len() - 1 - i];
        // Both were made just above.
        match (&slot[a], &slot[b]) {
            (Some(x), Some(y)) => x.text == y.text,
            _ => false,
        }
    }

    /// Writes the bullet of form `form` of request `i` to `out`.
    pub(super) fn push_bullet(&mut self, i: usize, form: usize, out: &mut String) {
        push_bullet(out, &self.get(i, form).text);
    }
}

/// The text of form `form` of `request`, borrowed when it is the request itself.
fn text_of(request: &str, form: usize) -> Cow<'_, str> {
    match form {
        LINE => first_line_marked(request, REQUEST_LINE_CHARS),
        // At most 300 bytes is at most 300 characters: no need to walk them.
        SHORT
            if request.len() <= REQUEST_CHARS
                || prefix_chars(request, REQUEST_CHARS).len() == request.len() =>
        {
            Cow::Borrowed(request)
        }
        SHORT => Cow::Owned(cut_chars(request, REQUEST_CHARS)),
        _ => Cow::Borrowed(request),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::bullet;

    fn bullet_of(forms: &mut Forms<'_>, i: usize, form: usize) -> String {
        let mut out = String::new();
        forms.push_bullet(i, form, &mut out);
        out
    }

    #[test]
    fn forms_are_made_newest_first_and_only_when_asked() {
        let requests: Vec<String> = (0..1000).map(|i| format!("request {i}")).collect();
        let mut forms = Forms::new(&requests);
        assert_eq!(bullet_of(&mut forms, 999, LINE), "- request 999\n");
        assert_eq!(forms.made.len(), 1);
        assert!(forms.same(998, LINE, FULL));
        assert_eq!(forms.made.len(), 2);
        let counted = std::cell::Cell::new(0);
        let count = |s: &str| {
            counted.set(counted.get() + 1);
            s.len()
        };
        let mut memo = RenderMemo::default();
        let mut costs = Costs {
            count: &count,
            memo: &mut memo,
            errors: Vec::new(),
            forms,
            scratch: String::new(),
        };
        assert_eq!(costs.request(999, LINE), "- request 999\n".len());
        assert_eq!(costs.request(999, LINE), "- request 999\n".len());
        assert_eq!(counted.get(), 1);
        // The next rendering's forms are new, its counts are the memo's.
        costs.forms = Forms::new(&requests);
        assert_eq!(costs.request(999, LINE), "- request 999\n".len());
        assert_eq!(counted.get(), 1);
        assert_eq!(costs.request(998, LINE), "- request 998\n".len());
        assert_eq!(counted.get(), 2);
    }

    #[test]
    fn forms_equal_the_eager_ones() {
        let long_line = "word ".repeat(80);
        let requests = [
            "plain".to_string(),
            "  padded request \n".to_string(),
            "first line\nsecond line".to_string(),
            long_line.clone(),
            format!("{long_line}\n{long_line}"),
            "é".repeat(301),
        ];
        let mut forms = Forms::new(&requests);
        for (i, r) in requests.iter().enumerate() {
            let eager = [
                bullet(&first_line_marked(r, REQUEST_LINE_CHARS)),
                bullet(&cut_chars(r, REQUEST_CHARS)),
                bullet(r),
            ];
            for a in [LINE, SHORT, FULL] {
                assert_eq!(bullet_of(&mut forms, i, a), eager[a], "{r:?} form {a}");
                for b in [LINE, SHORT, FULL] {
                    assert_eq!(forms.same(i, a, b), eager[a] == eager[b], "{r:?} {a} {b}");
                }
            }
        }
    }
}
