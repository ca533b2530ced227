//! The costs of the optional pieces a rendering weighs: the errors' bullets, and the earlier
//! requests' three forms (first line, first 300 characters, whole) with their bullets and
//! token counts, each made only when the fill or the writer first asks for it.
//!
//! The fill takes requests newest first and stops at the first that does not fit, and the
//! writer writes only the requests kept, so the forms of omitted requests are never made. A
//! running summary renders its whole record at every commit: building every form of every
//! earlier request each time made a commit cost the whole record, however little of it the
//! budget kept.

use super::{bullet, error_bullet, Parts, REQUEST_CHARS, REQUEST_LINE_CHARS};
use crate::text::first_line_marked;
use condense_text::{cut_chars, prefix_chars};
use std::borrow::Cow;

/// Token counts of the candidates, each counted at most once (both layouts share them), and
/// the earlier requests' forms, made when first needed.
pub(super) struct Costs<'a, 'c> {
    pub(super) count: &'c dyn Fn(&str) -> usize,
    pub(super) errors: Vec<Option<usize>>,
    pub(super) forms: Forms<'a>,
}

impl Costs<'_, '_> {
    pub(super) fn error(&mut self, p: &Parts<'_>, i: usize) -> usize {
        let count = self.count;
        *self.errors[i].get_or_insert_with(|| count(&error_bullet(&p.errors[i])))
    }

    pub(super) fn request(&mut self, i: usize, form: usize) -> usize {
        self.forms.tokens(i, form, self.count)
    }
}

/// Form indexes: the first line, the first 300 characters, the whole request.
pub(super) const LINE: usize = 0;
pub(super) const SHORT: usize = 1;
pub(super) const FULL: usize = 2;

/// One form of one request: its text (borrowed when it is the request itself, as it is for
/// most), then its bullet and the bullet's tokens once asked for.
struct Form<'a> {
    text: Cow<'a, str>,
    bullet: Option<String>,
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
    fn get(&mut self, i: usize, form: usize) -> &mut Form<'a> {
        let requests: &'a [String] = self.requests;
        let j = requests.len() - 1 - i;
        if self.made.len() <= j {
            self.made.resize_with(j + 1, Default::default);
        }
        self.made[j][form].get_or_insert_with(|| Form {
            text: text_of(&requests[i], form),
            bullet: None,
            tokens: None,
        })
    }

    /// Whether two forms of request `i` are the same text. Comparing texts is comparing
    /// bullets: [`bullet`] is one to one (it only prefixes each line).
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

    /// The bullet of form `form` of request `i`.
    pub(super) fn bullet(&mut self, i: usize, form: usize) -> &str {
        let f = self.get(i, form);
        f.bullet.get_or_insert_with(|| bullet(&f.text))
    }

    /// The tokens of that bullet, counted once.
    pub(super) fn tokens(&mut self, i: usize, form: usize, count: &dyn Fn(&str) -> usize) -> usize {
        if let Some(t) = self.get(i, form).tokens {
            return t;
        }
        let t = count(self.bullet(i, form));
        self.get(i, form).tokens = Some(t);
        t
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

    #[test]
    fn forms_are_made_newest_first_and_only_when_asked() {
        let requests: Vec<String> = (0..1000).map(|i| format!("request {i}")).collect();
        let mut forms = Forms::new(&requests);
        assert_eq!(forms.bullet(999, LINE), "- request 999\n");
        assert_eq!(forms.made.len(), 1);
        assert!(forms.same(998, LINE, FULL));
        assert_eq!(forms.made.len(), 2);
        let counted = std::cell::Cell::new(0);
        let count = |s: &str| {
            counted.set(counted.get() + 1);
            s.len()
        };
        assert_eq!(forms.tokens(999, LINE, &count), "- request 999\n".len());
        assert_eq!(forms.tokens(999, LINE, &count), "- request 999\n".len());
        assert_eq!(counted.get(), 1);
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
                assert_eq!(forms.bullet(i, a), eager[a], "{r:?} form {a}");
                for b in [LINE, SHORT, FULL] {
                    assert_eq!(forms.same(i, a, b), eager[a] == eager[b], "{r:?} {a} {b}");
                }
            }
        }
    }
}
